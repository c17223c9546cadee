"""The GEMM's row-split mode (cpu/gemm_rows.h: a narrow op(B) packed once and shared, the rows
of A split across the threads): shapes around every blocking edge (the register tile, the K
blocks, the units of MR panels, a ragged last unit), every transpose, alpha / beta, bias and
activations, pre-packed operands, every instruction set; the same bits on 1 .. 8 threads (which
also crosses over to the blocked steps when there are too few rows for the threads) and close to
numpy in float64."""

from __future__ import annotations

import itertools
import math
import textwrap

import numpy as np
import pytest
from cpu_isa_harness import C, run_under_every_isa
from gemm_reference import check_thread_counts, gemm_operands, gemm_reference

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}
# (m, n, k): N = 128 (dX / dW of a d = 128 model), N around the NR = 16 (AVX2 float32) tile and
# the 8 (float64) one, K around one and several K blocks (float32 KC 680 on this machine,
# float64 336; a small A with several K blocks takes the blocked steps), M around units of 4 / 8
# panels of 6 rows and a ragged last panel, few rows (60: the blocked steps on 8 threads)
SHAPES = [(2048, 128, 512), (385, 129, 681), (97, 127, 1500), (300, 17, 679), (61, 15, 337),
          (250, 64, 40), (1000, 8, 7), (60, 100, 600), (13 * 6 + 1, 33, 2)]  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_rows_mode_same_bits_on_any_thread_count(threads, dt, m, n, k):
    for (ta, tb), (alpha, beta, use_bias, act) in itertools.product(
        itertools.product([0, 1], [0, 1]),
        [(1.0, 0.0, False, -1), (0.75, 0.5, True, C.UNARY_RELU)],
    ):
        a, b, c0, bias = gemm_operands(dt, m, n, k, ta, tb, seed=m + n + k)
        bv = bias if use_bias else None
        want = gemm_reference(a, b, c0, bv, ta, tb, alpha, beta, act)
        check_thread_counts(threads, (1, 2, 3, 8), a, b, c0, ta, tb, alpha, beta, bv, act, want,
                            TOL[dt])  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
def test_rows_mode_tanh_epilogue_and_accumulating_batch(threads, dt):
    """A per-row activation after the last K block, and batch items that accumulate into one C
    (C stride 0: items in order) across several K blocks."""
    m, n, k, batch = 200, 96, 1400, 3
    r = np.random.default_rng(5)
    a = r.standard_normal((batch, m, k)).astype(dt)
    b = r.standard_normal((batch, n, k)).astype(dt)
    outs = []
    for t in (1, 2, 3):
        threads(t)
        c = np.zeros((m, n), dt)
        C.gemm(a, b, c, batch, m, n, k, 0, 1, 1.0, 1.0, m * k, n * k, 0)
        t_out = np.zeros((m, n), dt)
        C.gemm_ex(a[0], b[0], t_out, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, None, C.UNARY_TANH)
        outs.append((c, t_out))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = sum(a64[i] @ b64[i].T for i in range(batch))
    assert np.abs(outs[0][0] - want).max() < TOL[dt] * np.sqrt(k) * np.abs(want).max()
    pre = a64[0] @ b64[0].T  # (tanh' <= 1: its error is at most that of the product)
    err = np.abs(outs[0][1] - np.tanh(pre)).max()
    assert err < TOL[dt] * np.sqrt(k) * np.abs(pre).max()
    for c, t_out in outs[1:]:
        assert np.array_equal(c, outs[0][0]) and np.array_equal(t_out, outs[0][1])


@pytest.mark.parametrize("side", ["a", "b"])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_rows_mode_prepacked_operand_gives_the_unpacked_bits(threads, side, alpha):
    """A pre-packed A (its panels read where they lie, or copied times alpha) or B (no packing
    at all) in the row-split mode: the unpacked call's bits, on 1 and 2 threads."""
    m, n, k = 700, 128, 900
    for ta, tb in itertools.product([0, 1], [0, 1]):
        a, b, c0, bias = gemm_operands(np.float32, m, n, k, ta, tb, seed=11)
        for t in (1, 2):
            threads(t)
            pa = C.gemm_pack(a, "a", m, k, ta, 0) if side == "a" else a
            pb = C.gemm_pack(b, "b", k, n, tb, 0) if side == "b" else b
            want, got = c0.copy(), c0.copy()
            args = (1, m, n, k, ta, tb, alpha, 0.25, 0, 0, 0, bias, C.UNARY_RELU)
            C.gemm_ex(a, b, want, *args)
            C.gemm_ex(pa, pb, got, *args)
            assert np.array_equal(want, got), (side, ta, tb, t)


# (m, n, k) with several K blocks and a small A: the row-split mode from two threads, the blocked
# steps on one (128 x 128: the GPT's attention-projection dW; 96: its head), and N too wide for
# the mode but M narrow enough: swapped into it from two threads with alpha 1 (128 x 512: fc2's
# dW), the blocked steps otherwise; odd sizes around the units and the tile
SMALL_A = [(128, 128, 2048), (96, 128, 2048), (128, 512, 2048), (61, 500, 1401), (131, 449, 700)]


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m,n,k", SMALL_A)
def test_small_a_and_swapped_rows_same_bits_on_any_thread_count(threads, dt, m, n, k):
    for (ta, tb), (alpha, beta, use_bias, act) in itertools.product(
        itertools.product([0, 1], [0, 1]),
        [(1.0, 0.0, False, -1), (1.0, 0.5, True, C.UNARY_GELU), (0.75, 1.0, True, C.UNARY_RELU)],
    ):
        a, b, c0, bias = gemm_operands(dt, m, n, k, ta, tb, seed=m * n + k)
        bv = bias if use_bias else None
        want = gemm_reference(a, b, c0, bv, ta, tb, alpha, beta, -1)
        if act == C.UNARY_RELU:
            want = np.maximum(want, 0.0)
        elif act == C.UNARY_GELU:
            want = 0.5 * want * (1.0 + np.vectorize(math.erf)(want / math.sqrt(2.0)))
        check_thread_counts(threads, (1, 2, 3, 8), a, b, c0, ta, tb, alpha, beta, bv, act, want,
                            TOL[dt])  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
def test_swapped_rows_batches_same_bits(threads, dt):
    """A batch of dW-like items (A stored transposed, 128 x 512 x 2048 per item): items into one
    C (stride 0, in order: each item swapped into the row-split mode from two threads) and
    independent items (batch mode from two threads), against float64 and across thread counts."""
    m, n, k, batch = 128, 512, 2048, 2
    r = np.random.default_rng(9)
    a = r.standard_normal((batch, k, m)).astype(dt)
    b = r.standard_normal((batch, k, n)).astype(dt)
    outs = []
    for t in (1, 2, 3):
        threads(t)
        acc = np.zeros((m, n), dt)
        C.gemm(a, b, acc, batch, m, n, k, 1, 0, 1.0, 1.0, k * m, k * n, 0)
        each = np.empty((batch, m, n), dt)
        C.gemm(a, b, each, batch, m, n, k, 1, 0, 1.0, 0.0, k * m, k * n, m * n)
        outs.append((acc, each))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want_each = np.stack([a64[i].T @ b64[i] for i in range(batch)])
    tol = TOL[dt] * np.sqrt(k) * np.abs(want_each).max()
    assert np.abs(outs[0][1] - want_each).max() < tol
    assert np.abs(outs[0][0] - want_each.sum(0)).max() < 2 * tol
    for acc, each in outs[1:]:
        assert np.array_equal(acc, outs[0][0]) and np.array_equal(each, outs[0][1])


ISA_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from cpu_isa_harness import C
    from gemm_reference import thread_count_runs
    shapes = [(385, 129, 681), (300, 17, 1400), (61, 15, 40), (32, 512, 512)]
    for (m, n, k, ta, tb), c, want in thread_count_runs(
        (np.float32, np.float64), shapes, (1, 2, 3, 8)
    ):
        err = np.abs(c - want).max() / np.abs(want).max()
        assert err < (1e-5 if c.dtype == np.float32 else 1e-13), (m, n, k, ta, tb, err)
    # the Linear x @ W^T + bias, relu with W pre-packed swapped (C^T, register transposes into C)
    r = np.random.default_rng(7)
    x = r.standard_normal((32, 512)).astype(np.float32)
    w = r.standard_normal((512, 512)).astype(np.float32)
    bias = r.standard_normal(512).astype(np.float32)
    pw = C.gemm_pack(w, "b", 512, 512, 1, 1)
    C.set_num_threads(1)
    ref = np.empty((32, 512), np.float32)
    C.gemm_ex(x, w, ref, 1, 32, 512, 512, 0, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + bias, 0.0)
    assert np.abs(ref - want).max() < 1e-4 * np.abs(want).max()
    for t in (1, 2, 3, 8):
        C.set_num_threads(t)
        got = np.empty((32, 512), np.float32)
        C.gemm_ex(x, pw, got, 1, 32, 512, 512, 0, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), t
    # swapped units' transposes at ragged edges (n = 14 q + 5, m off the vector width), column
    # chunks with A packed once and B pre-packed (units waiting per claim range), row blocks
    for (m, n, k), swap, ta in [((43, 61, 300), 1, 0), ((131, 300, 700), 0, 0),
                                ((128, 512, 512), 0, 1), ((200, 300, 700), 0, 0),
                                ((60, 200, 300), 0, 1)]:
        a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        w = r.standard_normal((n, k)).astype(np.float32)
        bias = r.standard_normal(n).astype(np.float32)
        pw = C.gemm_pack(w, "b", k, n, 1, swap)
        C.set_num_threads(1)
        ref = np.empty((m, n), np.float32)
        C.gemm_ex(a, w, ref, 1, m, n, k, ta, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
        for t in (1, 2, 3, 8):
            C.set_num_threads(t)
            got = np.empty((m, n), np.float32)
            C.gemm_ex(a, pw, got, 1, m, n, k, ta, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
            assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), (m, n, k, t)
    print(C.info()["isa"])
    """
)


def test_rows_mode_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has; other tiles, so other
    modes), one subprocess each: close to float64 and the same bits on 1 .. 8 threads; a few-row
    32 x 512 x 512 (column chunks, A packed once, own B copies) and a swapped pre-packed Linear
    (C^T register transposes) too."""
    script = tmp_path / "isa_rows.py"
    script.write_text(ISA_SCRIPT)
    run_under_every_isa(script)


# (m, n, k) with fewer than two MR panels per thread (AVX-512 float32: 14-row panels, so m < 28
# .. 42 on two threads; AVX2: 6) but N wide enough for a column chunk per thread: the row-split
# mode's column chunks with A packed once for all of them (or read in place), claimed in
# per-thread ranges: 32 x 512 x 512 (the batch-32 Linear), a one-row edge panel (43 = 3 * 14 +
# 1), several K blocks, N off the NR tile, 128 rows (ten panels: chunks, A packed once; with B
# pre-packed, one block of rows per thread: test_a_packed_once_with_prepacked_b_same_bits)
FEW_ROWS = [(32, 512, 512), (43, 300, 700), (29, 97, 1500), (41, 64, 33), (128, 512, 512),
            (25, 1000, 300), (200, 300, 700), (60, 200, 300)]  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m,n,k", FEW_ROWS)
def test_few_row_panels_same_bits_on_any_thread_count(threads, dt, m, n, k):
    for (ta, tb), (alpha, beta, use_bias, act) in itertools.product(
        itertools.product([0, 1], [0, 1]),
        [(1.0, 0.0, False, -1), (0.75, 0.5, True, C.UNARY_RELU), (1.0, 0.0, True, C.UNARY_TANH)],
    ):
        a, b, c0, bias = gemm_operands(dt, m, n, k, ta, tb, seed=3 * m + n + k)
        bv = bias if use_bias else None
        want = gemm_reference(a, b, c0, bv, ta, tb, alpha, beta, -1)
        want = np.maximum(want, 0.0) if act == C.UNARY_RELU else want
        want = np.tanh(want) if act == C.UNARY_TANH else want
        check_thread_counts(threads, (1, 2, 3, 8), a, b, c0, ta, tb, alpha, beta, bv, act, want,
                            TOL[dt])  # fmt: skip


@pytest.mark.parametrize("swap", [0, 1])
@pytest.mark.parametrize("m", [32, 43, 128])
def test_prepacked_linear_weight_same_bits_on_any_thread_count(threads, swap, m):
    """The runtime's Linear: x @ W^T + bias, relu, with W packed as B (swap 0: its columns on the
    tile's columns; swap 1: on its rows, the product run as C^T and each unit's block moved into
    C by register transposes with the bias and relu) against the unpacked call on one thread,
    bit for bit, with NaN and inf rows in x, zero rows and a -0.0 bias, on 1 .. 8 threads."""
    n, k = 512, 512
    r = np.random.default_rng(m + swap)
    x = r.standard_normal((m, k)).astype(np.float32)
    x[1, 5], x[2, 7], x[3] = np.nan, np.inf, 0.0
    w = r.standard_normal((n, k)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    bias[:8] = -0.0
    pw = C.gemm_pack(w, "b", k, n, 1, swap)
    threads(1)
    want = np.empty((m, n), np.float32)
    C.gemm_ex(x, w, want, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
    x64 = x.astype(np.float64)
    ref = np.maximum(x64 @ w.astype(np.float64).T + bias, 0.0)
    ok = np.isfinite(ref).all(1)
    assert np.abs(want[ok] - ref[ok]).max() < 1e-5 * np.sqrt(k) * np.abs(ref[ok]).max()
    assert np.isnan(want[1]).all() and np.array_equal(np.isnan(want[2]), np.isnan(ref[2]))
    for t in (1, 2, 3, 8):
        threads(t)
        got = np.full((m, n), np.nan, np.float32)
        C.gemm_ex(x, pw, got, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (t, swap)


# (m, n, k) of a Linear x @ W^T with W pre-packed swapped (C^T = W x^T: n along the tile's MR
# rows, in units of one MR panel, m along its columns): each unit's block of C^T moves into C by
# GC_VN x GC_VN register transposes, rows and columns left over by whole groups through one more
# overlapping group (or element by element when the block is narrower than a group): n = 14 q + 2
# and 14 q + 5 (an edge panel of 2 / 5 rows on AVX-512, 6-row panels on AVX2), m off the
# vector width, one and several K blocks (at least 1 MFLOP: two threads take the mode)
SWAPPED_EDGES = [(27, 58, 400), (43, 61, 300), (61, 100, 700), (33, 75, 640)]


@pytest.mark.parametrize("m,n,k", SWAPPED_EDGES)
@pytest.mark.parametrize("use_bias,act", [(True, C.UNARY_RELU), (False, C.UNARY_RELU),
                                          (True, -1)])  # fmt: skip
def test_swapped_unit_transposes_same_bits_at_block_edges(threads, m, n, k, use_bias, act):
    """The swapped row-split units' transposes into C at ragged block edges: the unpacked call's
    bits on one thread (NaN, inf, -0.0 in x and the bias), on 1 .. 8 threads, close to float64."""
    r = np.random.default_rng(m * n + k)
    x = r.standard_normal((m, k)).astype(np.float32)
    x[1, 3], x[2, 5], x[4] = np.nan, np.inf, -0.0
    w = r.standard_normal((n, k)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32) if use_bias else None
    if use_bias:
        bias[::3] = -0.0
    pw = C.gemm_pack(w, "b", k, n, 1, 1)
    threads(1)
    want = np.empty((m, n), np.float32)
    C.gemm_ex(x, w, want, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, act)
    ref = x.astype(np.float64) @ w.astype(np.float64).T + (0.0 if bias is None else bias)
    ref = np.maximum(ref, 0.0) if act == C.UNARY_RELU else ref
    ok = np.isfinite(ref).all(1)
    assert np.abs(want[ok] - ref[ok]).max() < 1e-5 * np.sqrt(k) * np.abs(ref[ok]).max()
    assert np.isnan(want[1]).all()
    if act == C.UNARY_RELU:  # relu(-0.0 + -0.0) is +0.0, not -0.0
        assert not np.signbit(want[4]).any()
    for t in (1, 2, 3, 8):
        threads(t)
        got = np.full((m, n), np.nan, np.float32)
        C.gemm_ex(x, pw, got, 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, act)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), t


@pytest.mark.parametrize("m,n,k", [(128, 512, 512), (131, 300, 700), (57, 130, 90),
                                   (200, 300, 700)])  # fmt: skip
@pytest.mark.parametrize("ta", [0, 1])
def test_a_packed_once_with_prepacked_b_same_bits(threads, m, n, k, ta):
    """Column chunks with A packed once (A stored transposed, or row-major with rows that alias
    in L1: k = 512) and B pre-packed: each claim range starts at the A panels it packs and its
    units wait only for the claim ranges that pack theirs (3 and 8 threads; 57 rows on 2), or
    one block of rows per thread with its own A packing (128 .. 200 rows on 2, 200 on 3); the
    unpacked one-thread call's bits on 1 .. 8 threads, with a bias and relu."""
    r = np.random.default_rng(m + n + k + ta)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    w = r.standard_normal((n, k)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    pw = C.gemm_pack(w, "b", k, n, 1, 0)
    threads(1)
    want = np.empty((m, n), np.float32)
    C.gemm_ex(a, w, want, 1, m, n, k, ta, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
    a64 = a.astype(np.float64)
    ref = np.maximum((a64.T if ta else a64) @ w.astype(np.float64).T + bias, 0.0)
    assert np.abs(want - ref).max() < 1e-5 * np.sqrt(k) * np.abs(ref).max()
    for t in (1, 2, 3, 8):
        threads(t)
        for _ in range(3):  # (claims race differently call after call)
            got = np.full((m, n), np.nan, np.float32)
            C.gemm_ex(a, pw, got, 1, m, n, k, ta, 1, 1.0, 0.0, 0, 0, 0, bias, C.UNARY_RELU)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), t


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(172, 300, 37), (100, 200, 64)])
def test_row_blocks_with_alpha_keep_the_unpacked_bits(threads, dt, m, n, k):
    """alpha != 1 with a small row-major A (read in place, where full panels apply alpha in the
    kernel and a packed edge panel folds it into A) and B pre-packed: the row blocks, whose edge
    panels move with the thread count, are not taken; the packed call gives the unpacked call's
    bits on 1 .. 8 threads."""
    r = np.random.default_rng(m + n + k)
    a = r.standard_normal((m, k)).astype(dt)
    w = r.standard_normal((k, n)).astype(dt)
    pw = C.gemm_pack(w, "b", k, n, 0, 0)
    threads(1)
    want = np.zeros((m, n), dt)
    C.gemm_ex(a, w, want, 1, m, n, k, 0, 0, 0.75, 0.0, 0, 0, 0, None, -1)
    ref = 0.75 * (a.astype(np.float64) @ w.astype(np.float64))
    assert np.abs(want - ref).max() < 1e-5 * np.sqrt(k) * np.abs(ref).max()
    for t in (1, 2, 3, 8):
        threads(t)
        for b, out in ((w, np.zeros((m, n), dt)), (pw, np.zeros((m, n), dt))):
            C.gemm_ex(a, b, out, 1, m, n, k, 0, 0, 0.75, 0.0, 0, 0, 0, None, -1)
            assert np.array_equal(out, want), (t, b is pw)
