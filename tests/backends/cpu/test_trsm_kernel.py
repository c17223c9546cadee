"""cpu/trsm.c and cpu/histogram.c through their bindings: every triangle / transpose / unit form
of the blocked triangular solve against numpy float64 (sizes around the 64-row blocks, batches,
a broadcast A), the LU info codes, the histogram's binning modes, thread-count independence and
the bindings' refusals of bad buffers."""

import numpy as np
import pytest

from gpucore import _cpu

RNG = np.random.default_rng(0)


def _tri(a, upper, unit):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        np.fill_diagonal(t, 1.0)
    return t


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 5, 64, 65, 150])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("unit", [0, 1])
def test_trsm_matches_float64(dtype, m, upper, trans, unit):
    n = 7
    a = RNG.uniform(-1, 1, (m, m)) + np.eye(m) * (m / 4 + 2)
    if unit:  # the diagonal is not read: garbage there must not matter
        a[np.diag_indices(m)] = RNG.uniform(-5, 5, m)
        a = a / np.maximum(1, np.abs(a).sum(1, keepdims=True)) * 0.5 + np.diag(np.diag(a))
    b = RNG.uniform(-1, 1, (m, n))
    t = _tri(a, upper, unit)
    want = np.linalg.solve(t.T if trans else t, b)
    x = b.astype(dtype).copy()
    _cpu.trsm(a.astype(dtype).reshape(-1), x.reshape(-1), 1, m, n, 0, upper, trans, unit)
    tol = 2e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(x, want, rtol=tol, atol=tol)


def test_trsm_batches_and_broadcast_a():
    a = RNG.uniform(-1, 1, (3, 70, 70)) + 10 * np.eye(70)
    b = RNG.uniform(-1, 1, (3, 70, 4))
    x = b.copy()
    _cpu.trsm(a.reshape(-1), x.reshape(-1), 3, 70, 4, 70 * 70, 0, 0, 0)
    np.testing.assert_allclose(x, np.linalg.solve(np.tril(a), b), rtol=1e-11, atol=1e-12)
    x = b.copy()  # sa 0: one matrix for every item
    _cpu.trsm(a[0].reshape(-1), x.reshape(-1), 3, 70, 4, 0, 1, 0, 0)
    np.testing.assert_allclose(x, np.linalg.solve(np.triu(a[0]), b), rtol=1e-11, atol=1e-12)


def test_trsm_zero_diagonal_gives_inf_or_nan():
    a = np.tril(np.ones((3, 3)))
    a[1, 1] = 0.0
    x = np.ones((3, 1))
    _cpu.trsm(a.reshape(-1), x.reshape(-1), 1, 3, 1, 0, 0, 0, 0)
    assert not np.isfinite(x[1:]).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_do_not_depend_on_threads(dtype):
    a = (RNG.uniform(-1, 1, (300, 300)) + 20 * np.eye(300)).astype(dtype)
    b = RNG.uniform(-1, 1, (4, 300, 90)).astype(dtype)
    x = RNG.standard_normal(2_000_003).astype(dtype)
    w = RNG.uniform(0, 1, x.size).astype(dtype)
    edges = np.linspace(-3, 3, 41).astype(dtype)
    outs, before = [], _cpu.info()["threads"]
    try:
        for threads in (1, 2, 3):
            _cpu.set_num_threads(threads)
            x1, x4 = b[0].copy(), b.copy()
            _cpu.trsm(a.reshape(-1), x1.reshape(-1), 1, 300, 90, 0, 0, 1, 0)
            _cpu.trsm(a.reshape(-1), x4.reshape(-1), 4, 300, 90, 0, 1, 0, 0)
            h = np.empty(40, dtype)
            _cpu.histogram(x, x.size, 1, edges, np.array([41]), w, h, 1)
            outs.append((x1, x4, h))
    finally:
        _cpu.set_num_threads(before)
    for o in outs[1:]:
        for p, q in zip(outs[0], o):
            np.testing.assert_array_equal(p, q)


def _lu_info(a):
    out = np.empty(a.shape[0], np.int32)
    _cpu.getrf(a.copy().reshape(-1), None, out, a.shape[0], a.shape[-1])
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 48, 49, 130])
def test_getrf_factors_pa_into_lu(dtype, n):
    a = RNG.uniform(-1, 1, (2, n, n)).astype(dtype)
    lu, perm, info = a.copy(), np.empty((2, n), np.int32), np.empty(2, np.int32)
    _cpu.getrf(lu.reshape(-1), perm.reshape(-1), info, 2, n)
    assert info.tolist() == [0, 0]
    for i in range(2):
        low = np.tril(lu[i].astype(np.float64), -1) + np.eye(n)
        assert sorted(perm[i].tolist()) == list(range(n))
        assert np.abs(np.tril(lu[i], -1)).max(initial=0) <= 1  # partial pivoting: |l| <= 1
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(low @ np.triu(lu[i]), a[i][perm[i]], atol=tol * n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_getrf_info_first_zero_pivot(dtype):
    n = 100  # three panels
    well = RNG.uniform(-1, 1, (n, n)) + n * np.eye(n)
    rank = well.copy()
    rank[70] = 2 * rank[3] - rank[50]  # row 70 a combination: a zero pivot at the last column
    col = well.copy()
    col[:, 60] = 0.0  # a zero column: LAPACK's info is 61
    small = np.array([[1.0, 2, 3, 4], [2, 4, 6, 8], [0, 0, 1, 0], [0, 1, 0, 0]])
    got = _lu_info(np.stack([well, col, np.zeros((n, n))]).astype(dtype))
    np.testing.assert_array_equal(got, [0, 61, 1])
    assert _lu_info(small[None].astype(dtype))[0] == 4
    assert _lu_info(np.zeros((2, 0, 0), dtype)).tolist() == [0, 0]
    r = _lu_info(rank[None].astype(np.float64))[0]
    assert r in (0, n)  # rounding decides whether the last pivot is exactly zero


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_modes(dtype):
    x = RNG.standard_normal(10_000).astype(dtype)
    x[:5] = [np.nan, np.inf, -np.inf, 2.0, -2.0]  # NaN, outside, both outer edges
    edges = np.linspace(-2, 2, 9).astype(dtype)
    want, _ = np.histogram(x[np.isfinite(x)].astype(np.float64), edges.astype(np.float64))
    for mode in (0, 1):
        h = np.empty(8, dtype)
        _cpu.histogram(x, x.size, 1, edges, np.array([9]), None, h, mode)
        np.testing.assert_array_equal(h, want)
    w = RNG.uniform(0, 1, x.size).astype(dtype)
    h = np.empty(8, dtype)
    _cpu.histogram(x, x.size, 1, edges, np.array([9]), w, h, 0)
    fin = np.isfinite(x)
    ref, _ = np.histogram(x[fin].astype(np.float64), edges.astype(np.float64),
                          weights=w[fin].astype(np.float64))  # fmt: skip
    np.testing.assert_allclose(h, ref, rtol=1e-6)
    pts = RNG.uniform(-1, 1, (500, 2)).astype(dtype)
    e2 = [np.array([-1, 0, 1], dtype), np.array([-1, -0.5, 0, 1], dtype)]
    h = np.empty((2, 3), dtype)
    _cpu.histogram(pts, 500, 2, np.concatenate(e2), np.array([3, 4]), None, h, 0)
    ref, _ = np.histogramdd(pts.astype(np.float64), [e.astype(np.float64) for e in e2])
    np.testing.assert_array_equal(h, ref)


def test_bindings_refuse_bad_buffers():
    a, x = np.eye(4), np.ones((4, 2))
    with pytest.raises(ValueError, match="trsm"):
        _cpu.trsm(a.reshape(-1), x.reshape(-1), 2, 4, 2, 16, 0, 0, 0)  # x too small
    with pytest.raises(ValueError, match="trsm"):
        _cpu.trsm(a.reshape(-1), x.reshape(-1), 2, 4, 1, 16, 0, 0, 0)  # a too small for sa
    with pytest.raises(TypeError, match="trsm"):
        _cpu.trsm(a.astype(np.float32).reshape(-1), x.reshape(-1), 1, 4, 2, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="trsm"):
        _cpu.trsm(x.reshape(-1)[:4], x.reshape(-1), 1, 2, 2, 0, 0, 0, 0)  # x overlaps a
    with pytest.raises(ValueError, match="getrf"):
        _cpu.getrf(np.eye(3).reshape(-1), None, np.zeros(1, np.int32), 2, 3)
    with pytest.raises(ValueError, match="perm"):
        _cpu.getrf(np.eye(3).reshape(-1), np.zeros(2, np.int32), np.zeros(1, np.int32), 1, 3)
    with pytest.raises(TypeError, match="getrf"):
        _cpu.getrf(np.eye(3).reshape(-1), None, np.zeros(1, np.int64), 1, 3)
    h, v = np.zeros(3), np.ones(10)
    with pytest.raises(ValueError, match="increase"):
        _cpu.histogram(v, 10, 1, np.array([0.0, 2, 1, 3]), np.array([4]), None, h, 0)
    with pytest.raises(ValueError, match="finite"):
        _cpu.histogram(v, 10, 1, np.array([0.0, 1, 2, np.inf]), np.array([4]), None, h, 1)
    with pytest.raises(ValueError, match="hist"):
        _cpu.histogram(v, 10, 1, np.arange(5.0), np.array([5]), None, h, 0)  # 4 bins, 3 slots
    with pytest.raises(ValueError, match="edges"):
        _cpu.histogram(v, 10, 1, np.arange(3.0), np.array([4]), None, h, 0)
    with pytest.raises(ValueError, match="w"):
        _cpu.histogram(v, 10, 1, np.arange(4.0), np.array([4]), np.ones(3), h, 0)
    with pytest.raises(ValueError, match="mode"):
        _cpu.histogram(v, 10, 1, np.arange(4.0), np.array([4]), None, h, 3)
