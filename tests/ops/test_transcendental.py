"""The ops of gpucore/ops/transcendental.py (zeta, igamma/igammac, erfcx, ndtri) against mpmath
across their domains and against PyTorch at the edges; the compositions declared there (logit,
polygamma, mvlgamma) and their gradients against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import special

mpmath = pytest.importorskip("mpmath")


def _mp(fn, *xs, dps=30):
    with mpmath.workdps(dps):
        return np.array([float(fn(*[mpmath.mpf(float(v)) for v in vs])) for vs in zip(*xs)])


def _rel(got, want):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(got == want, 0.0, np.abs(got - want) / np.abs(want))


def _zeta_sum_mp(x, q, n=300):
    """sum_(k < n) (k + q)^-x plus the Euler-Maclaurin tail's first terms, at 40 digits (mpmath's
    own zeta loses digits for large x and q: 1e-9 at x = 52, q = 676 at 30 digits)."""
    with mpmath.workdps(40):
        x, q = mpmath.mpf(float(x)), mpmath.mpf(float(q))
        m = n + q
        tail = m ** (1 - x) / (x - 1) + m**-x / 2 + x * m ** (-x - 1) / 12
        tail -= x * (x + 1) * (x + 2) * m ** (-x - 3) / 720
        return mpmath.fsum((k + q) ** -x for k in range(n)) + tail


def _zeta_sum(x, q, n=300):
    return float(_zeta_sum_mp(x, q, n))


def test_zeta_against_mpmath():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(1.001, 3, 120), rng.uniform(3, 20, 80), [1.5, 2.0, 7.0]])
    q = np.concatenate([rng.uniform(1e-3, 2, 100), rng.uniform(2, 50, 100), [1e-8, 9.0, 9.5]])
    got = special.zeta(gpucore.tensor(x), gpucore.tensor(q)).numpy()
    assert _rel(got, np.array([_zeta_sum(a, b) for a, b in zip(x, q)])).max() < 1e-13
    xb, qb = np.array([52.52, 25.12, 3.5, 1.25]), np.array([676.1, 484.6, 1e4, 3e3])
    got = special.zeta(gpucore.tensor(xb), gpucore.tensor(qb)).numpy()
    assert _rel(got, np.array([_zeta_sum(a, b) for a, b in zip(xb, qb)])).max() < 1e-13
    # negative non-integer q with integer x (Cephes' extension)
    x2, q2 = np.array([2.0, 3.0, 4.0, 6.0]), np.array([-0.5, -2.25, -7.75, -30.1])
    got = special.zeta(gpucore.tensor(x2), gpucore.tensor(q2)).numpy()
    assert _rel(got, _mp(mpmath.zeta, x2, q2)).max() < 1e-12


def test_zeta_far_negative_q_is_exact_and_quick():
    """Below q = -256 the value comes from positive-q zetas, not a -q-term loop (q = -1e15 would
    never finish); checked against the direct sum at 40 digits and, at q = 1/2 - 1e15, against
    zeta(2, f) + zeta(2, 1 - f) = pi^2 / sin^2(pi f) (odd x: only the far tail is left)."""
    x = np.array([2.0, 7.0, 3.0, 2.0, 2.0, 3.0])
    q = np.array([-300.3, -2345.875, -1000.5, -255.5, -256.5, 0.5 - 1e15])
    got = special.zeta(gpucore.tensor(x), gpucore.tensor(q)).numpy()
    want = []
    with mpmath.workdps(40):
        for a, b in zip(x[:5], q[:5]):
            n = int(-np.floor(b))
            head = mpmath.fsum((mpmath.mpf(b) + k) ** -int(a) for k in range(n))
            want.append(float(head + _zeta_sum_mp(a, b + n)))
    want.append(_zeta_sum(3.0, 0.5 + 1e15))
    assert _rel(got, np.array(want)).max() < 1e-13
    half = gpucore.tensor([0.5 - 1e15], dtype=gpucore.float64)
    even = special.zeta(gpucore.tensor([2.0], dtype=gpucore.float64), half).item()
    assert abs(even - np.pi**2) < 1e-14


def test_zeta_domain_matches_torch():
    torch = pytest.importorskip("torch")
    inf, nan = np.inf, np.nan
    x = np.array([1.0, 0.5, 2.0, 2.0, 2.5, 3.0, inf, inf, inf, nan, 2.0, 2.0, -1.0])
    q = np.array([1.0, 1.0, 0.0, -3.0, -1.5, -1.5, 0.5, 1.0, 2.0, 1.0, nan, inf, 2.0])
    got = special.zeta(gpucore.tensor(x), gpucore.tensor(q)).numpy()
    want = torch.special.zeta(torch.tensor(x), torch.tensor(q)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


def test_igamma_against_mpmath():
    rng = np.random.default_rng(1)
    a = np.concatenate([rng.uniform(1e-3, 1, 80), rng.uniform(1, 60, 160), [100.0, 500.0]])
    x = np.concatenate([rng.uniform(1e-3, 3, 80), a[80:240] * rng.uniform(0.3, 2, 160), [90, 540]])
    p = special.gammainc(gpucore.tensor(a), gpucore.tensor(x)).numpy()
    q = special.gammaincc(gpucore.tensor(a), gpucore.tensor(x)).numpy()
    want_p = _mp(lambda s, y: mpmath.gammainc(s, 0, y, regularized=True), a, x)
    want_q = _mp(lambda s, y: mpmath.gammainc(s, y, mpmath.inf, regularized=True), a, x)
    # absolute: the smaller of P and Q is relative to the complement's rounding
    np.testing.assert_allclose(p, want_p, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(q, want_q, rtol=1e-10, atol=1e-14)


def test_igamma_large_a_against_mpmath():
    """Near x = a for large a, where the prefactor x^a e^-x / Gamma(a) is a difference of
    terms of size a: Stirling's series keeps it exact (PyTorch is 1e-11 off here)."""
    a = np.array([10.0, 12.5, 1e3, 1e3, 1e3, 1e4, 1e5, 1e6])
    x = np.array([25.0, 12.0, 1010.0, 500.0, 2e3, 1e4 + 50, 1e5 - 300, 1e6 + 900])
    p = special.gammainc(gpucore.tensor(a), gpucore.tensor(x)).numpy()
    q = special.gammaincc(gpucore.tensor(a), gpucore.tensor(x)).numpy()
    want_p = _mp(lambda s, y: mpmath.gammainc(s, 0, y, regularized=True), a, x, dps=40)
    want_q = _mp(lambda s, y: mpmath.gammainc(s, y, mpmath.inf, regularized=True), a, x, dps=40)
    np.testing.assert_allclose(p, want_p, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(q, want_q, rtol=1e-13, atol=1e-300)


def test_igamma_edges_match_torch():
    torch = pytest.importorskip("torch")
    inf, nan = np.inf, np.nan
    a = np.array([0.0, 0.0, 1.0, 1.0, inf, inf, -1.0, 1.0, nan, 2.0])
    x = np.array([0.0, 1.0, 0.0, inf, 1.0, inf, 1.0, -1.0, 1.0, nan])
    for name in ("gammainc", "gammaincc"):
        got = getattr(special, name)(gpucore.tensor(a), gpucore.tensor(x)).numpy()
        want = getattr(torch.special, name)(torch.tensor(a), torch.tensor(x)).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
        top = getattr(gpucore, "igamma" if name == "gammainc" else "igammac")
        np.testing.assert_array_equal(top(gpucore.tensor(a), gpucore.tensor(x)).numpy(), want)


def test_erfcx_against_mpmath():
    x = np.concatenate([np.linspace(-26, 30, 561), np.geomspace(30, 1e6, 30), [25.99, 26.01]])
    got = special.erfcx(gpucore.tensor(x)).numpy()
    want = _mp(lambda v: mpmath.exp(v * v) * mpmath.erfc(v), x, dps=50)
    assert _rel(got, want).max() < 2e-14
    # beyond: 1 / (x sqrt(pi)) to double precision
    big = np.array([1e10, 1e100, 1e300])
    np.testing.assert_allclose(
        special.erfcx(gpucore.tensor(big)).numpy(), 1 / (big * np.sqrt(np.pi)), rtol=1e-15
    )


def test_ndtri_against_mpmath():
    p = np.concatenate(
        [np.geomspace(5e-324, 1e-250, 20), np.geomspace(1e-300, 0.5, 200)]
        + [1 - np.geomspace(1e-16, 0.5, 100)]
    )
    got = special.ndtri(gpucore.tensor(p)).numpy()

    def newton(pv, x0):  # the root of ncdf(x) = p at 50 digits, from gpucore's value
        with mpmath.workdps(50):
            pv, x = mpmath.mpf(float(pv)), mpmath.mpf(float(x0))
            for _ in range(4):
                x -= (mpmath.ncdf(x) - pv) / mpmath.npdf(x)
            return float(x)

    want = np.array([newton(a, b) for a, b in zip(p, got)])
    assert _rel(got, want).max() < 1e-14
    edges = special.ndtri(gpucore.tensor([0.0, 1.0, 0.5, -0.1, 1.1, np.nan])).numpy()
    np.testing.assert_array_equal(edges, [-np.inf, np.inf, 0.0, np.nan, np.nan, np.nan])


def test_log_ndtr_against_mpmath():
    x = np.concatenate([np.linspace(-1e3, -30, 50), np.linspace(-30, 10, 401)])
    got = special.log_ndtr(gpucore.tensor(x)).numpy()
    want = _mp(lambda v: mpmath.log(mpmath.ncdf(v)), x, dps=60)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma_matches_torch(n):
    torch = pytest.importorskip("torch")
    x = np.concatenate([np.linspace(0.05, 20, 200), [-0.5, -1.5, -2.25, 1e4]])
    got = gpucore.polygamma(n, gpucore.tensor(x))
    want = torch.polygamma(n, torch.tensor(x))
    # torch's trigamma is ~1e-9 off for small x: mpmath decides there
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-8)
    np.testing.assert_allclose(gpucore.tensor(x).polygamma(n).numpy(), got.numpy(), rtol=0)
    ref = _mp(lambda v: mpmath.polygamma(n, v), x[:200])
    np.testing.assert_allclose(got.numpy()[:200], ref, rtol=1e-12)
    xs = gpucore.tensor(np.array([0.3, 1.7, 4.0]), requires_grad=True)
    ts = torch.tensor([0.3, 1.7, 4.0], dtype=torch.float64, requires_grad=True)
    gpucore.polygamma(n, xs).sum().backward()
    torch.polygamma(n, ts).sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), ts.grad.numpy(), rtol=1e-9)


def test_mvlgamma_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(2.1, 9, 30)
    for p in (1, 2, 5):
        got = gpucore.mvlgamma(gpucore.tensor(x), p).numpy()
        want = torch.mvlgamma(torch.tensor(x), p).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(
        gpucore.tensor(x).mvlgamma(3).numpy(), torch.tensor(x).mvlgamma(3).numpy(), rtol=1e-12
    )
    g, t = gpucore.tensor(x), torch.tensor(x)
    g.mvlgamma_(2)
    t.mvlgamma_(2)
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)
    g, t = gpucore.tensor(x), torch.tensor(x)
    g.polygamma_(2)
    t.polygamma_(2)
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-10)


def test_logit_matches_torch_with_and_without_eps():
    torch = pytest.importorskip("torch")
    x = np.array([-0.5, 0.0, 0.05, 0.3, 0.5, 0.9, 0.97, 1.0, 1.5])
    for eps in (None, 0.1, 0.0):
        g = gpucore.tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        gy, ty = gpucore.logit(g, eps), torch.logit(t, eps)
        np.testing.assert_allclose(gy.detach().numpy(), ty.detach().numpy(), equal_nan=True)
        inner = (x > 0) & (x < 1) & (x != 0.97)  # torch's clamp gradient at the bound: 1
        gy.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(g.grad.numpy()[inner], t.grad.numpy()[inner], rtol=1e-12)
    m = gpucore.tensor([0.25, 0.75])
    np.testing.assert_allclose(m.logit().numpy(), np.log([1 / 3, 3]), rtol=1e-6)
    m.logit_(eps=0.3)
    np.testing.assert_allclose(m.numpy(), np.log([0.3 / 0.7, 0.7 / 0.3]), rtol=1e-6)
    assert gpucore.logit(gpucore.tensor([1, 0])).dtype is gpucore.float32


@pytest.mark.parametrize(
    ("name", "lo", "hi"), [("erfcx", -3, 8), ("ndtri", 0.01, 0.99), ("ndtr", -5, 5)]
)
def test_unary_gradcheck(name, lo, hi):
    x = gpucore.tensor(np.linspace(lo, hi, 9), requires_grad=True)
    assert gpucore.autograd.gradcheck(getattr(special, name), (x,), atol=1e-6, rtol=1e-5)


def test_zeta_and_igamma_gradcheck_in_their_second_argument():
    a = gpucore.tensor(np.array([1.5, 2.0, 3.5, 6.0]))
    q = gpucore.tensor(np.array([0.4, 1.1, 2.5, 7.0]), requires_grad=True)
    for fn in (special.zeta, special.gammainc, special.gammaincc):
        assert gpucore.autograd.gradcheck(lambda v, fn=fn: fn(a, v), (q,), atol=1e-6, rtol=1e-5)
