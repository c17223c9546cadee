"""The rounding, special-function and elementwise-math additions (ops/unary.py's floor ..
digamma, ops/special.py with ``//`` and ``%``, ops/pointwise.py's compositions) against
PyTorch: values at the edges (NaN, +-inf, -0.0, halves, poles), dtypes, gradients (and
gradcheck), in-place forms, errors; and the unary primitives on Vulkan against the CPU."""

import math

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore

EDGES = np.array(
    [-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, np.nan, np.inf, -np.inf, 0.3, -0.7, 1e-30, 3.0]
    + [-3.0, 1e3, 1e-5, -1e-5, 88.0, 90.0, -90.0, 1e10, -1e10, 0.999, 1.0001, 6.5, 1.4616]
)
PRIMITIVES = ["floor", "ceil", "trunc", "round", "erf", "erfc", "expm1", "exp2", "log2", "log10"]
PRIMITIVES += ["lgamma", "digamma"]


def _rand(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


def _same_values(got, want, rtol, atol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    finite = ~np.isnan(want)
    assert (np.signbit(got) == np.signbit(want))[finite].all(), "signs of zeros/infs differ"


@pytest.mark.parametrize("name", PRIMITIVES + ["erfinv"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_primitive_edges_as_torch(name, dtype):
    torch = pytest.importorskip("torch")
    x = EDGES if name != "erfinv" else np.array([-1, -0.999, -0.5, -0.0, 0.0, 1e-8, 0.9, 1, 1.5])
    x = x.astype(dtype)
    got = getattr(gpucore, name)(gpucore.tensor(x)).numpy()
    want = getattr(torch, name)(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    tol = (2e-6, 1e-6) if dtype == "float32" else (1e-12, 1e-13)
    _same_values(got, want, *tol)


@pytest.mark.parametrize("name", PRIMITIVES + ["erfinv"])
def test_primitive_on_vulkan_as_cpu(name):
    """The shaders' formulas (float32) against the C kernels on many values, edges included."""
    if gpucore.dispatch.vulkan_backend(allow_cpu=True) is None:
        pytest.skip("no Vulkan device")
    rng = np.random.default_rng(1)
    if name == "erfinv":
        x = np.concatenate([[-1, -0.999, -0.0, 0.0, 1, 1.5, np.nan], rng.uniform(-1, 1, 5000)])
    else:
        x = np.concatenate([EDGES, rng.uniform(-10, 10, 5000), rng.uniform(-1, 1, 5000)])
    if name in ("log2", "log10"):
        x = np.concatenate([np.abs(x), 2.0 ** np.arange(-140, 120), [-1.0]])
    x = x.astype(np.float32)
    cpu = getattr(gpucore, name)(gpucore.tensor(x)).numpy()
    with gpucore.dispatch.device_policy("vulkan"):
        vk = getattr(gpucore, name)(gpucore.tensor(x, device="vulkan")).cpu().numpy()
    atol = 5e-6 if name in ("lgamma", "digamma") else 2e-7
    _same_values(vk, cpu, 3e-6, atol)
    if name == "log2":  # exact at the powers of two
        np.testing.assert_array_equal(vk[-261:-1], np.arange(-140, 120, dtype=np.float32))


def test_integer_inputs_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([-3, 0, 7], np.int64)
    for name in ["floor", "ceil", "trunc", "round", "fix"]:
        g, t = getattr(gpucore, name)(gpucore.tensor(x)), getattr(torch, name)(torch.tensor(x))
        assert g.dtype == gpucore.int64 and g.tolist() == t.tolist()
    for name in ["erf", "expm1", "log2", "lgamma", "deg2rad", "sinc"]:
        g, t = getattr(gpucore, name)(gpucore.tensor(x)), getattr(torch, name)(torch.tensor(x))
        assert g.dtype == gpucore.float32
        _same_values(g.numpy(), t.numpy(), 2e-6, 1e-6)
    with pytest.raises(TypeError, match="frac"):
        gpucore.frac(gpucore.tensor(x))
    with pytest.raises(TypeError, match="round"):
        gpucore.round(gpucore.tensor(x), decimals=1)


@pytest.mark.parametrize("name", ["erf", "erfc", "expm1", "exp2", "log2", "log10", "lgamma"])
def test_unary_gradients_as_torch(name):
    low = 0.2 if name in ("log2", "log10", "lgamma") else -2.0
    same_as_torch(lambda m, x: getattr(m, name)(x), _rand(3, 4, seed=2, low=low, high=3.0))


def test_erfinv_digamma_gradients_as_torch():
    same_as_torch(lambda m, x: m.erfinv(x), _rand(3, 4, seed=3, low=-0.95, high=0.95))
    same_as_torch(lambda m, x: m.digamma(x), _rand(3, 4, seed=4, low=0.1, high=8.0))
    x = _rand(6, seed=5, low=-4.0, high=-0.2)
    x = np.where(np.abs(x - np.round(x)) < 0.1, x + 0.3, x)  # away from the poles
    same_as_torch(lambda m, x: m.digamma(x), x)


def test_rounding_has_zero_gradient_and_halves_to_even():
    torch = pytest.importorskip("torch")
    x = _rand(3, 4, seed=6)
    for name in ["floor", "ceil", "trunc", "round", "fix"]:
        same_as_torch(lambda m, x, n=name: getattr(m, n)(x), x, check_fd=False)
    h = np.array([0.5, 1.5, 2.5, -0.5, -2.5])
    assert gpucore.round(gpucore.tensor(h)).tolist() == torch.round(torch.tensor(h)).tolist()
    for d in (2, 1, -1, -2):
        v = np.array([1.2345, 125.0, 135.0, -0.055, 1234.5678])
        same_as_torch(lambda m, x, d=d: m.round(x, decimals=d), v, check_fd=False)


def test_inplace_forms():
    torch = pytest.importorskip("torch")
    x = _rand(3, 4, seed=7, low=0.1, high=3.0)
    for name in ["floor", "ceil", "trunc", "round", "fix", "frac", "erf", "erfc", "expm1"]:
        for n2 in [name, "exp2", "log2", "log10", "lgamma", "digamma", "sinc", "deg2rad", "sgn"]:
            g, t = gpucore.tensor(x), torch.tensor(x)
            getattr(g, n2 + "_")()
            getattr(t, n2 + "_")()
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_fmod_remainder_as_torch(name):
    torch = pytest.importorskip("torch")
    a = np.array([5.3, -5.3, 5.3, -5.3, 1.0, 0.0, -0.0, np.inf, 3.0, np.nan])
    b = np.array([2.0, 2.0, -2.0, -2.0, 0.1, 3.0, 3.0, 2.0, np.inf, 1.0])
    for dt in ("float32", "float64"):
        g = getattr(gpucore, name)(gpucore.tensor(a.astype(dt)), gpucore.tensor(b.astype(dt)))
        t = getattr(torch, name)(torch.tensor(a.astype(dt)), torch.tensor(b.astype(dt)))
        _same_values(g.numpy(), t.numpy(), 1e-12, 0)
    ia, ib = np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])
    g = getattr(gpucore, name)(gpucore.tensor(ia), gpucore.tensor(ib))
    assert g.dtype == gpucore.int64
    assert g.tolist() == getattr(torch, name)(torch.tensor(ia), torch.tensor(ib)).tolist()
    assert getattr(gpucore, name)(gpucore.tensor(ia), 2.5).dtype == gpucore.float32
    with pytest.raises(ZeroDivisionError, match=name):
        getattr(gpucore, name)(gpucore.tensor(ia), 0)
    q = _rand(3, 4, seed=8, low=0.5, high=2.0)
    p = (np.random.default_rng(9).integers(-3, 4, (3, 4)) + 0.5) * q
    same_as_torch(lambda m, a, b: getattr(m, name)(a, b), p, q)
    same_as_torch(lambda m, a, b: getattr(a, name)(b), p, q[0])


ROUNDED = [
    ("floor_divide", lambda m, a, b: m.floor_divide(a, b)),
    ("//", lambda m, a, b: a // b),
    ("div floor", lambda m, a, b: m.div(a, b, rounding_mode="floor")),
    ("div trunc", lambda m, a, b: a.div(b, rounding_mode="trunc")),
    ("%", lambda m, a, b: a % b),
]


@pytest.mark.parametrize("name,fn", ROUNDED, ids=[r[0] for r in ROUNDED])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64"])  # fmt: skip
def test_rounded_division_and_mod_as_torch(name, fn, dtype):
    """``//``, ``%``, floor_divide and div(rounding_mode=) with tensors and numbers on either side
    (signs mixed, exact quotients, 1 // 0.1, float division by zero): values and dtypes."""
    torch = pytest.importorskip("torch")
    a = np.array([7, -7, 7, -7, 0, 6, -6, 1, 100, 5])
    b = np.array([2, 2, -2, -2, 3, 3, -3, 7, 9, 1])
    if dtype == "uint8":
        a, b = np.abs(a), np.abs(b)
    if dtype.startswith(("float", "bfloat")):
        a, b = np.append(a * 0.5, [1.0, -1.0, 1.0, 0.0]), np.append(b, [0.1, 0.1, 0.0, 0.0])
    g = [
        gpucore.tensor(a, dtype=getattr(gpucore, dtype)),
        gpucore.tensor(b, dtype=getattr(gpucore, dtype)),
    ]
    t = [torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b, dtype=getattr(torch, dtype))]
    pairs = [(fn(gpucore, *g), fn(torch, *t)), (fn(gpucore, g[0], 3), fn(torch, t[0], 3))]
    pairs.append((fn(gpucore, g[0], 2.5), fn(torch, t[0], 2.5)))  # ints: float results
    if name in ("//", "%"):  # the reflected operators
        pairs.append((fn(gpucore, 13, g[1]), fn(torch, 13, t[1])))
    for ours, theirs in pairs:
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], name
        _same_values(ours.float().numpy(), theirs.float().numpy(), 1e-6, 0)


def test_rounded_division_exact_in_int64_gradients_inplace_and_errors():
    big = gpucore.tensor([2**62 + 1, -(2**62) - 1, 2**53 + 1])
    d = gpucore.tensor([3, 3, -2])
    # int64 quotients beyond float64's 53 bits are exact
    assert (big // d).tolist() == [(2**62 + 1) // 3, (-(2**62) - 1) // 3, (2**53 + 1) // -2]
    assert big.div(d, rounding_mode="trunc").tolist() == [
        (2**62 + 1) // 3,
        -((2**62 + 1) // 3),
        -((2**53 + 1) // 2),
    ]
    x = gpucore.tensor([1.5, -2.5, 7.0], requires_grad=True)
    (gpucore.div(x, 2.0, rounding_mode="floor") * 3).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # a step function, as PyTorch's
    y = gpucore.tensor([7, -7])
    y //= 2
    assert y.tolist() == [3, -4] and y.dtype is gpucore.int64
    y %= 3
    assert y.tolist() == [0, 2]
    assert gpucore.tensor([7.0]).floor_divide_(2).tolist() == [3.0]
    with pytest.raises(ZeroDivisionError, match="div"):
        gpucore.tensor([1, 2]) // 0
    with pytest.raises(ZeroDivisionError, match="remainder"):
        gpucore.tensor([1, 2]) % gpucore.tensor([1, 0])
    with pytest.raises(ValueError, match="rounding_mode"):
        gpucore.div(gpucore.ones(2), 2, rounding_mode="round")


def test_rounded_division_on_vulkan_as_cpu(vulkan):
    a, b = _rand(4, 5, seed=12, low=-9, high=9), _rand(5, seed=13, low=0.5, high=3)
    for fn in (
        lambda x, y: x // y,
        lambda x, y: x % y,
        lambda x, y: x.div(y, rounding_mode="trunc"),
    ):
        want = fn(gpucore.tensor(a), gpucore.tensor(b)).numpy()
        got = fn(gpucore.tensor(a, device="vulkan"), gpucore.tensor(b, device="vulkan"))
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_binary_math_as_torch():
    a, b = _rand(3, 4, seed=10), _rand(4, seed=11, low=0.3, high=2.0)
    same_as_torch(lambda m, a, b: m.atan2(a, b), a, b)
    same_as_torch(lambda m, a, b: m.arctan2(a, -b), a, b)
    same_as_torch(lambda m, a, b: m.hypot(a, b), a, b)
    same_as_torch(lambda m, a, b: m.logaddexp(a, b), a, b)
    same_as_torch(lambda m, a, b: m.logaddexp2(a, b), a, b)
    same_as_torch(lambda m, a, b: m.xlogy(a, b), a, b)
    same_as_torch(lambda m, a, b: m.copysign(a, b - 1), a, b)
    same_as_torch(lambda m, a, b: m.fmax(a, b), a, b)
    same_as_torch(lambda m, a, b: m.fmin(a, b), a, b)
    same_as_torch(lambda m, a, b: m.float_power(a.abs(), b), a, b)
    same_as_torch(lambda m, a: m.sinc(a), a)
    same_as_torch(lambda m, a: m.deg2rad(a) + m.rad2deg(a), a)
    same_as_torch(lambda m, a: m.frac(a), a, check_fd=False)


def test_composite_edges_as_torch():
    torch = pytest.importorskip("torch")
    inf, nan = math.inf, math.nan
    a = np.array([-inf, -inf, inf, 0.0, 0.0, 1.0, nan, 2.0])
    b = np.array([-inf, 1.0, inf, 0.0, nan, nan, 1.0, -0.0])
    for name in ["logaddexp", "logaddexp2", "xlogy", "fmax", "fmin", "copysign", "atan2"]:
        g = getattr(gpucore, name)(gpucore.tensor(a), gpucore.tensor(b)).numpy()
        t = getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy()
        np.testing.assert_allclose(g, t, rtol=1e-12, equal_nan=True, err_msg=name)
    x = np.array([0.0, -0.0, 1.0, -2.0, nan, inf])
    for name in ["sinc", "signbit", "sgn"]:
        g, t = getattr(gpucore, name)(gpucore.tensor(x)), getattr(torch, name)(torch.tensor(x))
        np.testing.assert_array_equal(g.numpy(), t.numpy(), err_msg=name)
    v = np.array([0.25])
    g = gpucore.heaviside(gpucore.tensor(x), gpucore.tensor(v))
    np.testing.assert_array_equal(g.numpy(), torch.heaviside(torch.tensor(x), torch.tensor(v)))
    with pytest.raises(TypeError, match="heaviside"):
        gpucore.heaviside(gpucore.tensor(x), gpucore.tensor([1]))


def test_gradients_at_the_special_points_as_torch():
    """xlogy at x == 0, sinc at 0, copysign at 0: the gradients PyTorch gives (0, not NaN)."""
    same_as_torch(
        lambda m, x, y: m.xlogy(x, y), np.array([0.0, 0.0, 2.0]), np.array([0.5, 3.0, 0.5])
    )
    # at x == y == 0 PyTorch's gradient for y is 0 / 0 = NaN; gpucore's is 0 (and x's is 0)
    x, y = gpucore.zeros(1, requires_grad=True), gpucore.zeros(1, requires_grad=True)
    gpucore.xlogy(x, y).sum().backward()
    assert x.grad.tolist() == [0.0] and y.grad.tolist() == [0.0]
    same_as_torch(lambda m, x: m.sinc(x), np.array([0.0, 0.5, -1.5]), check_fd=False)
    same_as_torch(lambda m, x: m.copysign(x, -2.0), np.array([0.0, 0.5, -1.5]), check_fd=False)


def test_clamp_min_max_addcmul_addcdiv_as_torch():
    a, b, c = _rand(3, 4, seed=12), _rand(4, seed=13), _rand(3, 1, seed=14, low=0.5, high=2.0)
    same_as_torch(lambda m, a: m.clamp_min(a, 0.3) + m.clamp_max(a, -0.2), a)
    same_as_torch(lambda m, a, b: m.clamp_min(a, b), a, b, check_fd=False)
    same_as_torch(lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), a, b, c)
    same_as_torch(lambda m, a, b, c: m.addcdiv(a, b, c, value=-2), a, b, c)
    same_as_torch(lambda m, a, b, c: a.addcdiv(b, c), a, b, c)
    torch = pytest.importorskip("torch")
    g, t = gpucore.tensor(a), torch.tensor(a)
    g.addcmul_(gpucore.tensor(b), gpucore.tensor(c), value=3)
    t.addcmul_(torch.tensor(b), torch.tensor(c), value=3)
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)
    g.clamp_min_(0.1).clamp_max_(0.5)
    t.clamp_min_(0.1).clamp_max_(0.5)
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)
    with pytest.raises(TypeError, match="addcdiv"):
        gpucore.addcdiv(gpucore.tensor([1]), gpucore.tensor([1]), gpucore.tensor([2]))


def test_numpy_references_without_torch():
    """The same functions against numpy float64 (the check that runs without PyTorch)."""
    a, b = _rand(5, seed=15), _rand(5, seed=16, low=0.5, high=2.0)
    ga, gb = gpucore.tensor(a), gpucore.tensor(b)
    pairs = [
        (gpucore.fmod(ga, gb), np.fmod(a, b)),
        (gpucore.remainder(ga, gb), np.remainder(a, b)),
        (gpucore.atan2(ga, gb), np.arctan2(a, b)),
        (gpucore.hypot(ga, gb), np.hypot(a, b)),
        (gpucore.logaddexp(ga, gb), np.logaddexp(a, b)),
        (gpucore.logaddexp2(ga, gb), np.logaddexp2(a, b)),
        (gpucore.sinc(ga), np.sinc(a)),
        (gpucore.copysign(ga, -gb), np.copysign(a, -b)),
        (gpucore.float_power(gb, ga), np.power(b, a)),
        (gpucore.frac(ga), a - np.trunc(a)),
        (gpucore.expm1(ga), np.expm1(a)),
        (gpucore.log10(gb), np.log10(b)),
        (gpucore.exp2(ga), np.exp2(a)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)
