"""Runs worker scripts under a real ``mpirun`` for the distributed tests.

Without mpirun or mpi4py the tests skip, unless GPUCORE_TEST_REQUIRE_MPI=1 (set by .ci/run, whose
set-up installs both), which makes them fail: CI must never pass by skipping MPI.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")


def _require() -> bool:
    return os.environ.get("GPUCORE_TEST_REQUIRE_MPI", "") not in ("", "0")


def need_mpi() -> str:
    """The mpirun executable, or skip (fail under GPUCORE_TEST_REQUIRE_MPI=1)."""
    mpirun = shutil.which("mpirun")
    missing = []
    if mpirun is None:
        missing.append("mpirun (apt-get install openmpi-bin)")
    if importlib.util.find_spec("mpi4py") is None:
        missing.append("mpi4py (pip install 'gpucore[distributed]')")
    if missing:
        msg = "MPI is not installed: " + ", ".join(missing)
        if _require():
            pytest.fail(msg + " (GPUCORE_TEST_REQUIRE_MPI=1)")
        pytest.skip(msg)
    return mpirun


def mpirun(worker: str, np: int, *args: str, timeout: float = 120, env: dict | None = None):
    """Run ``workers/<worker>`` on ``np`` ranks; the CompletedProcess (stdout and stderr merged)."""
    exe = need_mpi()
    cmd = [exe, "--allow-run-as-root", "--oversubscribe", "-np", str(np)]
    cmd += [sys.executable, os.path.join(WORKERS, worker), *args]
    full_env = dict(os.environ)
    # one thread per rank: the ranks share the machine's cores
    full_env.setdefault("GPUCORE_NUM_THREADS", "1")
    full_env.update(env or {})
    return subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def passed(res, np: int, *checks: str) -> None:
    """Assert that every rank printed ``PASS <check>`` for every check and mpirun succeeded."""
    out = res.stdout
    assert res.returncode == 0, out[-4000:]
    for check in checks:
        for r in range(np):
            assert f"rank {r} PASS {check}" in out, f"rank {r} did not pass {check}:\n{out[-4000:]}"
