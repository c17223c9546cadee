"""gpucore.special against torch.special: the same names, values on a grid of arguments in float64,
float32 and from integer inputs, out=, argument errors, autograd where PyTorch has it, and a
Vulkan tensor giving the same answer. Accuracy against mpmath across each function's domain is
in tests/ops/test_bessel.py and test_transcendental.py."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import gpucore
import gpucore.special
from gpucore import special

torch = pytest.importorskip("torch")

# torch.special's module-level names that are not functions of the API
_NOT_FUNCTIONS = {"Tensor", "torch", "common_args", "multi_dim_common"}
TORCH_NAMES = sorted(
    n for n in dir(torch.special) if not n.startswith("_") and n not in _NOT_FUNCTIONS
)
TWO_INPUTS = {"xlogy", "xlog1py", "zeta", "gammainc", "gammaincc"}
POLYNOMIALS = {n for n in TORCH_NAMES if "polynomial" in n}
# the torch.special functions whose results torch computes less accurately than gpucore (its
# rational approximations lose digits near zeros and switch points, up to ~2e-5; see test_bessel)
LOOSE = {"bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "airy_ai"}
# domain of the grid per function (defaults: [-4, 4])
DOMAIN = {
    "ndtri": (0.001, 0.999),
    "logit": (0.01, 0.99),
    "gammaln": (0.1, 6.0),
    "digamma": (0.1, 6.0),
    "psi": (0.1, 6.0),
    "erfinv": (-0.99, 0.99),
    "bessel_y0": (0.01, 30.0),
    "bessel_y1": (0.01, 30.0),
    "modified_bessel_k0": (0.01, 30.0),
    "modified_bessel_k1": (0.01, 30.0),
    "scaled_modified_bessel_k0": (0.01, 30.0),
    "scaled_modified_bessel_k1": (0.01, 30.0),
    "bessel_j0": (-30.0, 30.0),
    "bessel_j1": (-30.0, 30.0),
    "airy_ai": (-10.0, 10.0),
    "log_ndtr": (-40.0, 10.0),
    "erfcx": (-5.0, 40.0),
    "i0": (-40.0, 40.0),
    "i1": (-40.0, 40.0),
    "i0e": (-40.0, 40.0),
    "i1e": (-40.0, 40.0),
}


def _grid(name, n=401, dtype=np.float64):
    lo, hi = DOMAIN.get(name, (-4.0, 4.0))
    return np.linspace(lo, hi, n).astype(dtype)


def _call(lib, name, *args, **kw):
    """Call name from torch.special or gpucore.special with the arguments each takes."""
    mod = torch.special if lib == "torch" else special
    f = getattr(mod, name)
    conv = torch.tensor if lib == "torch" else gpucore.tensor
    ts = [conv(a) if isinstance(a, np.ndarray) else a for a in args]
    if name in ("softmax", "log_softmax", "logsumexp"):
        return f(*ts, 0, **kw)
    if name == "polygamma":
        return f(2, *ts, **kw)
    if name == "multigammaln":
        return f(*ts, 3, **kw)
    return f(*ts, **kw)


def _args(name, dtype=np.float64):
    x = _grid(name, dtype=dtype)
    if name in POLYNOMIALS:
        lo, hi = (0.0, 1.0) if name.startswith("shifted") else (-1.2, 1.2)
        return (np.linspace(lo, hi, 401).astype(dtype), (np.arange(401) % 13 - 1).astype(dtype))
    if name in ("zeta", "gammainc", "gammaincc"):
        return (np.abs(x) + 1.25, (np.abs(x[::-1]) + 0.1))
    if name in TWO_INPUTS:
        return (x, x[::-1].copy())
    if name == "polygamma":
        return (np.abs(x) + 0.1,)
    if name == "multigammaln":
        return (x + 5,)
    return (x,)


def test_import_forms():
    assert importlib.import_module("gpucore.special") is special is gpucore.special
    assert special.erf is not None and "erf" in special.__all__


def test_every_torch_special_name_is_there():
    missing = [n for n in TORCH_NAMES if not hasattr(special, n)]
    assert not missing, f"gpucore.special lacks {missing}"
    assert sorted(special.__all__) == TORCH_NAMES


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_values_float64(name):
    args = _args(name)
    got = _call("gpucore", name, *args).numpy()
    want = _call("torch", name, *args).numpy()
    assert got.dtype == want.dtype, name
    rtol, atol = (1e-4, 1e-5) if name in LOOSE else (1e-9, 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_values_float32(name):
    args = _args(name, np.float32)
    got = _call("gpucore", name, *args)
    want = _call("torch", name, *args)
    assert got.dtype is gpucore.float32 and want.dtype == torch.float32, name
    np.testing.assert_allclose(
        got.numpy(), want.numpy(), rtol=2e-5, atol=2e-6, equal_nan=True, err_msg=name
    )


@pytest.mark.parametrize(
    "name", sorted(set(TORCH_NAMES) - {"softmax", "log_softmax", "round", "gammainc", "gammaincc"})
)
def test_integer_inputs_give_the_default_float(name):
    args = tuple(np.arange(1, 9, dtype=np.int64) for _ in _args(name))
    if name in ("ndtri", "logit", "erfinv"):  # in their domain only at 0 and 1: still integers
        args = (np.array([0, 1, 1, 0], dtype=np.int64),)
    got = _call("gpucore", name, *args)
    want = _call("torch", name, *args)
    assert got.dtype is gpucore.float32 and want.dtype == torch.float32, name
    rtol = 1e-4 if name in LOOSE else 1e-6
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, equal_nan=True, err_msg=name)


def test_incomplete_gamma_refuses_integers_as_torch():
    a = np.arange(1, 5)
    for name in ("gammainc", "gammaincc"):
        with pytest.raises(NotImplementedError):
            getattr(torch.special, name)(torch.tensor(a), torch.tensor(a))
        with pytest.raises(gpucore.DTypeError, match="pass float tensors"):
            getattr(special, name)(gpucore.tensor(a), gpucore.tensor(a))
        want = getattr(torch.special, name)(torch.tensor(a), torch.tensor(a * 1.5))
        got = getattr(special, name)(gpucore.tensor(a), gpucore.tensor(a * 1.5))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_softmax_dtype_and_round_of_integers():
    x = np.array([[1, 2, 3], [0, 5, 1]])
    for name in ("softmax", "log_softmax"):
        got = getattr(special, name)(gpucore.tensor(x), 1, dtype=gpucore.float64)
        want = getattr(torch.special, name)(torch.tensor(x), 1, dtype=torch.float64)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert special.round(gpucore.tensor(x)).dtype is gpucore.int64


@pytest.mark.parametrize("name", ["erf", "i0e", "bessel_j0", "zeta", "logit", "log_ndtr"])
def test_out(name):
    args = _args(name)
    want = _call("gpucore", name, *args)
    out = gpucore.empty(want.shape, dtype=gpucore.float64)
    got = _call("gpucore", name, *args, out=out)
    assert got is out
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    with pytest.raises(gpucore.DTypeError, match="can't be cast"):
        _call("gpucore", name, *args, out=gpucore.empty(want.shape, dtype=gpucore.int64))
    with pytest.raises(gpucore.ShapeError, match=r"out has shape \(3,\)"):
        _call("gpucore", name, *args, out=gpucore.empty(3, dtype=gpucore.float64))
    with pytest.raises(TypeError, match=f"{name}.*'out' must be Tensor"):
        _call("gpucore", name, *args, out=np.zeros(3))


def test_out_refuses_autograd():
    x = gpucore.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(ValueError, match="don't support automatic differentiation"):
        special.erf(x, out=gpucore.empty(2))
    with gpucore.no_grad():
        special.erf(x, out=gpucore.empty(2))


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_bad_argument_types(name):
    args = list(_args(name))
    args[0] = "x"
    with pytest.raises(TypeError, match=name):
        _call("gpucore", name, *args)


def test_polygamma_and_multigammaln_arguments():
    x = gpucore.tensor([1.5, 2.5])
    with pytest.raises(ValueError, match="does not support negative n"):
        special.polygamma(-1, x)
    with pytest.raises(TypeError, match="'n' must be int"):
        special.polygamma(1.5, x)
    with pytest.raises(ValueError, match="p has to be greater than or equal to 1"):
        special.multigammaln(x, 0)


# gradients: those PyTorch implements, against torch's (values of grad at the same points)
GRADS = {
    "expit": (-3, 3),
    "erfcx": (-2, 5),
    "ndtr": (-4, 4),
    "ndtri": (0.02, 0.98),
    "log_ndtr": (-30, 6),
    "i0": (-6, 6),
    "i0e": (-6, 6),
    "i1": (-6, 6),
    "i1e": (-6, 6),
    "entr": (0.05, 3),
    "logit": (0.05, 0.95),
    "sinc": (-3, 3),
    "gammaln": (0.2, 5),
    "digamma": (0.2, 5),
    "multigammaln": (0.2, 5),
    "polygamma": (0.2, 5),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_torch(name):
    lo, hi = GRADS[name]
    x = np.linspace(lo, hi, 57)
    if name in ("i1", "i1e"):
        x = np.append(x, 0.0)  # the gradient's special value at 0
    g = gpucore.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    _call("gpucore", name, g).sum().backward()
    _call("torch", name, t).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("name", ["xlog1py", "zeta", "gammainc", "gammaincc"])
def test_binary_gradients_match_torch(name):
    a = np.linspace(1.5, 4.0, 11)
    b = np.linspace(0.3, 3.0, 11)
    need_a = name == "xlog1py"
    ga, gb = gpucore.tensor(a, requires_grad=need_a), gpucore.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=need_a), torch.tensor(b, requires_grad=True)
    getattr(special, name)(ga, gb).sum().backward()
    getattr(torch.special, name)(ta, tb).sum().backward()
    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=1e-8, atol=1e-12)
    if need_a:
        np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize(
    "name", ["bessel_j0", "bessel_y1", "modified_bessel_k0", "airy_ai", "hermite_polynomial_h"]
)
def test_no_gradient_as_torch(name):
    args = [gpucore.tensor(a, requires_grad=True) for a in _args(name)]
    out = getattr(special, name)(*args)
    ref = getattr(torch.special, name)(*[torch.tensor(a, requires_grad=True) for a in _args(name)])
    assert out.requires_grad is ref.requires_grad is False


@pytest.mark.parametrize(
    ("name", "message"),
    [("zeta", "derivative for 'zeta'"), ("gammainc", "'igamma: input'")],
)
def test_unimplemented_gradients_raise_as_torch(name, message):
    a = gpucore.tensor([2.0, 3.0], requires_grad=True)
    y = getattr(special, name)(a, gpucore.tensor([1.5, 2.0]))
    with pytest.raises(NotImplementedError, match=message):
        y.sum().backward()


def test_edge_values():
    inf, nan = math.inf, math.nan
    x = np.array([0.0, -0.0, inf, -inf, nan, 1e-300, -1e-300, 1e300, -1e300])
    for name in TORCH_NAMES:
        if name in TWO_INPUTS | POLYNOMIALS | {"multigammaln", "polygamma", "softmax", "logsumexp"}:
            continue
        if name == "log_softmax":
            continue
        # torch's J and Y at 1e300 are off (its phase x - pi/4 rounds): accuracy of gpucore's
        # there is checked against mpmath in tests/ops/test_bessel.py
        xs = x[:7] if name.startswith(("bessel_", "spherical")) else x
        got = _call("gpucore", name, xs).numpy()
        want = _call("torch", name, xs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300, equal_nan=True, err_msg=name)


@pytest.mark.parametrize(
    "name",
    ["i0e", "erfcx", "ndtr", "log_ndtr", "entr", "bessel_j1", "zeta", "gammaincc", "airy_ai"]
    + ["modified_bessel_k1", "chebyshev_polynomial_w", "laguerre_polynomial_l"],
)
def test_vulkan_tensors_give_the_same_answer(vulkan, name):
    args = _args(name, np.float32)
    want = _call("gpucore", name, *args)
    ts = [gpucore.tensor(a).to("vulkan") for a in args]
    got = _call("gpucore", name, *ts)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=2e-5, atol=2e-6)


def test_half_precision_as_torch():
    """float16/bfloat16: the functions PyTorch refuses raise DTypeError; the others compute."""
    x = np.array([0.25, 0.5, 0.75])
    for name in TORCH_NAMES:
        if name in ("softmax", "log_softmax", "logsumexp", "polygamma", "multigammaln"):
            continue
        for tdt, gdt in ((torch.float16, gpucore.float16), (torch.bfloat16, gpucore.bfloat16)):
            k = 2 if name in TWO_INPUTS | POLYNOMIALS else 1
            try:
                want = getattr(torch.special, name)(*[torch.tensor(x, dtype=tdt)] * k)
            except (NotImplementedError, RuntimeError):
                with pytest.raises(gpucore.DTypeError, match=f"{name}.*not implemented"):
                    getattr(special, name)(*[gpucore.tensor(x, dtype=gdt)] * k)
                continue
            got = getattr(special, name)(*[gpucore.tensor(x, dtype=gdt)] * k)
            assert got.dtype is gdt, name
            np.testing.assert_allclose(
                got.float().numpy(), want.float().numpy(), rtol=2e-2, equal_nan=True, err_msg=name
            )


def test_gradients_at_the_singular_points_as_torch():
    g = gpucore.tensor([0.0, -1.0, 2.0], requires_grad=True)
    t = torch.tensor([0.0, -1.0, 2.0], requires_grad=True)
    special.entr(g).sum().backward()
    torch.special.entr(t).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), t.grad.numpy())  # inf, nan, -(1 + log 2)
    a, b = np.array([0.0, 0.0, 1.0]), np.array([-1.5, 2.0, -0.5])
    ga, gb = gpucore.tensor(a, requires_grad=True), gpucore.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    special.xlog1py(ga, gb).sum().backward()
    torch.special.xlog1py(ta, tb).sum().backward()
    np.testing.assert_array_equal(ga.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(gb.grad.numpy(), tb.grad.numpy())


# ------------------------------------------------------------------ the C kernels (cpu/special*.c)
BESSEL = [
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
    "airy_ai",
]
_INF, _NAN = math.inf, math.nan
_EDGES = [0.0, -0.0, 1e-300, -1e-300, 1e-8, -1e-8, 0.1, 2.0, 25.0, 30.0, -2.0, -25.0, -30.0]
_EDGES += [200.0, 1e3, -1e3, _INF, -_INF, _NAN]


def _bessel_points(dtype):
    rng = np.random.default_rng(7)
    mags = 10 ** rng.uniform(-6, 3, 600) * rng.choice([-1.0, 1.0], 600)
    return np.concatenate([rng.uniform(-40, 40, 2000), mags, _EDGES]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", BESSEL)
def test_bessel_family_across_ranges_as_torch(name, dtype):
    """Values, NaN / inf / zero patterns as PyTorch over [-1e3, 1e3] and the edges. The error
    is taken relative to the envelope of the oscillating ones (absolute near their zeros), where
    PyTorch's rational approximations are good to ~2e-6 plus its phase's rounding (~eps |x|)."""
    x = _bessel_points(dtype)
    got = getattr(special, name)(gpucore.tensor(x)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
    fin = np.isfinite(want) & np.isfinite(got)
    scale = np.abs(want[fin]).astype(np.float64)
    if name.startswith(("bessel_j", "spherical")) or name == "airy_ai" or "_y" in name:
        env = np.minimum(1.0, 1.0 / np.sqrt(np.abs(x[fin].astype(np.float64)) + 1e-300))
        scale = np.maximum(scale, env)
    err = np.abs(got[fin].astype(np.float64) - want[fin]) / np.maximum(scale, 1e-300)
    # PyTorch's phase (x - pi/4; Ai's 2/3 |x|^1.5) is rounded in the input's precision
    phase = np.abs(x[fin].astype(np.float64)) ** (1.5 if name == "airy_ai" else 1.0)
    err = err / (3e-6 + 4 * np.finfo(dtype).eps * phase)
    worst = int(np.argmax(err))
    assert err[worst] < 1, (
        f"{name}({x[fin][worst]!r}): {got[fin][worst]!r}, torch {want[fin][worst]!r}"
    )


@pytest.mark.parametrize("name", BESSEL + ["zeta", "gammainc", "gammaincc"])
def test_float32_is_the_float64_value_rounded_once(name):
    """These run in double whatever the input (float32 widened, the result rounded once)."""
    if name in BESSEL:
        args = (_bessel_points(np.float32),)
    else:
        rng = np.random.default_rng(3)
        args = (rng.uniform(0.5, 30, 3000), rng.uniform(-3 if name == "zeta" else 0, 40, 3000))
        args = tuple(a.astype(np.float32) for a in args)
    got = getattr(special, name)(*[gpucore.tensor(a) for a in args]).numpy()
    wide = getattr(special, name)(*[gpucore.tensor(a.astype(np.float64)) for a in args]).numpy()
    np.testing.assert_array_equal(got, wide.astype(np.float32), err_msg=name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_zeta_and_incomplete_gamma_across_ranges_as_torch(dtype):
    """zeta is PyTorch's own algorithm (to the last bits); igamma agrees to PyTorch's accuracy
    (its float64 asymptotic series near x = a is good to ~1e-9; mpmath decides in
    tests/ops/test_transcendental.py)."""
    rng = np.random.default_rng(11)
    edges_a = [1.0, 0.5, 2.0, 3.0, 2.0, _NAN, _INF, 4.0, 1.5, 0.0, -1.0, 1e10, 2.0]
    edges_b = [1.0, 1.0, 0.0, -1.0, -1.5, 2.0, 2.0, -2.5, -2.5, 0.0, 1.0, 3.0, _INF]
    a = np.concatenate([rng.uniform(1, 30, 1500), 10 ** rng.uniform(-2, 3, 500), edges_a])
    b = np.concatenate([rng.uniform(-5, 40, 1500), 10 ** rng.uniform(-3, 3.3, 500), edges_b])
    a, b = a.astype(dtype), b.astype(dtype)
    for name in ("zeta", "gammainc", "gammaincc"):
        # float32: PyTorch's zeta runs in double, its igamma in float (x^a e^-x to ~4e-5 in the
        # tails, where gpucore's is the double value rounded)
        rtol = 1e-8 if dtype == np.float64 else 2e-6 if name == "zeta" else 1e-4
        bb = b if name == "zeta" else np.abs(b)
        got = getattr(special, name)(gpucore.tensor(a), gpucore.tensor(bb)).numpy()
        want = getattr(torch.special, name)(torch.tensor(a), torch.tensor(bb)).numpy()
        assert got.dtype == want.dtype == dtype
        atol = np.finfo(dtype).tiny  # denormal results: a unit of the last place is all they hold
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
