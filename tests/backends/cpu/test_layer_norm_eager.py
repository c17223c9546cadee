"""Eager layer_norm's kernels (cpu/norm.c norm_rows_forward / norm_rows_backward, run by
gpucore/ops/norm.py): values, row statistics and all three gradients against float64, on rows
around the vector lanes and the gradient blocks, every weight / bias combination; the same bits
for any thread count and under every ISA; gradcheck and gradgradcheck through
F.layer_norm; bad calls raise."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from cpu_isa_harness import ISAS, C

import gpucore
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck, gradgradcheck

CHUNK = 64  # gpucore/backends/cpu/kernels/norm.py's rows per gradient block


def ref(x, w, b, g, eps):
    """float64 forward (out, mean, rstd) and backward (gx, gw, gb) over the rows of x."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    mean = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + eps)
    xh = (x - mean) * rstd
    out = xh * (w if w is not None else 1) + (b if b is not None else 0)
    gh = g * (w if w is not None else 1)
    gx = rstd * (gh - gh.mean(1, keepdims=True) - xh * (gh * xh).mean(1, keepdims=True))
    return out, mean[:, 0], rstd[:, 0], gx, (g * xh).sum(0), g.sum(0)


def run(x, w, b, g, eps=1e-5):
    rows, n = x.shape
    dt = x.dtype
    out, mean, rstd = np.empty_like(x), np.empty(rows, dt), np.empty(rows, dt)
    C.norm_rows_forward(x, w, b, out, mean, rstd, rows, 1, n, 1, eps, 0)
    gx, gw, gb = np.empty_like(x), np.empty(n, dt), np.empty(n, dt)
    part = np.empty(max(1, -(-rows // CHUNK) * 2 * n))
    C.norm_rows_backward(x, w, mean, rstd, g, gx, gw, gb, part, rows, 1, n, 1, CHUNK, 0)
    return out, mean, rstd, gx, gw, gb


def data(rows, n, dt, seed):
    r = np.random.default_rng(seed)
    x = (r.standard_normal((rows, n)) * 2 + 3).astype(dt)
    w, b = r.standard_normal(n).astype(dt), r.standard_normal(n).astype(dt)
    return x, w, b, r.standard_normal((rows, n)).astype(dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 63, 65, 1000])
@pytest.mark.parametrize("rows", [1, 63, 64, 65, 129])
def test_against_float64(rows, n, dt):
    x, w, b, g = data(rows, n, dt, seed=rows * 1000 + n)
    tol = 2e-5 if dt == np.float32 else 1e-11
    for wi, bi in ((w, b), (w, None), (None, b), (None, None)):
        got = run(x, wi, bi, g)
        want = ref(x, wi, bi, g, 1e-5)
        for a, e in zip(got, want):
            scale = 1 + np.abs(e).max()
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol * scale * max(1, rows) ** 0.5)


def test_threads_and_isas_bitwise(tmp_path):
    """Split over the pool (512 x 1024) or not, under every ISA: the same bits."""
    x, w, b, g = data(512, 1024, np.float32, seed=1)
    many = run(x, w, b, g)
    threads = C.info()["threads"]
    try:
        C.set_num_threads(1)
        one = run(x, w, b, g)
    finally:
        C.set_num_threads(threads)
    for a, e in zip(many, one):
        np.testing.assert_array_equal(a, e)
    np.savez(tmp_path / "in.npz", x=x, w=w, b=b, g=g)
    script = (
        "import sys, numpy as np, importlib.util\n"
        "spec = importlib.util.spec_from_file_location('gpucore._cpu', sys.argv[1])\n"
        "C = importlib.util.module_from_spec(spec); spec.loader.exec_module(C)\n"
        "d = np.load(sys.argv[2]); x, w, b, g = d['x'], d['w'], d['b'], d['g']\n"
        "rows, n = x.shape\n"
        "out, m, s = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)\n"
        "C.norm_rows_forward(x, w, b, out, m, s, rows, 1, n, 1, 1e-5, 0)\n"
        "gx, gw, gb = np.empty_like(x), np.empty(n, x.dtype), np.empty(n, x.dtype)\n"
        f"part = np.empty(-(-rows // {CHUNK}) * 2 * n)\n"
        f"C.norm_rows_backward(x, w, m, s, g, gx, gw, gb, part, rows, 1, n, 1, {CHUNK}, 0)\n"
        "np.savez(sys.argv[3], out=out, m=m, s=s, gx=gx, gw=gw, gb=gb)\n"
    )
    for isa in ISAS:
        res = tmp_path / f"{isa}.npz"
        env = dict(os.environ, GPUCORE_CPU_ISA=isa)
        subprocess.run(
            [sys.executable, "-c", script, C.__file__, str(tmp_path / "in.npz"), str(res)],
            env=env,
            check=True,
        )
        got = np.load(res)
        for a, key in zip(many, ("out", "m", "s", "gx", "gw", "gb")):
            np.testing.assert_array_equal(got[key], a, err_msg=f"{isa} {key}")


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
def test_gradcheck_through_functional(affine):
    r = np.random.default_rng(5)
    x = gpucore.tensor(r.standard_normal((3, 4, 6)), dtype=gpucore.float64, requires_grad=True)
    w = gpucore.tensor(r.standard_normal(6), dtype=gpucore.float64, requires_grad=True)
    b = gpucore.tensor(r.standard_normal(6), dtype=gpucore.float64, requires_grad=True)
    args = [x] + [t for t, a in zip((w, b), affine) if a]

    def f(x, *wb):
        it = iter(wb)
        return F.layer_norm(
            x, (6,), next(it) if affine[0] else None, next(it) if affine[1] else None
        )

    assert gradcheck(f, tuple(args))
    assert gradgradcheck(f, tuple(args))


def test_strided_input_and_eager_op():
    base = np.random.default_rng(6).standard_normal((5, 8, 6))
    x = gpucore.tensor(base, dtype=gpucore.float64).transpose(0, 1)  # not contiguous
    out = F.layer_norm(x, (6,))
    want = ref(base.transpose(1, 0, 2).reshape(-1, 6), None, None, np.zeros((40, 6)), 1e-5)[0]
    np.testing.assert_allclose(out.numpy().reshape(-1, 6), want, rtol=1e-12, atol=1e-12)
    with gpucore.dispatch.trace_ops() as ops:
        F.layer_norm(gpucore.ones(2, 3), (3,))
    assert [n for n, _, _ in ops] == ["native_layer_norm"]


def test_bad_calls_raise():
    x = np.zeros((4, 8), np.float32)
    out, m, s = np.empty_like(x), np.empty(4, np.float32), np.empty(4, np.float32)
    with pytest.raises(ValueError):
        C.norm_rows_forward(x, None, None, out, m, s, 5, 1, 8, 1, 1e-5, 0)  # x too small
    with pytest.raises(ValueError):
        C.norm_rows_forward(x, None, x[0], out, m, s, 4, 1, 8, 1, 1e-5, 1)  # rms with a bias
    with pytest.raises(ValueError):
        C.norm_rows_forward(x, None, None, out, m, s, 4, 3, 8, 1, 1e-5, 0)  # rows % groups
    with pytest.raises(TypeError):
        C.norm_rows_forward(x, None, None, out.astype(np.float64), None, None, 4, 1, 8, 1, 1e-5, 0)
    gx, gw, gb = np.empty_like(x), np.empty(8, np.float32), np.empty(8, np.float32)
    with pytest.raises(ValueError):  # part too small for the blocks
        C.norm_rows_backward(x, None, m, s, x, gx, gw, gb, np.empty(4), 4, 1, 8, 1, 64, 0)
    with pytest.raises(ValueError):  # gw without part
        C.norm_rows_backward(x, None, m, s, x, gx, gw, gb, None, 4, 1, 8, 1, 64, 0)
    with pytest.raises(ValueError):  # gx overlapping g
        C.norm_rows_backward(x, None, m, s, x, x, None, None, None, 4, 1, 8, 1, 64, 0)
