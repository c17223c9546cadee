"""gemm_pack / PackedMatrix: a constant operand packed once gives the unpacked call's bits in
gemm, gemm_ex and conv2d_forward (float32 and float64, both sides and layouts, every transpose,
alpha / beta, bias and activations, batches with stride 0, odd sizes, the small-m and swapped
paths), under every instruction set; and bad arguments raise.  A product that the unpacked call
runs on the narrow-N path (gemv order) keeps the blocked path packed: close, not the same bits."""

from __future__ import annotations

import gc
import itertools
import os
import textwrap
import weakref

import numpy as np
import pytest
from cpu_isa_harness import C, run_under_every_isa

from gpucore.runtime.ir.packing import _narrow as narrow

DTYPES = [np.float32, np.float64]
# (m, n, k): small-m path (m <= 16 / 24), odd sizes around the tiles, swap-prone (n small, m
# large), several K blocks
SHAPES = [(1, 5, 3), (9, 40, 17), (17, 33, 20), (25, 7, 300), (50, 3, 64), (31, 100, 1),
          (64, 49, 577), (100, 65, 33), (29, 30, 700)]  # fmt: skip


def _bits(x):
    return np.ascontiguousarray(x).view(np.uint8)


def run_pair(dt, m, n, k, ta, tb, alpha, beta, side, swap, batch=1, bias=False, act=-1, seed=0):
    """(unpacked C, packed C) of one gemm_ex call, the packed operand shared by every item."""
    r = np.random.default_rng(seed)
    na, nb = (1, batch) if side == "a" else (batch, 1)
    a = r.standard_normal((na,) + ((k, m) if ta else (m, k))).astype(dt).reshape(-1)
    b = r.standard_normal((nb,) + ((n, k) if tb else (k, n))).astype(dt).reshape(-1)
    c0 = r.standard_normal((batch, m, n)).astype(dt)
    bv = r.standard_normal(n).astype(dt) if bias else None
    sa, sb = (0, k * n) if side == "a" else (m * k, 0)
    if batch == 1:
        sa, sb = m * k, k * n
    if side == "a":
        pa, pb = C.gemm_pack(a, "a", m, k, ta, swap), b
    else:
        pa, pb = a, C.gemm_pack(b, "b", k, n, tb, swap)
    want, got = c0.copy(), c0.copy()
    args = (batch, m, n, k, ta, tb, alpha, beta, sa, sb, m * n, bv, act)
    C.gemm_ex(a, b, want.reshape(-1), *args)
    C.gemm_ex(pa, pb, got.reshape(-1), *args)
    return want, got


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_packed_gemm_is_bitwise_the_unpacked_call(dt, m, n, k):
    for ta, tb, side, swap in itertools.product([0, 1], [0, 1], "ab", [0, 1]):
        for alpha, beta, act in (
            (1.0, 0.0, -1),
            (0.75, 0.5, C.UNARY_RELU),
            (1.0, 1.0, C.UNARY_TANH),
        ):
            want, got = run_pair(dt, m, n, k, ta, tb, alpha, beta, side, swap, bias=m % 2 == 1,
                                 act=act)  # fmt: skip
            if narrow(m, n, k, ta, tb, np.dtype(dt).itemsize):  # unpacked: the gemv order
                tol = 1e-4 if dt == np.float32 else 1e-12
                assert np.abs(want - got).max() <= tol * (np.abs(want).max() + 1.0)
                continue
            assert np.array_equal(_bits(want), _bits(got)), (ta, tb, side, swap, alpha, beta)


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("side", ["a", "b"])
def test_packed_operand_shared_by_a_batch(dt, side):
    """batch > 1 with stride 0 for the packed operand: independent items (C stride m*n, spread
    over the threads or run in turn) and items accumulating into one C (stride 0)."""
    for (m, n, k), swap, alpha in itertools.product(
        [(40, 30, 50), (20, 6, 90)], [0, 1], [1.0, -2.0]
    ):
        want, got = run_pair(dt, m, n, k, 0, 1, alpha, 0.0, side, swap, batch=5, bias=True)
        assert np.array_equal(_bits(want), _bits(got)), (m, n, k, swap, alpha)
    r = np.random.default_rng(3)
    m, n, k = 30, 40, 70
    w = r.standard_normal((k, n)).astype(dt)
    x = r.standard_normal((4, m, k)).astype(dt)
    pw = C.gemm_pack(w, "b", k, n, 0, 0)
    want, got = np.ones((m, n), dt), np.ones((m, n), dt)
    C.gemm(x, w, want, 4, m, n, k, 0, 0, 1.0, 1.0, m * k, 0, 0)
    C.gemm(x, pw, got, 4, m, n, k, 0, 0, 1.0, 1.0, m * k, 0, 0)
    assert np.array_equal(_bits(want), _bits(got))


def test_packed_edge_sizes():
    for dt in DTYPES:
        for m, n, k in [(0, 5, 3), (4, 0, 3), (30, 20, 0)]:
            want, got = run_pair(dt, m, n, k, 0, 0, 1.0, 0.5, "a", 0, bias=True)
            assert np.array_equal(_bits(want), _bits(got))
        want, got = run_pair(dt, 40, 30, 20, 0, 0, 0.0, 2.0, "b", 1)  # alpha 0: C scaled
        assert np.array_equal(_bits(want), _bits(got))


def _conv_pair(dt, n, c, h, w, o, kh, kw, stride, pad, dil, swap, bias, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, c, h, w)).astype(dt)
    wt = r.standard_normal((o, c, kh, kw)).astype(dt)
    b = r.standard_normal(o).astype(dt) if bias else None
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    geo = (n, c, h, w, kh, kw, stride, stride, pad, pad, dil, dil, o)
    want, got = np.empty((n, o, oh, ow), dt), np.empty((n, o, oh, ow), dt)
    C.conv2d_forward(x, wt, b, want, *geo)
    pw = C.gemm_pack(wt, "a", o, c * kh * kw, 0, swap)
    C.conv2d_forward(x, pw, b, got, *geo)
    return want, got


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
def test_packed_conv_weight_is_bitwise(dt):
    """n, c, h, w, o, kh, kw, stride, padding, dilation: odd sizes, strides 1-3, dilation, 1x1,
    o <= 24 (gemm's small-m path: the columns unpacked) with more pixels than a fill chunk."""
    cases = [(1, 3, 15, 13, 30, 3, 3, 1, 1, 1), (2, 5, 9, 11, 40, 3, 2, 2, 1, 1),
             (3, 4, 8, 8, 33, 1, 1, 1, 0, 1), (1, 2, 20, 17, 7, 5, 3, 2, 2, 2),
             (1, 6, 7, 7, 64, 3, 3, 1, 1, 1), (1, 3, 30, 30, 8, 3, 3, 1, 1, 1),
             (2, 4, 17, 19, 33, 3, 3, 3, 1, 1), (1, 2, 40, 40, 30, 1, 1, 1, 0, 1)]  # fmt: skip
    for (n, c, h, w, o, kh, kw, s, p, d), swap, bias in itertools.product(cases, [0, 1], [0, 1]):
        want, got = _conv_pair(dt, n, c, h, w, o, kh, kw, s, p, d, swap, bias)
        assert np.array_equal(_bits(want), _bits(got)), (n, c, h, w, o, kh, kw, swap, bias)


ISA_SCRIPT = textwrap.dedent(
    """
    import sys, itertools
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_gemm_pack import run_pair, _conv_pair, _bits
    from cpu_isa_harness import C
    bad = []
    for dt in (np.float32, np.float64):
        for (m, n, k), side, swap in itertools.product(
            [(17, 33, 20), (30, 5, 300), (64, 49, 97), (25, 100, 9)], "ab", [0, 1]
        ):
            for ta, tb, alpha in itertools.product([0, 1], [0, 1], [1.0, 0.5]):
                w, g = run_pair(dt, m, n, k, ta, tb, alpha, 0.5, side, swap, batch=3,
                                bias=True, act=C.UNARY_GELU)
                if not np.array_equal(_bits(w), _bits(g)):
                    bad.append((dt.__name__, m, n, k, side, swap, ta, tb, alpha))
        for swap in (0, 1):
            w, g = _conv_pair(dt, 2, 3, 10, 9, 30, 3, 3, 1, 1, 1, swap, 1)
            if not np.array_equal(_bits(w), _bits(g)):
                bad.append((dt.__name__, "conv", swap))
    print(C.info()["isa"], bad)
    sys.exit(1 if bad else 0)
    """
)


def test_packed_bitwise_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has), one subprocess each."""
    script = tmp_path / "isa_pack.py"
    script.write_text(ISA_SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    run_under_every_isa(script, here, path=(here,))


def test_packed_matrix_object():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    pm = C.gemm_pack(w, "b", 3, 4, 0, 0)
    assert isinstance(pm, C.PackedMatrix)
    assert (pm.side, pm.rows, pm.cols, pm.trans, pm.swap, pm.dtype) == ("b", 3, 4, 0, 0, "float32")
    assert pm.isa == C.info()["isa"] and pm.width == C.info()["gemm"]["float32"]["nr"]
    assert pm.nbytes >= 48 and pm.kc >= 3
    assert "PackedMatrix side='b' 3 x 4 float32" in repr(pm)
    with pytest.raises(TypeError):
        memoryview(pm)  # exports nothing
    with pytest.raises(TypeError):
        C.PackedMatrix()
    with pytest.raises(AttributeError):
        pm.rows = 5
    w[...] = 0  # packed is a copy
    c = np.empty((2, 4), np.float32)
    C.gemm(np.ones((2, 3), np.float32), pm, c, 1, 2, 4, 3, 0, 0, 1.0, 0.0, 0, 0, 0)
    assert np.array_equal(c, np.ones((2, 3)) @ np.arange(12).reshape(3, 4))


def test_packed_memory_comes_back_from_the_host_cache():
    """A PackedMatrix's panels are a block of the caching host allocator: one freed returns its
    block, and packing the same size again reuses it (no fresh pages to fault in at a reload)."""
    if C.host_cache_info()["limit_bytes"] < (64 << 20):
        pytest.skip("GPUCORE_HOST_CACHE_MB caps the cache below this test's blocks")
    w = np.random.default_rng(0).standard_normal((256, 2304)).astype(np.float32)
    pm = C.gemm_pack(w, "a", 256, 2304, 0, 1)
    cached = C.host_cache_info()["cached_bytes"]
    del pm
    gc.collect()
    assert C.host_cache_info()["cached_bytes"] >= cached + w.nbytes  # the block went back
    hits = C.host_cache_info()["hits"]
    pm = C.gemm_pack(w, "a", 256, 2304, 0, 1)
    assert C.host_cache_info()["hits"] == hits + 1
    c = np.empty((256, 64), np.float32)
    b = np.random.default_rng(1).standard_normal((2304, 64)).astype(np.float32)
    C.gemm(pm, b, c, 1, 256, 64, 2304, 0, 0, 1.0, 0.0, 0, 0, 0)  # the reused block holds the panels
    ref = np.empty_like(c)
    C.gemm(w, b, ref, 1, 256, 64, 2304, 0, 0, 1.0, 0.0, 0, 0, 0)
    assert np.array_equal(c, ref)


def test_gemm_pack_argument_errors():
    w = np.zeros((4, 5), np.float32)
    with pytest.raises(TypeError, match="'side' must be 'a' or 'b'"):
        C.gemm_pack(w, 0, 4, 5, 0, 0)
    with pytest.raises(ValueError, match="'side' must be 'a' or 'b'"):
        C.gemm_pack(w, "c", 4, 5, 0, 0)
    with pytest.raises(ValueError, match="rows"):
        C.gemm_pack(w, "a", -1, 5, 0, 0)
    with pytest.raises(ValueError, match="trans"):
        C.gemm_pack(w, "a", 4, 5, 2, 0)
    with pytest.raises(ValueError, match="swap"):
        C.gemm_pack(w, "a", 4, 5, 0, 3)
    with pytest.raises(ValueError, match="'x' holds 20 elements but 30"):
        C.gemm_pack(w, "a", 5, 6, 0, 0)
    with pytest.raises(TypeError):
        C.gemm_pack(w.astype(np.int32), "a", 4, 5, 0, 0)
    with pytest.raises(ValueError, match="contiguous"):
        C.gemm_pack(np.zeros((5, 8), np.float32)[:, ::2], "a", 4, 5, 0, 0)
    with pytest.raises(TypeError, match="buffer protocol"):
        C.gemm_pack([1.0], "a", 1, 1, 0, 0)
    with pytest.raises(TypeError):
        C.gemm_pack(w, "a", 4, 5, 0)
    with pytest.raises(ValueError, match="overflow|too large"):
        C.gemm_pack(w, "a", 2**62, 2**62, 0, 0)


def test_packed_operand_checked_against_the_call():
    a = np.zeros((6, 5), np.float32)
    b = np.zeros((5, 7), np.float32)
    c = np.zeros((6, 7), np.float32)
    pa = C.gemm_pack(a, "a", 6, 5, 0, 0)
    pb = C.gemm_pack(b, "b", 5, 7, 0, 0)
    args = (1, 6, 7, 5, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="'b' is a PackedMatrix for side 'a'"):
        C.gemm(a, pa, c, *args)
    with pytest.raises(ValueError, match="'a' is a PackedMatrix for side 'b'"):
        C.gemm(pb, b, c, *args)
    with pytest.raises(ValueError, match="'a' is a PackedMatrix of 6 x 5 with trans=0, the call"):
        C.gemm(pa, b, c, 1, 6, 7, 5, 1, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="'b' is a PackedMatrix of 5 x 7"):
        C.gemm(a, pb, np.zeros((6, 8), np.float32), 1, 6, 8, 5, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="'a' is a PackedMatrix of float32"):
        C.gemm(pa, b.astype(np.float64), c.astype(np.float64), *args)
    with pytest.raises(ValueError, match="'sa' must be 0"):
        C.gemm(pa, b, np.zeros((2, 6, 7), np.float32), 2, 6, 7, 5, 0, 0, 1.0, 0.0, 30, 0, 42)
    with pytest.raises(TypeError, match="buffer protocol"):
        C.gemm(pa, b, pb, *args)  # c must be an array
    C.gemm(pa, pb, c, *args)  # both packed
    b2 = np.zeros((2, 5, 7), np.float32)
    C.gemm(pa, b2, np.zeros((2, 6, 7), np.float32), 2, 6, 7, 5, 0, 0, 1.0, 0.0, 0, 35, 42)
    x = np.zeros((1, 2, 4, 4), np.float32)
    w = np.zeros((3, 2, 3, 3), np.float32)
    out = np.zeros((1, 3, 2, 2), np.float32)
    geo = (1, 2, 4, 4, 3, 3, 1, 1, 0, 0, 1, 1, 3)
    C.conv2d_forward(x, C.gemm_pack(w, "a", 3, 18, 0, 1), None, out, *geo)
    with pytest.raises(ValueError, match="'w' is a PackedMatrix of 3 x 17"):
        C.conv2d_forward(x, C.gemm_pack(w, "a", 3, 17, 0, 0), None, out, *geo)
    with pytest.raises(ValueError, match="'w' is a PackedMatrix for side 'b'"):
        C.conv2d_forward(x, C.gemm_pack(w, "b", 3, 18, 0, 0), None, out, *geo)
    with pytest.raises(ValueError, match="trans=1"):
        C.conv2d_forward(x, C.gemm_pack(w, "a", 3, 18, 1, 0), None, out, *geo)
    with pytest.raises(TypeError, match="'w' must support the buffer protocol"):
        g = np.zeros_like(out)
        C.conv2d_backward(x, C.gemm_pack(w, "a", 3, 18, 0, 0), g, None, None, None, *geo)


def test_program_keeps_the_packed_matrix_alive():
    r = np.random.default_rng(1)
    a = r.standard_normal((40, 30)).astype(np.float32)
    b = r.standard_normal((50, 30)).astype(np.float32)
    pb = C.gemm_pack(b, "b", 30, 50, 1, 1)
    ref = weakref.ref(pb)
    c = np.zeros((40, 50), np.float32)
    prog = C.Program([("gemm_ex", (a, pb, c, 1, 40, 50, 30, 0, 1, 1.0, 0.0, 0, 0, 0, None, -1))])
    del pb
    gc.collect()
    assert ref() is not None
    assert prog.run((), ()) == -1
    want = np.zeros_like(c)
    C.gemm_ex(a, b, want, 1, 40, 50, 30, 0, 1, 1.0, 0.0, 0, 0, 0, None, -1)
    assert np.array_equal(c, want)
    del prog
    gc.collect()
    assert ref() is None
