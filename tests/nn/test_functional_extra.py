"""gpucore.nn.functional, the extra ops (functional_extra.py): activations, glu/prelu/softmin,
normalize and the distances, pad, group/instance norm, interpolate, dropout2d and the extra
losses, each against a numpy float64 reference, with gradcheck, bad input, and PyTorch with the
same inputs where it is installed."""

import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, np_softmax, rand, to_np

import gpucore
import gpucore.nn.functional as F

SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def like(a, x):
    """A constant (no grad) holding ``a`` in x's dtype, for the non-differentiated arguments."""
    return gpucore.tensor(np.asarray(a, np.float64), dtype=x.dtype)


def np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.logaddexp(0, beta * x) / beta)


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reduce(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


# ============================================================================= activations
ACT = {
    "silu": (F.silu, lambda x: x * np_sigmoid(x)),
    "mish": (F.mish, lambda x: x * np.tanh(np.logaddexp(0, x))),
    "softplus": (F.softplus, np_softplus),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0, threshold=3.0),
                      lambda x: np_softplus(x, 2.0, 3.0)),
    "elu": (F.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "elu_alpha": (lambda x: F.elu(x, alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "selu": (F.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    "celu": (lambda x: F.celu(x, alpha=1.5),
             lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5))),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: np.clip(x, -0.5, 1.5)),
    "relu6": (lambda x: F.relu6(x * 2), lambda x: np.clip(x * 2, 0, 6)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "logsigmoid": (F.logsigmoid, lambda x: -np.logaddexp(0, -x)),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "softmin": (lambda x: F.softmin(x, dim=1), lambda x: np_softmax(-x, 1)),
    "glu": (lambda x: F.glu(x, dim=0), lambda x: x[:3] * np_sigmoid(x[3:])),
    "glu_last": (F.glu, lambda x: x[..., :2] * np_sigmoid(x[..., 2:])),
}


@pytest.mark.parametrize("name", ACT)
def test_activation(name):
    fn, np_fn = ACT[name]
    check_op(fn, np_fn, [(6, 4)], low=-5, high=5)
    check_op(fn, np_fn, [(6, 4, 4)], grad=False, low=-30, high=30)


@pytest.mark.parametrize("name", ["silu", "mish", "elu", "selu", "celu", "softplus", "logsigmoid",
                                  "softsign", "tanhshrink", "glu"])
def test_activation_gradgrad(name):
    fn, _ = ACT[name]
    check_grad(fn, rand((6, 4), -3, 3, seed=3), gradgrad=True)


def test_activations_stable_at_extremes():
    x = gpucore.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    for fn in (F.silu, F.mish, F.softplus, F.elu, F.selu, F.celu, F.logsigmoid, F.softsign):
        out = to_np(fn(x))
        assert np.isfinite(out).all(), fn.__name__
    assert_close(F.logsigmoid(x), [-1000.0, -50.0, -math.log(2), 0.0, 0.0], atol=1e-6)
    xg = f64([-1000.0, -1.0, 1000.0], grad=True)
    for fn in (F.elu, F.selu, F.celu, F.mish, F.softplus):
        xg.grad = None
        fn(xg).sum().backward()
        assert np.isfinite(to_np(xg.grad)).all(), fn.__name__


@pytest.mark.parametrize("name", ["silu", "mish", "elu", "selu", "celu", "hardtanh", "relu6",
                                  "hardsigmoid", "hardswish"])
def test_activation_inplace(name):
    fn = getattr(F, name)
    a = rand((3, 4), -4, 4, seed=1)
    x = gpucore.tensor(a)
    ref = to_np(fn(gpucore.tensor(a)))
    y = fn(x, inplace=True)
    assert y is x
    assert_close(x, ref)
    # in-place on a non-leaf keeps autograd right
    w = f64(a, grad=True)
    h = w * 1.0
    fn(h, inplace=True).sum().backward()
    w2 = f64(a, grad=True)
    fn(w2).sum().backward()
    assert_close(w.grad, to_np(w2.grad))


def test_hardtanh_family_gradients_at_bounds():
    # PyTorch: hardtanh/relu6/hardsigmoid pass no gradient at their bounds; hardswish's is
    # -0.5 at -3 and 1.5 at 3.
    x = f64([-1.0, 1.0, 0.0, 0.5], grad=True)
    F.hardtanh(x).sum().backward()
    assert to_np(x.grad).tolist() == [0.0, 0.0, 1.0, 1.0]
    x = f64([0.0, 6.0, 3.0], grad=True)
    F.relu6(x).sum().backward()
    assert to_np(x.grad).tolist() == [0.0, 0.0, 1.0]
    x = f64([-3.0, 3.0, 0.0], grad=True)
    F.hardsigmoid(x).sum().backward()
    assert_close(x.grad, [0.0, 0.0, 1 / 6])
    x = f64([-3.0, 3.0, -4.0, 4.0], grad=True)
    F.hardswish(x).sum().backward()
    assert_close(x.grad, [-0.5, 1.5, 0.0, 1.0])


def test_activation_errors():
    with pytest.raises(TypeError, match="softmin"):
        F.softmin(gpucore.zeros(3))
    with pytest.raises(gpucore.ShapeError, match="glu.*even.*size 5"):
        F.glu(gpucore.zeros(3, 5))
    with pytest.raises(gpucore.ShapeError, match="glu"):
        F.glu(gpucore.tensor(1.0))
    with pytest.raises(IndexError, match="glu"):
        F.glu(gpucore.zeros(2, 2), dim=2)
    with pytest.raises(ValueError, match="hardtanh.*min_val"):
        F.hardtanh(gpucore.zeros(2), 1.0, -1.0)
    with pytest.raises(ValueError, match="celu.*alpha"):
        F.celu(gpucore.zeros(2), alpha=0.0)
    with pytest.raises(ValueError, match="softplus.*beta"):
        F.softplus(gpucore.zeros(2), beta=0)
    with pytest.raises(gpucore.DTypeError, match="silu"):
        F.silu(gpucore.tensor([1, 2]))
    with pytest.raises(TypeError, match="elu"):
        F.elu([1.0, 2.0])


def test_prelu():
    w = np.array([0.1, -0.3, 0.7])

    def np_prelu(x, w):
        return np.where(x > 0, x, x * w.reshape(1, 3, *([1] * (x.ndim - 2))))

    check_op(F.prelu, np_prelu, [(2, 3, 4), (3,)])
    check_op(F.prelu, lambda x, a: np.where(x > 0, x, x * a), [(5, 2), (1,)])
    check_op(F.prelu, np_prelu, [(4, 3), (3,)])
    with pytest.raises(gpucore.ShapeError, match="prelu.*parameter numbers = 4.*channel size = 3"):
        F.prelu(gpucore.zeros(2, 3), gpucore.zeros(4))
    with pytest.raises(gpucore.ShapeError, match="prelu"):
        F.prelu(gpucore.tensor(1.0), gpucore.zeros(2))
    check_op(F.prelu, np_prelu, [(2, 3)], vals=[rand((2, 3)), w], noncontig=False)


# ============================================================================= distances
def np_norm(x, p, axis, keepdims=False):
    if p == math.inf:
        return np.abs(x).max(axis=axis, keepdims=keepdims)
    return (np.abs(x) ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)])
def test_normalize(p, dim):
    check_op(lambda x: F.normalize(x, p=p, dim=dim),
             lambda x: x / np.maximum(np_norm(x, p, dim, True), 1e-12), [(4, 5)])


def test_normalize_zero_rows_and_eps():
    x = f64([[0.0, 0.0], [3.0, 4.0]], grad=True)
    y = F.normalize(x, dim=1)
    assert_close(y, [[0.0, 0.0], [0.6, 0.8]])
    y.sum().backward()
    assert np.isfinite(to_np(x.grad)).all()
    assert_close(F.normalize(gpucore.tensor([[0.3, 0.4]]), eps=1.0), [[0.3, 0.4]])
    with pytest.raises(TypeError, match="normalize.*out"):
        F.normalize(gpucore.zeros(2, 2), out=gpucore.zeros(2, 2))


def np_cos(a, b, axis, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(axis, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(axis, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(axis)


def test_cosine_similarity():
    check_op(F.cosine_similarity, lambda a, b: np_cos(a, b, 1), [(4, 6), (4, 6)])
    check_op(lambda a, b: F.cosine_similarity(a, b, dim=-1), lambda a, b: np_cos(a, b, -1),
             [(3, 2, 5), (2, 5)])  # broadcast
    check_op(lambda a, b: F.cosine_similarity(a, b, dim=0), lambda a, b: np_cos(a, b, 0),
             [(5,), (5,)])
    with pytest.raises(gpucore.ShapeError, match="cosine_similarity"):
        F.cosine_similarity(gpucore.zeros(2, 3), gpucore.zeros(2, 4))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(p, keepdim):
    check_op(lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
             lambda a, b: np_norm(a - b + 1e-6, p, -1, keepdim), [(4, 5), (4, 5)])
    check_op(lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
             lambda a, b: np_norm(a - b + 1e-6, p, -1, keepdim), [(4, 5), (5,)])
    with pytest.raises(gpucore.ShapeError, match="pairwise_distance"):
        F.pairwise_distance(gpucore.zeros(2, 3), gpucore.zeros(2, 4))


# ============================================================================= pad
def np_pad(x, pad, mode="constant", value=0.0):
    """numpy reference: positive pads with np.pad, then negative pads crop."""
    k = len(pad) // 2
    widths = [(0, 0)] * x.ndim
    for i in range(k):
        widths[x.ndim - 1 - i] = (max(pad[2 * i], 0), max(pad[2 * i + 1], 0))
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    kw = {"constant_values": value} if mode == "constant" else {}
    out = np.pad(x, widths, mode=np_mode, **kw)
    sl = [slice(None)] * x.ndim
    for i in range(k):
        d = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        sl[d] = slice(max(-lo, 0), out.shape[d] - max(-hi, 0))
    return out[tuple(sl)]


PAD_CASES = [
    ("constant", (1, 2), (2, 3, 4)),
    ("constant", (1, 0, 2, 1), (2, 3, 4)),
    ("constant", (0, 1, 1, 0, 2, 1), (2, 3, 4)),  # a leading dim padded too
    ("constant", (-1, 2, 1, -2), (2, 3, 5, 4)),
    ("constant", (1, 1, 1, 1, 1, 1, 1, 1), (2, 3, 4, 2)),
    ("reflect", (2, 1), (2, 3, 4)),
    ("reflect", (1, 2, 2, 0), (2, 3, 3, 4)),
    ("reflect", (3, 3, 2, 2), (3, 4, 5)),
    ("reflect", (-1, 2, 0, 1), (1, 2, 3, 3)),
    ("reflect", (1, 1, 1, 1, 1, 1), (1, 2, 3, 3, 4)),
    ("replicate", (3, 1), (2, 2, 3)),
    ("replicate", (2, 5, 0, 3), (2, 2, 3, 3)),
    ("replicate", (-1, 1, 2, -1), (2, 3, 3)),
    ("replicate", (1, 2, 0, 1, 2, 0), (2, 2, 2, 3)),
    ("circular", (2, 1, 1, 3), (1, 2, 3, 4)),
    ("circular", (-1, 1), (2, 3, 4)),
]


@pytest.mark.parametrize("mode,pad,shape", PAD_CASES)
def test_pad(mode, pad, shape):
    check_op(lambda x: F.pad(x, pad, mode=mode), lambda x: np_pad(x, pad, mode), [shape])


def test_pad_value_and_dtypes():
    check_op(lambda x: F.pad(x, (1, 2, 0, 1), value=2.5),
             lambda x: np_pad(x, (1, 2, 0, 1), value=2.5), [(2, 3, 4)])
    xi = gpucore.tensor(np.arange(6).reshape(2, 3))
    out = F.pad(xi, (1, 1), value=7)
    assert out.dtype is gpucore.int64
    assert to_np(out).tolist() == [[7, 0, 1, 2, 7], [7, 3, 4, 5, 7]]
    assert tuple(F.pad(gpucore.zeros(1, 1, 3, 3), (0, 0, -3, 0)).shape) == (1, 1, 0, 3)
    assert F.pad(gpucore.zeros(2, 3), ()).shape == (2, 3)
    x = gpucore.zeros(1, 2, 3)
    assert F.pad(x, (1, 1), mode="reflect", value=0.0).shape == (1, 2, 5)  # 0 is allowed


def test_pad_errors():
    x = gpucore.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match="too large"):
        F.pad(gpucore.zeros(3), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="mode"):
        F.pad(x, (1, 1), mode="symmetric")
    with pytest.raises(ValueError, match="reflect.*value"):
        F.pad(x, (1, 1, 1, 1), mode="reflect", value=1.0)
    with pytest.raises(ValueError, match="reflect padding must be less"):
        F.pad(x, (3, 3, 0, 0), mode="reflect")
    with pytest.raises(ValueError, match="circular.*more than once"):
        F.pad(x, (4, 0, 0, 0), mode="circular")
    with pytest.raises(NotImplementedError, match="last 1, 2 or 3 dims"):
        F.pad(x, (1, 1), mode="replicate")  # 4-D input, one padded dim
    with pytest.raises(NotImplementedError, match="last 1, 2 or 3 dims"):
        F.pad(x, (1, 1, 1, 1, 1, 1, 1, 1), mode="reflect")
    with pytest.raises(gpucore.ShapeError, match="negative output size"):
        F.pad(x, (-2, -2))
    with pytest.raises(gpucore.ShapeError, match="pad"):
        F.pad(x, (-4, 4))
    with pytest.raises(TypeError, match="pad.*ints"):
        F.pad(x, (1.5, 1))
    with pytest.raises(TypeError, match="pad"):
        F.pad(np.zeros((2, 2)), (1, 1))


# ============================================================================= normalization
def np_group_norm(x, g, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    out = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    out = out.reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


@pytest.mark.parametrize("shape,g", [((2, 6, 3, 4), 3), ((3, 4, 5), 1), ((2, 4, 3, 2), 4),
                                     ((2, 6), 2)])
def test_group_norm(shape, g):
    c = shape[1]
    check_op(lambda x: F.group_norm(x, g), lambda x: np_group_norm(x, g), [shape])
    check_op(lambda x, w, b: F.group_norm(x, g, w, b, eps=1e-3),
             lambda x, w, b: np_group_norm(x, g, w, b, 1e-3), [shape, (c,), (c,)])


def test_group_norm_errors():
    with pytest.raises(gpucore.ShapeError, match="divisible by num_groups.*num_groups=4"):
        F.group_norm(gpucore.zeros(2, 6, 3), 4)
    with pytest.raises(gpucore.ShapeError, match="group_norm.*weight"):
        F.group_norm(gpucore.zeros(2, 6, 3), 3, gpucore.ones(3))
    with pytest.raises(gpucore.ShapeError, match="group_norm.*2 dims"):
        F.group_norm(gpucore.zeros(6), 3)


def np_instance_norm(x, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    out = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 2, 6)])
def test_instance_norm(shape):
    c = shape[1]
    check_op(F.instance_norm, np_instance_norm, [shape])
    check_op(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
             lambda x, w, b: np_instance_norm(x, w, b), [shape, (c,), (c,)])


def test_instance_norm_running_stats():
    x = rand((3, 2, 4, 4), seed=5)
    rm, rv = gpucore.zeros(2, dtype=gpucore.float64), gpucore.ones(2, dtype=gpucore.float64)
    out = F.instance_norm(f64(x), rm, rv, momentum=0.2)
    assert_close(out, np_instance_norm(x))
    means = x.mean((2, 3))
    vars_ = x.var((2, 3), ddof=1)
    assert_close(rm, 0.2 * means.mean(0), rtol=1e-9)
    assert_close(rv, 0.8 + 0.2 * vars_.mean(0), rtol=1e-9)
    out = F.instance_norm(f64(x), rm, rv, use_input_stats=False)
    ref = (x - to_np(rm).reshape(1, 2, 1, 1)) / np.sqrt(to_np(rv).reshape(1, 2, 1, 1) + 1e-5)
    assert_close(out, ref)
    check_grad(lambda t: F.instance_norm(t, rm, rv, use_input_stats=False), x)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(gpucore.zeros(2, 3, 1, 1))
    with pytest.raises(ValueError, match="running_mean and running_var"):
        F.instance_norm(gpucore.zeros(2, 3, 4), use_input_stats=False)
    with pytest.raises(gpucore.ShapeError, match="instance_norm.*3 dims"):
        F.instance_norm(gpucore.zeros(2, 3))
    with pytest.raises(gpucore.ShapeError, match="instance_norm.*weight"):
        F.instance_norm(gpucore.zeros(2, 3, 4), weight=gpucore.ones(2))


# ============================================================================= interpolate
def np_nearest(x, out_size, exact=False):
    for d, o in zip(range(2, x.ndim), out_size):
        n = x.shape[d]
        src = np.minimum(np.floor((np.arange(o) + (0.5 if exact else 0.0)) * n / o), n - 1)
        x = np.take(x, src.astype(int), axis=d)
    return x


def np_linear(x, out_size, align_corners, scales=None):
    """Separable linear interpolation over every spatial dim, pixel by pixel (PyTorch's
    source-index formulas)."""
    scales = scales or [None] * len(out_size)
    for d, o, s in zip(range(2, x.ndim), out_size, scales):
        n = x.shape[d]
        y = np.zeros(x.shape[:d] + (o,) + x.shape[d + 1:])
        for j in range(o):
            if align_corners:
                src = j * (n - 1) / (o - 1) if o > 1 else 0.0
            else:
                ratio = 1 / s if s else n / o
                src = max((j + 0.5) * ratio - 0.5, 0.0)
            i0 = min(int(math.floor(src)), n - 1)
            i1 = min(i0 + 1, n - 1)
            lam = src - i0
            a, b = np.take(x, i0, axis=d), np.take(x, i1, axis=d)
            y[(slice(None),) * d + (j,)] = a * (1 - lam) + b * lam
        x = y
    return x


@pytest.mark.parametrize("size", [(6, 8), (3, 2), (5, 7), (4, 5), (1, 1)])
def test_interpolate_nearest(size):
    check_op(lambda x: F.interpolate(x, size=size), lambda x: np_nearest(x, size), [(2, 3, 4, 5)])
    check_op(lambda x: F.interpolate(x, size=size, mode="nearest-exact"),
             lambda x: np_nearest(x, size, exact=True), [(2, 3, 4, 5)], grad=False)


def test_interpolate_nearest_scale_factor_and_dims():
    check_op(lambda x: F.interpolate(x, scale_factor=2), lambda x: np_nearest(x, (6, 8)),
             [(1, 2, 3, 4)])
    check_op(lambda x: F.interpolate(x, scale_factor=(2, 0.5)), lambda x: np_nearest(x, (6, 2)),
             [(1, 2, 3, 4)])
    check_op(lambda x: F.interpolate(x, size=7), lambda x: np_nearest(x, (7,)), [(2, 3, 4)])
    check_op(lambda x: F.interpolate(x, scale_factor=2), lambda x: np_nearest(x, (4, 6, 2)),
             [(1, 2, 2, 3, 1)], grad=False)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(6, 8), (3, 2), (5, 7), (1, 3), (4, 5)])
def test_interpolate_bilinear(size, align_corners):
    check_op(lambda x: F.interpolate(x, size=size, mode="bilinear", align_corners=align_corners),
             lambda x: np_linear(x, size, align_corners), [(2, 3, 4, 5)])


def test_interpolate_linear_scale_factor():
    check_op(lambda x: F.interpolate(x, scale_factor=2.5, mode="bilinear"),
             lambda x: np_linear(x, (7, 10), False, [2.5, 2.5]), [(1, 2, 3, 4)])
    # recompute_scale_factor: the ratio of the sizes, not 1 / scale_factor
    check_op(lambda x: F.interpolate(x, scale_factor=2.5, mode="bilinear",
                                     recompute_scale_factor=True),
             lambda x: np_linear(x, (7, 10), False), [(1, 2, 3, 4)], grad=False)
    check_op(lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True),
             lambda x: np_linear(x, (9,), True), [(2, 2, 4)])
    check_op(lambda x: F.interpolate(x, size=(3, 4, 2), mode="trilinear"),
             lambda x: np_linear(x, (3, 4, 2), False), [(1, 1, 2, 3, 3)])


def test_interpolate_area():
    x = rand((2, 3, 4, 6))
    ref = x.reshape(2, 3, 2, 2, 3, 2).mean((3, 5))
    assert_close(F.interpolate(f64(x), size=(2, 3), mode="area"), ref, rtol=1e-9)


def test_interpolate_errors():
    x = gpucore.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="3D input, but bilinear mode needs 4D"):
        F.interpolate(gpucore.zeros(1, 3, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True)
    with pytest.raises(gpucore.ShapeError, match="interpolate"):
        F.interpolate(gpucore.zeros(3, 3), size=4)
    with pytest.raises(ValueError, match="size"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="scale_factor must be positive"):
        F.interpolate(x, scale_factor=-1.0)
    with pytest.raises(gpucore.ShapeError, match="output size"):
        F.interpolate(x, scale_factor=0.2)


# ============================================================================= dropout2d
def test_dropout2d_drops_whole_channels():
    gpucore.manual_seed(0)
    x = gpucore.ones(8, 16, 3, 4)
    y = to_np(F.dropout2d(x, 0.5))
    per_channel = y.reshape(8, 16, -1)
    assert ((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1)).all()
    frac = (per_channel[..., 0] == 0).mean()
    assert 0.3 < frac < 0.7
    gpucore.manual_seed(0)
    assert (to_np(F.dropout2d(x, 0.5)) == y).all()  # the seed fixes the mask
    assert F.dropout2d(x, 0.5, training=False) is x
    assert F.dropout2d(x, 0.0) is x
    assert (to_np(F.dropout2d(x, 1.0)) == 0).all()


def test_dropout2d_grad_and_inplace():
    a = rand((2, 3, 2, 2))
    gpucore.manual_seed(3)
    x = f64(a, grad=True)
    y = F.dropout2d(x, 0.4)
    y.sum().backward()
    scale = to_np(y) / a
    assert_close(x.grad, scale, rtol=1e-9)
    gpucore.manual_seed(3)
    z = gpucore.tensor(a, dtype=gpucore.float64)
    out = F.dropout2d(z, 0.4, inplace=True)
    assert out is z and np.allclose(to_np(z), to_np(y))


def test_dropout2d_errors_and_warnings():
    with pytest.raises(ValueError, match="dropout2d.*probability"):
        F.dropout2d(gpucore.zeros(1, 2, 3, 3), 1.5)
    with pytest.raises(gpucore.ShapeError, match="dropout2d"):
        F.dropout2d(gpucore.zeros(4), 0.5)
    with pytest.warns(UserWarning, match="3D input"):
        y = F.dropout2d(gpucore.ones(2, 5, 3), 0.5)
    per = to_np(y)
    assert ((per == 0).all(-1) | (per == 2).all(-1)).all()


# ============================================================================= losses
REDUCTIONS = ["mean", "sum", "none"]


def np_kl(x, t, log_target=False):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t == 0, 0.0, t * np.log(np.where(t == 0, 1.0, t))) - t * x


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    def red(loss):
        if reduction == "batchmean":
            return loss.sum() / loss.shape[0]
        return reduce(loss, reduction)

    t = rand((4, 5), 0.0, 1.0, seed=7)
    t[0, 1] = 0.0  # xlogy: 0 * log 0 is 0
    if log_target:
        t = np.log(t + 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_op(lambda x: F.kl_div(x, like(t, x), reduction=reduction, log_target=log_target),
                 lambda x: red(np_kl(x, t, log_target)), [(4, 5)], noncontig=False)
        check_grad(lambda x, tt: F.kl_div(x, tt, reduction=reduction, log_target=log_target),
                   rand((4, 5), seed=2), t if log_target else t + 0.05)


def test_kl_div_mean_warns_and_errors():
    x, t = gpucore.zeros(2, 3), gpucore.ones(2, 3) / 3
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, t)
    with pytest.raises(ValueError, match="kl_div.*reduction"):
        F.kl_div(x, t, reduction="average")
    with pytest.raises(gpucore.DTypeError, match="kl_div.*target"):
        F.kl_div(x, gpucore.tensor([[1, 2, 3], [1, 2, 3]]), reduction="sum")
    with pytest.raises(TypeError, match="kl_div.*deprecated"):
        F.kl_div(x, t, reduction="batchmean", reduce=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (False, False), (True, True),
                                            (False, True)])
def test_poisson_nll_loss(reduction, log_input, full):
    t = np.array([[0.0, 1.0, 2.0, 5.0], [3.0, 0.5, 1.5, 8.0]])

    def np_fn(x):
        loss = np.exp(x) - t * x if log_input else x - t * np.log(x + 1e-8)
        if full:
            with np.errstate(divide="ignore", invalid="ignore"):
                st = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
            loss = loss + np.where(t > 1, st, 0.0)
        return reduce(loss, reduction)

    low, high = (-2, 2) if log_input else (0.1, 3)
    check_op(lambda x: F.poisson_nll_loss(x, like(t, x), log_input, full, reduction=reduction),
             np_fn, [(2, 4)], low=low, high=high, noncontig=False)


def np_cos_embed(a, b, y, margin):
    cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    return np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(cos - margin, 0), 0.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding_loss(reduction, margin):
    y = np.array([1.0, -1.0, -1.0, 1.0, -1.0])
    check_op(lambda a, b: F.cosine_embedding_loss(a, b, like(y, a), margin, reduction=reduction),
             lambda a, b: reduce(np_cos_embed(a, b, y, margin), reduction), [(5, 3), (5, 3)],
             noncontig=False)
    yi = gpucore.tensor([1, -1])  # int targets
    out = F.cosine_embedding_loss(f64(rand((2, 3))), f64(rand((2, 3), seed=1)), yi, margin,
                                  reduction=reduction)
    assert_close(out, reduce(np_cos_embed(rand((2, 3)), rand((2, 3), seed=1),
                                          np.array([1, -1]), margin), reduction))
    check_op(lambda a, b: F.cosine_embedding_loss(a, b, like(-1.0, a), reduction=reduction),
             lambda a, b: reduce(np_cos_embed(a, b, np.array(-1.0), 0.0), reduction),
             [(4,), (4,)], noncontig=False)


def test_cosine_embedding_loss_errors():
    a = gpucore.zeros(3, 4)
    with pytest.raises(gpucore.ShapeError, match="0D or 1D target"):
        F.cosine_embedding_loss(a, a, gpucore.ones(3, 1))
    with pytest.raises(gpucore.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(a, gpucore.zeros(3, 5), gpucore.ones(3))
    with pytest.raises(gpucore.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(a, a, gpucore.ones(2))
    with pytest.raises(gpucore.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(gpucore.zeros(4), gpucore.zeros(4), gpucore.ones(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_loss(reduction):
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    check_op(lambda a, b: F.margin_ranking_loss(a, b, like(y, a), 0.5, reduction=reduction),
             lambda a, b: reduce(np.maximum(-y * (a - b) + 0.5, 0), reduction), [(6,), (6,)])
    with pytest.raises(gpucore.ShapeError, match="margin_ranking_loss.*same number of dims"):
        F.margin_ranking_loss(gpucore.zeros(3), gpucore.zeros(3, 1), gpucore.ones(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_hinge_embedding_loss(reduction):
    y = np.array([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])
    check_op(lambda x: F.hinge_embedding_loss(x, like(y, x), 1.5, reduction=reduction),
             lambda x: reduce(np.where(y == 1, x, np.maximum(1.5 - x, 0)), reduction), [(2, 3)])
    with pytest.raises(gpucore.ShapeError, match="hinge_embedding_loss"):
        F.hinge_embedding_loss(gpucore.zeros(3), gpucore.ones(4))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2.0, False), (1.0, False), (2.0, True), (3.0, True)])
def test_triplet_margin_loss(reduction, p, swap):
    def np_fn(a, pos, neg):
        dp = np_norm(a - pos + 1e-6, p, -1)
        dn = np_norm(a - neg + 1e-6, p, -1)
        if swap:
            dn = np.minimum(dn, np_norm(pos - neg + 1e-6, p, -1))
        return reduce(np.maximum(0.8 + dp - dn, 0), reduction)

    check_op(lambda a, pos, neg: F.triplet_margin_loss(a, pos, neg, 0.8, p, swap=swap,
                                                       reduction=reduction),
             np_fn, [(5, 4), (5, 4), (5, 4)])


def test_triplet_margin_loss_errors():
    with pytest.raises(gpucore.ShapeError, match="same number of dimensions.*anchor 2D"):
        F.triplet_margin_loss(gpucore.zeros(3, 4), gpucore.zeros(4), gpucore.zeros(3, 4))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_loss(gpucore.zeros(3, 4), gpucore.zeros(3, 4), gpucore.zeros(3, 4),
                              margin=0.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss(reduction):
    y = np.array([[1.0, -1.0, 1.0, 1.0], [-1.0, -1.0, 1.0, -1.0]])
    check_op(lambda x: F.soft_margin_loss(x, like(y, x), reduction=reduction),
             lambda x: reduce(np.logaddexp(0, -y * x), reduction), [(2, 4)], low=-5, high=5)
    big = F.soft_margin_loss(gpucore.tensor([-100.0]), gpucore.tensor([1.0]))
    assert_close(big, 100.0)
    with pytest.raises(gpucore.ShapeError, match="soft_margin_loss"):
        F.soft_margin_loss(gpucore.zeros(3), gpucore.ones(4))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin_loss(reduction, weighted):
    y = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    w = np.array([0.5, 1.0, 2.0])

    def np_fn(x):
        loss = -(y * -np.logaddexp(0, -x) + (1 - y) * -np.logaddexp(0, x))
        if weighted:
            loss = loss * w
        return reduce(loss.mean(-1), reduction)

    def gc_fn(x):
        return F.multilabel_soft_margin_loss(x, like(y, x), like(w, x) if weighted else None,
                                             reduction=reduction)

    check_op(gc_fn, np_fn, [(4, 3)])


def test_loss_reduction_errors():
    x = gpucore.zeros(2, 3)
    for fn, args in ((F.soft_margin_loss, (x, x)), (F.hinge_embedding_loss, (x, x)),
                     (F.multilabel_soft_margin_loss, (x, x)), (F.poisson_nll_loss, (x, x)),
                     (F.margin_ranking_loss, (x, x, x)),
                     (F.triplet_margin_loss, (x, x, x))):
        with pytest.raises(ValueError, match=f"{fn.__name__}.*reduction"):
            fn(*args, reduction="avg")
        with pytest.raises(TypeError, match=f"{fn.__name__}.*deprecated"):
            fn(*args, size_average=True)


# ============================================================================= PyTorch
def _torch_cases(torch):
    tf = torch.nn.functional
    a, b, c = rand((4, 6)), rand((4, 6), seed=1), rand((4, 6), seed=2)
    img = rand((2, 4, 5, 6), seed=3)
    y = np.array([1.0, -1.0, -1.0, 1.0])
    t01 = rand((4, 6), 0.0, 1.0, seed=4)
    prob = np_softmax(rand((4, 6), seed=5), 1)
    return [
        ("silu", F.silu, tf.silu, [a], {}),
        ("mish", F.mish, tf.mish, [a], {}),
        ("softplus", F.softplus, tf.softplus, [a * 10], {"beta": 2.0, "threshold": 5.0}),
        ("elu", F.elu, tf.elu, [a], {"alpha": 0.5}),
        ("selu", F.selu, tf.selu, [a], {}),
        ("celu", F.celu, tf.celu, [a], {"alpha": 2.0}),
        ("hardtanh", F.hardtanh, tf.hardtanh, [a], {"min_val": -0.5, "max_val": 0.7}),
        ("relu6", F.relu6, tf.relu6, [a * 4], {}),
        ("hardsigmoid", F.hardsigmoid, tf.hardsigmoid, [a * 2], {}),
        ("hardswish", F.hardswish, tf.hardswish, [a * 2], {}),
        ("logsigmoid", F.logsigmoid, tf.logsigmoid, [a], {}),
        ("softsign", F.softsign, tf.softsign, [a], {}),
        ("tanhshrink", F.tanhshrink, tf.tanhshrink, [a], {}),
        ("softmin", F.softmin, tf.softmin, [a], {"dim": 1}),
        ("glu", F.glu, tf.glu, [a], {"dim": 1}),
        ("prelu", F.prelu, tf.prelu, [img, rand((4,), seed=9)], {}),
        ("normalize", F.normalize, tf.normalize, [a], {"p": 3.0, "dim": 0}),
        ("cosine_similarity", F.cosine_similarity, tf.cosine_similarity, [a, b], {}),
        ("pairwise_distance", F.pairwise_distance, tf.pairwise_distance, [a, b], {"p": 1.5}),
        ("pad_constant", F.pad, tf.pad, [img], {"pad": (1, -2, 2, 1), "value": 0.5}),
        ("pad_reflect", F.pad, tf.pad, [img], {"pad": (2, 3, -1, 4), "mode": "reflect"}),
        ("pad_replicate", F.pad, tf.pad, [img], {"pad": (3, 0, 1, 2), "mode": "replicate"}),
        ("pad_circular", F.pad, tf.pad, [img], {"pad": (2, 1, 1, 3), "mode": "circular"}),
        ("pad_reflect_1d", F.pad, tf.pad, [a.reshape(2, 2, 6)], {"pad": (2, 3),
                                                                  "mode": "reflect"}),
        ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b),
         lambda x, w, b: tf.group_norm(x, 2, w, b), [img, rand((4,), seed=6),
                                                     rand((4,), seed=7)], {}),
        ("instance_norm", F.instance_norm, tf.instance_norm, [img], {}),
        ("nearest_up", F.interpolate, tf.interpolate, [img], {"size": (7, 13)}),
        ("nearest_down", F.interpolate, tf.interpolate, [img], {"size": (3, 4)}),
        ("nearest_scale", F.interpolate, tf.interpolate, [img], {"scale_factor": 1.7}),
        ("nearest_exact", F.interpolate, tf.interpolate, [img],
         {"size": (7, 4), "mode": "nearest-exact"}),
        ("bilinear", F.interpolate, tf.interpolate, [img], {"size": (9, 4), "mode": "bilinear"}),
        ("bilinear_ac", F.interpolate, tf.interpolate, [img],
         {"size": (9, 11), "mode": "bilinear", "align_corners": True}),
        ("bilinear_scale", F.interpolate, tf.interpolate, [img],
         {"scale_factor": (1.5, 2.3), "mode": "bilinear"}),
        ("area", F.interpolate, tf.interpolate, [img], {"size": (3, 4), "mode": "area"}),
        ("kl_div", F.kl_div, tf.kl_div, [np.log(prob), t01], {"reduction": "batchmean"}),
        ("kl_div_log", F.kl_div, tf.kl_div, [np.log(prob), np.log(t01 + 0.1)],
         {"reduction": "sum", "log_target": True}),
        ("poisson_nll", F.poisson_nll_loss, tf.poisson_nll_loss, [a, t01 * 4], {"full": True}),
        ("poisson_nll_lin", F.poisson_nll_loss, tf.poisson_nll_loss, [t01 + 0.1, t01 * 4],
         {"log_input": False}),
        ("cosine_embedding", F.cosine_embedding_loss, tf.cosine_embedding_loss, [a, b, y],
         {"margin": 0.1}),
        ("margin_ranking", F.margin_ranking_loss, tf.margin_ranking_loss,
         [a[:, 0], b[:, 0], y], {"margin": 0.2}),
        ("hinge_embedding", F.hinge_embedding_loss, tf.hinge_embedding_loss,
         [a, np.where(b > 0, 1.0, -1.0)], {"margin": 0.5}),
        ("triplet", F.triplet_margin_loss, tf.triplet_margin_loss, [a, b, c],
         {"margin": 1.5, "swap": True}),
        ("soft_margin", F.soft_margin_loss, tf.soft_margin_loss,
         [a, np.where(b > 0, 1.0, -1.0)], {}),
        ("multilabel_soft_margin", F.multilabel_soft_margin_loss,
         tf.multilabel_soft_margin_loss, [a, (b > 0).astype(np.float64), c[0]], {}),
    ]


# Arguments PyTorch does not differentiate (targets of the margin losses, class weights).
_NO_GRAD = {"cosine_embedding": {2}, "margin_ranking": {2}, "hinge_embedding": {1},
            "soft_margin": {1}, "multilabel_soft_margin": {1, 2}}


def test_match_torch():
    torch = pytest.importorskip("torch")
    for name, gc_fn, t_fn, args, kw in _torch_cases(torch):
        fixed = _NO_GRAD.get(name, set())
        ga = [f64(v, grad=i not in fixed) for i, v in enumerate(args)]
        ta = [torch.tensor(v, requires_grad=i not in fixed) for i, v in enumerate(args)]
        out = gc_fn(*ga, **kw)
        ref = t_fn(*ta, **kw)
        assert_close(out, ref.detach().numpy(), rtol=1e-5, atol=1e-6, what=name)
        w = rand(tuple(ref.shape), seed=11)
        (out * f64(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        for i, (g, t) in enumerate(zip(ga, ta)):
            if i in fixed:
                continue
            assert_close(g.grad, t.grad.numpy(), rtol=1e-5, atol=1e-6, what=f"{name} grad {i}")
        # float32 forward too (PyTorch's float32 kernels within 1e-5)
        out32 = gc_fn(*[gpucore.tensor(v, dtype=gpucore.float32) for v in args], **kw)
        ref32 = t_fn(*[torch.tensor(v, dtype=torch.float32) for v in args], **kw)
        assert_close(out32, ref32.numpy().astype(np.float64), rtol=1e-5, atol=1e-5,
                     what=f"{name} float32")


def test_dropout2d_matches_torch_statistics():
    # Not the same random stream as PyTorch, but the same semantics: whole channels, 1/(1-p).
    torch = pytest.importorskip("torch")
    x = np.ones((4, 6, 2, 2))
    ours = to_np(F.dropout2d(gpucore.tensor(x), 0.25))
    theirs = torch.nn.functional.dropout2d(torch.tensor(x), 0.25).numpy()
    for y in (ours, theirs):
        vals = set(np.unique(y).round(6).tolist())
        assert vals <= {0.0, round(1 / 0.75, 6)}
        per = y.reshape(4, 6, -1)
        assert (per.min(-1) == per.max(-1)).all()
