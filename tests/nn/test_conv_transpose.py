"""conv_transpose1d/2d and ConvTranspose1d/2d (stride, padding, output_padding, groups,
dilation, output_size) against a float64 scatter reference, gradcheck and PyTorch."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, rand
from nn_checks import check_function_vs_torch, check_module_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def np_conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation):
    """Each input pixel scatters its kernel-weighted copy into the (uncropped) output."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (s0, s1), (p0, p1), (q0, q1), (d0, d1) = stride, padding, output_padding, dilation
    oh = (h - 1) * s0 - 2 * p0 + d0 * (kh - 1) + q0 + 1
    ow = (wd - 1) * s1 - 2 * p1 + d1 * (kw - 1) + q1 + 1
    full = np.zeros((n, og * groups, oh + 2 * p0, ow + 2 * p1))
    cg = c // groups
    for g in range(groups):
        for ci in range(g * cg, (g + 1) * cg):
            for i in range(h):
                for j in range(wd):
                    for a in range(kh):
                        for e in range(kw):
                            full[:, g * og : (g + 1) * og, i * s0 + a * d0, j * s1 + e * d1] += (
                                x[:, ci, i, j][:, None] * w[ci, :, a, e][None, :]
                            )
    out = full[:, :, p0 : p0 + oh, p1 : p1 + ow]
    return out if b is None else out + b[None, :, None, None]


CASES = {
    "plain": dict(),
    "stride_padding_output_padding": dict(stride=2, padding=1, output_padding=1),
    "groups_dilation": dict(stride=3, padding=2, output_padding=2, groups=2, dilation=2),
    "rectangular": dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), dilation=(1, 2)),
}


def _pairs(kw):
    def pair(v, default):
        v = kw.get(v, default)
        return tuple(v) if isinstance(v, tuple) else (v, v)

    return (
        pair("stride", 1),
        pair("padding", 0),
        pair("output_padding", 0),
        kw.get("groups", 1),
        pair("dilation", 1),
    )


@pytest.mark.parametrize("kw", CASES.values(), ids=CASES)
def test_conv_transpose2d_against_a_float64_reference(kw):
    g = kw.get("groups", 1)
    x, w, b = rand((2, 4, 4, 5)), rand((4, 3, 3, 2), seed=1), rand((3 * g,), seed=2)
    out = F.conv_transpose2d(gpucore.tensor(x), gpucore.tensor(w), gpucore.tensor(b), **kw)
    assert_close(out, np_conv_transpose2d(x, w, b, *_pairs(kw)), rtol=1e-10, atol=1e-12)
    check_grad(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), x, w, b)


@pytest.mark.parametrize("kw", CASES.values(), ids=CASES)
def test_conv_transpose2d_matches_torch(kw):
    torch = pytest.importorskip("torch")
    g = kw.get("groups", 1)
    check_function_vs_torch(
        lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
        lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kw),
        [rand((2, 4, 5, 6)), rand((4, 3, 3, 2), seed=1), rand((3 * g,), seed=2)],
    )


def test_conv_transpose1d_against_a_reference_and_torch():
    x, w, b = rand((2, 4, 7)), rand((4, 3, 3), seed=1), rand((6,), seed=2)
    kw = dict(stride=2, padding=1, output_padding=1, groups=2, dilation=2)
    ref = np_conv_transpose2d(x[:, :, None], w[:, :, None], b, (1, 2), (0, 1), (0, 1), 2, (1, 2))[
        :, :, 0
    ]
    out = F.conv_transpose1d(gpucore.tensor(x), gpucore.tensor(w), gpucore.tensor(b), **kw)
    assert_close(out, ref, rtol=1e-10, atol=1e-12)
    unbatched = F.conv_transpose1d(gpucore.tensor(x[0]), gpucore.tensor(w), None, **kw)
    assert_close(unbatched, ref[0] - b[:, None], rtol=1e-10, atol=1e-12)
    check_grad(lambda x, w: F.conv_transpose1d(x, w, None, **kw), x, w)
    torch = pytest.importorskip("torch")
    check_function_vs_torch(
        lambda x, w, b: F.conv_transpose1d(x, w, b, **kw),
        lambda x, w, b: torch.nn.functional.conv_transpose1d(x, w, b, **kw),
        [x, w, b],
    )


def test_conv_transpose_modules_match_torch():
    torch = pytest.importorskip("torch")
    kw = dict(stride=2, padding=1, output_padding=1, groups=2, dilation=2)
    check_module_vs_torch(
        nn.ConvTranspose1d(4, 6, 3, **kw),
        torch.nn.ConvTranspose1d(4, 6, 3, **kw),
        [rand((2, 4, 7))],
    )
    check_module_vs_torch(
        nn.ConvTranspose2d(4, 3, (3, 2), stride=2, padding=1, bias=False),
        torch.nn.ConvTranspose2d(4, 3, (3, 2), stride=2, padding=1, bias=False),
        [rand((2, 4, 5, 6))],
        output_size=(10, 11),
    )


def test_conv_transpose_module_shapes_repr_and_errors():
    m = nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=1)
    assert repr(m) == (
        "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))"
    )
    assert tuple(m.weight.shape) == (2, 4, 3, 3) and tuple(m.bias.shape) == (4,)
    assert m(gpucore.zeros(1, 2, 5, 5)).shape == (1, 4, 12, 12)
    assert m(gpucore.zeros(2, 5, 5), output_size=(11, 11)).shape == (4, 11, 11)
    with pytest.raises(ValueError, match="not reachable"):
        m(gpucore.zeros(2, 5, 5), output_size=(13, 11))
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(gpucore.zeros(1, 2, 3, 3), gpucore.zeros(2, 1, 3, 3), output_padding=2)
    with pytest.raises(gpucore.ShapeError, match=r"conv_transpose2d\(\)"):
        F.conv_transpose2d(gpucore.zeros(1, 3, 3, 3), gpucore.zeros(2, 1, 3, 3))
    with pytest.raises(gpucore.ShapeError, match=r"conv_transpose1d\(\)"):
        F.conv_transpose1d(gpucore.zeros(1, 2, 3), gpucore.zeros(2, 1, 3, 3))
    with pytest.raises(gpucore.ShapeError, match=r"conv_transpose2d\(\): bias must have shape"):
        F.conv_transpose2d(gpucore.zeros(1, 2, 3, 3), gpucore.zeros(2, 1, 3, 3), gpucore.zeros(3))
    with pytest.raises(ValueError, match=r"conv_transpose2d\(\): kernel size"):
        F.conv_transpose2d(gpucore.zeros(1, 2, 3, 3), gpucore.zeros(2, 1, 0, 3))
    with pytest.raises(gpucore.DTypeError, match=r"conv_transpose1d\(\)"):
        F.conv_transpose1d(gpucore.zeros(1, 2, 3), gpucore.zeros(2, 1, 3, dtype=gpucore.float64))
