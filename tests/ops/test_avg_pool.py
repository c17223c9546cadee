"""avg_pool2d / avg_pool2d_backward (gpucore/ops/pool.py, cpu/avgpool.c): values and gradients
against PyTorch on geometries around the divisor rules (padding counted or not, ceil_mode's
clipped windows, divisor_override), avg_pool1d, odd sizes, strided inputs; the same bits for
any thread count; gradcheck and gradgradcheck (the backward's backward is the forward)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import rand

import gpucore
import gpucore.nn.functional as F
from gpucore import _cpu
from gpucore.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

GEOMS = [
    # kernel, stride, padding
    (2, None, 0),
    (3, 2, 1),
    (3, 1, 1),
    ((2, 3), (1, 2), (1, 1)),
    ((3, 2), (2, 3), (0, 1)),
    (4, 3, 2),
]


@pytest.mark.parametrize("geom", GEOMS, ids=str)
@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor", [None, 3])
def test_matches_torch(geom, ceil_mode, count_include_pad, divisor):
    k, s, p = geom
    for shape in [(2, 3, 7, 9), (1, 2, 8, 8), (2, 1, 5, 11)]:
        x = rand(shape, seed=sum(shape))
        kw = dict(
            kernel_size=k,
            stride=s,
            padding=p,
            ceil_mode=ceil_mode,
            count_include_pad=count_include_pad,
            divisor_override=divisor,
        )
        try:
            want = torch.nn.functional.avg_pool2d(torch.tensor(x, requires_grad=True), **kw)
        except RuntimeError:
            continue  # a window too large for this input: both refuse
        xt = torch.tensor(x, requires_grad=True)
        want = torch.nn.functional.avg_pool2d(xt, **kw)
        g = rand(tuple(want.shape), seed=3)
        want.backward(torch.tensor(g))
        for dt, tol in ((gpucore.float64, 1e-12), (gpucore.float32, 1e-5)):
            xg = gpucore.tensor(x, dtype=dt, requires_grad=True)
            out = F.avg_pool2d(xg, **kw)
            np.testing.assert_allclose(
                out.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol
            )
            out.backward(gpucore.tensor(g, dtype=dt))
            np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)


def test_one_op_each_way_and_strided_input():
    base = rand((3, 2, 8, 6), seed=1)
    x = gpucore.tensor(base, requires_grad=True)
    v = x.transpose(0, 1)  # not contiguous
    with gpucore.dispatch.trace_ops() as ops:
        F.avg_pool2d(v, 2).sum().backward()
    names = [n for n, _, _ in ops]
    assert names.count("avg_pool2d") == 1 and names.count("avg_pool2d_backward") == 1
    assert "im2col" not in names
    want = torch.nn.functional.avg_pool2d(torch.tensor(base).transpose(0, 1), 2)
    np.testing.assert_allclose(F.avg_pool2d(v, 2).detach().numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), np.full(base.shape, 0.25), rtol=1e-6)


def test_avg_pool1d_and_unbatched():
    x = rand((2, 3, 11), seed=2)
    for k, s, p in ((2, None, 0), (3, 2, 1), (4, 1, 2)):
        got = F.avg_pool1d(gpucore.tensor(x), k, s, p)
        want = torch.nn.functional.avg_pool1d(torch.tensor(x), k, s, p)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    got = F.avg_pool2d(gpucore.tensor(x), 2)  # [C, H, W]
    np.testing.assert_allclose(
        got.numpy(), torch.nn.functional.avg_pool2d(torch.tensor(x), 2).numpy(), rtol=1e-6
    )


def test_gradcheck_and_gradgradcheck():
    x = gpucore.tensor(rand((1, 2, 6, 5), seed=4), dtype=gpucore.float64, requires_grad=True)
    for kw in (
        dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
        dict(kernel_size=2, ceil_mode=True, divisor_override=3),
    ):
        assert gradcheck(lambda t, kw=kw: F.avg_pool2d(t, **kw), (x,))
        assert gradgradcheck(lambda t, kw=kw: F.avg_pool2d(t, **kw), (x,))


def test_threads_bitwise_and_bad_calls():
    x = rand((64 * 16, 28, 28), seed=5).astype(np.float32)
    g = rand((64 * 16, 14, 14), seed=6).astype(np.float32)
    geom = (64 * 16, 28, 28, 3, 3, 2, 2, 1, 1, 14, 14)

    def run():
        y, gx = np.empty((64 * 16, 14, 14), np.float32), np.empty_like(x)
        _cpu.avg_pool2d(x, y, *geom, 0, 0)
        _cpu.avg_pool2d_backward(g, gx, *geom, 0, 0)
        return y, gx

    many = run()
    threads = _cpu.info()["threads"]
    try:
        _cpu.set_num_threads(1)
        one = run()
    finally:
        _cpu.set_num_threads(threads)
    for a, b in itertools.zip_longest(many, one):
        np.testing.assert_array_equal(a, b)
    y = np.empty((64 * 16, 14, 14), np.float32)
    with pytest.raises(ValueError):  # x too small for the geometry
        _cpu.avg_pool2d(x[:10], y, *geom, 0, 0)
    with pytest.raises(ValueError):  # negative divisor
        _cpu.avg_pool2d(x, y, *geom, 0, -1)
    with pytest.raises(TypeError):
        _cpu.avg_pool2d(x, y.astype(np.float64), *geom, 0, 0)
