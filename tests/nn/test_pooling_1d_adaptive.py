"""1-D pooling (max_pool1d, avg_pool1d, adaptive_avg_pool1d) and adaptive max pooling
(adaptive_max_pool1d/2d with indices), functional and modules, against numpy float64 loops,
gradcheck and PyTorch."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, rand, to_np
from nn_checks import check_function_vs_torch, check_module_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def np_pool1d(x, k, s, p, d, reduce, count_include_pad=True):
    """Windows over the last axis of a padded copy (-inf for max, 0 for mean)."""
    fill = -np.inf if reduce == "max" else 0.0
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(p, p)], constant_values=fill)
    out_len = (x.shape[-1] + 2 * p - d * (k - 1) - 1) // s + 1
    outs, idx = [], []
    for o in range(out_len):
        pos = o * s + np.arange(k) * d
        win = xp[..., pos]
        if reduce == "max":
            outs.append(win.max(-1))
            idx.append(pos[win.argmax(-1)] - p)
        else:
            inside = ((pos >= p) & (pos < x.shape[-1] + p)).sum()
            outs.append(win.sum(-1) / (k if count_include_pad else inside))
    return np.stack(outs, -1), (np.stack(idx, -1) if idx else None)


def _bins(size, out):
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def np_adaptive_max2d(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    ind = np.zeros((n, c, oh, ow), np.int64)
    for i, (h0, h1) in enumerate(_bins(h, oh)):
        for j, (w0, w1) in enumerate(_bins(w, ow)):
            win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            a = win.argmax(-1)
            out[:, :, i, j] = win.max(-1)
            ind[:, :, i, j] = (h0 + a // (w1 - w0)) * w + w0 + a % (w1 - w0)
    return out, ind


def np_adaptive_avg1d(x, o):
    return np.stack([x[..., a:b].mean(-1) for a, b in _bins(x.shape[-1], o)], -1)


POOL1D = {
    "max": dict(kernel_size=3, stride=2, padding=1),
    "max_dilated": dict(kernel_size=2, stride=1, padding=1, dilation=3),
}


@pytest.mark.parametrize("kw", POOL1D.values(), ids=POOL1D)
def test_max_pool1d_against_a_reference(kw):
    x = rand((2, 3, 11))
    k, s, p, d = kw["kernel_size"], kw["stride"], kw["padding"], kw.get("dilation", 1)
    ref, ind = np_pool1d(x, k, s, p, d, "max")
    out, got = F.max_pool1d(gpucore.tensor(x), **kw, return_indices=True)
    assert_close(out, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(to_np(got), ind)
    check_grad(lambda x: F.max_pool1d(x, **kw), x)
    unbatched = F.max_pool1d(gpucore.tensor(x[0]), **kw)
    assert_close(unbatched, ref[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool1d_against_a_reference(count_include_pad):
    x = rand((2, 3, 10))
    ref, _ = np_pool1d(x, 3, 2, 1, 1, "mean", count_include_pad)
    out = F.avg_pool1d(gpucore.tensor(x), 3, 2, 1, count_include_pad=count_include_pad)
    assert_close(out, ref, rtol=1e-12, atol=1e-12)
    check_grad(lambda x: F.avg_pool1d(x, 3, 2, 1, False, count_include_pad), x)


@pytest.mark.parametrize("size", [(3, 4), (5, 2), (None, 3), 6])
def test_adaptive_max_pool2d_against_a_reference(size):
    x = rand((2, 3, 7, 5))
    oh, ow = size if isinstance(size, tuple) else (size, size)
    oh = 7 if oh is None else oh
    ref, ind = np_adaptive_max2d(x, oh, ow)
    out, got = F.adaptive_max_pool2d(gpucore.tensor(x), size, return_indices=True)
    assert_close(out, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(to_np(got), ind)
    check_grad(lambda x: F.adaptive_max_pool2d(x, size), x)


def test_adaptive_1d_pools_against_references():
    x = rand((2, 3, 10))
    ref, ind = np_adaptive_max2d(x[:, :, None], 1, 4)
    out, got = F.adaptive_max_pool1d(gpucore.tensor(x), 4, return_indices=True)
    assert_close(out, ref[:, :, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(to_np(got), ind[:, :, 0])
    out = F.adaptive_avg_pool1d(gpucore.tensor(x[0]), (4,))
    assert_close(out, np_adaptive_avg1d(x[0], 4), rtol=1e-12, atol=1e-12)
    check_grad(lambda x: F.adaptive_avg_pool1d(x, 3), x)
    check_grad(lambda x: F.adaptive_max_pool1d(x, 3), x)


TORCH_CASES = {
    "max_pool1d": ("max_pool1d", (3, 2, 1, 2, True, True), (2, 3, 12)),
    "avg_pool1d": ("avg_pool1d", (3, 2, 1, True, False), (2, 3, 12)),
    "adaptive_avg_pool1d": ("adaptive_avg_pool1d", (5,), (3, 12)),
    "adaptive_max_pool1d": ("adaptive_max_pool1d", (5, True), (2, 3, 12)),
    "adaptive_max_pool2d": ("adaptive_max_pool2d", ((3, 5), True), (2, 3, 7, 9)),
    "adaptive_max_pool2d_up": ("adaptive_max_pool2d", (6, True), (1, 2, 4, 5)),
}


@pytest.mark.parametrize("case", TORCH_CASES.values(), ids=TORCH_CASES)
def test_pooling_matches_torch(case):
    torch = pytest.importorskip("torch")
    name, args, shape = case
    check_function_vs_torch(
        lambda x: getattr(F, name)(x, *args),
        lambda x: getattr(torch.nn.functional, name)(x, *args),
        [rand(shape)],
    )


MODULES = [
    ("MaxPool1d", (3,), dict(stride=2, padding=1), (2, 3, 10)),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False), (2, 3, 10)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool1d", (4,), {}, (3, 10)),
    ("AdaptiveMaxPool2d", ((3, None),), {}, (2, 3, 7, 5)),
    ("AdaptiveMaxPool2d", (2,), dict(return_indices=True), (2, 3, 7, 5)),
]


@pytest.mark.parametrize("case", MODULES, ids=[m[0] for m in MODULES])
def test_pooling_modules_match_torch(case):
    torch = pytest.importorskip("torch")
    name, args, kw, shape = case
    check_module_vs_torch(
        getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw), [rand(shape)]
    )


def test_pooling_module_reprs_and_errors():
    assert repr(nn.MaxPool1d(2)) == (
        "MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.AvgPool1d(2)) == "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(nn.AdaptiveMaxPool2d((2, 3))) == "AdaptiveMaxPool2d(output_size=(2, 3))"
    assert repr(nn.AdaptiveAvgPool1d(3)) == "AdaptiveAvgPool1d(output_size=3)"
    with pytest.raises(gpucore.ShapeError, match=r"max_pool1d\(\)"):
        F.max_pool1d(gpucore.zeros(1, 2, 3, 4), 2)
    with pytest.raises(ValueError, match="kernel_size"):
        F.avg_pool1d(gpucore.zeros(1, 2, 6), (2, 2))
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_max_pool2d(gpucore.zeros(1, 2, 6, 6), (2, 2, 2))
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_max_pool1d(gpucore.zeros(1, 2, 6), (2, 2))
