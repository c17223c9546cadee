"""Fixtures of the CPU backend tests: ``isa_outputs``, every ISA's results computed once per
session (cpu_isa_harness.SCRIPT, one subprocess per ISA); ``threads``, the thread count set for
one test; ``lane_open``, the fast lanes open (the 'cpu' policy)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from cpu_isa_harness import ACTS, ALPHA_BETA, ISAS, SCRIPT, C, gemm_cases, unary_inputs


@pytest.fixture(scope="session")
def isa_outputs(tmp_path_factory):
    """{isa: npz of outputs} for every ISA of this CPU, each computed in its own subprocess."""
    d = tmp_path_factory.mktemp("isa")
    xpath = str(d / "x.npy")
    np.save(xpath, unary_inputs())
    script = d / "run.py"
    script.write_text(SCRIPT)
    procs = {}
    for isa in ISAS:
        env = dict(os.environ, GPUCORE_CPU_ISA=isa)
        args = [
            sys.executable,
            str(script),
            C.__file__,
            str(d / f"{isa}.npz"),
            repr(gemm_cases()),
            repr(ACTS),
            repr(ALPHA_BETA),
            xpath,
        ]
        procs[isa] = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    out = {}
    for isa, p in procs.items():
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"GPUCORE_CPU_ISA={isa} run failed:\n{err}"
        out[isa] = dict(np.load(d / f"{isa}.npz"))
        assert str(out[isa]["isa"]) == isa
    return out


@pytest.fixture
def threads():
    """set_num_threads for the test, restored afterwards."""
    before = C.info()["threads"]
    yield C.set_num_threads
    C.set_num_threads(before)


@pytest.fixture
def conv_path(monkeypatch):
    """Sets GPUCORE_CONV (read by the C side on every call) for the rest of the test."""
    return lambda mode: monkeypatch.setenv("GPUCORE_CONV", mode)


@pytest.fixture
def lane_open():
    """The fast lanes as they are for a plain script under the 'cpu' policy."""
    from gpucore import dispatch

    old = dispatch.get_device_policy()
    dispatch.set_device_policy("cpu")
    assert dispatch._fast_limit[0] > 0
    yield
    dispatch.set_device_policy(old)
