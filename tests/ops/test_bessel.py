"""The Bessel-type ops (gpucore/ops/bessel.py) against mpmath at 30 digits across their domains:
dense grids through every switch-over between series, quadrature and asymptotic expansions,
tiny and huge arguments; and PyTorch's values at the special points (0, infinities, NaN,
negative arguments outside the domain)."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import special

mpmath = pytest.importorskip("mpmath")

_MP = {
    "bessel_j0": lambda x: mpmath.besselj(0, x),
    "bessel_j1": lambda x: mpmath.besselj(1, x),
    "bessel_y0": lambda x: mpmath.bessely(0, x),
    "bessel_y1": lambda x: mpmath.bessely(1, x),
    "modified_bessel_i0": lambda x: mpmath.besseli(0, x),
    "modified_bessel_i1": lambda x: mpmath.besseli(1, x),
    "i0e": lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x)),
    "i1e": lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x)),
    "modified_bessel_k0": lambda x: mpmath.besselk(0, x),
    "modified_bessel_k1": lambda x: mpmath.besselk(1, x),
    "scaled_modified_bessel_k0": lambda x: mpmath.besselk(0, x) * mpmath.exp(x),
    "scaled_modified_bessel_k1": lambda x: mpmath.besselk(1, x) * mpmath.exp(x),
    "spherical_bessel_j0": lambda x: mpmath.sin(x) / x,
    "airy_ai": mpmath.airyai,
}
# x > 0 only (the others are even or odd: checked at -x too)
POSITIVE = {n for n in _MP if "_y" in n or "_k" in n}
SWITCH = [0.1, 1.0, 2.0, 25.0, 30.0]


def _points(name):
    pts = np.concatenate(
        [
            np.geomspace(1e-6, 1.0, 15),
            np.linspace(1.0, 40.0, 120),
            np.geomspace(40.0, 1e4, 20),
            np.array([s + d for s in SWITCH for d in (-1e-9, 0.0, 1e-9)]),
        ]
    )
    if name == "airy_ai":
        pts = np.concatenate([pts[pts < 100], -pts[pts < 300]])
    elif name not in POSITIVE:
        pts = np.concatenate([pts, -pts])
    return pts


def _mp(name, x):
    with mpmath.workdps(30):
        return np.array([float(_MP[name](mpmath.mpf(float(v)))) for v in x])


@pytest.mark.parametrize("name", sorted(_MP))
def test_against_mpmath(name):
    x = _points(name)
    got = getattr(special, name)(gpucore.tensor(x)).numpy()
    want = _mp(name, x)
    # oscillating functions: the error is relative to the envelope (absolute near the zeros)
    scale = np.abs(want)
    if name.startswith(("bessel_", "spherical")) or name == "airy_ai":
        env = np.minimum(1.0, 1.0 / np.sqrt(np.abs(x)))
        if name == "airy_ai":
            env = np.maximum(np.abs(x), 1.0) ** -0.25
        scale = np.maximum(scale, env)
    with np.errstate(invalid="ignore"):  # inf - inf where both overflow
        err = np.where(got == want, 0.0, np.abs(got - want) / np.maximum(scale, 1e-300))
    worst = int(np.argmax(err))
    assert err[worst] < 5e-13, f"{name}({x[worst]!r}) = {got[worst]!r}, mpmath {want[worst]!r}"


def test_large_arguments_keep_the_phase():
    """J and Y at 1e10 and 1e17: cos/sin of x are taken exactly by libm and the phase shift
    applied after, so the result keeps its digits (PyTorch's cos(x - pi/4) loses them)."""
    x = np.array([1e10, 1e17, 123456789.123])
    for name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"):
        got = getattr(special, name)(gpucore.tensor(x)).numpy()
        with mpmath.workdps(60):
            want = np.array([float(_MP[name](mpmath.mpf(v))) for v in x])
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)


def test_float32_rounds_the_float64_value():
    x = np.linspace(-20, 20, 101).astype(np.float32)
    for name in ("bessel_j0", "i0e", "airy_ai", "spherical_bessel_j0"):
        got = getattr(special, name)(gpucore.tensor(x))
        assert got.dtype is gpucore.float32
        want = getattr(special, name)(gpucore.tensor(x.astype(np.float64))).numpy()
        np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))


def test_special_points_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -1e-300, 1e-300, 800.0, -800.0])
    for name in sorted(_MP):
        got = getattr(special, name)(gpucore.tensor(x)).numpy()
        want = getattr(torch.special, name)(torch.tensor(x)).numpy()
        # -800: Ai's phase 2/3 x^1.5 rounds in the last place (~1e-11 relative at this size)
        np.testing.assert_allclose(got, want, rtol=1e-10, equal_nan=True, err_msg=name)


def test_top_level_i0_and_methods():
    torch = pytest.importorskip("torch")
    x = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(
        gpucore.i0(gpucore.tensor(x)).numpy(), torch.i0(torch.tensor(x)).numpy(), rtol=1e-12
    )
    t = gpucore.tensor(x)
    np.testing.assert_allclose(t.i0().numpy(), torch.tensor(x).i0().numpy(), rtol=1e-12)
    t.i0_()
    np.testing.assert_allclose(t.numpy(), torch.i0(torch.tensor(x)).numpy(), rtol=1e-12)


def test_i1_gradient_at_zero():
    x = gpucore.tensor([0.0, 0.0], requires_grad=True)
    (special.i1(x) + special.i1e(x)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_gradcheck(name):
    x = gpucore.tensor(np.array([-31.0, -3.2, -0.4, 0.7, 2.5, 29.5, 35.0]), requires_grad=True)
    assert gpucore.autograd.gradcheck(getattr(special, name), (x,), atol=1e-6, rtol=1e-5)
