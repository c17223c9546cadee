"""The saved model's C section: the compiled CPU program as plain integers, for ``gc_model_load``
(the C API, gpucore/include/gpucore.h) which runs a saved model without Python.

``section(model, tensor_of)`` plans the model for the CPU as the compiled executor does (passes,
planner, lowering: the node calls a ``gpucore._cpu.Program`` runs, except that hidden activations
between chained Linears stay in the plain layout: planner/layout.py's transposed chains need
gemm_ex's ``bias_rows``, which the C API's nodes do not take; the same bits, without that
speed-up), then writes
each node as integers into one int64 tensor, ``program``::

    header   MAGIC, VERSION, arena_bytes, n_consts, n_inputs, n_outputs, n_nodes
    consts   per constant: dtype, byte size
    inputs   per input:  dtype, ndim, sizes...        (names: section["names"])
    outputs  per output: dtype, ndim, sizes...
    nodes    per node: KIND, nargs, then each argument:
               NONE 0 | INT 1, value | FLOAT 2, IEEE bits of the double |
               BUF 3, region (-1: the arena, k >= 0: constant k), byte offset, dtype, ndim,
                      sizes..., byte strides... |
               PACKED 4, region (a constant), byte offset, dtype, side (0: a, 1: b), rows,
                      cols, trans, swap: a pre-packed GEMM operand (gemm_ex a / b,
                      conv2d_forward w; swap 2: a 3x3 weight transformed for Winograd),
                      which gc_model_load packs the same way |
               QPACKED 5, region (a constant), byte offset, k, n, trans: int8 weights packed
                      by ``_cpu.qgemm_pack(w, k, n, trans)`` (qgemm, qconv2d), stored as the
                      plain int8 constant and packed at load for the ISA in use

``names`` is a uint8 tensor: the constants' tensor names in the file, the input names, then the
output names, each ending in a zero byte. The constants are the planned graph's: one that is a
saved weight (the same memory) is named ``weights.<name>`` (stored once in the file); others
(folded by the passes) are added to the section as ``c<k>`` (named ``capi.c<k>`` in the file).
Dtypes are gc_dtype codes (the order of gpucore.dtypes.ALL). Node kinds are ``KINDS``, fixed
numbers written once in cpu/opcodes.def (GC_NODE_KIND) and never renumbered.

None when the model cannot run from C: dynamic sizes without example sizes, a step without a
lowering (it runs in Python), a node kind C does not run, or a strided output.
"""

from __future__ import annotations

import struct

import numpy as np

from .. import _cpu as _C
from .. import dtypes as D
from ..tensor import Tensor
from .capture.dynamic import specialize
from .executors.cpu import _arena, bind_arrays, lower_step
from .ir import packing, quantized
from .ir.shapes import check_shapes
from .passes import optimize as run_passes
from .planner.plan import plan as make_plan

MAGIC = 0x67637072  # "gcpr"
VERSION = 1
# node kinds and argument tags: cpu/opcodes.def's GC_NODE_KIND / GC_NODE_ARG (never renumbered)
KINDS = dict(_C.OPCODES["node_kind"])
_ARG = _C.OPCODES["node_arg"]
NONE, INT, FLOAT, BUF = _ARG["NONE"], _ARG["INT"], _ARG["FLOAT"], _ARG["BUF"]
PACKED, QPACKED = _ARG["PACKED"], _ARG["QPACKED"]
# keyed by the arrays' numpy dtype: a uint16 array may be bfloat16 or uint16, so neither has one
DTYPE_CODE = {d.np: i for i, d in enumerate(D.ALL) if d.np != np.uint16}


def _plan(model):
    if model.symbols:
        sizes = model._example_sizes
        if sizes is None:
            return None
        graph = specialize(model.symbolic, sizes)
    else:
        graph = model.symbolic.copy()
    check_shapes(graph)
    if model.optimize:
        run_passes(graph)
    return make_plan(graph)


def _unpacked() -> dict:
    """id(PackedMatrix) -> (owner array, byte offset of the packed view in it); id(QPackedMatrix)
    -> (the int8 weight constant it was packed from, 0)."""
    out = {}
    with packing._lock:
        for ref, layouts in packing._cache.values():
            owner = ref()
            if owner is not None:
                for layout, pm_ref in layouts.items():
                    pm = pm_ref()
                    if pm is not None:
                        out[id(pm)] = (owner, layout[0])
    with quantized._lock:
        for ref, pm in quantized._cache.values():
            w = ref()
            if w is not None:
                out[id(pm)] = (w, 0)
    return out


class _Encoder:
    def __init__(self, arena: np.ndarray, consts: list):
        self.arena = arena
        self.a0 = arena.__array_interface__["data"][0]
        self.consts = consts  # [(array, start address)]
        self.words: list = []
        self.packed = None

    def region(self, addr: int, nbytes: int) -> tuple:
        if self.a0 <= addr and addr + nbytes <= self.a0 + self.arena.nbytes:
            return -1, addr - self.a0
        for k, (arr, start) in enumerate(self.consts):
            if start <= addr and addr + nbytes <= start + arr.nbytes:
                return k, addr - start
        raise LookupError("a buffer outside the arena and the constants")

    def buf(self, a: np.ndarray) -> None:
        code = DTYPE_CODE.get(a.dtype)
        if code is None:
            raise LookupError(f"dtype {a.dtype}")
        addr = a.__array_interface__["data"][0]
        lo = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides) if n > 0)
        hi = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides) if n > 0)
        region, off = self.region(addr + lo, hi - lo + a.itemsize if a.size else 0)
        self.words += [BUF, region, off - lo, code, a.ndim, *a.shape, *a.strides]

    def arg(self, v) -> None:
        if v is None:
            self.words.append(NONE)
        elif isinstance(v, np.ndarray):
            self.buf(v)
        elif isinstance(v, (bool, int, np.integer)):
            self.words += [INT, int(v)]
        elif isinstance(v, (float, np.floating)):
            self.words += [FLOAT, struct.unpack("<q", struct.pack("<d", float(v)))[0]]
        else:
            if self.packed is None:
                self.packed = _unpacked()
            owner, off = self.packed[id(v)]  # a (Q)PackedMatrix: its constant, packed at load
            if type(v).__name__ == "QPackedMatrix":  # (_cpu does not export the type)
                self.qpacked(v, owner)
                return
            region, base = self.region(owner.__array_interface__["data"][0], owner.nbytes)
            side = {"a": 0, "b": 1}[v.side]
            self.words += [PACKED, region, base + off, DTYPE_CODE[owner.dtype], side]
            self.words += [v.rows, v.cols, v.trans, v.swap]

    def qpacked(self, v, w: np.ndarray) -> None:
        """int8 weights ``w`` (its k * n bytes, C-contiguous) that ``v`` was packed from."""
        if w.dtype != np.int8 or not w.flags.c_contiguous or w.size != v.k * v.n:
            raise LookupError("a packed int8 weight without its int8 constant")
        region, off = self.region(w.__array_interface__["data"][0], w.nbytes)
        if region < 0:
            raise LookupError("a packed int8 weight in the arena")
        self.words += [QPACKED, region, off, v.k, v.n, v.trans]


def _key(a: np.ndarray) -> tuple:
    return a.__array_interface__["data"][0], a.nbytes, a.dtype.str


def section(model, weights: dict, prefix: str = "capi") -> dict | None:
    """The C section of ``model``'s saved file (see the module docstring), or None; ``weights``
    maps each saved weight's name (the file's ``weights.<name>``) to its array."""
    plan = _plan(model)
    if plan is None:
        return None
    graph = plan.graph
    arena = _arena(plan.arena_bytes)
    arrays, scratch = bind_arrays(plan, arena)
    calls = [("input", (k, arrays[n])) for k, n in enumerate(graph.inputs)]
    for step, sc in zip(plan.steps, scratch):
        if step.kind != "view":
            lowered = lower_step(step, arrays, sc)
            if lowered is None:
                return None
            calls += lowered
    for k, name in enumerate(graph.outputs):
        if not arrays[name].flags.c_contiguous:
            return None
        calls.append(("output", (k, arrays[name])))
    consts = []
    for t in graph.tensors.values():
        if t.data is not None:
            c = np.require(t.data, requirements="C")
            consts.append((c, c.__array_interface__["data"][0]))
    enc = _Encoder(arena, consts)
    try:
        for name, args in calls:
            if name not in KINDS:
                return None
            enc.words += [KINDS[name], len(args)]
            for v in args:
                enc.arg(v)
    except (LookupError, KeyError):
        return None
    head = [MAGIC, VERSION, plan.arena_bytes, len(consts), len(graph.inputs), len(graph.outputs)]
    head.append(len(calls))
    for c, _ in consts:
        head += [DTYPE_CODE[c.dtype], c.nbytes]
    specs = []
    for name in graph.inputs + graph.outputs:
        info = graph.tensors[name]
        specs += [DTYPE_CODE[info.dtype.np], len(info.shape), *map(int, info.shape)]
    words = np.array(head + specs + enc.words, np.int64)
    saved = {_key(a): f"weights.{n}" for n, a in weights.items()}
    out = {"program": Tensor._wrap(words, D.int64)}
    const_names = []
    for k, (c, _) in enumerate(consts):
        name = saved.get(_key(c))
        if name is None:
            name = f"{prefix}.c{k}"
            out[f"c{k}"] = Tensor._wrap(c, D.from_numpy_dtype(c.dtype))
        const_names.append(name)
    names = b"".join(n.encode("utf-8") + b"\0" for n in const_names + graph.inputs + graph.outputs)
    out["names"] = Tensor._wrap(np.frombuffer(names, np.uint8).copy(), D.uint8)
    return out
