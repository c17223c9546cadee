"""_cpu.layer_norm (cpu/norm.c): against an independent float64 numpy reference, in float32 and
float64; rows with a large mean next to their spread; without weight / bias; in place; every row
length through the vector tails; threaded calls equal single-threaded ones bitwise; PyTorch's
layer_norm when it is installed; argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import _cpu as C

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-6, np.float64: 1e-13}


def ref_layer_norm(x, w, b, eps):
    x = x.astype(np.float64)
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y


def check(out, ref, dt, slack=1.0):
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(out.astype(np.float64) - ref).max()) / scale
    assert err <= TOL[dt] * slack, err


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "rows,n", [(1, 1), (3, 2), (4, 64), (7, 33), (5, 1000), (2, 4097), (64, 17), (16, 300)]
)
def test_layer_norm_matches_float64(dt, rows, n):
    r = np.random.default_rng(rows * 1000 + n)
    x = (r.standard_normal((rows, n)) * 3 + 2).astype(dt)
    w = r.standard_normal(n).astype(dt)
    b = r.standard_normal(n).astype(dt)
    for ww, bb in ((w, b), (w, None), (None, b), (None, None)):
        out = np.full_like(x, np.nan)
        C.layer_norm(x, ww, bb, out, rows, n, 1e-5)
        check(out, ref_layer_norm(x, ww, bb, 1e-5), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_layer_norm_large_mean(dt):
    """A mean of 1e4 next to a spread of 1: the corrected two-pass statistics stay accurate (the
    float64 reference itself is only good to ~1e4 * 2e-16 here)."""
    r = np.random.default_rng(1)
    x = (1e4 + r.standard_normal((6, 777))).astype(dt)
    out = np.empty_like(x)
    C.layer_norm(x, None, None, out, 6, 777, 1e-6)
    check(out, ref_layer_norm(x, None, None, 1e-6), dt, slack=1.0 if dt == np.float32 else 100.0)


@pytest.mark.parametrize("dt", DTYPES)
def test_layer_norm_constant_rows_and_eps(dt):
    x = np.full((3, 10), 5.0, dt)
    out = np.empty_like(x)
    b = np.arange(10, dtype=dt)
    C.layer_norm(x, None, b, out, 3, 10, 0.1)
    np.testing.assert_array_equal(out, np.broadcast_to(b, (3, 10)))
    x[1] = np.arange(10)  # var 8.25, eps dominates nothing
    C.layer_norm(x, None, None, out, 3, 10, 100.0)
    check(out, ref_layer_norm(x, None, None, 100.0), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_layer_norm_in_place(dt):
    r = np.random.default_rng(2)
    x = r.standard_normal((9, 130)).astype(dt)
    w = r.standard_normal(130).astype(dt)
    ref = ref_layer_norm(x, w, None, 1e-5)
    C.layer_norm(x, w, None, x, 9, 130, 1e-5)
    check(x, ref, dt)


def test_layer_norm_nan_row_stays_in_its_row():
    x = np.ones((3, 8), np.float32)
    x[1, 3] = np.nan
    x[2] = np.arange(8)
    out = np.empty_like(x)
    C.layer_norm(x, None, None, out, 3, 8, 1e-5)
    assert np.isnan(out[1]).all()
    assert np.isfinite(out[[0, 2]]).all()


def test_layer_norm_threads_bitwise():
    """Large enough to be split over the pool: the same bits with one thread."""
    r = np.random.default_rng(3)
    x = r.standard_normal((512, 1024)).astype(np.float32)
    w, b = r.standard_normal(1024).astype(np.float32), r.standard_normal(1024).astype(np.float32)
    out = np.empty_like(x)
    C.layer_norm(x, w, b, out, 512, 1024, 1e-5)
    threads = C.info()["threads"]
    try:
        C.set_num_threads(1)
        one = np.empty_like(x)
        C.layer_norm(x, w, b, one, 512, 1024, 1e-5)
    finally:
        C.set_num_threads(threads)
    np.testing.assert_array_equal(out, one)
    check(out, ref_layer_norm(x, w, b, 1e-5), np.float32)


def test_layer_norm_matches_torch():
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(4)
    x = r.standard_normal((4, 16, 64)).astype(np.float32)
    w, b = r.standard_normal(64).astype(np.float32), r.standard_normal(64).astype(np.float32)
    out = np.empty_like(x)
    C.layer_norm(x, w, b, out, 64, 64, 1e-5)
    want = torch.nn.functional.layer_norm(
        torch.from_numpy(x), (64,), torch.from_numpy(w), torch.from_numpy(b), 1e-5
    ).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_layer_norm_empty():
    x = np.empty((0, 5), np.float32)
    C.layer_norm(x, None, None, x, 0, 5, 1e-5)
    y = np.empty((3, 0), np.float64)
    C.layer_norm(y, None, None, y, 3, 0, 1e-5)


def test_layer_norm_errors():
    x = np.ones((2, 4), np.float32)
    out = np.empty_like(x)
    w = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="layer_norm: 'weight' must be float32"):
        C.layer_norm(x, np.ones(4), None, out, 2, 4, 1e-5)
    with pytest.raises(TypeError, match="layer_norm: 'out' must be float32"):
        C.layer_norm(x, None, None, np.empty((2, 4)), 2, 4, 1e-5)
    with pytest.raises(TypeError, match="layer_norm: 'x' must be float32"):
        C.layer_norm(x.astype(np.int32), None, None, out, 2, 4, 1e-5)
    with pytest.raises(ValueError, match="layer_norm: 'x' holds 8 elements but 12"):
        C.layer_norm(x, None, None, out, 3, 4, 1e-5)
    with pytest.raises(ValueError, match="layer_norm: 'bias' holds 3 elements but 4"):
        C.layer_norm(x, None, w[:3], out, 2, 4, 1e-5)
    with pytest.raises(ValueError, match="not C-contiguous|contiguous"):
        C.layer_norm(np.ones((4, 4), np.float32)[:, ::2], None, None, out, 2, 4, 1e-5)
    with pytest.raises(ValueError, match="layer_norm: 'out' overlaps 'x' without being the same"):
        big = np.ones(10, np.float32)
        C.layer_norm(big[:8], None, None, big[2:], 2, 4, 1e-5)
    with pytest.raises(ValueError, match="layer_norm: 'out' overlaps 'weight'"):
        C.layer_norm(x, out.reshape(-1)[:4], None, out, 2, 4, 1e-5)
    with pytest.raises(ValueError, match="layer_norm: 'eps' must be finite and >= 0"):
        C.layer_norm(x, None, None, out, 2, 4, -1.0)
    with pytest.raises(ValueError, match="layer_norm: 'eps' must be finite"):
        C.layer_norm(x, None, None, out, 2, 4, float("nan"))
    with pytest.raises(ValueError, match="layer_norm: 'rows'"):
        C.layer_norm(x, None, None, out, -1, 4, 1e-5)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty_like(x)
        ro.flags.writeable = False
        C.layer_norm(x, None, None, ro, 2, 4, 1e-5)
    with pytest.raises(TypeError, match="layer_norm: 'eps' must be a real number"):
        C.layer_norm(x, None, None, out, 2, 4, "1e-5")
    with pytest.raises(TypeError, match="exactly 7"):
        C.layer_norm(x, None, None, out, 2, 4)
