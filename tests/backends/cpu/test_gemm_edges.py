"""The blocked GEMM's edges (cpu/gemm.c, gemm_rows.h, isa/ukr_rows.h): a partial last row panel
(AVX-512 float32 runs it through the edge kernel of its row count: every count 1 .. MR - 1 must
give the rows of the padded full tile bit for bit), row-major A read in place or packed (its row
stride aliasing in L1 or not: the same bits), row-split units split across N when the threads do
not divide few panels, and the swapped row-split mode's units transposing their own block of C^T
into C (bias, relu) — each against float64 and bitwise across 1 .. 3 threads, the default ISA
and every other one this CPU has."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from cpu_isa_harness import C, run_under_every_isa
from gemm_reference import check_thread_counts

TOL = 2e-5  # float32, times sqrt(k) and the result's scale


def _gemm(a, b, c0, ta, tb, alpha=1.0, beta=0.0, bias=None, act=-1):
    m = a.shape[1] if ta else a.shape[0]
    k = a.shape[0] if ta else a.shape[1]
    n = b.shape[0] if tb else b.shape[1]
    c = c0[:m].copy()
    C.gemm_ex(a, b, c, 1, m, n, k, ta, tb, alpha, beta, 0, 0, 0, bias, act)
    return c


def _reference(a, b, c0, ta, tb, alpha, beta, bias, act):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    y = alpha * ((a64.T if ta else a64) @ (b64.T if tb else b64)) + beta * c0
    if bias is not None:
        y = y + bias
    if act == C.UNARY_RELU:
        y = np.maximum(y, 0.0)
    elif act == C.UNARY_TANH:
        y = np.tanh(y)
    return y


def _close(got, want, k):
    err = np.abs(got - want).max() / (np.abs(want).max() + 1.0)
    assert err < TOL * np.sqrt(k), err


@pytest.mark.parametrize("n,k", [(64, 100), (70, 700)])
def test_partial_row_panel_is_the_full_tiles_rows(threads, n, k):
    """m = full panels + r rows for every r < MR: the first m rows of the product with one more
    full panel, bit for bit (the edge kernel of r rows against the full kernel on padded rows), with
    beta, bias and relu (alpha 1; another alpha against float64), both layouts of B, a full and
    a partial last column panel, one and several K blocks, on 1 and 2 threads."""
    mr = C.info()["gemm"]["float32"]["mr"]
    nfull = max(2, 25 // mr + 1)  # m > 24 for every row count: not the small-m (gemv) path
    full = (nfull + 1) * mr
    r = np.random.default_rng(n + k)
    a = r.standard_normal((full, k)).astype(np.float32)
    c0 = r.standard_normal((full, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    for tb, t in itertools.product((0, 1), (1, 2)):
        threads(t)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        half = _gemm(a, b, c0, 0, tb, 0.5, 0.75, bias, C.UNARY_RELU)
        _close(half, _reference(a, b, c0, 0, tb, 0.5, 0.75, bias, C.UNARY_RELU), k)
        # (alpha 1: with another alpha, full panels of a small A read in place apply it in the
        # kernel, a packed partial panel in the packing)
        for alpha, beta, bv, act in ((1.0, 0.0, None, -1), (1.0, 0.75, bias, C.UNARY_RELU)):
            whole = _gemm(a, b, c0, 0, tb, alpha, beta, bv, act)
            _close(whole, _reference(a, b, c0, 0, tb, alpha, beta, bv, act), k)
            for rows in range(1, mr):
                m = nfull * mr + rows
                part = _gemm(np.ascontiguousarray(a[:m]), b, c0, 0, tb, alpha, beta, bv, act)
                assert np.array_equal(part, whole[:m]), (rows, tb, t, alpha)
            # A stored transposed (always packed) gives the same edge panels
            m = nfull * mr + mr // 2
            at = np.ascontiguousarray(a[:m].T)
            assert np.array_equal(_gemm(at, b, c0, 1, tb, alpha, beta, bv, act), whole[:m])


# (m, n, k): row strides of 4 KiB (1024 floats: every row of a tile in one L1 set), 2 KiB,
# 4 KiB + 64 bytes; a small A (the blocked steps read it in place) and a larger one (row-split)
ALIAS = [(300, 128, 1024), (60, 600, 1024), (200, 96, 512), (100, 128, 1040), (64, 2048, 300)]


@pytest.mark.parametrize("m,n,k", ALIAS)
def test_row_major_a_in_place_or_packed_same_bits(threads, m, n, k):
    """Row-major A, which the driver reads in place unless its row stride aliases in L1 (then
    packs it), gives the bits of the same A stored transposed (always packed), with alpha 1, on
    1 .. 3 threads; and float64's values.  Likewise row-major B (in place when few panels of A
    use it and its rows are at most 4 KiB apart) against B stored transposed."""
    r = np.random.default_rng(m + k)
    a = r.standard_normal((m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    c0 = r.standard_normal((m, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    first = None
    for t in (1, 2, 3):
        threads(t)
        got = _gemm(a, b, c0, 0, 0, 1.0, 0.5, bias, C.UNARY_RELU)
        assert np.array_equal(got, _gemm(a.T.copy(), b, c0, 1, 0, 1.0, 0.5, bias, C.UNARY_RELU))
        # (row-major B, read in place under few panels of A, against B stored transposed)
        assert np.array_equal(got, _gemm(a, b.T.copy(), c0, 0, 1, 1.0, 0.5, bias, C.UNARY_RELU))
        if first is None:
            first = got
            _close(got, _reference(a, b, c0, 0, 0, 1.0, 0.5, bias, C.UNARY_RELU), k)
        assert np.array_equal(got, first), t


# (m, n, k): few MR panels that two threads do not divide (64 x 784 x 512: 5 panels of 14), split
# across N as well; uneven column chunks; one K block and several; a small row-major B (read in
# place, its edge panel packed)
FEW_PANELS = [(64, 512, 784), (50, 200, 300), (33, 640, 500), (71, 96, 1300), (45, 120, 120)]


@pytest.mark.parametrize("m,n,k", FEW_PANELS)
def test_few_row_panels_split_across_columns_same_bits(threads, m, n, k):
    r = np.random.default_rng(m * n + k)
    for ta, tb in itertools.product((0, 1), (0, 1)):
        a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        c0 = r.standard_normal((m, n)).astype(np.float32)
        bias = r.standard_normal(n).astype(np.float32)
        for alpha, beta, bv, act in ((1.0, 0.0, None, -1), (0.75, 1.0, bias, C.UNARY_TANH)):
            want = _reference(a, b, c0, ta, tb, alpha, beta, bv, act)
            check_thread_counts(threads, (1, 2, 3), a, b, c0, ta, tb, alpha, beta, bv, act, want,
                                TOL)  # fmt: skip


# (m, n, k) of a Linear y = x W^T + b with W pre-packed in the transposed layout (swap 1: the
# runtime's choice for few rows): the MLP's 32 x 512 x 512, odd sizes, several K blocks
LINEAR = [(32, 512, 512), (40, 333, 700), (25, 1000, 300)]


@pytest.mark.parametrize("m,n,k", LINEAR)
def test_swapped_linear_units_transpose_their_block(threads, m, n, k):
    """The swapped row-split mode (a pre-packed weight, swap 1) with bias and relu (the units
    transpose their own C^T blocks into C), with tanh (one pass after the region) and with beta:
    float64's values, the unpacked call's bits, and the same bits on 1 .. 3 threads."""
    r = np.random.default_rng(m + n + k)
    x = r.standard_normal((m, k)).astype(np.float32)
    w = r.standard_normal((n, k)).astype(np.float32)
    c0 = r.standard_normal((m, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    pw = C.gemm_pack(w, "b", k, n, 1, 1)
    for beta, bv, act in ((0.0, bias, C.UNARY_RELU), (0.0, None, -1), (0.5, bias, C.UNARY_TANH),
                          (1.0, bias, C.UNARY_RELU)):  # fmt: skip
        first = None
        for t in (1, 2, 3):
            threads(t)
            got = c0.copy()
            C.gemm_ex(x, pw, got, 1, m, n, k, 0, 1, 1.0, beta, 0, 0, 0, bv, act)
            if first is None:
                first = got
                _close(got, _reference(x, w, c0, 0, 1, 1.0, beta, bv, act), k)
                assert np.array_equal(got, _gemm(x, w, c0, 0, 1, 1.0, beta, bv, act))
            assert np.array_equal(got, first), (beta, act, t)


ISA_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from cpu_isa_harness import C
    from gemm_reference import thread_count_runs
    mr = C.info()["gemm"]["float32"]["mr"]
    shapes = [(2 * mr + 1, 70, 300), (3 * mr - 1, 64, 700), (64, 512, 784), (300, 128, 1024)]
    for (m, n, k, ta, tb), c, want in thread_count_runs((np.float32,), shapes, (1, 2, 3)):
        err = np.abs(c - want).max() / np.abs(want).max()
        assert err < 1e-5, (m, n, k, ta, tb, err)
    print(C.info()["isa"])
    """
)


def test_edges_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has; only AVX-512 has edge
    kernels, the others pad), one subprocess each: close to float64 and the same bits on 1 .. 3
    threads."""
    script = tmp_path / "isa_edges.py"
    script.write_text(ISA_SCRIPT)
    run_under_every_isa(script)


BLOCKED_SCRIPT = textwrap.dedent(
    """
    import itertools
    import numpy as np
    from cpu_isa_harness import C
    assert C.info()["gemm"]["float32"]["kc"] == 512, C.info()["gemm"]
    for (m, n, k), ta, tb in itertools.product([(300, 1000, 1500), (157, 1100, 1100)], (0, 1),
                                               (0, 1)):
        r = np.random.default_rng(m + k)
        a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        c0 = r.standard_normal((m, n)).astype(np.float32)
        bias = r.standard_normal(n).astype(np.float32)
        a64 = (a.T if ta else a).astype(np.float64)
        want = np.tanh(0.5 * a64 @ (b.T if tb else b).astype(np.float64) + 0.25 * c0 + bias)
        outs = []
        for t in (1, 2, 3, 4):
            C.set_num_threads(t)
            c = c0.copy()
            C.gemm_ex(a, b, c, 1, m, n, k, ta, tb, 0.5, 0.25, 0, 0, 0, bias, C.UNARY_TANH)
            outs.append(c)
        err = np.abs(outs[0] - want).max()
        assert err < 1e-4, (m, n, k, ta, tb, err)
        assert all(np.array_equal(o, outs[0]) for o in outs), (m, n, k, ta, tb)
    print("ok")
    """
)


def test_blocked_steps_unit_by_unit_same_bits(tmp_path):
    """The blocked steps (B too wide for the row-split mode) with small blocks forced through
    GPUCORE_GEMM_BLOCKING (MC 70: several M blocks; KC 512: several K blocks; NC 128: many
    units), where each unit waits only for its own tiles' previous K block: float64's values and
    the same bits on 1 .. 4 threads."""
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED_SCRIPT)
    tests = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, GPUCORE_GEMM_BLOCKING="70,512,128", PYTHONPATH=path)
    out = subprocess.run([sys.executable, str(script)], env=env, text=True, timeout=300,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout  # fmt: skip
    assert out.split()[-1:] == ["ok"], out
