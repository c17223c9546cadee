"""GEMM test operands and their float64 reference, shared by the GEMM path tests
(tests/backends/cpu/test_gemm_rows.py, test_gemm_narrow.py)."""

from __future__ import annotations

import numpy as np
from cpu_isa_harness import C


def gemm_operands(dt, m, n, k, ta, tb, seed):
    """A (k x m when ta), B (n x k when tb), C's initial m x n and an n-bias, standard normal."""
    r = np.random.default_rng(seed)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(dt)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(dt)
    c0 = r.standard_normal((m, n)).astype(dt)
    bias = r.standard_normal(n).astype(dt)
    return a, b, c0, bias


def gemm_reference(a, b, c0, bias, ta, tb, alpha, beta, act):
    """act(alpha op(A) op(B) + beta C0 + bias) in float64 (act: -1, relu or tanh)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    y = alpha * ((a64.T if ta else a64) @ (b64.T if tb else b64)) + beta * c0.astype(np.float64)
    if bias is not None:
        y = y + bias
    if act == C.UNARY_RELU:
        return np.maximum(y, 0.0)
    return np.tanh(y) if act == C.UNARY_TANH else y
