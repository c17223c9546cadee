"""The io nodes that list kernel nodes (gpucore._cpu.Program, cpu/python/program.c's relocate):
the listed kernels read a run input / write a run output in place when it is aligned, through
the data pointer fields their kinds declare (nodes.h's GC_NODE_KIND_IO, GC_NODE_PTR for a field
exec reads, GC_NODE_OUT for one it writes). A run never writes a caller's input: an input may
not list a node writing into its buffer (ValueError naming the node and field), and run inputs
are acquired read-only; io nodes listing nodes need disjoint buffers."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from program_cases import CASES, DTYPES, Arena

from gpucore import _cpu as C

ROOT = Path(__file__).resolve().parents[3]


def _eager(nodes):
    for name, args in nodes:
        getattr(C, name)(*args)


def _aligned(n):
    raw = np.zeros(n + 16, np.float32)
    start = (-raw.ctypes.data % 64) // 4
    return raw[start : start + n]


def test_io_nodes_with_readers_use_the_run_buffers_in_place():
    """('input', (k, dst, nodes)) / ('output', (k, src, nodes)): the listed kernels read the run
    input and write the run output themselves when those are item-aligned (dst and src are not
    touched), and fall back to the copies otherwise, with the same bits; an io node without
    nodes after one with them keeps its own copy."""
    arena = _aligned(64)
    a, h, o = arena[:15], arena[16:31], arena[32:47]
    prog = C.Program(
        [
            ("input", (0, a, (1,))),
            ("unary", (C.UNARY_EXP, a, h)),
            ("unary", (C.UNARY_TANH, h, o)),
            ("output", (0, h)),
            ("output", (1, o, (2,))),
        ]
    )
    x = np.random.default_rng(0).standard_normal(15).astype(np.float32)
    want_h, want_o = np.empty_like(x), np.empty_like(x)
    C.unary(C.UNARY_EXP, x, want_h)
    C.unary(C.UNARY_TANH, want_h, want_o)
    out_h, out_o = np.empty_like(x), np.empty_like(x)
    assert prog.run((x,), (out_h, out_o)) == -1
    assert out_h.tobytes() == want_h.tobytes() and out_o.tobytes() == want_o.tobytes()
    assert not a.any() and not o.any()  # read and written in place: no copy in or out
    raw = np.zeros(61, np.uint8)
    xm = np.frombuffer(raw.data, np.float32, 15, offset=1)
    xm[:] = x
    om = np.frombuffer(bytearray(61), np.float32, 15, offset=1)
    out_h[:] = 0
    assert prog.run((xm,), (out_h, om)) == -1
    assert om.tobytes() == want_o.tobytes() and out_h.tobytes() == want_h.tobytes()
    assert a.tobytes() == x.tobytes() and o.tobytes() == want_o.tobytes()  # the copies
    with pytest.raises(ValueError, match="not a kernel node"):
        C.Program([("input", (0, a, (0,)))])


def test_io_kinds_are_node_kinds():
    kinds = C.Program.io_kinds()
    assert set(kinds) <= set(C.Program.node_kinds())
    assert {"gemm", "gemm_ex", "unary", "binary", "copy", "layer_norm"} <= set(kinds)


@pytest.mark.parametrize("dt", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("kind", sorted(C.Program.io_kinds()))
def test_io_kind_declares_every_pointer_field(kind, dt):
    """The kind's case with the whole arena as an output node listing every node: the kernels
    must read and write the run buffer alone. A data pointer the kind does not declare
    (nodes.h's GC_NODE_KIND_IO) would still point into the arena, which holds NaN bytes here:
    it would read them, or write there instead of the run buffer."""
    ar = Arena(seed=sorted(CASES).index(kind))
    nodes = CASES[kind](ar, dt)
    prog = C.Program([*nodes, ("output", (0, ar.buf, tuple(range(len(nodes)))))])
    # the run buffer at the arena's address modulo 64 (the kernels' pointers keep alignment)
    raw = np.empty(ar.buf.size + 64, np.uint8)
    start = (ar.buf.ctypes.data - raw.ctypes.data) % 64
    out = raw[start : start + ar.buf.size]
    for _ in range(2):  # the second run repoints the same fields again
        before = ar.buf.copy()
        _eager(nodes)
        want = ar.buf.copy()
        out[:] = before
        ar.buf[:] = 0xFF
        assert prog.run((), (out,)) == -1
        assert np.array_equal(out, want), f"{kind}: the in-place run differs from eager"
        assert (ar.buf == 0xFF).all(), f"{kind}: a kernel wrote the arena"
        ar.buf[:] = before
        ar.refill()


def test_io_nodes_may_list_io_kinds_only():
    ar = Arena(seed=5)
    nodes = CASES["im2col"](ar, np.float32)
    assert "im2col" not in C.Program.io_kinds()
    with pytest.raises(ValueError, match="'im2col' declares no pointer fields"):
        C.Program([*nodes, ("output", (0, ar.buf, (0,)))])


def test_run_buffers_that_share_memory_keep_the_copies():
    """Output 0 given the input's own array: in place, exp would overwrite x before tanh reads
    it; the program sees the shared bytes and copies instead."""
    arena = _aligned(64)
    a, e, t = arena[:15], arena[16:31], arena[32:47]
    prog = C.Program(
        [
            ("input", (0, a, (1, 2))),
            ("unary", (C.UNARY_EXP, a, e)),
            ("unary", (C.UNARY_TANH, a, t)),
            ("output", (0, e, (1,))),
            ("output", (1, t, (2,))),
        ]
    )
    x = np.random.default_rng(1).standard_normal(15).astype(np.float32)
    want_e, want_t = np.empty_like(x), np.empty_like(x)
    C.unary(C.UNARY_EXP, x, want_e)
    C.unary(C.UNARY_TANH, x, want_t)
    buf, other = x.copy(), np.empty_like(x)
    assert prog.run((buf,), (buf, other)) == -1
    assert buf.tobytes() == want_e.tobytes() and other.tobytes() == want_t.tobytes()
    assert a.tobytes() == x.tobytes()  # x went through the copy


def test_input_may_not_list_a_node_writing_its_buffer():
    """A kernel writing into the input's buffer would, read in place, write the caller's array
    (or fault on a read-only mapping): refused at construction, naming the node and its
    written field, for each kind's written field (unary's and binary's out, gemm's c, copy's
    dst), in place over its operand too."""
    buf = _aligned(32)
    x, y = buf[:8], buf[8:16]
    sq = [buf[k : k + 4].reshape(2, 2) for k in (0, 4, 8)]
    refused = [
        ("unary", (C.UNARY_EXP, x, x), "out"),
        ("unary", (C.UNARY_EXP, x, y), "out"),
        ("binary", (C.BINARY_ADD, x, x, y), "out"),
        ("gemm", (*sq, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0), "c"),
        ("copy", (x, y), "dst"),
    ]
    for kind, args, field in refused:
        with pytest.raises(
            ValueError,
            match=rf"Program node 0 \(input\): nodes: node 1 \({kind}\) writes its field "
            rf"'{field}' into this input's buffer, and a run never writes a caller's input",
        ):
            C.Program([("input", (0, buf, (1,))), (kind, args), ("output", (0, buf))])
    other = _aligned(32)  # the same node writing outside the input's buffer is accepted
    C.Program([("input", (0, buf, (1,))), ("unary", (C.UNARY_EXP, x, other[:8]))])


@pytest.mark.parametrize("kind", sorted(C.Program.io_kinds()))
def test_every_io_kind_marks_a_written_field(kind):
    """Each io kind's case writes into its arena: an input whose buffer is that arena, listing
    every node, is refused (a kind whose written field were declared with GC_NODE_PTR would be
    accepted and its run would write the caller's input)."""
    ar = Arena(seed=sorted(CASES).index(kind))
    nodes = CASES[kind](ar, np.float32)
    with pytest.raises(ValueError, match=r"writes its field '(out|dst|c)' into this input"):
        C.Program([("input", (0, ar.buf, tuple(range(1, len(nodes) + 1)))), *nodes])


def test_read_only_input_is_read_in_place():
    """A run input mapped PROT_READ (writing it would fault) is read in place by the listed
    readers: the result is the eager one and the file's bytes are unchanged."""
    arena = _aligned(64)
    a, h = arena[:8], arena[16:24]
    prog = C.Program(
        [("input", (0, a, (1,))), ("unary", (C.UNARY_EXP, a, h)), ("output", (0, h, (1,)))]
    )
    x = (np.arange(8, dtype=np.float32) - 3) / 4
    want = np.empty_like(x)
    C.unary(C.UNARY_EXP, x, want)
    fd = os.memfd_create("program_io") if hasattr(os, "memfd_create") else None
    if fd is None:
        pytest.skip("no memfd_create")
    try:
        os.write(fd, x.tobytes())
        mm = mmap.mmap(fd, x.nbytes, prot=mmap.PROT_READ)
        xr = np.frombuffer(mm, np.float32)
        assert not xr.flags.writeable
        out = np.zeros(8, np.float32)
        assert prog.run((xr,), (out,)) == -1
        assert out.tobytes() == want.tobytes() and xr.tobytes() == x.tobytes()
        assert not a.any()  # read in place: no copy into the arena
        del xr
        mm.close()
    finally:
        os.close(fd)


def test_overlapping_io_buffers_may_not_share_a_node():
    """Two io nodes listing nodes whose buffers overlap, one kernel node with a field in both:
    the later relocation of the shared word would replace the earlier (exp would read the
    output's run buffer): refused, naming the node. Different nodes in overlapping buffers are
    the arena reusing a dead input's memory for an output: accepted, each run buffer serving
    its own nodes, with the eager results."""
    arena = _aligned(64)
    a, h = arena[:8], arena[16:24]
    for other, xin in ((a, a), (arena[4:12], arena[4:8])):
        with pytest.raises(
            ValueError,
            match=r"Program node 3 \(output\): node 1 \(unary\) uses this buffer and node 0's "
            r"\(input\), which overlap: a kernel node's fields may lie in one io buffer only",
        ):
            C.Program(
                [
                    ("input", (0, a, (1,))),
                    ("unary", (C.UNARY_EXP, xin, h[: xin.size])),
                    ("unary", (C.UNARY_TANH, h, other)),
                    ("output", (0, other, (1, 2))),
                ]
            )
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    keep, e, t = x.copy(), np.empty_like(x), np.empty_like(x)
    C.unary(C.UNARY_EXP, x, e)
    C.unary(C.UNARY_TANH, e, t)
    reuse = C.Program(
        [
            ("input", (0, a, (1,))),
            ("unary", (C.UNARY_EXP, a, h)),
            ("unary", (C.UNARY_TANH, h, a)),  # over the dead input
            ("output", (0, a, (2,))),
            ("output", (1, h, ())),  # an empty nodes tuple lists nothing: a copy
        ]
    )
    for xr in (x, _misaligned(x)):  # in place, then through the copies
        o0, o1 = np.zeros_like(x), np.zeros_like(x)
        assert reuse.run((xr,), (o0, o1)) == -1
        assert o0.tobytes() == t.tobytes() and o1.tobytes() == e.tobytes()
        assert xr.tobytes() == keep.tobytes()


def _misaligned(x):
    raw = np.zeros(x.nbytes + 1, np.uint8)
    y = np.frombuffer(raw.data, x.dtype, x.size, offset=1)
    y[:] = x
    return y


def test_nodes_tuple_errors_name_the_io_node_once():
    a, h = _aligned(8), _aligned(8)
    with pytest.raises(TypeError) as info:
        C.Program([("input", (0, a, ("a",))), ("unary", (C.UNARY_EXP, a, h))])
    assert str(info.value) == "Program node 0 (input): input: 'nodes' must be an int, got str"
    with pytest.raises(ValueError, match=r"Program node 0 \(input\): nodes: 5 is not a kernel"):
        C.Program([("input", (0, a, (5,))), ("unary", (C.UNARY_EXP, a, h))])


_SNIPPET = """#include "python/nodes.h"
typedef struct { const void *x; void *out; Py_ssize_t n; } t_node;
static const gc_node_ptr t_ptrs[] = {GC_NODE_PTR(t_node, x), GC_NODE_OUT(t_node, out)%s};
const gc_node_ptr *t_use(void) { return t_ptrs; }
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_node_ptr_accepts_pointer_fields_only(tmp_path):
    """GC_NODE_PTR / GC_NODE_OUT compile for pointer fields and fail for an integer field of
    the same size (it would be 'relocated' as an address)."""
    cmd = ["cc", "-std=c11", "-fsyntax-only", f"-I{ROOT / 'cpu'}"]
    cmd.append(f"-I{sysconfig.get_paths()['include']}")
    for extra, ok in (("", True), (", GC_NODE_PTR(t_node, n)", False)):
        src = tmp_path / "snippet.c"
        src.write_text(_SNIPPET % extra)
        r = subprocess.run([*cmd, str(src)], capture_output=True, text=True)
        assert (r.returncode == 0) == ok, r.stderr
        if not ok:
            assert "unary" in r.stderr or "indirection" in r.stderr, r.stderr
