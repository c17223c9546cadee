"""linear_relu's backward pass (unary.c gc_relu_backward_bias, loops in cpu/isa/relu_bias.h) under
every ISA of this CPU, each forced in a subprocess: the mask exactly as numpy's (NaN and -0
gradients, zero and NaN saved values), the column sums within one rounding of float64's, and the
same bits on every ISA and on 1, 2, 3 and 8 threads (a column's sum is one thread's, in row
order, whatever the ISA's width). Shapes around the 128-column chunks, the 4-row passes and the
vector widths."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from cpu_isa_harness import ISAS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHAPES = [(1, 1), (5, 3), (4, 17), (7, 300), (130, 257), (64, 128), (33, 129), (256, 512)]
THREADS = (1, 2, 3, 8)

SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, ROOT)
import gpucore as gc
from gpucore import _cpu
assert _cpu.info()["isa"] == ISA, (_cpu.info()["isa"], ISA)
data = np.load(INP)
gc.relu(gc.tensor(np.ones(2, np.float32)))  # (the fast lane opens with the first op)
out = {}
for key in data.files:
    if not key.endswith(".g"):
        continue
    stem = key[:-2]
    g, s = gc.from_numpy(data[key]), gc.from_numpy(data[stem + ".s"])
    for nt in THREADS:
        _cpu.set_num_threads(nt)
        res = _cpu.fast_relu_backward_bias(g, s)
        assert res is not None, stem
        out[f"{stem}.{nt}.mask"], out[f"{stem}.{nt}.bsum"] = (t.numpy().copy() for t in res)
np.savez(OUT, **out)
"""


def _inputs(path) -> dict:
    rng = np.random.default_rng(19)
    arrays = {}
    for dtype in (np.float32, np.float64):
        for m, n in SHAPES:
            g = rng.standard_normal((m, n)).astype(dtype)
            s = rng.standard_normal((m, n)).astype(dtype)
            g.reshape(-1)[::5] = np.nan
            g.reshape(-1)[1::5] = -0.0
            s.reshape(-1)[2::7] = 0.0
            s.reshape(-1)[3::11] = -0.0
            s.reshape(-1)[4::13] = np.nan
            stem = f"{np.dtype(dtype).name}_{m}x{n}"
            arrays[stem + ".g"], arrays[stem + ".s"] = g, s
    np.savez(path, **arrays)
    return arrays


@pytest.fixture(scope="module")
def per_isa(tmp_path_factory):
    """{isa: npz of mask and sums per shape and thread count}, one subprocess per ISA."""
    d = tmp_path_factory.mktemp("relu_bias")
    inp = str(d / "in.npz")
    arrays = _inputs(inp)
    got = {}
    for isa in ISAS:
        out = str(d / f"{isa}.npz")
        head = f"ROOT = {ROOT!r}\nISA = {isa!r}\nINP = {inp!r}\nOUT = {out!r}\n"
        head += f"THREADS = {THREADS!r}\n"
        p = subprocess.run(
            [sys.executable, "-c", head + SCRIPT],
            env=dict(os.environ, GPUCORE_CPU_ISA=isa),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, f"{isa}: {p.stderr[-2000:]}"
        got[isa] = dict(np.load(out))
    return arrays, got


@pytest.mark.parametrize("isa", ISAS)
def test_against_numpy(per_isa, isa):
    arrays, got = per_isa
    for key in arrays:
        if not key.endswith(".g"):
            continue
        stem = key[:-2]
        g, s = arrays[key], arrays[stem + ".s"]
        want = np.where(s > 0, g, 0).astype(g.dtype)  # NaN saved values mask, as s > 0 is false
        mask, bsum = got[isa][f"{stem}.1.mask"], got[isa][f"{stem}.1.bsum"]
        assert mask.dtype == g.dtype and bsum.dtype == g.dtype
        assert mask.tobytes() == want.tobytes(), f"{isa} {stem}: mask"
        ref = want.astype(np.float64).sum(0)
        tol = 1e-6 if g.dtype == np.float32 else 1e-14
        np.testing.assert_allclose(bsum, ref, rtol=tol, err_msg=f"{isa} {stem}")


def test_same_bits_on_every_isa_and_thread_count(per_isa):
    arrays, got = per_isa
    first = got[ISAS[-1]]  # the scalar build
    for isa in ISAS:
        for key, value in got[isa].items():
            stem, _, part = key.rsplit(".", 2)
            base = first[f"{stem}.1.{part}"]
            assert value.tobytes() == base.tobytes(), f"{isa} {key} differs from scalar, 1 thread"
