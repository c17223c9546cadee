"""F.pdist, F.conv_tbc, F.native_channel_shuffle, F.linear_cross_entropy /
nn.LinearCrossEntropyLoss, nn.CrossMapLRN2d and the top-level rms_norm, pixel_unshuffle,
native_channel_shuffle, conv_tbc, feature_dropout(_) and embedding_renorm_ against PyTorch and
float64 numpy references: values, gradients (PyTorch's and finite differences), errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


# ----------------------------------------------------------------------------- pdist
@pytest.mark.parametrize("p", [0.0, 1.0, 1.5, 2.0, 3.0, np.inf])
def test_pdist_as_torch_and_numpy(p):
    x = _rand(5, 3, seed=1)
    same_as_torch(lambda m, a: m.nn.functional.pdist(a, p), x, check_fd=p not in (0.0, np.inf))
    i, j = np.triu_indices(5, 1)
    d = x[i] - x[j]
    ref = np.linalg.norm(d, ord=p, axis=1) if p else (d != 0).sum(1)
    np.testing.assert_allclose(F.pdist(gpucore.tensor(x), p).numpy(), ref, rtol=1e-12)


def test_pdist_zero_distance_has_zero_gradient_and_errors():
    x = gpucore.tensor(np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]]), requires_grad=True)
    F.pdist(x).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy()[0], x.grad.numpy()[1])  # 0 from the equal pair
    assert F.pdist(gpucore.zeros(1, 3)).shape == (0,)
    with pytest.raises(gpucore.ShapeError, match="2-D"):
        F.pdist(gpucore.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="non-negative"):
        F.pdist(gpucore.zeros(3, 2), -1.0)
    with pytest.raises(gpucore.DTypeError, match="pdist.*floating"):  # as PyTorch
        F.pdist(gpucore.ones(3, 2, dtype=gpucore.int64))


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_pdist_and_cdist_below_one_with_a_shared_coordinate_as_torch(p):
    # |d|^p has an infinite slope at d = 0: PyTorch's gradient there is 0, not NaN
    torch = pytest.importorskip("torch")
    x = np.array([[0.0, 1.0], [0.0, 2.0], [3.0, 2.0]])
    fns = (
        (lambda a: F.pdist(a, p), lambda a: torch.nn.functional.pdist(a, p)),
        (lambda a: gpucore.cdist(a, a * 1.0, p), lambda a: torch.cdist(a, a * 1.0, p)),
    )
    for ours, theirs in fns:
        g, t = gpucore.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        gy, ty = ours(g), theirs(t)
        np.testing.assert_allclose(gy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        gy.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- conv_tbc
@pytest.mark.parametrize("pad", [0, 1, 3])
def test_conv_tbc_as_torch(pad):
    x, w, b = _rand(7, 2, 3, seed=2), _rand(3, 3, 4, seed=3), _rand(4, seed=4)
    same_as_torch(lambda m, x, w, b: m.nn.functional.conv_tbc(x, w, b, pad), x, w, b)
    same_as_torch(lambda m, x, w, b: m.conv_tbc(x, w, b, pad), x, w, b, check_fd=False)


def test_conv_tbc_numpy_reference_and_errors():
    x, w, b = _rand(6, 2, 3, seed=5), _rand(2, 3, 4, seed=6), _rand(4, seed=7)
    xp = np.pad(x, ((1, 1), (0, 0), (0, 0)))
    ref = np.stack([sum(xp[t + k] @ w[k] for k in range(2)) + b for t in range(7)])
    got = F.conv_tbc(gpucore.tensor(x), gpucore.tensor(w), gpucore.tensor(b), 1).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(gpucore.ShapeError, match="conv_tbc"):
        F.conv_tbc(gpucore.tensor(x), gpucore.tensor(w[:, :2]), gpucore.tensor(b))
    with pytest.raises(gpucore.ShapeError, match="conv_tbc"):
        F.conv_tbc(gpucore.tensor(x[0]), gpucore.tensor(w), gpucore.tensor(b))
    with pytest.raises(ValueError, match="pad"):
        F.conv_tbc(gpucore.tensor(x), gpucore.tensor(w), gpucore.tensor(b), -1)


# ----------------------------------------------------------------------------- channel shuffle
def test_native_channel_shuffle_as_torch():
    x = _rand(2, 6, 3, seed=8)
    # PyTorch's native kernel has no derivative: values there, gradients by finite differences
    same_as_torch(lambda m, a: m.nn.functional.native_channel_shuffle(a, 3), x, grad=False)
    same_as_torch(lambda m, a: m.native_channel_shuffle(a, 2), x, grad=False)
    a = gpucore.tensor(x, requires_grad=True)
    assert gradcheck(lambda t: F.native_channel_shuffle(t, 3), (a,))
    ref = x.reshape(2, 3, 2, 3).transpose(0, 2, 1, 3).reshape(2, 6, 3)
    np.testing.assert_array_equal(F.native_channel_shuffle(gpucore.tensor(x), 3).numpy(), ref)
    with pytest.raises(gpucore.ShapeError):
        F.native_channel_shuffle(gpucore.zeros(3, 4), 2)


# ----------------------------------------------------------------------------- top level
def test_top_level_rms_norm_and_pixel_unshuffle_as_torch():
    x, w = _rand(2, 3, 4, seed=9), _rand(4, seed=10)
    same_as_torch(lambda m, a, w: m.rms_norm(a, (4,), w, 1e-6), x, w)
    same_as_torch(lambda m, a: m.rms_norm(a, [3, 4]), x)
    same_as_torch(lambda m, a: m.pixel_unshuffle(a, 2), _rand(1, 2, 4, 6, seed=11))
    same_as_torch(lambda m, a: m.pixel_shuffle(a, 2), _rand(1, 8, 2, 3, seed=12))


def test_feature_dropout_drops_whole_channels():
    gpucore.manual_seed(3)
    x = gpucore.ones(8, 6, 5)
    y = gpucore.feature_dropout(x, 0.5, True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and (y == y[:, :, :1]).all()
    assert 0 < (y[:, :, 0] == 0).sum() < 48
    np.testing.assert_array_equal(gpucore.feature_dropout(x, 0.5, False).numpy(), x.numpy())
    z = gpucore.ones(4, 5)
    assert gpucore.feature_dropout_(z, 0.5, True) is z
    assert set(np.unique(z.numpy())) <= {0.0, 2.0}
    # gradient: the same mask scales the gradient
    a = gpucore.ones(4, 3, 2, requires_grad=True)
    b = a * 1.0
    gpucore.feature_dropout_(b, 0.25, True)
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.detach().numpy())
    with pytest.raises(gpucore.ShapeError, match="2 dimensions"):
        gpucore.feature_dropout(gpucore.ones(3), 0.5, True)
    with pytest.raises(ValueError, match="probability"):
        gpucore.feature_dropout(x, 1.5, True)


def test_embedding_renorm_as_torch():
    torch = pytest.importorskip("torch")
    w = _rand(6, 4, seed=13) * 2
    for norm_type in (1.0, 2.0, 3.0):
        ours, theirs = gpucore.tensor(w), torch.tensor(w)
        idx = [0, 2, 2, 5]
        assert gpucore.embedding_renorm_(ours, gpucore.tensor(idx), 1.5, norm_type) is ours
        torch.embedding_renorm_(theirs, torch.tensor(idx), 1.5, norm_type)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    # numpy: rows 0, 2, 5 scaled to max_norm / (norm + 1e-7) when above it, the others kept
    n = np.linalg.norm(w, axis=1)
    ref = w.copy()
    for r in (0, 2, 5):
        if n[r] > 1.5:
            ref[r] *= 1.5 / (n[r] + 1e-7)
    ours = gpucore.tensor(w)
    gpucore.embedding_renorm_(ours, gpucore.tensor([5, 0, 2]), 1.5, 2.0)
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-12)
    with pytest.raises(gpucore.AutogradError, match="leaf"):
        gpucore.embedding_renorm_(gpucore.tensor(w, requires_grad=True), gpucore.tensor([0]), 1, 2)
    with pytest.raises(IndexError):
        gpucore.embedding_renorm_(gpucore.tensor(w), gpucore.tensor([6]), 1.0, 2.0)


# ----------------------------------------------------------------------------- linear_cross_entropy
LCE_CASES = [
    ({}, "index"),
    ({"reduction": "sum", "label_smoothing": 0.2}, "index"),
    ({"reduction": "none", "ignore_index": 1}, "index"),
    ({"weight": True}, "index"),
    ({}, "probs"),
    ({"reduction": "none"}, "kdim"),
]


@pytest.mark.parametrize("kw,kind", LCE_CASES)
def test_linear_cross_entropy_as_torch(kw, kind):
    rng = np.random.default_rng(14)
    x, b = _rand(4, 5, seed=15), _rand(6, seed=16)
    w = _rand(6, 5, seed=17)
    kw = dict(kw)
    extra = []
    if kw.pop("weight", False):
        extra = [np.abs(_rand(6, seed=18)) + 0.1]
    if kind == "index":
        t = rng.integers(0, 6, 4)
    elif kind == "probs":
        t = rng.dirichlet(np.ones(6), 4)
    else:
        w, b = _rand(6, 2, 5, seed=19), _rand(6, 2, seed=20)
        t = rng.integers(0, 6, (4, 2))

    def f(m, x, w, b):
        weight = m.tensor(extra[0]) if extra else None
        return m.nn.functional.linear_cross_entropy(
            x, w, m.tensor(t), linear_bias=b, weight=weight, **kw
        )

    same_as_torch(f, x, w, b)


def test_linear_cross_entropy_unbatched_module_and_errors():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.LinearCrossEntropyLoss(5, 6, out_features=(2, 3), bias=True).double()
    ours = nn.LinearCrossEntropyLoss(5, 6, out_features=(2, 3), bias=True).to(gpucore.float64)
    ours.load_state_dict({k: gpucore.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _rand(4, 5, seed=21)
    t = np.random.default_rng(22).integers(0, 6, (4, 2, 3))
    gx, tx = gpucore.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    lo, lt = ours(gx, gpucore.tensor(t)), theirs(tx, torch.tensor(t))
    np.testing.assert_allclose(lo.item(), lt.item(), rtol=1e-12)
    lo.backward()
    lt.backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        ours.linear.weight.grad.numpy(), theirs.linear.weight.grad.numpy(), atol=1e-12
    )
    assert "num_classes=6" in repr(ours)
    # unbatched input, class index target
    w = _rand(6, 5, seed=23)
    got = F.linear_cross_entropy(gpucore.tensor(x[0]), gpucore.tensor(w), gpucore.tensor(2))
    logits = w @ x[0]
    np.testing.assert_allclose(got.item(), np.log(np.exp(logits).sum()) - logits[2], rtol=1e-12)
    with pytest.raises(gpucore.ShapeError, match="in_features"):
        F.linear_cross_entropy(gpucore.zeros(4, 3), gpucore.zeros(6, 5), gpucore.tensor([0] * 4))
    with pytest.raises(gpucore.ShapeError, match="batched"):
        F.linear_cross_entropy(gpucore.zeros(5), gpucore.zeros(6, 2, 5), gpucore.tensor([0, 0]))
    with pytest.raises(ValueError, match="ignore_index"):
        F.linear_cross_entropy(
            gpucore.zeros(4, 5), gpucore.zeros(6, 5), gpucore.zeros(4, 6), ignore_index=1
        )
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.LinearCrossEntropyLoss(5, 6, label_smoothing=2.0)


# ----------------------------------------------------------------------------- CrossMapLRN2d
def _cross_map_ref(x, size, alpha, beta, k):
    """float64 numpy: PyTorch's legacy running window (channel 0 never leaves the sum)."""
    c = x.shape[1]
    pre = int((size - 1) / 2 + 1)
    sq = x * x
    scale = np.zeros_like(x)
    scale[:, 0] = sq[:, : min(pre, c)].sum(1)
    for i in range(1, c):
        scale[:, i] = scale[:, i - 1]
        if i < c - pre + 1:
            scale[:, i] += sq[:, i + pre - 1]
        if i > pre:
            scale[:, i] -= sq[:, i - pre]
    return x * (scale * alpha / size + k) ** -beta


@pytest.mark.parametrize("size", [1, 2, 3, 5, 9])
def test_cross_map_lrn2d_as_torch_and_numpy(size):
    x = _rand(2, 7, 3, 2, seed=24)
    m = nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.3)
    got = m(gpucore.tensor(x)).numpy()
    np.testing.assert_allclose(got, _cross_map_ref(x, size, 0.5, 0.75, 1.3), rtol=1e-12)
    torch = pytest.importorskip("torch")
    ref = torch.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.3)(torch.tensor(x))
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12)


def test_cross_map_lrn2d_gradient_and_errors():
    # PyTorch's hand-written backward fails its own gradcheck; ours is the forward's exact one
    x = gpucore.tensor(_rand(1, 5, 2, 2, seed=25), requires_grad=True)
    m = nn.CrossMapLRN2d(3, alpha=0.5, beta=0.75, k=1.0)
    assert gradcheck(lambda t: m(t), (x,), atol=1e-6, rtol=1e-4)
    assert repr(m) == "CrossMapLRN2d(3, alpha=0.5, beta=0.75, k=1.0)"
    with pytest.raises(gpucore.ShapeError, match="4D"):
        m(gpucore.zeros(2, 3, 4))


def test_top_level_bilinear_and_prelu_as_torch():
    x1, x2, w, b = _rand(5, 3, seed=30), _rand(5, 4, seed=31), _rand(2, 3, 4, seed=32), _rand(2)
    same_as_torch(lambda m, a, c, w, b: m.bilinear(a, c, w, b), x1, x2, w, b)
    x, slope = _rand(2, 3, 4, seed=33), np.abs(_rand(3, seed=34))
    same_as_torch(lambda m, a, s: m.prelu(a, s), x, slope)
    same_as_torch(lambda m, a, s: a.prelu(s), x, slope[:1])


def test_added_functions_on_vulkan_agree_with_the_cpu(vulkan):
    x = _rand(7, 2, 3, seed=40).astype(np.float32)
    w, b = _rand(3, 3, 4, seed=41).astype(np.float32), _rand(4, seed=42).astype(np.float32)
    img = _rand(2, 6, 3, 3, seed=43).astype(np.float32)
    rows = _rand(6, 4, seed=44).astype(np.float32)
    calls = {
        "conv_tbc": lambda d: F.conv_tbc(*(gpucore.tensor(a, device=d) for a in (x, w, b)), 1),
        "pdist": lambda d: F.pdist(gpucore.tensor(rows, device=d), 1.5),
        "native_channel_shuffle": lambda d: F.native_channel_shuffle(
            gpucore.tensor(img, device=d), 3
        ),
        "cross_map_lrn2d": lambda d: nn.CrossMapLRN2d(3, 0.5, 0.75, 1.0)(
            gpucore.tensor(img, device=d)
        ),
        "linear_cross_entropy": lambda d: F.linear_cross_entropy(
            gpucore.tensor(rows, device=d),
            gpucore.tensor(w[0], device=d),
            gpucore.tensor(np.array([0, 1, 2, 0, 1, 2]), device=d),
        ),
    }
    for name, call in calls.items():
        got = call("vulkan")
        np.testing.assert_allclose(
            got.cpu().numpy(), call("cpu").numpy(), rtol=1e-5, atol=1e-5, err_msg=name
        )


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_as_torch(dims, transposed):
    x = _rand(2, 4, *(5,) * dims, seed=50 + dims)
    w = _rand(4, 3, *(2,) * dims, seed=60 + dims) if transposed else _rand(4, 2, *(2,) * dims)
    b = _rand(3 if transposed else 4, seed=70)
    stride, pad, dil = (2,) * dims, (1,) * dims, (1,) * dims
    out_pad = (1,) * dims if transposed else (0,) * dims
    groups = 1 if transposed else 2

    def f(m, x, w, b):
        return m.convolution(x, w, b, stride, pad, dil, transposed, out_pad, groups)

    same_as_torch(f, x, w, b, check_fd=dims < 3)


def test_convolution_errors():
    with pytest.raises(ValueError, match="3, 4 or 5 dims"):
        gpucore.convolution(gpucore.zeros(2, 3), gpucore.zeros(3, 3), None, 1, 0, 1, False, 0, 1)
