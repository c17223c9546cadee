"""GEMM test operands, their float64 reference and the thread-count loops, shared by the GEMM
path tests (tests/backends/cpu/test_gemm_rows.py, test_gemm_narrow.py, test_gemm_edges.py) and
their under-every-ISA scripts."""

from __future__ import annotations

import itertools

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


def check_thread_counts(threads, counts, a, b, c0, ta, tb, alpha, beta, bias, act, want, tol):
    """C.gemm_ex(a, b, c0's copy, ...) on each thread count of ``counts`` (``threads``: the
    fixture's set_num_threads): the first close to ``want`` (max error over max |want| + 1 below
    tol * sqrt(k)), every other one the same bits.  Returns the first result."""
    m = a.shape[1] if ta else a.shape[0]
    k = a.shape[0] if ta else a.shape[1]
    n = b.shape[0] if tb else b.shape[1]
    first = None
    for t in counts:
        threads(t)
        c = c0[:m].copy()
        C.gemm_ex(a, b, c, 1, m, n, k, ta, tb, alpha, beta, 0, 0, 0, bias, act)
        if first is None:
            first = c
            err = np.abs(c - want).max() / (np.abs(want).max() + 1.0)
            assert err < tol * np.sqrt(k), (ta, tb, alpha, err)
        else:
            assert np.array_equal(c.view(np.uint8), first.view(np.uint8)), (t, ta, tb, alpha)
    return first


def thread_count_runs(dtypes, shapes, counts, relu_bias=False):
    """The under-every-ISA scripts' products: for each dtype, (m, n, k) and transpose pair, A and
    B standard normal (seed m + k), C = op(A) op(B) (relu_bias: C.gemm_ex's relu(... + bias), a
    standard normal n-bias) computed on each thread count of ``counts``; asserts the same bits
    on every count and yields ((m, n, k, ta, tb), C, its float64 reference)."""
    for dt, (m, n, k), ta, tb in itertools.product(dtypes, shapes, (0, 1), (0, 1)):
        r = np.random.default_rng(m + k)
        a = r.standard_normal((k, m) if ta else (m, k)).astype(dt)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(dt)
        want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
        bias = None
        if relu_bias:
            bias = r.standard_normal(n).astype(dt)
            want = np.maximum(want + bias, 0.0)
        outs = []
        for t in counts:
            C.set_num_threads(t)
            c = np.empty((m, n), dt)
            if relu_bias:
                C.gemm_ex(a, b, c, 1, m, n, k, ta, tb, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
            else:
                C.gemm(a, b, c, 1, m, n, k, ta, tb, 1.0, 0.0, 0, 0, 0)
            outs.append(c)
        assert all(np.array_equal(o, outs[0]) for o in outs), (m, n, k, ta, tb)
        yield (m, n, k, ta, tb), outs[0], want
