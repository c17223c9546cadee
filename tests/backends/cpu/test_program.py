"""The compiled executor's C program (gpucore._cpu.Program, cpu/python/program.c).

Every kernel node kind gives bitwise the eager binding's result (strided and overlapping views
into one arena array, constant weights outside it); input / output copy nodes; python nodes stop
the run and resume; construction errors are the eager binding's, prefixed with the node; run-time
buffer checks; the program keeps its buffers alive; a second concurrent run raises."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref

import numpy as np
import pytest
from program_cases import CASES, DTYPES, POOL, Arena

from gpucore import _cpu as C


def test_every_kind_has_a_case():
    """A new node kind (nodes.h's GC_NODES) needs its case in tests/program_cases.py."""
    assert sorted(C.Program.node_kinds()) == sorted(CASES)


def _eager(nodes):
    for name, args in nodes:
        getattr(C, name)(*args)


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_node_matches_eager_bitwise(kind, dt):
    ar = Arena(seed=sorted(CASES).index(kind))
    nodes = CASES[kind](ar, dt)
    prog = C.Program(nodes)
    for _ in range(2):  # the second run reads new data through the same pointers
        before = ar.buf.copy()
        _eager(nodes)
        want = ar.buf.copy()
        ar.buf[:] = before
        assert prog.run((), ()) == -1
        assert np.array_equal(ar.buf, want), f"{kind}: the program's result differs from eager"
        ar.refill()


def test_whole_graph_in_one_program():
    """Every case in one program over one arena: the same bits as the eager calls in order."""
    ar = Arena(seed=7)
    nodes = [node for kind in sorted(CASES) for dt in DTYPES for node in CASES[kind](ar, dt)]
    before = ar.buf.copy()
    _eager(nodes)
    want = ar.buf.copy()
    ar.buf[:] = before
    prog = C.Program(nodes)
    assert len(prog) == len(nodes)
    assert prog.run((), ()) == -1
    assert np.array_equal(ar.buf, want)


# ------------------------------------------------------------------------------------------
# input / output / python nodes


def _mlp(ar):
    """input 0 -> x; h = relu(x @ w + b) in one gemm_ex; python; y = h * s; output 0 <- y,
    output 1 <- h."""
    x, w, b = (
        ar.alloc((4, 6), np.float32, None),
        ar.const((6, 5), np.float32),
        ar.const((5,), np.float32),
    )
    h, s, y = (
        ar.alloc((4, 5), np.float32, None),
        ar.alloc((5,), np.float32),
        ar.alloc((4, 5), np.float32, None),
    )
    nodes = [
        ("input", (0, x)),
        ("gemm_ex", (x, w, h, 1, 4, 5, 6, 0, 0, 1.0, 0.0, 0, 0, 0, b, C.UNARY_RELU)),
        ("python", ()),
        ("binary", (C.BINARY_MUL, h, s, y)),
        ("output", (0, y)),
        ("output", (1, h)),
    ]
    return nodes, (x, w, b, h, s, y)


def test_input_output_and_python_nodes():
    ar = Arena(seed=3)
    nodes, (x, w, b, h, s, y) = _mlp(ar)
    prog = C.Program(nodes)
    assert prog.names == ("input", "gemm_ex", "python", "binary", "output", "output")
    assert (prog.n_inputs, prog.n_outputs) == (1, 2)
    rng = np.random.default_rng(1)
    for _ in range(2):
        xin = rng.standard_normal((4, 6)).astype(np.float32)
        # eager reference on copies
        hr, yr = np.zeros((4, 5), np.float32), np.zeros((4, 5), np.float32)
        C.gemm_ex(xin, w, hr, 1, 4, 5, 6, 0, 0, 1.0, 0.0, 0, 0, 0, b, C.UNARY_RELU)
        hr *= 2
        C.binary(C.BINARY_MUL, hr, s.copy(), yr)

        out_y, out_h = np.full((4, 5), np.nan, np.float32), np.full((4, 5), np.nan, np.float32)
        stop = prog.run((xin,), (out_y, out_h))
        assert stop == 2 and np.isnan(out_y).all()  # stopped at the python node
        assert np.array_equal(x, xin)
        h *= 2  # the python node's work
        assert prog.run((xin,), (out_y, out_h), start=stop + 1) == -1
        assert np.array_equal(out_y, yr) and np.array_equal(out_h, hr)


def test_python_nodes_in_a_row_and_start():
    prog = C.Program([("python", ()), ("python", ()), ("python", ())])
    assert [prog.run((), (), start=i) for i in range(4)] == [0, 1, 2, -1]
    assert prog.run((), (), 3) == -1
    with pytest.raises(ValueError, match=r"start = 4 is outside \[0, 3\]"):
        prog.run((), (), start=4)
    with pytest.raises(ValueError, match="start = -1"):
        prog.run((), (), -1)
    empty = C.Program([])
    assert len(empty) == 0 and empty.names == () and empty.run((), ()) == -1


def test_run_buffer_checks():
    ar = Arena(seed=4)
    nodes, (x, *_rest) = _mlp(ar)
    prog = C.Program(nodes)
    xin = np.ones((4, 6), np.float32)
    outs = (np.zeros((4, 5), np.float32), np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="takes 1 inputs and 2 outputs; got 0 and 2"):
        prog.run((), outs)
    with pytest.raises(ValueError, match="takes 1 inputs and 2 outputs; got 1 and 1"):
        prog.run((xin,), outs[:1])
    # wrong byte size, wrong format (same size), same bytes but another shape is fine
    with pytest.raises(
        ValueError,
        match=r"input 0 has format 'f', shape \(4, 5\)"
        r".*node 0 \(input\) expects format 'f', shape \(4, 6\)",
    ):
        prog.run((np.ones((4, 5), np.float32),), outs)
    with pytest.raises(ValueError, match=r"input 0 has format 'i'.*expects format 'f'"):
        prog.run((np.ones((4, 6), np.int32),), outs)
    with pytest.raises(
        ValueError, match=r"output 1 has format 'd'.*node 5 \(output\) expects format 'f'"
    ):
        prog.run((xin,), (outs[0], np.zeros((2, 5), np.float64)))
    assert prog.run((xin.reshape(24),), outs) == 2
    # not C-contiguous, read-only output, not a buffer: the exporter's error, named
    with pytest.raises(ValueError, match="Program.run: input 0 .*contiguous"):
        prog.run((np.ones((4, 12), np.float32)[:, ::2],), outs)
    ro = np.zeros((4, 5), np.float32)
    ro.flags.writeable = False
    with pytest.raises((ValueError, BufferError), match="Program.run: output 1"):
        prog.run((xin,), (outs[0], ro))
    with pytest.raises(TypeError, match="Program.run: input 0 \\(int\\)"):
        prog.run((3,), outs)
    with pytest.raises(TypeError, match="tuples"):
        prog.run([xin], outs)
    # no copy happened on a failed check: nothing ran
    x[...] = 0
    with pytest.raises(ValueError):
        prog.run((np.ones((4, 6), np.int32),), outs)
    assert not x.any()
    assert not prog.running


# ------------------------------------------------------------------------------------------
# Construction errors: the eager binding's, prefixed with the node


def _eager_error(name, args):
    with pytest.raises(Exception) as ei:
        getattr(C, name)(*args)
    return ei.value


def _check_same_error(name, args):
    """As node 1 (after a good node), the eager error with "Program node 1 (name): "."""
    e = _eager_error(name, args)
    good = ("unary", (C.UNARY_NEG, np.ones(3), np.zeros(3)))
    with pytest.raises(Exception) as ei:
        C.Program([good, (name, args)])
    assert type(ei.value) is type(e)
    assert str(ei.value) == f"Program node 1 ({name}): {e}"
    return e


def _bad_cases():
    f32 = np.ones((4, 4), np.float32)
    o32 = np.zeros((4, 4), np.float32)
    ro = np.zeros((4, 4), np.float32)
    ro.flags.writeable = False
    ok_gemm = (f32, f32, o32, 1, 4, 4, 4, 0, 0, 1.0, 0.0, 0, 0, 0, None, -1)
    return {
        "format": ("gemm_ex", (np.ones((4, 4), np.float16), *ok_gemm[1:]), TypeError),
        "mixed_formats": ("binary", (C.BINARY_ADD, f32, np.ones(4), o32), TypeError),
        "too_small": ("gemm_ex", (f32, f32, np.zeros(15, np.float32), *ok_gemm[3:]), ValueError),
        "too_small_reduce": (
            "reduce",
            (C.REDUCE_SUM, np.ones(5), np.zeros(1), 2, 3, 1),
            ValueError,
        ),
        "nargs": ("gemm_ex", ok_gemm[:14], TypeError),
        "bad_op": ("unary", (10_000, f32, o32), ValueError),
        "bad_act": ("gemm_ex", (*ok_gemm[:15], 12345), ValueError),
        "read_only_out": ("softmax", (f32, ro, 4, 4, 1, 0), ValueError),
        "non_contiguous_out": (
            "binary",
            (C.BINARY_ADD, f32, f32, np.zeros((4, 8), np.float32)[:, ::2]),
            ValueError,
        ),
        "overlap": ("gemm", (f32, f32, f32, 1, 4, 4, 4, 0, 0, 1.0, 0.0, 0, 0, 0), ValueError),
        "not_a_buffer": ("copy", ([1.0], np.zeros(1)), TypeError),
        "gather_shapes": (
            "gather",
            (f32, np.zeros((4, 5), np.int64), np.zeros((4, 5), np.float32), 0),
            ValueError,
        ),
        "shape_mismatch": ("copy", (np.ones(3), np.zeros(4)), ValueError),
        "cast_overlap": ("cast", (f32, f32.view(np.int32)), ValueError),
        "cast_dtype": ("cast", (f32, np.zeros(f32.shape, np.float16)), TypeError),
        "bad_geometry": (
            "im2col",
            (np.ones(10), np.zeros(10), 1, 1, 2, 2, 5, 5, 1, 1, 0, 0, 1, 1),
            ValueError,
        ),
        "bad_int": (
            "max_pool2d",
            (
                np.ones(4),
                np.zeros(1),
                np.zeros(1, np.int64),
                1,
                2,
                2,
                2,
                2,
                2,
                2,
                0,
                0,
                1,
                1,
                "x",
                1,
            ),
            TypeError,
        ),
    }


@pytest.mark.parametrize("case", sorted(_bad_cases()))
def test_construction_error_is_the_eager_one(case):
    name, args, exc = _bad_cases()[case]
    e = _check_same_error(name, args)
    assert isinstance(e, exc)


def test_special_node_errors():
    with pytest.raises(
        ValueError,
        match=r"Program node 0: unknown node kind 'gemm3'; known: input, output, python, gemm",
    ):
        C.Program([("gemm3", ())])
    with pytest.raises(TypeError, match=r"Program node 1: expected a \(name: str, args: tuple\)"):
        C.Program([("python", ()), ("python", [])])
    with pytest.raises(TypeError, match=r"Program node 0: expected"):
        C.Program([("python",)])
    with pytest.raises(TypeError):
        C.Program(3)
    with pytest.raises(TypeError, match=r"Program node 0 \(python\): python\(\) takes exactly 0"):
        C.Program([("python", (1,))])
    with pytest.raises(
        ValueError,
        match=r"Program node 0 \(input\): input: 'dst' \(shape \(2, 2\)\) must be C-contiguous",
    ):
        C.Program([("input", (0, np.zeros((2, 4))[:, ::2]))])
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(
        ValueError, match=r"Program node 0 \(input\): input: output 'dst' is read-only"
    ):
        C.Program([("input", (0, ro))])
    with pytest.raises(ValueError, match=r"Program node 0 \(output\): output: 'k' must be >= 0"):
        C.Program([("output", (-1, np.zeros(3)))])
    with pytest.raises(
        TypeError, match=r"Program node 0 \(output\): output: 'src' must be a plain"
    ):
        C.Program([("output", (0, np.array([None, 1], dtype=object)))])


def test_run_time_kernel_error_names_the_node():
    """A kernel failing at run time (here max_pool2d_backward's index check) raises the eager
    binding's exception with the node's index."""
    planes, h, w = POOL[:3]
    oh, ow = POOL[-2:]
    g, idx, gx = (
        np.ones((planes, oh, ow)),
        np.zeros((planes, oh, ow), np.int64),
        np.zeros((planes, h, w)),
    )
    nodes = [("python", ()), ("max_pool2d_backward", (g, idx, gx, *POOL))]
    prog = C.Program(nodes)
    assert prog.run((), (), 1) == -1
    idx[0, 0, 0] = h * w
    e = _eager_error(*nodes[1])
    assert isinstance(e, IndexError)
    with pytest.raises(IndexError) as ei:
        prog.run((), (), 1)
    assert str(ei.value) == f"Program node 1 (max_pool2d_backward): {e}"
    assert not prog.running


def test_gather_index_checked_at_each_run():
    """gather's index is data (a model's token ids): a run with one out of range raises the
    eager binding's IndexError, and the next good run works."""
    x, idx, out = np.arange(10.0).reshape(5, 2), np.zeros((3, 2), np.int64), np.zeros((3, 2))
    prog = C.Program([("gather", (x, idx, out, 0))])
    idx[:] = [[4, 0], [1, 2], [3, 3]]
    assert prog.run((), ()) == -1
    np.testing.assert_array_equal(out, [[8, 1], [2, 5], [6, 7]])
    idx[1, 1] = 5
    with pytest.raises(IndexError, match=r"Program node 0 \(gather\): gather\(\): index values"):
        prog.run((), ())
    idx[1, 1] = 0
    assert prog.run((), ()) == -1


# ------------------------------------------------------------------------------------------
# Lifetime and threads


def test_program_keeps_its_buffers_alive():
    rng = np.random.default_rng(5)
    arena = np.zeros(4096, np.uint8)
    x = arena[:96].view(np.float32).reshape(4, 6)
    h = arena[128:208].view(np.float32).reshape(4, 5)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    wref = weakref.ref(w)
    prog = C.Program(
        [
            ("input", (0, x)),
            ("gemm", (x, w, h, 1, 4, 5, 6, 0, 0, 1.0, 0.0, 0, 0, 0)),
            ("output", (0, h)),
        ]
    )
    w_copy = w.copy()
    del arena, x, h, w
    gc.collect()
    assert wref() is not None
    for _ in range(2):
        xin = rng.standard_normal((4, 6)).astype(np.float32)
        want = np.zeros((4, 5), np.float32)
        C.gemm(xin, w_copy, want, 1, 4, 5, 6, 0, 0, 1.0, 0.0, 0, 0, 0)
        out = np.zeros((4, 5), np.float32)
        assert prog.run((xin,), (out,)) == -1
        assert np.array_equal(out, want)
        gc.collect()
    del prog
    gc.collect()
    assert wref() is None  # the program released its buffers


def test_failed_construction_releases_buffers():
    w = np.ones(3)
    wref = weakref.ref(w)
    with pytest.raises(TypeError):
        C.Program([("unary", (C.UNARY_NEG, w, w)), ("copy", (w, np.zeros(3, np.float32)))])
    del w
    gc.collect()
    assert wref() is None


def test_concurrent_run_raises():
    """Thread A runs a long program.  Once the main thread sees it running it keeps the GIL (the
    switch interval is huge, so A cannot take it back), and A clears its busy flag only after
    re-taking the GIL: the main thread's run deterministically finds the flag set.  A run that
    ends before the main thread looks is simply retried."""
    n = 384
    a, b = np.ones((n, n)), np.ones((n, n))
    cs = [np.zeros((n, n)) for _ in range(8)]
    prog = C.Program([("gemm", (a, b, c, 1, n, n, n, 0, 0, 1.0, 0.0, 0, 0, 0)) for c in cs])
    other = C.Program([("gemm", (a, b, np.zeros((n, n)), 1, n, n, n, 0, 0, 1.0, 0.0, 0, 0, 0))])
    results = []
    old = sys.getswitchinterval()
    seen = False
    try:
        sys.setswitchinterval(1000.0)
        for _ in range(50):
            t = threading.Thread(target=lambda: results.append(prog.run((), ())))
            t.start()
            while not prog.running and t.is_alive():
                time.sleep(0.0002)
            if prog.running:
                with pytest.raises(
                    RuntimeError,
                    match="already running in another thread; use one Program per thread",
                ):
                    prog.run((), ())
                assert other.run((), ()) == -1  # another program is free
                seen = True
            t.join()
            if seen:
                break
    finally:
        sys.setswitchinterval(old)
    assert seen, "the long run was never observed in flight"
    assert results and all(r == -1 for r in results)
    assert not prog.running
    assert prog.run((), ()) == -1
    assert all(np.array_equal(c, np.full((n, n), float(n))) for c in cs)


def test_len_names_repr():
    x = np.zeros(4)
    prog = C.Program(
        [("input", (2, x)), ("unary", (C.UNARY_EXP, x, x)), ("python", ()), ("output", (0, x))]
    )
    assert len(prog) == 4
    assert prog.names == ("input", "unary", "python", "output")
    assert (prog.n_inputs, prog.n_outputs) == (3, 1)
    assert repr(prog) == "<gpucore._cpu.Program: 4 nodes, 3 inputs, 1 outputs>"
