"""max_pool2d / max_pool2d_backward (gpucore/ops/pool.py): values and indices against a float64
numpy scan with PyTorch's rule, indices against torch when it is importable, scatter of the
backward (overlapping windows add up), gradcheck and gradgradcheck."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, check_op, rand, to_np

import gpucore
import gpucore.nn.functional as F
from gpucore.ops import pool
from gpucore.ops.registry import apply

# name: (input shape, F.max_pool2d keyword arguments)
CASES = {
    "k2": ((2, 3, 8, 8), dict(kernel_size=2)),
    "k2_odd": ((2, 3, 7, 9), dict(kernel_size=2)),
    "k3_s2_p1": ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    "overlap_k3_s1": ((1, 2, 6, 7), dict(kernel_size=3, stride=1)),
    "overlap_k3_s1_p1": ((1, 2, 6, 5), dict(kernel_size=3, stride=1, padding=1)),
    "rect_dilated": (
        (2, 2, 10, 11),
        dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1)),
    ),
    "dilated_interleaved": ((1, 2, 9, 9), dict(kernel_size=2, stride=2, dilation=3)),
    "ceil": ((2, 3, 8, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    "ceil_pad": ((2, 3, 7, 6), dict(kernel_size=2, stride=2, padding=1, ceil_mode=True)),
    "ceil_overlap": ((1, 2, 6, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    "k1": ((2, 2, 3, 4), dict(kernel_size=1)),
    "whole_plane": ((2, 3, 5, 4), dict(kernel_size=(5, 4))),
}


def _geom(kw):
    return F._pool_args(
        "t", kw["kernel_size"], kw.get("stride"), kw.get("padding", 0), kw.get("dilation", 1)
    )


def np_max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """float64 reference: PyTorch's scan (start at -inf with the first in-bounds position, take
    ``v > best or isnan(v)``), so the first maximum wins and, among NaNs, the last one."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _geom(
        dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)
    )
    n, c, h, w = x.shape
    oh = pool.pool_out("t", h, kh, sh, ph, dh, ceil_mode)[0]
    ow = pool.pool_out("t", w, kw, sw, pw, dw, ceil_mode)[0]
    out = np.full((n, c, oh, ow), -np.inf)
    idx = np.full((n, c, oh, ow), -1, np.int64)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * sh - ph + a * dh, j * sw - pw + b * dw
                    if not (0 <= r < h and 0 <= q < w):
                        continue
                    v = x[:, :, r, q]
                    take = (v > out[:, :, i, j]) | np.isnan(v) | (idx[:, :, i, j] < 0)
                    out[:, :, i, j] = np.where(take, v, out[:, :, i, j])
                    idx[:, :, i, j] = np.where(take, r * w + q, idx[:, :, i, j])
    return out, idx


def np_max_pool2d_backward(g, idx, shape):
    n, c, h, w = shape
    out = np.zeros((n, c, h * w))
    b, ci = np.indices(idx.shape[:2])
    for o in np.ndindex(idx.shape[2:]):
        np.add.at(out, (b, ci, idx[(..., *o)]), g[(..., *o)])
    return out.reshape(shape)


def _t(x, dtype=gpucore.float32, grad=False):
    return gpucore.tensor(x, dtype=dtype, requires_grad=grad)


@pytest.mark.parametrize("case", CASES)
def test_forward_values_indices_and_gradient(case):
    shape, kw = CASES[case]
    check_op(
        lambda x: F.max_pool2d(x, **kw), lambda x: np_max_pool2d(x, **kw)[0], [shape], gradgrad=True
    )
    x = rand(shape, seed=3)
    ref, ref_idx = np_max_pool2d(x, **kw)
    for dt in (gpucore.float32, gpucore.float64):
        t = _t(x, dt, grad=True)
        out, idx = F.max_pool2d(t, return_indices=True, **kw)
        assert idx.dtype is gpucore.int64 and out.dtype is dt
        assert_close(out, ref, 1e-6, 0)
        np.testing.assert_array_equal(to_np(idx), ref_idx)
        g = rand(ref.shape, seed=4)
        out.backward(_t(g, dt))
        assert_close(t.grad, np_max_pool2d_backward(g, ref_idx, shape), 1e-6, 1e-6)


@pytest.mark.parametrize("case", ["k2", "overlap_k3_s1_p1", "ceil_overlap", "rect_dilated"])
def test_ties_nan_and_infinities(case):
    shape, kw = CASES[case]
    rng = np.random.default_rng(11)
    x = rng.integers(-2, 3, size=shape).astype(np.float64)  # many ties
    x[rng.random(shape) < 0.15] = np.nan
    x[rng.random(shape) < 0.15] = -np.inf
    x[rng.random(shape) < 0.05] = np.inf
    x[0, 0] = -np.inf  # whole windows of -inf (the index is the first position in the input)
    ref, ref_idx = np_max_pool2d(x, **kw)
    t = _t(x, grad=True)
    out, idx = F.max_pool2d(t, return_indices=True, **kw)
    assert_close(out, ref, 0, 0)
    np.testing.assert_array_equal(to_np(idx), ref_idx)
    g = rand(ref.shape, seed=5)
    out.backward(_t(g))
    assert_close(t.grad, np_max_pool2d_backward(g, ref_idx, shape), 1e-6, 1e-6)


@pytest.mark.parametrize("case", CASES)
def test_indices_match_torch(case):
    torch = pytest.importorskip("torch")
    shape, kw = CASES[case]
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    x[rng.random(shape) < 0.1] = np.nan
    x[rng.random(shape) < 0.1] = -np.inf
    out, idx = F.max_pool2d(_t(x), return_indices=True, **kw)
    tout, tidx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(to_np(out), tout.numpy())
    np.testing.assert_array_equal(to_np(idx), tidx.numpy())


def test_gradient_goes_to_first_max_and_overlaps_add():
    x = _t([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 3.0]]]], grad=True)
    F.max_pool2d(x, 2).sum().backward()
    assert to_np(x.grad).tolist() == [[[[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]
    x = _t([[[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]]], grad=True)  # unbatched
    out, idx = F.max_pool2d(x, 2, stride=1, return_indices=True)
    assert out.shape == (1, 1, 2) and to_np(idx).tolist() == [[[1, 1]]]
    out.sum().backward()
    assert to_np(x.grad).tolist() == [[[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]]


def test_one_op_each_way():
    x = _t(rand((2, 3, 8, 8)), grad=True)
    with gpucore.dispatch.trace_ops() as ops:
        F.max_pool2d(x, 2).sum().backward()
    names = [n for n, _, _ in ops]
    assert names.count("max_pool2d") == 1 and names.count("max_pool2d_backward") == 1
    assert not {"im2col", "max_dim", "where", "eq"} & set(names)


def test_double_backward_is_a_gather():
    x = _t(rand((2, 2, 6, 6)), gpucore.float64, grad=True)
    out, idx = F.max_pool2d(x, 3, stride=1, padding=1, return_indices=True)
    g = _t(rand(out.shape, seed=2), gpucore.float64, grad=True)
    (gx,) = gpucore.autograd.grad(out, x, g, create_graph=True)
    v = rand(x.shape, seed=3)
    (gg,) = gpucore.autograd.grad(gx, g, _t(v, gpucore.float64))
    want = np.take_along_axis(v.reshape(2, 2, 36), to_np(idx).reshape(2, 2, 36), 2)
    assert_close(gg, want.reshape(out.shape), 1e-12, 0)


def test_backward_op_directly():
    shape, kw = CASES["overlap_k3_s1_p1"]
    x = rand(shape)
    _, idx = np_max_pool2d(x, **kw)
    g = rand(idx.shape, seed=1)
    k, s, p, d = _geom(kw)
    got = apply(
        pool.MAX_POOL2D_BACKWARD,
        _t(g, gpucore.float64),
        gpucore.tensor(idx),
        input_shape=shape,
        kernel=k,
        stride=s,
        padding=p,
        dilation=d,
    )
    assert_close(got, np_max_pool2d_backward(g, idx, shape), 1e-12, 0)
    with pytest.raises(gpucore.GpucoreIndexError):
        apply(
            pool.MAX_POOL2D_BACKWARD,
            _t(g),
            gpucore.tensor(idx + 100),
            input_shape=shape,
            kernel=k,
            stride=s,
            padding=p,
            dilation=d,
        )


def test_low_precision_and_empty_batch():
    x = rand((1, 2, 6, 6))
    out, idx = F.max_pool2d(_t(x, gpucore.float16), 2, return_indices=True)
    assert out.dtype is gpucore.float16
    ref, ref_idx = np_max_pool2d(x.astype(np.float16).astype(np.float64), 2)
    assert_close(out, ref, 0, 0)
    np.testing.assert_array_equal(to_np(idx), ref_idx)
    t = _t(np.zeros((0, 3, 4, 4)), grad=True)
    out = F.max_pool2d(t, 2)
    assert out.shape == (0, 3, 2, 2)
    out.sum().backward()
    assert t.grad.shape == (0, 3, 4, 4)


def test_errors():
    x = _t(rand((1, 1, 1, 5)))
    # with dilation a window can lie entirely in the padding: rejected, not an index out of range
    with pytest.raises(gpucore.ShapeError, match="padding"):
        F.max_pool2d(x, (2, 1), padding=(2, 0), dilation=(3, 1))
    with pytest.raises(gpucore.DTypeError):
        F.max_pool2d(gpucore.tensor(np.zeros((1, 1, 4, 4), np.int64)), 2)
    with pytest.raises(gpucore.ShapeError, match="too small"):
        F.max_pool2d(x, 3)
