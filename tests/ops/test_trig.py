"""tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh (gpucore/ops/trig.py): float64 numpy
references, gradcheck and gradgradcheck, PyTorch's values at float32 precision over a range that
includes tiny, huge, +-1, +-inf and NaN, the aliases and in-place forms, integer inputs, and
device tensors against the host."""

import math

import numpy as np
import pytest
from helpers import check_op

import gpucore as gc

# name, numpy reference, input range for the check (inside the domain, away from its edges)
_CASES = [
    ("tan", np.tan, -1.4, 1.4),
    ("sinh", np.sinh, -3.0, 3.0),
    ("cosh", np.cosh, -3.0, 3.0),
    ("asinh", np.arcsinh, -5.0, 5.0),
    ("acosh", np.arccosh, 1.05, 6.0),
    ("atanh", np.arctanh, -0.95, 0.95),
    ("atan", np.arctan, -5.0, 5.0),
    ("asin", np.arcsin, -0.95, 0.95),
    ("acos", np.arccos, -0.95, 0.95),
]


@pytest.mark.parametrize("name, ref, lo, hi", _CASES, ids=[c[0] for c in _CASES])
def test_values_and_gradients(name, ref, lo, hi):
    check_op(getattr(gc, name), ref, [(4, 5)], low=lo, high=hi, gradgrad=True)


# (not 89: PyTorch's own float32 sinh / cosh give inf or 2.2e38 there depending on the element's
# position, its vector or scalar loop)
_EDGES = [0.0, -0.0, 1e-30, -1e-8, 1e-3, 0.5, -0.999, 0.999, 1.0, -1.0, 3.0, 20.0, -50.0, 88.0,
          -88.0, 1e20, -1e20, math.inf, -math.inf, math.nan]  # fmt: skip


@pytest.mark.parametrize("name", [c[0] for c in _CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_torch_at_edges(name, dtype):
    torch = pytest.importorskip("torch")
    x = np.concatenate([np.linspace(-4, 4, 81), _EDGES]).astype(dtype)
    ours = getattr(gc, name)(gc.tensor(x)).numpy()
    theirs = getattr(torch, name)(torch.tensor(x)).numpy()
    rtol = 2e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=0, equal_nan=True)
    zeros = x == 0  # the sign of zero too (asinh(-0.0) is -0.0)
    np.testing.assert_array_equal(np.signbit(ours[zeros]), np.signbit(theirs[zeros]))


def test_aliases_methods_inplace_and_integers():
    x = gc.tensor([0.25, -0.5])
    for alias, name in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan")):
        np.testing.assert_array_equal(getattr(gc, alias)(x).numpy(), getattr(gc, name)(x).numpy())
    for alias, name in (("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh")):
        np.testing.assert_array_equal(getattr(x, alias)().numpy(), getattr(x, name)().numpy())
    y = x.clone()
    assert y.tan_() is y
    np.testing.assert_allclose(y.numpy(), np.tan([0.25, -0.5]), rtol=1e-6)
    i = gc.tensor([0, 1, 2])
    assert gc.sinh(i).dtype is gc.float32
    np.testing.assert_allclose(gc.sinh(i).numpy(), np.sinh([0, 1, 2]), rtol=1e-6)


def test_gradient_at_zero_of_the_odd_forms():
    for name in ("asinh", "sinh", "atan", "asin", "tan", "atanh"):
        x = gc.tensor([0.0], dtype=gc.float64, requires_grad=True)
        getattr(gc, name)(x).sum().backward()
        assert x.grad.item() == pytest.approx(1.0, abs=1e-12), name


@pytest.mark.parametrize("name", [c[0] for c in _CASES])
def test_device_tensors_match_the_host(vulkan, name):
    x = np.linspace(-0.9, 0.9, 5000).astype(np.float32) + (1.5 if name == "acosh" else 0.0)
    want = getattr(gc, name)(gc.tensor(x).to("cpu")).numpy()
    got = getattr(gc, name)(gc.tensor(x).to("vulkan")).numpy(force=True)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", [c[0] for c in _CASES])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs_compute_in_float32_as_torch(name, dtype):
    """Half inputs over their whole range (squares and exponentials that would overflow in half
    precision): float64 references of the float32 computation, rounded once to the dtype."""
    x = np.array([0.5, -0.9, 3.0, 11.5, -11.5, 300.0, -1000.0, 60000.0, 0.0], np.float32)
    t = gc.tensor(x).to(getattr(gc, dtype))
    got = getattr(gc, name)(t)
    assert got.dtype is t.dtype
    ref = {n: r for n, r, _, _ in _CASES}[name]
    with np.errstate(all="ignore"):
        want = gc.tensor(ref(t.float().numpy().astype(np.float64)).astype(np.float32))
    want = want.to(t.dtype).float().numpy()
    np.testing.assert_array_equal(got.float().numpy(), want)
