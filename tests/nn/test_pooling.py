"""Pooling, functional and modules: max_pool2d (values, indices, the gradient to the first
maximum), avg_pool2d (padding counted or not, ceil_mode, divisor_override) and
adaptive_avg_pool2d against numpy float64 references; reprs and errors."""

import numpy as np
import pytest
from helpers import assert_close, check_op, rand, to_np

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def _pool_size(size, k, s, p, d, ceil):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


def np_max_pool2d(x, k, s, p=(0, 0), d=(1, 1), ceil=False):
    n, c, h, w = x.shape
    oh = _pool_size(h, k[0], s[0], p[0], d[0], ceil)
    ow = _pool_size(w, k[1], s[1], p[1], d[1], ceil)
    out = np.full((n, c, oh, ow), -np.inf)
    idx = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            best = np.full((n, c), -np.inf)
            for a in range(k[0]):
                for b in range(k[1]):
                    r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                    if 0 <= r < h and 0 <= q < w:
                        v = x[:, :, r, q]
                        better = v > best
                        best = np.where(better, v, best)
                        idx[:, :, i, j] = np.where(better, r * w + q, idx[:, :, i, j])
            out[:, :, i, j] = best
    return out, idx


def np_avg_pool2d(x, k, s, p=(0, 0), ceil=False, count_include_pad=True, divisor=None):
    """PyTorch's definition (aten AvgPool2d: window clipped to the padded input for the
    count_include_pad divisor, to the input for the sum)."""
    n, c, h, w = x.shape
    oh, ow = _pool_size(h, k[0], s[0], p[0], 1, ceil), _pool_size(w, k[1], s[1], p[1], 1, ceil)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            size = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            total = x[:, :, h0:h1, w0:w1].sum((2, 3))
            div = divisor or (size if count_include_pad else (h1 - h0) * (w1 - w0))
            out[:, :, i, j] = total / div
    return out


def np_adaptive_avg_pool2d(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean((2, 3))
    return out


# ============================================================================= tests
MAXPOOL_CASES = {
    "k2": dict(kernel_size=2),
    "k3_s2_p1": dict(kernel_size=3, stride=2, padding=1),
    "rect_dilated": dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1)),
    "ceil": dict(kernel_size=3, stride=2, ceil_mode=True),
    "ceil_pad": dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
}


@pytest.mark.parametrize("case", MAXPOOL_CASES)
def test_max_pool2d(case):
    kw = MAXPOOL_CASES[case]
    k, s, p, d = F._pool_args(
        "t", kw["kernel_size"], kw.get("stride"), kw.get("padding", 0), kw.get("dilation", 1)
    )

    def ref(x):
        return np_max_pool2d(x, k, s, p, d, kw.get("ceil_mode", False))[0]

    check_op(lambda x: F.max_pool2d(x, **kw), ref, [(2, 3, 7, 6)])
    x = rand((2, 3, 7, 6))
    out, idx = F.max_pool2d(f32(x), return_indices=True, **kw)
    assert idx.dtype is gpucore.int64
    np.testing.assert_array_equal(
        to_np(idx), np_max_pool2d(x, k, s, p, d, kw.get("ceil_mode", False))[1]
    )


def test_max_pool2d_gradient_goes_to_first_max():
    x = gpucore.tensor([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 3.0]]]], requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    # windows [1, 3 / 3, 2] and [3, 0 / 0, 3]: ties go to the first in row-major order
    assert to_np(x.grad).tolist() == [[[[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]
    # overlapping windows add up; an unbatched input works too
    x = gpucore.tensor([[[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]]], requires_grad=True)
    out = F.max_pool2d(x, 2, stride=1)
    assert out.shape == (1, 1, 2)
    out.sum().backward()
    assert to_np(x.grad).tolist() == [[[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]]


AVGPOOL_CASES = {
    "k2": dict(kernel_size=2),
    "k3_s2_p1": dict(kernel_size=3, stride=2, padding=1),
    "no_pad_count": dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    "ceil": dict(kernel_size=3, stride=2, ceil_mode=True),
    "ceil_pad": dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True),
    "ceil_pad_nocount": dict(
        kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
    ),
    "divisor": dict(kernel_size=2, stride=1, divisor_override=3),
}


@pytest.mark.parametrize("case", AVGPOOL_CASES)
def test_avg_pool2d(case):
    kw = AVGPOOL_CASES[case]
    k, s, p, _ = F._pool_args("t", kw["kernel_size"], kw.get("stride"), kw.get("padding", 0))

    def ref(x):
        return np_avg_pool2d(
            x,
            k,
            s,
            p,
            kw.get("ceil_mode", False),
            kw.get("count_include_pad", True),
            kw.get("divisor_override"),
        )

    check_op(lambda x: F.avg_pool2d(x, **kw), ref, [(2, 3, 7, 6)])


@pytest.mark.parametrize("size", [1, (2, 3), (3, 4), (None, 2), (5, 5), (8, 7)])
def test_adaptive_avg_pool2d(size):
    oh, ow = (size, size) if isinstance(size, int) else size
    oh, ow = oh or 6, ow or 5

    def ref(x):
        return np_adaptive_avg_pool2d(x, oh, ow)

    check_op(lambda x: F.adaptive_avg_pool2d(x, size), ref, [(2, 2, 6, 5)], rtol=1e-5)


def test_pool_modules_and_errors():
    assert repr(nn.MaxPool2d(2)) == (
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.AvgPool2d(3, 1, 1)) == "AvgPool2d(kernel_size=3, stride=1, padding=1)"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    x = rand((1, 2, 4, 4))
    out, idx = nn.MaxPool2d(2, return_indices=True)(f32(x))
    assert out.shape == (1, 2, 2, 2) and idx.shape == (1, 2, 2, 2)
    assert_close(nn.AvgPool2d(2)(f32(x)), np_avg_pool2d(x, (2, 2), (2, 2)))
    assert nn.AdaptiveAvgPool2d(1)(f32(x)).shape == (1, 2, 1, 1)
    with pytest.raises(ValueError, match="half"):
        F.max_pool2d(f32(x), 2, padding=2)
    with pytest.raises(ValueError, match="half"):
        F.avg_pool2d(f32(x), 2, padding=2)
    with pytest.raises(gpucore.ShapeError, match="too small"):
        F.max_pool2d(f32(x), 5)
    with pytest.raises(ValueError, match="kernel_size"):
        F.max_pool2d(f32(x), 0)
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_avg_pool2d(f32(x), 0)
