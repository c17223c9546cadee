"""gpucore.nn layers and their functional forms: forward against numpy float64 references,
gradcheck on float64, PyTorch's semantics (same weights, where torch is installed), errors,
reprs, and the Vulkan path."""

import math

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


# ============================================================================= numpy references
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
        xs, ws = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                r, q = i * dil[0], j * dil[1]
                patch = xs[:, :, r:r + stride[0] * (oh - 1) + 1:stride[0],
                           q:q + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out if b is None else out + b[None, :, None, None]


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


def np_batch_norm(x, w=None, b=None, mean=None, var=None, eps=1e-5):
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if mean is None:
        mean, var = x.mean(dims), x.var(dims)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    dims = tuple(range(x.ndim - k, x.ndim))
    y = (x - x.mean(dims, keepdims=True)) / np.sqrt(x.var(dims, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


# ============================================================================= linear
def test_linear_functional():
    check_op(F.linear, lambda x, w, b: x @ w.T + b, [(3, 5), (4, 5), (4,)])
    check_op(F.linear, lambda x, w: x @ w.T, [(2, 3, 5), (4, 5)])
    check_op(F.linear, lambda x, w, b: x @ w.T + b, [(5,), (2, 5), (2,)], noncontig=False)
    with pytest.raises(gpucore.ShapeError, match=r"linear\(\).*\(3, 4\)"):
        F.linear(gpucore.zeros(2, 3), gpucore.zeros(3, 4))
    with pytest.raises(gpucore.ShapeError, match="bias"):
        F.linear(gpucore.zeros(2, 4), gpucore.zeros(3, 4), gpucore.zeros(4))
    with pytest.raises(gpucore.DTypeError, match=r"linear\(\).*float64"):
        F.linear(gpucore.zeros(2, 4), gpucore.zeros(3, 4, dtype=gpucore.float64))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (65, 257, 33), (7, 784, 10), (130, 31, 129)])
def test_linear_is_one_gemm_with_bias_and_contiguous_gradients(m, k, n):
    x, w, b = rand((m, k), seed=1), rand((n, k), seed=2), rand((n,), seed=3)
    with gpucore.dispatch.trace_ops() as ops:
        out = F.linear(f32(x), f32(w), f32(b))
    assert [name for name, _, _ in ops] == ["linear"]  # bias fused into the GEMM
    assert_close(out, x @ w.T + b, rtol=1e-4, atol=1e-5)
    # the weight as a transposed view (e.g. tied embeddings) folds into the packing
    wt = f32(np.ascontiguousarray(w.T)).t()
    assert n == k == 1 or not wt.is_contiguous()
    assert_close(F.linear(f32(x), wt), x @ w.T, rtol=1e-4, atol=1e-5)
    xs, ws, bs = (gpucore.tensor(a, dtype=gpucore.float32, requires_grad=True) for a in (x, w, b))
    g = rand((m, n), seed=4)
    F.linear(xs, ws, bs).backward(f32(g))
    assert_close(xs.grad, g @ w, rtol=1e-4, atol=1e-5)
    assert_close(ws.grad, g.T @ x, rtol=1e-4, atol=1e-5)
    assert_close(bs.grad, g.sum(0), rtol=1e-4, atol=1e-5)
    assert ws.grad.is_contiguous()  # the optimizer and the leaf get a plain [out, in] buffer


def test_linear_gradients_and_second_order():
    check_grad(F.linear, rand((4, 5), seed=1), rand((3, 5), seed=2), rand((3,), seed=3),
               gradgrad=True)
    check_grad(F.linear, rand((2, 3, 5), seed=1), rand((3, 5), seed=2))


def test_linear_module():
    m = nn.Linear(5, 3)
    assert repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    assert m.weight.shape == (3, 5) and m.bias.shape == (3,)
    x = rand((4, 5))
    ref = x @ to_np(m.weight).T + to_np(m.bias)
    assert_close(m(f32(x)), ref, rtol=1e-5)
    m = nn.Linear(5, 3, bias=False, dtype=gpucore.float64)
    assert m.bias is None and "bias" not in m.state_dict() and m.weight.dtype is gpucore.float64
    assert repr(m).endswith("bias=False)")
    assert m(f64(x)).dtype is gpucore.float64
    assert nn.Identity(3, foo=1)(m.weight) is m.weight


# ============================================================================= conv2d
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


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1), dict(dilation=(2, 1), groups=2)],
                         ids=["fused", "grouped"])
def test_conv2d_double_backward(kw):
    # groups=1 runs as one fused op whose backward rebuilds the gradients from differentiable
    # ops when a graph of them is wanted; grouped convolutions take the im2col lowering.
    x, w, b = rand((2, 4, 5, 6), seed=0), rand((4, 2 if kw.get("groups") else 4, 3, 2), seed=1), \
        rand((4,), seed=2)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, **kw), x, w, b, gradgrad=True)


def test_conv2d_unbatched_no_bias_and_module():
    x = rand((3, 5, 5))
    w = rand((2, 3, 3, 3), seed=1)
    assert_close(F.conv2d(f32(x), f32(w), padding=1),
                 np_conv2d(x[None], w, pad=((1, 1), (1, 1)))[0], rtol=1e-5, atol=1e-5)
    m = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, bias=False)
    assert repr(m) == ("Conv2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
                       "groups=2, bias=False)")
    assert m.weight.shape == (6, 2, 3, 3) and m.bias is None
    x = rand((2, 4, 7, 7))
    assert_close(m(f32(x)),
                 np_conv2d(x, to_np(m.weight).astype(np.float64), None, (2, 2), ((1, 1),) * 2,
                           (1, 1), 2), rtol=1e-4, atol=1e-5)
    assert repr(nn.Conv2d(1, 16, 3, padding=1)) == (
        "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))")
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
    with pytest.raises(NotImplementedError, match="reflect"):
        nn.Conv2d(3, 4, 3, padding_mode="reflect")


# ============================================================================= pooling
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
    k, s, p, d = F._pool_args("t", kw["kernel_size"], kw.get("stride"), kw.get("padding", 0),
                              kw.get("dilation", 1))

    def ref(x):
        return np_max_pool2d(x, k, s, p, d, kw.get("ceil_mode", False))[0]

    check_op(lambda x: F.max_pool2d(x, **kw), ref, [(2, 3, 7, 6)])
    x = rand((2, 3, 7, 6))
    out, idx = F.max_pool2d(f32(x), return_indices=True, **kw)
    assert idx.dtype is gpucore.int64
    np.testing.assert_array_equal(to_np(idx), np_max_pool2d(x, k, s, p, d,
                                                            kw.get("ceil_mode", False))[1])


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
    "ceil_pad_nocount": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                             count_include_pad=False),
    "divisor": dict(kernel_size=2, stride=1, divisor_override=3),
}


@pytest.mark.parametrize("case", AVGPOOL_CASES)
def test_avg_pool2d(case):
    kw = AVGPOOL_CASES[case]
    k, s, p, _ = F._pool_args("t", kw["kernel_size"], kw.get("stride"), kw.get("padding", 0))

    def ref(x):
        return np_avg_pool2d(x, k, s, p, kw.get("ceil_mode", False),
                             kw.get("count_include_pad", True), kw.get("divisor_override"))

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
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)")
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


# ============================================================================= normalization
@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 4), (2, 3, 3, 2)])
def test_batch_norm_train_functional(shape):
    c = shape[1]
    check_op(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda x, w, b: np_batch_norm(x, w, b),
        [shape, (c,), (c,)],
        rtol=1e-4,
        atol=1e-5,
        gradgrad=len(shape) == 2,
    )


def test_batch_norm_eval_functional():
    rm, rv = rand((3,), seed=5), rand((3,), 0.5, 2, seed=6)
    check_op(
        lambda x, w, b: F.batch_norm(x, f64(rm), f64(rv), w, b, training=False, eps=1e-3),
        lambda x, w, b: np_batch_norm(x, w, b, rm, rv, eps=1e-3),
        [(2, 3, 4), (3,), (3,)],
        rtol=1e-5,
    )


def test_batch_norm_running_stats():
    bn = nn.BatchNorm2d(3, momentum=0.3)
    assert repr(bn) == ("BatchNorm2d(3, eps=1e-05, momentum=0.3, affine=True, bias=True, "
                        "track_running_stats=True)")
    assert to_np(bn.weight).tolist() == [1, 1, 1] and to_np(bn.bias).tolist() == [0, 0, 0]
    rm, rv = np.zeros(3), np.ones(3)
    for seed in range(3):
        x = rand((4, 3, 2, 2), seed=seed)
        y = bn(f32(x))
        assert_close(y, np_batch_norm(x), rtol=1e-4, atol=1e-5)
        rm = 0.7 * rm + 0.3 * x.mean((0, 2, 3))
        rv = 0.7 * rv + 0.3 * x.var((0, 2, 3), ddof=1)  # unbiased, as PyTorch
    assert_close(bn.running_mean, rm, rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, rv, rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 3
    bn.eval()
    x = rand((2, 3, 2, 2), seed=9)
    assert_close(bn(f32(x)), np_batch_norm(x, mean=rm, var=rv), rtol=1e-4, atol=1e-5)
    assert int(bn.num_batches_tracked) == 3  # eval does not count


def test_batch_norm_cumulative_average_and_options():
    bn = nn.BatchNorm1d(2, momentum=None)
    xs = [rand((5, 2), seed=s) for s in range(3)]
    for x in xs:
        bn(f32(x))
    assert_close(bn.running_mean, np.mean([x.mean(0) for x in xs], 0), rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, np.mean([x.var(0, ddof=1) for x in xs], 0), rtol=1e-5)
    # no running stats: batch statistics in eval too; no affine: no parameters
    bn = nn.BatchNorm1d(2, affine=False, track_running_stats=False).eval()
    assert bn.running_mean is None and list(bn.parameters()) == [] and bn.state_dict() == {}
    nb = nn.BatchNorm1d(2, bias=False)
    assert nb.bias is None and nb.weight is not None and "bias=False" in repr(nb)
    x = rand((6, 2, 3))
    assert_close(bn(f32(x)), np_batch_norm(x), rtol=1e-4, atol=1e-5)
    # track_running_stats=True but training: the module updates stats in place under no_grad
    bn = nn.BatchNorm1d(2)
    xt = gpucore.tensor(rand((4, 2)), dtype=gpucore.float32, requires_grad=True)
    bn(xt).sum().backward()
    assert bn.running_mean.grad_fn is None and not bn.running_mean.requires_grad
    with pytest.raises(ValueError, match="more than 1 value"):
        bn(gpucore.zeros(1, 2))
    with pytest.raises(gpucore.ShapeError, match="2D or 3D"):
        bn(gpucore.zeros(2, 2, 2, 2))
    with pytest.raises(gpucore.ShapeError, match="4D"):
        nn.BatchNorm2d(2)(gpucore.zeros(2, 2, 2))
    with pytest.raises(gpucore.ShapeError, match="channels"):
        bn(gpucore.zeros(3, 4))


def test_batch_norm_module_gradcheck():
    bn = nn.BatchNorm2d(2).double()
    bn.weight.data = f64(rand((2,), 0.5, 1.5))
    bn.bias.data = f64(rand((2,), seed=3))
    check_grad(lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
               rand((3, 2, 2, 2)), to_np(bn.weight), to_np(bn.bias))
    check_grad(lambda x: bn.eval()(x), rand((2, 2, 2, 2)))


@pytest.mark.parametrize("ns", [(5,), (3, 5)])
def test_layer_norm(ns):
    shape = (2, 3, 5)
    k = len(ns)
    check_op(
        lambda x, w, b: F.layer_norm(x, ns, w, b, eps=1e-4),
        lambda x, w, b: np_layer_norm(x, k, w, b, eps=1e-4),
        [shape, ns, ns],
        rtol=1e-4,
        atol=1e-5,
        gradgrad=k == 1,
    )
    check_op(lambda x: F.layer_norm(x, ns), lambda x: np_layer_norm(x, k), [shape], rtol=1e-4,
             atol=1e-5)


def test_layer_norm_module():
    m = nn.LayerNorm(4)
    assert repr(m) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert m.weight.shape == (4,) and to_np(m.weight).tolist() == [1] * 4
    x = rand((3, 4))
    assert_close(m(f32(x)), np_layer_norm(x, 1), rtol=1e-4, atol=1e-5)
    m = nn.LayerNorm([2, 3], elementwise_affine=False)
    assert list(m.parameters()) == [] and m.normalized_shape == (2, 3)
    assert nn.LayerNorm(4, bias=False).bias is None
    with pytest.raises(gpucore.ShapeError, match="normalized_shape"):
        m(gpucore.zeros(2, 3, 2))


# ============================================================================= dropout
def test_dropout_statistics_and_scale():
    gpucore.manual_seed(0)
    x = gpucore.ones(200, 100)
    for p in (0.2, 0.5, 0.9):
        y = to_np(F.dropout(x, p))
        kept = y != 0
        frac = 1 - kept.mean()
        assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / y.size)
        np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert to_np(F.dropout(x, 1.0)).max() == 0
    with pytest.raises(ValueError, match="p"):
        F.dropout(x, 1.5)


def test_dropout_gradient_seed_and_module():
    xv = rand((6, 7))
    gpucore.manual_seed(3)
    x = gpucore.tensor(xv, dtype=gpucore.float32, requires_grad=True)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    mask = to_np(y) != 0
    np.testing.assert_allclose(to_np(x.grad), mask / 0.6, rtol=1e-6)
    np.testing.assert_allclose(to_np(y)[mask], xv[mask] / 0.6, rtol=1e-6)
    gpucore.manual_seed(3)
    assert (to_np(F.dropout(f32(xv), 0.4)) == to_np(y)).all()  # Philox: reproducible
    m = nn.Dropout(0.25)
    assert repr(m) == "Dropout(p=0.25, inplace=False)"
    t = f32(xv)
    assert m.eval()(t) is t
    assert (to_np(m.train()(t)) == 0).any()
    t2 = f32(xv)
    assert nn.Dropout(0.5, inplace=True)(t2) is t2
    with pytest.raises(ValueError):
        nn.Dropout(-0.1)


# ============================================================================= embedding
def test_embedding():
    w = rand((6, 3))
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    check_op(lambda wt: F.embedding(gpucore.tensor(idx), wt), lambda wt: wt[idx], [(6, 3)])
    wt = f64(w, grad=True)
    out = F.embedding(gpucore.tensor(idx), wt, padding_idx=2)
    assert_close(out, w[idx])
    out.backward(f64(np.ones((2, 3, 3))))
    expected = np.zeros((6, 3))
    np.add.at(expected, idx[idx != 2], 1.0)
    assert_close(wt.grad, expected)
    # int32 indices, negative padding_idx
    assert_close(F.embedding(gpucore.tensor(idx).int(), f64(w), padding_idx=-1), w[idx])
    with pytest.raises(gpucore.DTypeError, match="int64"):
        F.embedding(gpucore.tensor([0.0]), f64(w))
    with pytest.raises(IndexError):
        F.embedding(gpucore.tensor([6]), f64(w))


def test_embedding_module():
    gpucore.manual_seed(1)
    m = nn.Embedding(1000, 8, padding_idx=3)
    assert repr(m) == "Embedding(1000, 8, padding_idx=3)"
    wv = to_np(m.weight)
    assert (wv[3] == 0).all()
    assert abs(wv.std() - 1) < 0.05 and abs(wv.mean()) < 0.05  # N(0, 1)
    out = m(gpucore.tensor([3, 4]))
    out.sum().backward()
    g = to_np(m.weight.grad)
    assert (g[3] == 0).all() and (g[4] == 1).all()
    e = nn.Embedding.from_pretrained(f32(rand((4, 2))))
    assert not e.weight.requires_grad and e(gpucore.tensor([1])).shape == (1, 2)
    # max_norm renormalizes looked-up rows in place
    m = nn.Embedding(3, 2, max_norm=1.0)
    with gpucore.no_grad():
        m.weight.copy_(gpucore.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]]))
    m(gpucore.tensor([0, 1]))
    assert_close(m.weight, [[0.6, 0.8], [0.3, 0.4], [6.0, 8.0]], rtol=1e-5)


# ============================================================================= activations
def test_activation_modules():
    x = rand((3, 4), -3, 3)
    t = f32(x)
    cases = [
        (nn.ReLU(), np.maximum(x, 0), "ReLU()"),
        (nn.LeakyReLU(0.2), np.where(x > 0, x, 0.2 * x), "LeakyReLU(negative_slope=0.2)"),
        (nn.Sigmoid(), 1 / (1 + np.exp(-x)), "Sigmoid()"),
        (nn.Tanh(), np.tanh(x), "Tanh()"),
        (nn.Softmax(dim=1), np.exp(x) / np.exp(x).sum(1, keepdims=True), "Softmax(dim=1)"),
        (nn.LogSoftmax(dim=0), x - np.log(np.exp(x).sum(0, keepdims=True)), "LogSoftmax(dim=0)"),
        (nn.GELU(approximate="tanh"), None, "GELU(approximate='tanh')"),
        (nn.Flatten(0), x.reshape(-1), "Flatten(start_dim=0, end_dim=-1)"),
    ]
    for m, ref, r in cases:
        assert repr(m) == r
        if ref is not None:
            assert_close(m(t), ref, rtol=1e-5, atol=1e-6)
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    with pytest.warns(UserWarning, match="dim"):
        assert_close(nn.Softmax()(t), np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-5)
    assert nn.Unflatten(1, (2, 2))(t).shape == (3, 2, 2)


def test_leaky_relu():
    check_op(lambda x: F.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x), [(3, 5)],
             gradgrad=True)
    x = gpucore.tensor([-2.0, 0.0, 3.0])
    assert F.leaky_relu(x, 0.5, inplace=True) is x and x.tolist() == [-1.0, 0.0, 3.0]
    m = nn.LeakyReLU(inplace=True)
    y = gpucore.tensor([-1.0, 1.0])
    assert m(y) is y
    assert_close(y, [-0.01, 1.0])


# ============================================================================= gradcheck of modules
def test_module_gradchecks():
    """Every layer with parameters, in float64, differentiated w.r.t. input and parameters."""
    gpucore.manual_seed(0)
    layers = [
        (nn.Linear(3, 2), (2, 3)),
        (nn.Conv2d(4, 2, 3, stride=2, padding=1, dilation=1, groups=2), (1, 4, 5, 5)),
        (nn.Conv2d(2, 2, (2, 3), padding="same", dilation=2), (1, 2, 4, 5)),
        (nn.LayerNorm((2, 3)), (2, 2, 3)),
        (nn.BatchNorm1d(3), (4, 3)),
        (nn.Sequential(nn.MaxPool2d(2, 1), nn.AvgPool2d(2, padding=1),
                       nn.AdaptiveAvgPool2d((2, 1))), (1, 2, 5, 4)),
    ]
    for m, shape in layers:
        m.double()
        params = list(m.parameters())
        names = [n for n, _ in m.named_parameters()]

        def fn(x, *ps, m=m, names=names):
            for name, p in zip(names, ps):
                mod = m.get_submodule(name.rpartition(".")[0])
                mod._parameters[name.rpartition(".")[2]] = p
            return m(x)

        x = f64(rand(shape), grad=True)
        ps = [f64(to_np(p), grad=True) for p in params]
        assert gpucore.autograd.gradcheck(fn, [x, *ps], atol=1e-5, rtol=1e-3), type(m).__name__


# ============================================================================= PyTorch
def _to_torch(torch, mod, tmod):
    with torch.no_grad():
        for (n, p), (tn, tp) in zip(mod.state_dict().items(), tmod.state_dict().items()):
            assert n == tn
            tp.copy_(torch.tensor(to_np(p)))


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_layers_match_torch():
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    gpucore.manual_seed(0)
    pairs = [
        (nn.Conv2d(4, 6, 3, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
         tnn.Conv2d(4, 6, 3, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
         (2, 4, 7, 8)),
        (nn.Conv2d(4, 3, (2, 4), padding="same"), tnn.Conv2d(4, 3, (2, 4), padding="same"),
         (2, 4, 5, 6)),
        (nn.Linear(8, 3), tnn.Linear(8, 3), (2, 5, 8)),
        (nn.BatchNorm2d(4, momentum=None), tnn.BatchNorm2d(4, momentum=None), (3, 4, 2, 3)),
        (nn.BatchNorm1d(4), tnn.BatchNorm1d(4), (5, 4, 3)),
        (nn.LayerNorm((3, 4)), tnn.LayerNorm((3, 4)), (2, 3, 4)),
        (nn.MaxPool2d(3, 2, 1, ceil_mode=True), tnn.MaxPool2d(3, 2, 1, ceil_mode=True),
         (2, 3, 8, 7)),
        (nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
         tnn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 8, 7)),
        (nn.AdaptiveAvgPool2d((3, 5)), tnn.AdaptiveAvgPool2d((3, 5)), (2, 3, 8, 7)),
        (nn.LeakyReLU(0.3), tnn.LeakyReLU(0.3), (4, 5)),
        (nn.GELU(), tnn.GELU(), (4, 5)),
    ]
    for m, tm, shape in pairs:
        m.double()
        tm.double()
        _to_torch(torch, m, tm)
        assert repr(m) == repr(tm)
        for step in range(2):  # two steps: running statistics too
            x = rand(shape, seed=step)
            gx, tx = f64(x, grad=True), torch.tensor(x, requires_grad=True)
            out, tout = m(gx), tm(tx)
            assert_close(out, tout.detach().numpy(), rtol=1e-9, atol=1e-10, what=repr(m))
            w = rand(tuple(tout.shape), seed=7)
            (out * f64(w)).sum().backward()
            (tout * torch.tensor(w)).sum().backward()
            assert_close(gx.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-10, what=repr(m))
            for (n, p), tp in zip(m.named_parameters(), tm.parameters()):
                assert_close(p.grad, tp.grad.numpy(), rtol=1e-8, atol=1e-10, what=n)
                p.grad = None
                tp.grad = None
        tsd = tm.state_dict()
        for k, v in m.state_dict().items():
            assert_close(v, tsd[k].numpy(), rtol=1e-9, atol=1e-12, what=k)
        m.eval()
        tm.eval()
        x = rand(shape, seed=11)
        assert_close(m(f64(x)), tm(torch.tensor(x)).detach().numpy(), rtol=1e-9, atol=1e-10)
    # embedding with padding_idx
    e, te = nn.Embedding(5, 3, padding_idx=1).double(), tnn.Embedding(5, 3, padding_idx=1).double()
    _to_torch(torch, e, te)
    idx = np.array([[1, 2], [4, 1]])
    out, tout = e(gpucore.tensor(idx)), te(torch.tensor(idx))
    assert_close(out, tout.detach().numpy())
    out.sum().backward()
    tout.sum().backward()
    assert_close(e.weight.grad, te.weight.grad.numpy())


# ============================================================================= Vulkan
def test_layers_on_vulkan(vulkan):
    """A small CNN: forward and gradients under the 'vulkan' policy equal the CPU's."""
    gpucore.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
        nn.Conv2d(4, 4, 3, padding="same", groups=2), nn.AvgPool2d(2), nn.Flatten(),
        nn.LayerNorm(16), nn.Linear(16, 3),
    )
    x = f32(rand((3, 2, 8, 8)))
    t = gpucore.tensor([0, 2, 1])

    def run(policy):
        m.zero_grad()
        with gpucore.device_policy(policy):
            loss = F.cross_entropy(m(x), t, label_smoothing=0.1)
            loss.backward()
        return [to_np(loss)] + [to_np(p.grad) for p in m.parameters()]

    cpu = run("cpu")
    vk = run("vulkan")
    for a, b in zip(cpu, vk):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)
    # parameters living on the device
    m.to("vulkan")
    assert all(p.device.type == "vulkan" for p in m.parameters())
    assert m[1].running_mean.device.type == "vulkan"
    out = m(x.to("vulkan"))
    out.sum().backward()
    assert m[0].weight.grad.device.type == "vulkan"
    m.cpu()
    assert all(p.device.type == "cpu" for p in m.parameters())
