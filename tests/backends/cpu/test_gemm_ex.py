"""gemm_ex: GEMM with a fused epilogue (bias added per column, then an activation) against
float64, in float32 and float64, every transpose and beta; NaN and -0 through ReLU; batched
items; and argument errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from cpu_isa_harness import ACTS, C

_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
_ACT64 = {
    None: lambda v: v,
    "RELU": lambda v: np.where(v <= 0, 0.0, v),
    "SIGMOID": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "TANH": np.tanh,
    "GELU": lambda v: 0.5 * v * _ERFC(-v / math.sqrt(2)),
    "GELU_TANH": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ACTS + [None])
@pytest.mark.parametrize("m,n,k", [(65, 33, 31), (200, 3, 64), (7, 300, 129), (3, 2, 0)])
def test_gemm_ex_bias_activation(dtype, act, m, n, k):
    r = np.random.default_rng(m + n + k)
    for ta, tb in itertools.product([0, 1], [0, 1]):
        a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        bias = r.standard_normal(n).astype(dtype)
        c0 = r.standard_normal((m, n)).astype(dtype)
        for beta, use_bias in ((0.0, True), (0.5, False), (1.0, True)):
            c = c0.copy()
            code = -1 if act is None else getattr(C, "UNARY_" + act)
            C.gemm_ex(
                a, b, c, 1, m, n, k, ta, tb, 1.5, beta, 0, 0, 0, bias if use_bias else None, code
            )
            oa = a.astype(np.float64).T if ta else a.astype(np.float64)
            ob = b.astype(np.float64).T if tb else b.astype(np.float64)
            pre = 1.5 * (oa @ ob) + beta * c0 + (bias if use_bias else 0.0)
            ref = _ACT64[act](pre)
            scale = 1.5 * (np.abs(oa) @ np.abs(ob)) + abs(beta) * np.abs(c0) + np.abs(bias) + 1
            tol = 1e-4 if dtype == np.float32 else 1e-12
            assert np.all(np.abs(c - ref) <= tol * scale), (ta, tb, beta, use_bias)


def test_gemm_ex_relu_keeps_nan_and_zeroes_negative_zero():
    a = np.array([[np.nan, 0.0], [-1.0, 0.0]], np.float32)
    b = np.eye(2, dtype=np.float32)
    c = np.empty((2, 2), np.float32)
    C.gemm_ex(a, b, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, None, C.UNARY_RELU)
    assert np.isnan(c[0, 0])
    assert c[1, 0] == 0 and not np.signbit(c[1, 0])


def test_gemm_ex_batched_applies_epilogue_per_item():
    r = np.random.default_rng(5)
    bt, m, n, k = 4, 9, 40, 17
    a = r.standard_normal((bt, m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    c = np.empty((bt, m, n), np.float32)
    C.gemm_ex(a, b, c, bt, m, n, k, 0, 0, 1.0, 0.0, m * k, 0, m * n, bias, C.UNARY_TANH)
    ref = np.tanh(a.astype(np.float64) @ b + bias)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_gemm_ex_errors():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="'act' must be -1"):
        C.gemm_ex(
            x,
            x,
            np.empty((2, 2), np.float32),
            1,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            0,
            None,
            C.UNARY_EXP,
        )
    with pytest.raises(TypeError, match="'bias' must be float32"):
        C.gemm_ex(
            x, x, np.empty((2, 2), np.float32), 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, np.ones(2), -1
        )
    with pytest.raises(ValueError, match="'bias' holds 1 elements but 2"):
        C.gemm_ex(
            x,
            x,
            np.empty((2, 2), np.float32),
            1,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            0,
            np.ones(1, np.float32),
            -1,
        )
    c = np.empty((2, 2), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        C.gemm_ex(x, x, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, c.reshape(-1)[:2], -1)
    with pytest.raises(TypeError, match="16 or 17 positional arguments \\(14 given\\)"):
        C.gemm_ex(x, x, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)


# ---- small m: the weight-streaming path (gemm.c's gemm_small_m: m <= 16 with trans_b, 24
# without) -------------------------------------------------------------------------------------


def _ref_small(a, b, c0, ta, tb, alpha, beta, bias, act):
    oa = a.astype(np.float64).T if ta else a.astype(np.float64)
    ob = b.astype(np.float64).T if tb else b.astype(np.float64)
    pre = alpha * (oa @ ob) + (beta * c0.astype(np.float64) if beta else 0.0)
    if bias is not None:
        pre = pre + bias
    scale = abs(alpha) * (np.abs(oa) @ np.abs(ob)) + abs(beta) * np.abs(c0) + 1
    if bias is not None:
        scale = scale + np.abs(bias)
    return _ACT64[act](pre), scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", list(range(1, 10)) + [16, 17, 24, 25])
def test_gemm_small_m(dtype, m):
    """Every m around the streaming path's tiles and limits, both transposes of A and B, alpha,
    beta (NaN in C ignored when beta == 0), bias and activation, against float64."""
    r = np.random.default_rng(m)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for n, k in ((37, 53), (130, 7), (5, 300), (64, 16)):
        for ta, tb in itertools.product([0, 1], [0, 1]):
            a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
            b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
            bias = r.standard_normal(n).astype(dtype)
            c0 = r.standard_normal((m, n)).astype(dtype)
            for alpha, beta, use_bias, act in (
                (1.0, 0.0, False, None),
                (0.75, 0.5, True, "RELU"),
                (-1.5, 1.0, True, "GELU"),
                (2.0, 0.0, True, "TANH"),
            ):
                c = c0.copy()
                if beta == 0:
                    c[:] = np.nan
                code = -1 if act is None else getattr(C, "UNARY_" + act)
                C.gemm_ex(
                    a, b, c, 1, m, n, k, ta, tb, alpha, beta, 0, 0, 0,
                    bias if use_bias else None, code,
                )  # fmt: skip
                ref, scale = _ref_small(
                    a, b, c0, ta, tb, alpha, beta, bias if use_bias else None, act
                )
                assert np.all(np.abs(c - ref) <= tol * scale), (n, k, ta, tb, alpha, beta, act)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tb", [0, 1])
def test_gemm_small_m_batched(dtype, tb):
    """Batches: independent items (one parallel range over all of them), a broadcast B (sb = 0),
    and C stride 0 (the items accumulate in order with beta = 1)."""
    r = np.random.default_rng(20 + tb)
    bt, m, n, k = 5, 3, 70, 45
    a = r.standard_normal((bt, m, k)).astype(dtype)
    b = r.standard_normal((bt, n, k) if tb else (bt, k, n)).astype(dtype)
    ob = np.swapaxes(b, 1, 2) if tb else b
    c = np.empty((bt, m, n), dtype)
    C.gemm(a, b, c, bt, m, n, k, 0, tb, 1.0, 0.0, m * k, n * k, m * n)
    np.testing.assert_allclose(c, a.astype(np.float64) @ ob, rtol=1e-4, atol=1e-4)
    C.gemm(a, b, c, bt, m, n, k, 0, tb, 1.0, 0.0, m * k, 0, m * n)  # B of item 0 for all
    np.testing.assert_allclose(c, a.astype(np.float64) @ ob[0], rtol=1e-4, atol=1e-4)
    acc = np.zeros((m, n), dtype)
    C.gemm(a, b, acc, bt, m, n, k, 0, tb, 1.0, 1.0, m * k, n * k, 0)
    want = np.einsum("bik,bkj->ij", a.astype(np.float64), ob.astype(np.float64))
    np.testing.assert_allclose(acc, want, rtol=1e-4, atol=1e-3)
    at = np.ascontiguousarray(np.swapaxes(a, 1, 2))  # A stored transposed, m > 1: copied
    C.gemm(at, b, c, bt, m, n, k, 1, tb, 1.0, 0.0, m * k, n * k, m * n)
    np.testing.assert_allclose(c, a.astype(np.float64) @ ob, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tb", [0, 1])
def test_gemm_small_m_threads_bitwise(tb):
    """A weight big enough to be split over the pool: the same bits with one thread."""
    r = np.random.default_rng(30)
    n, k = 1536, 1024
    w = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    threads = C.info()["threads"]
    for m in (1, 3):
        x = r.standard_normal((m, k)).astype(np.float32)
        many = np.empty((m, n), np.float32)
        C.gemm_ex(x, w, many, 1, m, n, k, 0, tb, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_GELU_TANH)
        try:
            C.set_num_threads(1)
            one = np.empty((m, n), np.float32)
            C.gemm_ex(x, w, one, 1, m, n, k, 0, tb, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_GELU_TANH)
        finally:
            C.set_num_threads(threads)
        np.testing.assert_array_equal(many, one)
        ow = w.T if tb else w
        ref = _ACT64["GELU_TANH"](x.astype(np.float64) @ ow + bias)
        np.testing.assert_allclose(many, ref, rtol=1e-4, atol=1e-4)
