"""gpucore._cpu against float64 numpy references (cpu/README.md): softmax/log_softmax
and their backward, the fused cross-entropy, im2col/col2im."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_ext import FLOATS, C, close, randn, rng


# ------------------------------------------------------------------------------------ softmax
def np_softmax(x, axis, log):
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis, keepdims=True)
    return (x - m) - np.log(s) if log else e / s


SOFTMAX_SHAPES = [
    (1, 1, 1),
    (1, 7, 1),
    (3, 13, 1),
    (2, 257, 1),
    (2, 13, 5),
    (1, 65, 129),
    (0, 3, 2),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax(dtype, log, shape):
    x = randn(shape, dtype, seed=shape[1]) * 5
    out = np.empty_like(x)
    C.softmax(x, out, *shape, log)
    close(out, np_softmax(x, 1, log), dtype, atol=1e-6 if dtype == np.float32 else 1e-14)
    C.softmax(x, x, *shape, log)  # in place
    np.testing.assert_array_equal(x, out)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("inner", [1, 3])
def test_softmax_stability(dtype, log, inner):
    rows = np.array([[1000.0, 1000.0, 1000.0], [1000.0, -1000.0, 0.0]])
    x = np.repeat(rows[:, :, None], inner, axis=2).astype(dtype)
    out = np.empty_like(x)
    C.softmax(x, out, 2, 3, inner, log)
    assert np.isfinite(out).all()
    ref = np_softmax(x, 1, log)
    close(out, ref, dtype, atol=1e-6 if dtype == np.float32 else 1e-14)


def softmax_backward_ref(g, y, log):
    g = g.astype(np.float64)
    y = y.astype(np.float64)
    if log:
        return g - np.exp(y) * g.sum(1, keepdims=True)
    return y * (g - (g * y).sum(1, keepdims=True))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax_backward(dtype, log, shape):
    x = randn(shape, dtype, seed=1)
    y = np.empty_like(x)
    C.softmax(x, y, *shape, log)
    g = randn(shape, dtype, seed=2)
    out = np.empty_like(x)
    C.softmax_backward(g, y, out, *shape, log)
    close(out, softmax_backward_ref(g, y, log), dtype, atol=1e-6 if dtype == np.float32 else 1e-14)
    g2 = g.copy()
    C.softmax_backward(g2, y, g2, *shape, log)  # out is grad
    np.testing.assert_array_equal(g2, out)


@pytest.mark.parametrize("log", [0, 1])
def test_softmax_backward_is_the_vjp(log):
    shape = (2, 5, 3)
    x = randn(shape, np.float64, seed=3)
    g = randn(shape, np.float64, seed=4)
    y = np.empty_like(x)
    C.softmax(x, y, *shape, log)
    out = np.empty_like(x)
    C.softmax_backward(g, y, out, *shape, log)
    h = 1e-6
    fd = np.empty_like(x)
    for idx in np.ndindex(shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        fd[idx] = ((np_softmax(xp, 1, log) - np_softmax(xm, 1, log)) * g).sum() / (2 * h)
    np.testing.assert_allclose(out, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [5, 129, 20000])
def test_softmax_row_with_positive_infinity_is_all_nan(n):
    # exp(inf - inf) is NaN, so the row's sum and every output are NaN (PyTorch, numpy's formula)
    x = np.zeros((1, n), np.float32)
    x[0, 1] = np.inf
    for log in (0, 1):
        out = np.empty_like(x)
        C.softmax(x, out, 1, n, 1, log)
        assert np.isnan(out).all(), (n, log)


# ------------------------------------------------------------------------------ cross entropy
def ce_ref(logits, target, ignore):
    x = logits.astype(np.float64)
    m = x.max(1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(1))
    safe = np.where(target == ignore, 0, target)
    loss = np.where(target == ignore, 0.0, lse - x[np.arange(len(x)), safe])
    return loss, lse


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n,c", [(1, 1), (7, 13), (13, 257), (65, 7), (0, 5)])
def test_cross_entropy_forward(dtype, n, c):
    logits = randn((n, c), dtype, seed=c) * 4
    target = rng(n).integers(0, c, n).astype(np.int64)
    if n > 2:
        target[1] = -100
        logits[2, 0] = 1000.0  # stability
    loss = np.empty(n, dtype)
    lse = np.empty(n, dtype)
    C.cross_entropy_forward(logits, target, loss, lse, n, c, -100)
    rl, rs = ce_ref(logits, target, -100)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(loss, rl, **tol)
    np.testing.assert_allclose(lse, rs, **tol)
    if n > 2:
        assert loss[1] == 0.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_backward(dtype):
    n, c, ign = 13, 7, 3
    logits = randn((n, c), dtype, seed=7) * 3
    target = rng(1).integers(0, c, n).astype(np.int64)
    target[[0, 5]] = ign  # ignore_index may be a valid class id
    loss = np.empty(n, dtype)
    lse = np.empty(n, dtype)
    C.cross_entropy_forward(logits, target, loss, lse, n, c, ign)
    gl = randn(n, dtype, seed=8)
    out = np.empty_like(logits)
    C.cross_entropy_backward(logits, target, lse, gl, out, n, c, ign)
    x = logits.astype(np.float64)
    p = np.exp(x - lse.astype(np.float64)[:, None])
    onehot = np.eye(c)[np.where(target == ign, 0, target)]
    ref = gl.astype(np.float64)[:, None] * (p - onehot)
    ref[target == ign] = 0.0
    close(out, ref, dtype, atol=1e-6 if dtype == np.float32 else 1e-14)
    assert (out[[0, 5]] == 0).all()
    lg2 = logits.copy()
    C.cross_entropy_backward(lg2, target, lse, gl, lg2, n, c, ign)  # out is logits
    np.testing.assert_array_equal(lg2, out)


def test_cross_entropy_backward_matches_finite_differences():
    n, c = 5, 6
    logits = randn((n, c), np.float64, seed=11)
    target = np.array([0, 5, -1, 2, 3], np.int64)
    gl = randn(n, np.float64, seed=12)

    def f(lg):
        loss, lse = np.empty(n), np.empty(n)
        C.cross_entropy_forward(lg, target, loss, lse, n, c, -1)
        return (loss * gl).sum()

    loss, lse = np.empty(n), np.empty(n)
    C.cross_entropy_forward(logits, target, loss, lse, n, c, -1)
    out = np.empty_like(logits)
    C.cross_entropy_backward(logits, target, lse, gl, out, n, c, -1)
    h = 1e-6
    fd = np.empty_like(logits)
    for idx in np.ndindex(logits.shape):
        lp, lm = logits.copy(), logits.copy()
        lp[idx] += h
        lm[idx] -= h
        fd[idx] = (f(lp) - f(lm)) / (2 * h)
    np.testing.assert_allclose(out, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad", [7, -1, 100])
def test_cross_entropy_target_out_of_range(bad):
    n, c = 4, 7
    logits = np.zeros((n, c), np.float32)
    target = np.array([0, 1, bad, 2], np.int64)
    loss = np.empty(n, np.float32)
    lse = np.empty(n, np.float32)
    with pytest.raises(IndexError, match=rf"target\[2\] = {bad} is out of range for c = 7"):
        C.cross_entropy_forward(logits, target, loss, lse, n, c, -100)
    with pytest.raises(IndexError, match="out of range"):
        C.cross_entropy_backward(logits, target, lse, loss, np.empty_like(logits), n, c, -100)


# ------------------------------------------------------------------------------ im2col/col2im
def im2col_ref(x, kh, kw, sh, sw, ph, pw, dh, dw):
    n, c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), x.dtype)
    xp[:, :, ph : ph + h, pw : pw + w] = x
    col = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for ki in range(kh):
        for kj in range(kw):
            ys = ki * dh
            xs = kj * dw
            col[:, :, ki, kj] = xp[
                :, :, ys : ys + sh * (oh - 1) + 1 : sh, xs : xs + sw * (ow - 1) + 1 : sw
            ]
    return col.reshape(n, c * kh * kw, oh * ow), oh, ow


CONV_GEOMS = [
    # n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1),
    (2, 3, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1),
    (1, 2, 13, 9, 3, 2, 2, 3, 1, 0, 1, 1),
    (2, 1, 9, 13, 3, 3, 2, 2, 2, 3, 2, 2),
    (1, 3, 5, 6, 5, 6, 1, 1, 0, 0, 1, 1),
    (1, 1, 4, 4, 2, 2, 3, 3, 4, 4, 1, 1),  # padding wider than the kernel: zero rows/cols
    (2, 2, 8, 5, 1, 1, 2, 1, 0, 0, 1, 1),
    (0, 2, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("geom", CONV_GEOMS)
def test_im2col_and_adjoint(dtype, geom):
    n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw = geom
    x = randn((n, c, h, w), dtype, seed=h)
    ref, oh, ow = im2col_ref(x, kh, kw, sh, sw, ph, pw, dh, dw)
    col = np.full((n, c * kh * kw, oh * ow), np.nan, dtype)
    C.im2col(x, col, *geom)
    np.testing.assert_array_equal(col, ref)
    y = randn(col.shape, dtype, seed=w)
    xb = np.full(x.shape, np.nan, dtype)
    C.col2im(y, xb, *geom)
    lhs = float((ref.astype(np.float64) * y).sum())
    rhs = float((x.astype(np.float64) * xb).sum())
    assert lhs == pytest.approx(rhs, rel=1e-5 if dtype == np.float32 else 1e-12, abs=1e-9)
    # col2im against an explicit scatter-add
    xr = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    y6 = y.astype(np.float64).reshape(n, c, kh, kw, oh, ow)
    for ki in range(kh):
        for kj in range(kw):
            ys, xs = ki * dh, kj * dw
            xr[:, :, ys : ys + sh * (oh - 1) + 1 : sh, xs : xs + sw * (ow - 1) + 1 : sw] += y6[
                :, :, ki, kj
            ]
    close(xb, xr[:, :, ph : ph + h, pw : pw + w], dtype)


def test_im2col_kernel_too_large():
    x = np.zeros((1, 1, 3, 3), np.float32)
    with pytest.raises(ValueError, match="larger than the padded input"):
        C.im2col(x, np.zeros(100, np.float32), 1, 1, 3, 3, 5, 1, 1, 1, 0, 0, 1, 1)
    with pytest.raises(ValueError, match=">= 1"):
        C.im2col(x, np.zeros(100, np.float32), 1, 1, 3, 3, 1, 1, 0, 1, 0, 0, 1, 1)


def test_im2col_buffer_too_small():
    x = np.zeros((1, 1, 5, 5), np.float32)
    col = np.zeros(9 * 9 - 1, np.float32)  # needs 9 rows x 9 columns
    with pytest.raises(ValueError, match=r"'col' holds 80 elements but 81 are needed"):
        C.im2col(x, col, 1, 1, 5, 5, 3, 3, 1, 1, 0, 0, 1, 1)
