"""The GEMM's narrow-N path (cpu/gemm_small_m.h, gemm_narrow_n: C^T = op(B)^T op(A)^T through the
few-row gemv kernels, A read where it lies, then one transposing pass with the bias and the
activation): columns around the bounds (8 at any size, 16 with a small A; 17 and a large A take
the blocked path, as do A stored transposed and pre-packed operands), every transpose, alpha /
beta, bias, relu / tanh, every instruction set; close to float64 and the same bits on 1, 2 and 3
threads."""

from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest
from cpu_isa_harness import C, run_under_every_isa
from gemm_reference import check_thread_counts, gemm_operands, gemm_reference

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}
# (m, n, k): the MLP's last Linear (64 x 512 x 10; at batch 256, 256 x 10 x 256: op(A) 256 KiB in
# float32, at the bound, twice that in float64) and its neighbours at 1, NR/2 (AVX-512 f64: 8),
# 15, 16 and 17 columns; a large A at 8 columns (narrow) and at 12 (blocked); one K step; m just
# past the small-m bounds (17, 25); many rows (column chunks over the threads); short k (the
# MLP's dY @ W through its last Linear, 256 x 256 x 10: blocked)
SHAPES = [(64, 10, 512), (64, 1, 512), (64, 8, 512), (61, 15, 337), (64, 16, 512),
          (64, 17, 512), (256, 10, 256), (600, 8, 700), (300, 12, 700), (43, 5, 1),
          (17, 10, 100), (25, 3, 64), (2000, 4, 96), (256, 256, 10), (100, 3, 40)]  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_narrow_n_close_to_float64_and_same_bits_on_any_thread_count(threads, dt, m, n, k):
    for (ta, tb), (alpha, beta, use_bias, act) in itertools.product(
        itertools.product([0, 1], [0, 1]),
        [(1.0, 0.0, False, -1), (0.75, 0.5, True, C.UNARY_RELU), (1.0, 1.0, True, C.UNARY_TANH)],
    ):
        a, b, c0, bias = gemm_operands(dt, m, n, k, ta, tb, seed=m * n + k)
        bv = bias if use_bias else None
        want = gemm_reference(a, b, c0, bv, ta, tb, alpha, beta, act)
        check_thread_counts(threads, (1, 2, 3), a, b, c0, ta, tb, alpha, beta, bv, act, want,
                            TOL[dt])  # fmt: skip


def test_narrow_n_nan_inf_rows_and_signed_zero_bias(threads):
    """NaN / inf in a row of x give NaN / inf in that row of x @ W^T + bias (relu keeps NaN);
    a zero row with a -0.0 bias gives +0 after relu and -0.0 + 0 without."""
    m, n, k = 64, 10, 512
    r = np.random.default_rng(3)
    x = r.standard_normal((m, k)).astype(np.float32)
    x[1, 5], x[2, 7], x[3] = np.nan, np.inf, 0.0
    w = np.abs(r.standard_normal((n, k))).astype(np.float32)
    bias = np.full(n, -0.0, np.float32)
    for t in (1, 2):
        threads(t)
        c = np.empty((m, n), np.float32)
        C.gemm_ex(x, w, c, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
        assert np.isnan(c[1]).all() and np.isposinf(c[2]).all()
        assert (c[3] == 0).all() and not np.signbit(c[3]).any()
        ref = np.maximum(x[4:].astype(np.float64) @ w.T.astype(np.float64), 0.0)
        assert np.abs(c[4:] - ref).max() < 1e-4 * np.abs(ref).max()


@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_narrow_n_prepacked_operand_keeps_the_blocked_path(threads, side, alpha):
    """A pre-packed operand of a narrow product (recurrent.c's W_hh^T at a small batch) keeps
    the blocked path instead of being unpacked on every call: with alpha 1, the bits of the same
    product as an item of a batch (which the blocked path runs), on 1 and 2 threads; close to
    float64 with alpha 0.5."""
    m, n, k = 64, 10, 512
    for ta, tb, swap in itertools.product([0, 1], [0, 1], [0, 1]):
        a, b, c0, bias = gemm_operands(np.float32, m, n, k, ta, tb, seed=11)
        for t in (1, 2):
            threads(t)
            pa = C.gemm_pack(a, "a", m, k, ta, swap) if side == "a" else a
            pb = C.gemm_pack(b, "b", k, n, tb, swap) if side == "b" else b
            got, two = c0.copy(), np.stack([c0, c0])
            C.gemm_ex(pa, pb, got, 1, m, n, k, ta, tb, alpha, 0.25, 0, 0, 0, bias, C.UNARY_RELU)
            a2 = np.stack([a, a])
            C.gemm_ex(a2, b, two, 2, m, n, k, ta, tb, alpha, 0.25, a.size, 0, m * n, bias,
                      C.UNARY_RELU)  # fmt: skip
            if alpha == 1.0:
                assert np.array_equal(two[0], got), (side, ta, tb, swap, t)
            ref = gemm_reference(a, b, c0, bias, ta, tb, alpha, 0.25, C.UNARY_RELU)
            assert np.abs(got - ref).max() < 1e-4 * (np.abs(ref).max() + 1.0)


def test_narrow_n_batches_against_float64(threads):
    """Batches of narrow items (the blocked path: items spread over the threads, or in order
    into one C with stride 0) against float64, the same bits on 1, 2 and 3 threads."""
    m, n, k, batch = 64, 10, 512, 3
    r = np.random.default_rng(9)
    a = r.standard_normal((batch, m, k)).astype(np.float32)
    b = r.standard_normal((batch, n, k)).astype(np.float32)
    outs = []
    for t in (1, 2, 3):
        threads(t)
        acc = np.zeros((m, n), np.float32)
        C.gemm(a, b, acc, batch, m, n, k, 0, 1, 1.0, 1.0, m * k, n * k, 0)
        each = np.empty((batch, m, n), np.float32)
        C.gemm(a, b, each, batch, m, n, k, 0, 1, 1.0, 0.0, m * k, n * k, m * n)
        outs.append((acc, each))
    want = np.einsum("bmk,bnk->bmn", a.astype(np.float64), b.astype(np.float64))
    tol = 2e-5 * np.sqrt(k) * np.abs(want).max()
    assert np.abs(outs[0][1] - want).max() < tol
    assert np.abs(outs[0][0] - want.sum(0)).max() < 2 * tol
    for acc, each in outs[1:]:
        assert np.array_equal(acc, outs[0][0]) and np.array_equal(each, outs[0][1])


ISA_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from cpu_isa_harness import C
    from gemm_reference import thread_count_runs
    shapes = [(64, 10, 512), (61, 15, 337), (64, 17, 512), (600, 8, 70), (43, 5, 1), (256, 10, 256)]
    for (m, n, k, ta, tb), c, want in thread_count_runs(
        (np.float32, np.float64), shapes, (1, 2, 3), relu_bias=True
    ):
        err = np.abs(c - want).max() / (np.abs(want).max() + 1.0)
        assert err < (2e-5 if c.dtype == np.float32 else 1e-13) * np.sqrt(k), (m, n, k, ta, tb, err)
    print(C.info()["isa"])
    """
)


def test_narrow_n_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has), one subprocess each: close
    to float64 and the same bits on 1 .. 3 threads."""
    script = tmp_path / "isa_narrow.py"
    script.write_text(ISA_SCRIPT)
    run_under_every_isa(script)
