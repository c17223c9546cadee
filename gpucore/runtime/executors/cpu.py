"""The CPU executors: run a planned graph over one arena.

Both bind a plan to an arena once (every tensor an array at its planned offset, every view made,
every kernel's arguments fixed) and keep the bound runner for the next call:

- ``InterpretedExecutor``: a Python loop over the nodes' kernels (the same kernels eager
  gpucore runs), for debugging and ablations; the profiler times each node;
- ``CompiledExecutor``: the nodes' lowered binding calls recorded into one
  ``gpucore._cpu.Program``: a run copies the inputs in, runs every node and copies the outputs
  out in one C call with the GIL released. A node without a lowering runs its kernel from
  Python between two C calls (``Program.run`` stops at it). Where the plan allows
  (``direct_io``), the kernels read the caller's input and write the fresh result array in
  place instead of those copies.

The compiled executor lowers chained Linear layers with their hidden activations transposed in
the arena (planner/layout.py, ``fused.gemm_layout_calls``): the interpreted executor's bits.

Runs from several threads at once each get their own runner (arena and program); the only lock
guards the pool of idle runners, never a kernel.
"""

from __future__ import annotations

import threading
import weakref
from time import perf_counter

import numpy as np

from ... import _cpu
from ..ir.fused import gemm_layout_calls
from ..ir.ops import op_info
from ..planner.layout import transposed
from ..planner.plan import ALIGN, Plan
from ..planner.plan import plan as make_plan


def _arena(nbytes: int) -> np.ndarray:
    """A zeroed, 64-byte-aligned byte array (zeroed: a bug reading unwritten memory then reads
    zeros, not stale data of another run)."""
    raw = np.zeros(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + nbytes]


def bind_arrays(plan: Plan, arena: np.ndarray) -> tuple[dict, list]:
    """Every tensor of the plan as an array over ``arena`` (constants as the graph holds them),
    and each step's scratch arrays."""
    graph = plan.graph
    arrays: dict = {n: t.data for n, t in graph.tensors.items() if t.data is not None}

    def at(name: str, shape, npdtype) -> np.ndarray:
        return np.ndarray(shape, npdtype, buffer=arena, offset=plan.offset[plan.root[name]])

    for name in graph.inputs:
        info = graph.tensors[name]
        arrays[name] = at(name, info.shape, info.dtype.np)
    scratch = []
    for step in plan.steps:
        node = step.node
        info = graph.tensors[node.output]
        if step.kind == "view":
            arrays[node.output] = op_info(node.op).view(arrays[node.inputs[0]], node.attrs)
        else:
            arrays[node.output] = at(node.output, info.shape, info.dtype.np)
        scratch.append([at(name, shape, dt) for name, shape, dt in step.scratch])
    return arrays, scratch


class _Pool:
    """Idle runners of one executor; ``take`` makes a new one when all are busy. ``make`` (the
    executor's ``_bind``) is held weakly and runners hold no reference to their executor, so
    that a dropped model frees its arena and packed weights at once, not at the next cyclic
    garbage collection (a model loaded again then reuses the blocks warm: cpu/python/pack.c)."""

    def __init__(self, make):
        self._make = weakref.WeakMethod(make)
        self.idle: list = []
        self.lock = threading.Lock()
        self.created = 0

    def take(self):
        with self.lock:
            if self.idle:
                return self.idle.pop()
            self.created += 1
        return self._make()()

    def give(self, runner) -> None:
        with self.lock:
            self.idle.append(runner)


class _Executor:
    """What both CPU executors share: the plan, the pool, the run protocol."""

    name = "?"

    def __init__(self, plan: Plan):
        self.plan = plan
        self.graph = plan.graph
        self.pool = _Pool(self._bind)
        self.profile: dict | None = None  # node output -> [calls, seconds] when profiling
        self._out_specs = None

    def run(self, inputs: list) -> list:
        """Outputs (fresh arrays) for ``inputs`` (C-contiguous arrays of the graph's inputs'
        shapes and dtypes, already checked by the caller)."""
        runner = self.pool.take()
        try:
            return runner(inputs)
        finally:
            self.pool.give(runner)

    def _out_arrays(self) -> list:
        return [np.empty(shape, dt) for shape, dt in self._out_specs_of()]

    def _out_specs_of(self) -> list:
        specs = self._out_specs
        if specs is None:
            graph = self.graph
            specs = self._out_specs = [
                (graph.tensors[n].shape, graph.tensors[n].dtype.np) for n in graph.outputs
            ]
        return specs


def _thunk(step, arrays: dict, scratch: list, graph):
    """A no-argument callable running ``step`` on bound arrays (None for a view step)."""
    node = step.node
    if step.kind == "view":
        return None
    out = arrays[node.output]
    ins = [arrays[n] for n in node.inputs]
    if step.kind == "copy":
        src = op_info(node.op).view(ins[0], node.attrs)
        return lambda: np.copyto(out, src)
    info = op_info(node.op)
    dtypes = [graph.tensors[n].dtype for n in node.inputs]
    run = info.run
    attrs = node.attrs

    def call():
        run(out, ins, attrs, scratch, dtypes)

    return call


class InterpretedExecutor(_Executor):
    """A Python loop over the nodes' kernels (see the module docstring)."""

    name = "interpreted"

    def _bind(self):
        arena = _arena(self.plan.arena_bytes)
        arrays, scratch = bind_arrays(self.plan, arena)
        graph = self.graph
        thunks = []
        for step, sc in zip(self.plan.steps, scratch):
            t = _thunk(step, arrays, sc, graph)
            if t is not None:
                thunks.append((step.node.output, t))
        ins = [arrays[n] for n in graph.inputs]
        outs = [arrays[n] for n in graph.outputs]
        owner = weakref.ref(self)  # (not self: see _Pool)

        def runner(inputs):
            for dst, src in zip(ins, inputs):
                np.copyto(dst, src)
            prof = owner().profile
            if prof is None:
                for _, t in thunks:
                    t()
            else:
                for name, t in thunks:
                    t0 = perf_counter()
                    t()
                    rec = prof.setdefault(name, [0, 0.0])
                    rec[0] += 1
                    rec[1] += perf_counter() - t0
            return [np.array(o) for o in outs]

        runner.arena = arena
        return runner


def lower_step(step, arrays: dict, scratch: list, layout: tuple | None = None):
    """The binding calls of one step, or None when it must run from Python; ``layout``: the
    step's ``(in_t, out_t)`` of planner/layout.py's transposed chains."""
    node = step.node
    ins = [arrays[n] for n in node.inputs]
    out = arrays[node.output]
    if layout is not None:
        return gemm_layout_calls(out, ins, node.attrs, *layout)
    if step.kind == "copy":
        src = op_info(node.op).view(ins[0], node.attrs)
        if src.dtype.itemsize in (1, 2, 4, 8):
            return [("copy", (src, out))]
        return None
    lower = op_info(node.op).lower
    return None if lower is None else lower(out, ins, node.attrs, scratch)


# The node kinds that declare their structs' data pointer fields (cpu/python/nodes.h,
# GC_NODE_KIND_IO): the only ones Program can repoint at a run's buffers (program.c, relocate).
_IO_KINDS = frozenset(_cpu.Program.io_kinds())


def direct_io(plan: Plan, spans: list, arrays: dict, out_views: set) -> tuple[dict, dict]:
    """The Program node indices that use each graph input's / output's memory, for the inputs
    the kernels may read from the caller's array and the outputs they may write into the
    result array, skipping the copies; ``spans``: per step, None (a view) or
    ``(first, stop, call names)`` of its Program nodes (call names None: a python step).

    An allocation qualifies when it holds one graph input or output and nothing the run writes
    else: no in-place successor of an input (that would write the caller's array), no output
    that is an input's view or shares its memory with another output, an output that is its
    allocation whole; and every step touching it is lowered to io kinds (``Program.io_kinds()``)."""
    graph = plan.graph
    root = plan.root
    touching: dict = {}  # allocation -> the spans of the steps that read or write it
    for step, span in zip(plan.steps, spans):
        if span is None:
            continue
        node = step.node
        for r in {root.get(n) for n in (*node.inputs, node.output)} - {None}:
            touching.setdefault(r, []).append(span)
    out_roots = [root[n] for n in graph.outputs]
    rewritten = {root[o] for o in plan.inplace}

    def readers(r):
        spans_r = touching.get(r, [])
        if not spans_r or any(
            names is None or not set(names) <= _IO_KINDS for _, _, names in spans_r
        ):
            return None
        return tuple(i for first, stop, _ in spans_r for i in range(first, stop))

    ins = {}
    for name in graph.inputs:
        if name in out_roots or name in rewritten:
            continue
        nodes = readers(name)
        if nodes is not None:
            ins[name] = nodes
    outs = {}
    for name, r in zip(graph.outputs, out_roots):
        if name in out_views or r in graph.inputs or out_roots.count(r) > 1:
            continue
        if (
            arrays[name].nbytes != plan.nbytes[r]
            or arrays[name].ctypes.data != arrays[r].ctypes.data
        ):
            continue
        nodes = readers(r)
        if nodes is not None:
            outs[name] = nodes
    return ins, outs


class CompiledExecutor(_Executor):
    """The whole graph as one ``gpucore._cpu.Program`` (see the module docstring)."""

    name = "compiled"

    def __init__(self, plan: Plan):
        super().__init__(plan)
        self.python_steps = 0  # nodes without a lowering (reported by stats)
        self.pool.give(self.pool.take())  # bind one runner now: errors show here

    @classmethod
    def build(cls, graph) -> CompiledExecutor:
        """The executor of ``graph`` planned for direct input: no node writes over the memory
        of an input that the kernels read from the caller's array. The graph is planned with
        every input kept; when some input is not read in place after all (a reader without an
        io kind, a python step) and a plan writing over those inputs needs a smaller arena,
        the executor is built again on that plan (the planner alone decides it: cheap; the
        rebuild, which packs the weights again, only then)."""
        ex = cls(make_plan(graph, keep_inputs=graph.inputs))
        direct = ex.direct[0]
        if len(direct) < len(graph.inputs):
            p = make_plan(graph, keep_inputs=direct)
            if p.arena_bytes < ex.plan.arena_bytes:
                ex = cls(p)
        return ex

    def _bind(self):
        arena = _arena(self.plan.arena_bytes)
        arrays, scratch = bind_arrays(self.plan, arena)
        graph = self.graph
        nodes: list = []
        python: dict = {}
        layouts = transposed(self.plan)
        for k, name in enumerate(graph.inputs):
            nodes.append(("input", (k, arrays[name])))
        spans: list = []
        for step, sc in zip(self.plan.steps, scratch):
            if step.kind == "view":
                spans.append(None)
                continue
            first = len(nodes)
            calls = lower_step(step, arrays, sc, layouts.get(step.node.output))
            if calls is None:
                python[len(nodes)] = _thunk(step, arrays, sc, graph)
                nodes.append(("python", ()))
            else:
                nodes.extend(calls)
            spans.append((first, len(nodes), None if calls is None else [c[0] for c in calls]))
        out_views = []
        for k, name in enumerate(graph.outputs):
            src = arrays[name]
            if not src.flags.c_contiguous:
                out_views.append((k, src))  # copied from Python (a strided output view)
        skip = {graph.outputs[k] for k, _ in out_views}
        direct_in, direct_out = direct_io(self.plan, spans, arrays, skip)
        for k, name in enumerate(graph.inputs):
            if name in direct_in:
                nodes[k] = ("input", (k, arrays[name], direct_in[name]))
        for k, name in enumerate(graph.outputs):
            if name in skip:
                continue
            extra = (direct_out[name],) if name in direct_out else ()
            nodes.append(("output", (k, arrays[name], *extra)))
        self.direct = (sorted(direct_in), sorted(direct_out))  # (reported by tests)
        self.python_steps = len(python)
        program = _cpu.Program(nodes)

        specs = self._out_specs_of()

        def runner(inputs):
            outs = [np.empty(shape, dt) for shape, dt in specs]
            ins = tuple(inputs)
            o = tuple(outs)
            start = program.run(ins, o, 0)
            while start >= 0:
                python[start]()
                start = program.run(ins, o, start + 1)
            for k, src in out_views:
                np.copyto(outs[k], src)
            return outs

        runner.arena = arena
        runner.program = program
        return runner
