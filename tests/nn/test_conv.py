"""conv2d, functional and module (strides, padding incl. 'same' and 'valid', dilation, groups, the
fused op and the im2col lowering, double backward, errors, reprs), and unfold/fold (im2col,
col2im) with one_hot, against numpy float64 references."""

import subprocess
import sys

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, np_col2im, np_im2col, rand, to_np
from nn_checks import check_function_vs_torch, check_module_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore.ops import nn as nn_ops
from gpucore.ops.registry import apply


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def np_conv2d(x, w, b=None, stride=(1, 1), pad=((0, 0), (0, 0)), dil=(1, 1), groups=1):
    """Direct cross-correlation; pad is ((top, bottom), (left, right))."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad[0], pad[1]))
    oh = (xp.shape[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg : (g + 1) * cg], w[g * og : (g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                r, q = i * dil[0], j * dil[1]
                patch = xs[
                    :,
                    :,
                    r : r + stride[0] * (oh - 1) + 1 : stride[0],
                    q : q + stride[1] * (ow - 1) + 1 : stride[1],
                ]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out if b is None else out + b[None, :, None, None]


CONV_CASES = {
    "plain": dict(),
    "stride": dict(stride=2),
    "stride_pair_padding": dict(stride=(2, 1), padding=(1, 2)),
    "dilation": dict(dilation=(2, 1), padding=1),
    "groups": dict(groups=2, padding=1),
    "depthwise": dict(groups=4),
    "same_odd": dict(padding="same"),
    "same_even_dilated": dict(padding="same", dilation=(1, 2)),
    "valid": dict(padding="valid", stride=(1, 2)),
}


def _conv_ref_args(kw, k):
    stride = F._pair(kw.get("stride", 1), "", "", 1)
    dil = F._pair(kw.get("dilation", 1), "", "", 1)
    p = kw.get("padding", 0)
    if p == "same":
        pad = []
        for kk, d in zip(k, dil):
            total = d * (kk - 1)
            pad.append((total // 2, total - total // 2))
        pad = tuple(pad)
    elif p == "valid":
        pad = ((0, 0), (0, 0))
    else:
        pp = F._pair(p, "", "", 0)
        pad = ((pp[0], pp[0]), (pp[1], pp[1]))
    return stride, pad, dil


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(case):
    kw = CONV_CASES[case]
    groups = kw.get("groups", 1)
    k = (3, 2)
    stride, pad, dil = _conv_ref_args(kw, k)
    shapes = [(2, 4, 6, 5), (4, 4 // groups, *k), (4,)]

    def ref(x, w, b):
        return np_conv2d(x, w, b, stride, pad, dil, groups)

    check_op(lambda x, w, b: F.conv2d(x, w, b, **kw), ref, shapes, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kw", [dict(stride=2, padding=1), dict(dilation=(2, 1), groups=2)], ids=["fused", "grouped"]
)
def test_conv2d_double_backward(kw):
    # groups=1 runs as one fused op whose backward rebuilds the gradients from differentiable
    # ops when a graph of them is wanted; grouped convolutions take the im2col lowering.
    x, w, b = (
        rand((2, 4, 5, 6), seed=0),
        rand((4, 2 if kw.get("groups") else 4, 3, 2), seed=1),
        rand((4,), seed=2),
    )
    check_grad(lambda x, w, b: F.conv2d(x, w, b, **kw), x, w, b, gradgrad=True)


def test_conv2d_unbatched_no_bias_and_module():
    x = rand((3, 5, 5))
    w = rand((2, 3, 3, 3), seed=1)
    assert_close(
        F.conv2d(f32(x), f32(w), padding=1),
        np_conv2d(x[None], w, pad=((1, 1), (1, 1)))[0],
        rtol=1e-5,
        atol=1e-5,
    )
    m = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, bias=False)
    assert repr(m) == (
        "Conv2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2, bias=False)"
    )
    assert m.weight.shape == (6, 2, 3, 3) and m.bias is None
    x = rand((2, 4, 7, 7))
    assert_close(
        m(f32(x)),
        np_conv2d(x, to_np(m.weight).astype(np.float64), None, (2, 2), ((1, 1),) * 2, (1, 1), 2),
        rtol=1e-4,
        atol=1e-5,
    )
    assert repr(nn.Conv2d(1, 16, 3, padding=1)) == (
        "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"
    )
    assert "padding=same" in repr(nn.Conv2d(1, 2, 3, padding="same", dilation=2))


def test_conv2d_errors():
    x = gpucore.zeros(1, 4, 5, 5)
    with pytest.raises(gpucore.ShapeError, match="channels"):
        F.conv2d(x, gpucore.zeros(2, 3, 3, 3))
    with pytest.raises(ValueError, match="groups"):
        F.conv2d(x, gpucore.zeros(3, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, gpucore.zeros(2, 4, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="padding"):
        F.conv2d(x, gpucore.zeros(2, 4, 3, 3), padding="full")
    with pytest.raises(gpucore.ShapeError, match="smaller"):
        F.conv2d(x, gpucore.zeros(2, 4, 7, 7))
    with pytest.raises(gpucore.ShapeError, match="4-D"):
        F.conv2d(gpucore.zeros(4, 5), gpucore.zeros(2, 4, 3, 3))
    with pytest.raises(gpucore.DTypeError, match="dtype"):
        F.conv2d(x, gpucore.zeros(2, 4, 3, 3, dtype=gpucore.float64))
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="only 'zeros' padding_mode"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


# ============================================================================= unfold, fold
def test_unfold_fold_one_hot():
    x = rand((2, 3, 7, 6))
    check_op(
        lambda t: F.unfold(t, (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
        lambda t: np_im2col(t, (2, 3), (2, 1), (1, 0), (1, 2)),
        [x.shape],
        vals=[x],
    )
    cols = np_im2col(x, (3, 3), (1, 1), (1, 1), (1, 1))
    check_op(
        lambda c: F.fold(c, (7, 6), 3, padding=1),
        lambda c: np_col2im(c, x.shape, (3, 3), (1, 1), (1, 1), (1, 1)),
        [cols.shape],
        vals=[cols],
        grad=False,
    )
    with pytest.raises(gpucore.ShapeError, match="fold"):
        F.fold(gpucore.zeros(1, 5, 4), (3, 3), 2)
    assert F.one_hot(gpucore.tensor([0, 2]), 3).tolist() == [[1, 0, 0], [0, 0, 1]]


# Issue 20, item 13: zero input channels raised MemoryError in a fresh process (the C kernel's
# column buffer of size 0) and gave zeros after another conv2d ran. Now as PyTorch's eager
# conv2d: no output channels either, zero gradients, the same in any process.
_ZERO_CHANNELS = [
    ((1, 0, 4, 4), (2, 0, 3, 3), {}, (1, 0, 2, 2)),
    ((2, 0, 4, 4), (3, 0, 1, 1), {"stride": 2}, (2, 0, 2, 2)),
    ((1, 0, 4, 4), (4, 0, 3, 3), {"padding": "same"}, (1, 0, 4, 4)),
    ((1, 0, 4, 4), (4, 0, 3, 3), {"groups": 2}, (1, 0, 2, 2)),
    ((0, 4, 4), (2, 0, 3, 3), {}, (0, 2, 2)),
]


@pytest.mark.parametrize("xs, ws, kw, out", _ZERO_CHANNELS)
def test_conv2d_of_zero_input_channels_as_pytorch(xs, ws, kw, out):
    x = gpucore.zeros(*xs, requires_grad=True)
    w = gpucore.zeros(*ws, requires_grad=True)
    b = gpucore.ones(ws[0], requires_grad=True)
    y = F.conv2d(x, w, b, **kw)
    assert y.shape == out
    y.sum().backward()
    assert x.grad.shape == xs and w.grad.shape == ws
    assert b.grad.tolist() == [0.0] * ws[0]


def test_conv2d_of_zero_input_channels_in_a_fresh_process():
    code = (
        "import gpucore, gpucore.nn.functional as F\n"
        "y = F.conv2d(gpucore.zeros(1, 0, 4, 4), gpucore.zeros(2, 0, 3, 3), gpucore.ones(2))\n"
        "print(tuple(y.shape))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "(1, 0, 2, 2)"


def test_fused_conv2d_op_with_empty_sums_is_the_bias():
    """The op itself (reached by F.conv2d only with channels): empty sums, whatever ran before."""
    geom = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1)}
    x, w, b = gpucore.zeros(1, 0, 4, 4), gpucore.zeros(2, 0, 3, 3), gpucore.tensor([1.0, -2.0])
    y = apply(nn_ops.CONV2D, x, w, b, **geom)
    assert y.shape == (1, 2, 2, 2) and y.numpy()[0, :, 0, 0].tolist() == [1.0, -2.0]
    g = gpucore.ones(1, 2, 2, 2)
    gx, gw, gb = apply(nn_ops.CONV2D_BACKWARD, x, w, g, need=(True, True, True), **geom)
    assert gx.shape == (1, 0, 4, 4) and gw.shape == (2, 0, 3, 3) and gb.tolist() == [4.0, 4.0]


def test_conv2d_refuses_a_kernel_of_size_zero():
    with pytest.raises(ValueError, match="kernel size"):
        F.conv2d(gpucore.zeros(1, 1, 4, 4), gpucore.zeros(2, 1, 0, 3))


# ============================================================================= conv1d
CONV1D_CASES = {
    "plain": dict(),
    "stride_padding": dict(stride=2, padding=2),
    "dilation_groups": dict(dilation=2, groups=2, padding=1),
    "same": dict(padding="same", dilation=2),
}


@pytest.mark.parametrize("kw", CONV1D_CASES.values(), ids=CONV1D_CASES)
def test_conv1d_against_a_float64_reference(kw):
    x, w, b = rand((2, 4, 11)), rand((6, 4 // kw.get("groups", 1), 3), seed=1), rand((6,), seed=2)
    s, d, g = kw.get("stride", 1), kw.get("dilation", 1), kw.get("groups", 1)
    p = kw.get("padding", 0)
    pads = ((0, 0), (d, d)) if p == "same" else ((0, 0), (p, p))
    expected = np_conv2d(x[:, :, None], w[:, :, None], b, (1, s), pads, (1, d), g)[:, :, 0]
    out = F.conv1d(gpucore.tensor(x), gpucore.tensor(w), gpucore.tensor(b), **kw)
    assert_close(out, expected, rtol=1e-10, atol=1e-12)
    check_grad(lambda x, w, b: F.conv1d(x, w, b, **kw), x, w, b)


@pytest.mark.parametrize("kw", CONV1D_CASES.values(), ids=CONV1D_CASES)
def test_conv1d_matches_torch(kw):
    torch = pytest.importorskip("torch")
    w = rand((6, 4 // kw.get("groups", 1), 4), seed=1)
    check_function_vs_torch(
        lambda x, w, b: F.conv1d(x, w, b, **kw),
        lambda x, w, b: torch.nn.functional.conv1d(x, w, b, **kw),
        [rand((2, 4, 11)), w, rand((6,), seed=2)],
    )


def test_conv1d_module_unbatched_and_errors():
    torch = pytest.importorskip("torch")
    for args, kw in [
        ((4, 6, 3), dict(stride=2, padding=1, groups=2)),
        ((4, 2, 2), dict(bias=False)),
    ]:
        check_module_vs_torch(
            nn.Conv1d(*args, **kw), torch.nn.Conv1d(*args, **kw), [rand((2, 4, 9))]
        )
    m = nn.Conv1d(4, 6, 3)
    assert tuple(m.weight.shape) == (6, 4, 3) and m(gpucore.zeros(4, 9)).shape == (6, 7)
    with pytest.raises(gpucore.ShapeError, match=r"conv1d\(\)"):
        F.conv1d(gpucore.zeros(2, 3, 4, 5), gpucore.zeros(2, 3, 3))
    with pytest.raises(ValueError, match="stride"):
        F.conv1d(gpucore.zeros(1, 3, 8), gpucore.zeros(2, 3, 3), stride=(1, 2))
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv1d(3, 4, 3, groups=2)


def test_fold_unfold_modules():
    x = rand((2, 3, 5, 4))
    unfold = nn.Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=2)
    assert repr(unfold) == "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=2)"
    cols = unfold(gpucore.tensor(x))
    assert_close(cols, np_im2col(x, (2, 3), (2, 2), (1, 1)), rtol=1e-12, atol=1e-12)
    fold = nn.Fold(output_size=(5, 4), kernel_size=(2, 3), padding=1, stride=2)
    assert (
        repr(fold)
        == "Fold(output_size=(5, 4), kernel_size=(2, 3), dilation=1, padding=1, stride=2)"
    )
    expected = np_col2im(to_np(cols), x.shape, (2, 3), (2, 2), (1, 1))
    assert_close(fold(cols), expected, rtol=1e-12, atol=1e-12)
    check_grad(lambda c: fold(c), to_np(cols))
