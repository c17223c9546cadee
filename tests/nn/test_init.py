"""gpucore.nn.init: gains, fans, bounds and standard deviations of each initialiser (the truncated
normal's moments, the orthogonal one's Q^T Q), the layers' default initialisations (PyTorch's),
in-place under no_grad, reproducibility."""

import math

import numpy as np
import pytest
from helpers import to_np

import gpucore
import gpucore.nn as nn
from gpucore.nn import init


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01**2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="slope"):
        init.calculate_gain("leaky_relu", "a")


def test_fans():
    assert init._calculate_fan_in_and_fan_out(gpucore.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(gpucore.empty(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError, match="fewer than 2"):
        init.xavier_uniform_(gpucore.empty(5))
    with pytest.raises(ValueError, match="mode"):
        init.kaiming_uniform_(gpucore.empty(5, 3), mode="fan_avg")


def _check_uniform(v, bound):
    assert np.abs(v).max() <= bound
    assert np.abs(v).max() > 0.98 * bound  # fills the interval
    assert abs(v.std() - bound / math.sqrt(3)) < 0.03 * bound
    assert abs(v.mean()) < 0.03 * bound


def test_uniform_family():
    gpucore.manual_seed(0)
    t = gpucore.empty(200, 150)
    assert init.uniform_(t, -2.0, 3.0) is t
    v = to_np(t)
    assert v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.05
    init.xavier_uniform_(t, gain=2.0)
    _check_uniform(to_np(t), 2.0 * math.sqrt(6 / 350))
    init.kaiming_uniform_(t)  # leaky_relu with a=0: gain sqrt(2), fan_in
    _check_uniform(to_np(t), math.sqrt(2) * math.sqrt(3 / 150))
    init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu")
    _check_uniform(to_np(t), math.sqrt(2) * math.sqrt(3 / 200))


def test_normal_family():
    gpucore.manual_seed(1)
    t = gpucore.empty(300, 100, dtype=gpucore.float64)
    init.normal_(t, 1.0, 0.5)
    v = to_np(t)
    assert abs(v.mean() - 1) < 0.01 and abs(v.std() - 0.5) < 0.01
    for fn, std in [
        (lambda: init.xavier_normal_(t), math.sqrt(2 / 400)),
        (
            lambda: init.kaiming_normal_(t, mode="fan_out", nonlinearity="tanh"),
            5 / 3 / math.sqrt(300),
        ),
        (lambda: init.kaiming_normal_(t, a=0.2), math.sqrt(2 / 1.04) / math.sqrt(100)),
    ]:
        assert fn() is t
        v = to_np(t)
        assert abs(v.std() - std) < 0.02 * std and abs(v.mean()) < 0.02 * std


def _truncated_moments(mean, std, a, b):
    """Mean and variance of N(mean, std^2) truncated to [a, b] (the textbook formulas)."""
    al, be = (a - mean) / std, (b - mean) / std

    def pdf(x):
        return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)

    def cdf(x):
        return (1 + math.erf(x / math.sqrt(2))) / 2

    z = cdf(be) - cdf(al)
    m = mean + std * (pdf(al) - pdf(be)) / z
    v = std**2 * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    return m, v


@pytest.mark.parametrize(
    "mean,std,a,b", [(0.0, 0.02, -2.0, 2.0), (0.0, 1.0, -1.0, 2.0), (0.5, 1.0, 0.0, 1.0)]
)
def test_trunc_normal(mean, std, a, b):
    gpucore.manual_seed(3)
    w = init.trunc_normal_(gpucore.empty(400, 500), mean=mean, std=std, a=a, b=b)
    x = to_np(w).astype(np.float64)
    assert x.min() >= a and x.max() <= b
    m, v = _truncated_moments(mean, std, a, b)
    n = x.size  # the sample moments' standard errors, 5 of them
    assert abs(x.mean() - m) < 5 * math.sqrt(v / n)
    assert abs(x.var() - v) < 5 * v * math.sqrt(2 / n) + 1e-12
    with pytest.warns(UserWarning, match="more than 2 std"):
        init.trunc_normal_(gpucore.empty(3), mean=5.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_trunc_normal_half_precision_keeps_the_distribution(dtype):
    """The samples are drawn in float32 and rounded once: a half-precision uniform sample near
    +-1 would round to 1, which the inverse CDF takes to infinity and the clamp to a bound."""
    gpucore.manual_seed(5)
    w = init.trunc_normal_(gpucore.empty(200, 500, dtype=getattr(gpucore, dtype)), std=0.02)
    x = to_np(w.float()).astype(np.float64)
    m, v = _truncated_moments(0.0, 0.02, -2.0, 2.0)
    assert np.abs(x).max() < 0.2  # 10 std; a bound of 2 would be a wrong sample
    assert abs(x.std() - math.sqrt(v)) < 0.02 * math.sqrt(v)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (6, 2, 2)])
def test_orthogonal(shape):
    w = init.orthogonal_(gpucore.empty(*shape), gain=2.0)
    q = to_np(w).reshape(shape[0], -1).astype(np.float64)
    gram = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(q.shape)), atol=1e-5)
    g = gpucore.Generator().manual_seed(7)
    a = to_np(init.orthogonal_(gpucore.empty(4, 3), generator=g))
    g.manual_seed(7)
    np.testing.assert_array_equal(a, to_np(init.orthogonal_(gpucore.empty(4, 3), generator=g)))
    with pytest.raises(gpucore.ShapeError, match="2 or more dimensions"):
        init.orthogonal_(gpucore.empty(3))


def test_eye():
    np.testing.assert_array_equal(to_np(init.eye_(gpucore.empty(2, 3))), np.eye(2, 3))
    with pytest.raises(gpucore.ShapeError, match="2-D"):
        init.eye_(gpucore.empty(2, 2, 2))


def test_constants_in_place_under_no_grad():
    p = nn.Parameter(gpucore.empty(3, 2))
    assert init.ones_(p) is p and to_np(p).min() == 1
    assert init.zeros_(p) is p and to_np(p).max() == 0
    assert init.constant_(p, 2.5) is p and (to_np(p) == 2.5).all()
    init.kaiming_uniform_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert isinstance(p, nn.Parameter)
    with pytest.raises(TypeError, match="floating"):
        init.uniform_(gpucore.zeros(2, dtype=gpucore.int64))
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(gpucore.empty(0, 3))


def test_reproducible_with_seed_and_generator():
    gpucore.manual_seed(7)
    a = to_np(nn.Linear(4, 3).weight).copy()
    gpucore.manual_seed(7)
    b = to_np(nn.Linear(4, 3).weight).copy()
    np.testing.assert_array_equal(a, b)
    g1, g2 = gpucore.Generator(5), gpucore.Generator(5)
    x, y = gpucore.empty(10), gpucore.empty(10)
    init.normal_(x, generator=g1)
    init.normal_(y, generator=g2)
    np.testing.assert_array_equal(to_np(x), to_np(y))


def test_layer_default_initialisations():
    """PyTorch's defaults: kaiming_uniform_(a=sqrt(5)) weights (bound 1/sqrt(fan_in)) and
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) biases; BatchNorm/LayerNorm ones and zeros;
    Embedding N(0, 1)."""
    gpucore.manual_seed(2)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    _check_uniform(to_np(lin.weight), bound)
    b = to_np(lin.bias)
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    conv = nn.Conv2d(16, 64, (3, 5), groups=4)
    fan_in = 16 // 4 * 15
    _check_uniform(to_np(conv.weight), 1 / math.sqrt(fan_in))
    assert np.abs(to_np(conv.bias)).max() <= 1 / math.sqrt(fan_in)
    bn = nn.BatchNorm1d(5)
    assert (to_np(bn.weight) == 1).all() and (to_np(bn.bias) == 0).all()
    assert (to_np(bn.running_var) == 1).all() and (to_np(bn.running_mean) == 0).all()
    emb = to_np(nn.Embedding(300, 100).weight)
    assert abs(emb.std() - 1) < 0.02 and abs(emb.mean()) < 0.02


def test_init_on_vulkan(vulkan):
    t = gpucore.empty(64, 32).to("vulkan")
    gpucore.manual_seed(3)
    init.kaiming_uniform_(t, a=math.sqrt(5))
    assert t.device.type == "vulkan"
    gpucore.manual_seed(3)
    ref = init.kaiming_uniform_(gpucore.empty(64, 32), a=math.sqrt(5))
    np.testing.assert_array_equal(to_np(t), to_np(ref))
    init.zeros_(t)
    assert to_np(t).max() == 0
