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
    with pytest.raises(TypeError, match="exactly 16"):
        C.gemm_ex(x, x, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)
