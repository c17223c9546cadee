"""The memory planner: where every tensor of a graph lives during a run.

- Constants (weights, folded values) live outside the arena, as the graph holds them.
- Views alias their source when the view is C-contiguous, or when every reader accepts its
  strides (gemm's transposed operands, attention's permuted heads); otherwise, and for graph
  outputs that are not contiguous, the view is copied into a buffer of its own.
- An elementwise node writes into the memory of a same-shaped, same-dtype input that dies at it
  (in place), when nothing else still reads that memory and it is not the memory of a graph
  input named in ``keep_inputs`` (the inputs that the compiled executor's kernels read from the
  caller's array in place: one copy less for, at most, one allocation more).
- Graph inputs, computed tensors and per-node scratch share one arena: each allocation lives from
  the step that writes it to the last step that reads it (or any view or in-place successor of
  it), and takes the lowest 64-byte-aligned offset that no allocation live at the same time uses
  (first fit in birth order). Graph outputs live to the end.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from ..ir.graph import Graph
from ..ir.ops import data_start, op_info, proto_array
from .order import memory_order

ALIGN = 64


class Step:
    """One node of the execution order: ``kind`` is "kernel" (runs the op), "view" (its output
    is a view of input 0's memory: nothing runs) or "copy" (a view op whose result is copied
    into its own memory)."""

    __slots__ = ("node", "kind", "scratch")

    def __init__(self, node, kind: str):
        self.node = node
        self.kind = kind
        self.scratch: list = []  # [(offset, shape, numpy dtype)]

    def __repr__(self) -> str:
        return f"<{self.kind} {self.node!r}>"


class Plan:
    """The result of ``plan``: the steps, the arena size, where each tensor lives."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps: list[Step] = []
        self.root: dict[str, str] = {}  # tensor -> the allocation whose memory it uses
        self.offset: dict[str, int] = {}  # allocation -> byte offset in the arena
        self.nbytes: dict[str, int] = {}  # allocation -> bytes
        self.lifetime: dict[str, tuple] = {}  # allocation -> (first step, last step)
        self.arena_bytes = 0
        self.inplace: dict[str, str] = {}  # node output -> the input whose memory it took

    def summary(self) -> str:
        kinds: dict = {}
        for s in self.steps:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        return (
            f"{len(self.steps)} steps {kinds}, arena {self.arena_bytes} bytes, "
            f"{len(self.inplace)} in place"
        )


def _nbytes(graph: Graph, name: str) -> int:
    info = graph.tensors[name]
    return info.dtype.itemsize * math.prod(info.shape)


def _view_kinds(graph: Graph, order: list) -> tuple[dict, set]:
    """node output -> "view" or "copy" for the view nodes, and the views that cover their whole
    source exactly (contiguous, offset 0: in-place writes through them are safe); data-less
    prototypes decide whether a view is contiguous and whether its readers accept its strides."""
    protos: dict = {}
    kinds: dict = {}
    exact: set = set()
    starts: dict = {}
    for node in order:
        info = op_info(node.op)
        out = graph.tensors[node.output]
        if info.view is None:
            continue
        src = node.inputs[0]
        if src not in protos:
            protos[src] = proto_array(graph.tensors[src].shape, graph.tensors[src].dtype.itemsize)
            starts[src] = data_start(protos[src])
        arr = info.view(protos[src], node.attrs)
        if graph.tensors[src].data is not None:
            kinds[node.output] = "copy"  # a view of a constant: copied once per run
            continue
        ok = arr.flags.c_contiguous
        if not ok and node.output not in graph.outputs:
            ok = all(
                op_info(r.op).strided_inputs is not None
                and all(
                    op_info(r.op).strided_inputs(r.attrs, i, arr)
                    for i, n in enumerate(r.inputs)
                    if n == node.output
                )
                for r in graph.readers(node.output)
            )
        kinds[node.output] = "view" if ok else "copy"
        if ok:
            protos[node.output] = arr
            starts[node.output] = starts[src]
            whole = data_start(arr) == starts[src]
            if arr.flags.c_contiguous and whole and (src in exact or src not in kinds):
                exact.add(node.output)
        else:
            protos[node.output] = proto_array(out.shape, out.dtype.itemsize)
            starts[node.output] = data_start(protos[node.output])
            exact.add(node.output)  # copied into an allocation of its own
    return kinds, exact


def plan(graph: Graph, inplace: bool = True, keep_inputs: Collection[str] = ()) -> Plan:
    """Plan ``graph`` (see the module docstring); ``inplace=False`` gives every computed tensor
    memory of its own (the Vulkan executor: its shaders are not written for aliased outputs);
    no node writes over the memory of the graph inputs in ``keep_inputs``."""
    keep = frozenset(keep_inputs)
    p = Plan(graph)
    order = memory_order(graph)
    kinds, exact = _view_kinds(graph, order)
    last_read: dict[str, int] = {}
    for i, node in enumerate(order):
        for name in node.inputs:
            last_read[name] = i
    end = len(order)
    for name in graph.outputs:
        last_read[name] = end
    members: dict[str, list] = {}  # allocation -> tensors using its memory

    def allocate(name: str, step: int) -> None:
        p.root[name] = name
        p.nbytes[name] = _nbytes(graph, name)
        p.lifetime[name] = (step, step)
        members[name] = [name]

    for name in graph.inputs:
        allocate(name, -1)
    for i, node in enumerate(order):
        info = op_info(node.op)
        kind = kinds.get(node.output, "kernel")
        p.steps.append(Step(node, kind))
        if kind == "view":
            root = p.root[node.inputs[0]]
            p.root[node.output] = root
            members[root].append(node.output)
            continue
        victim = (
            _inplace_victim(graph, p, node, i, last_read, members, exact, keep)
            if info.inplace and inplace
            else None
        )
        if victim is not None:
            root = p.root[victim]
            p.root[node.output] = root
            members[root].append(node.output)
            p.inplace[node.output] = victim
            exact.add(node.output)  # the victim's whole memory, in the same order
        else:
            allocate(node.output, i)
        if kind == "kernel" and info.scratch is not None:
            ins = [(graph.tensors[n].shape, graph.tensors[n].dtype) for n in node.inputs]
            out = graph.tensors[node.output]
            for j, (shape, npdt) in enumerate(
                info.scratch(node.attrs, ins, (out.shape, out.dtype))
            ):
                sname = f"{node.output}#scratch{j}"
                p.root[sname] = sname
                p.nbytes[sname] = np.dtype(npdt).itemsize * math.prod(shape)
                p.lifetime[sname] = (i, i)
                members[sname] = []
                p.steps[-1].scratch.append((sname, tuple(shape), np.dtype(npdt)))
    for root, names in members.items():
        if not names:
            continue
        first = p.lifetime[root][0]
        last = max(last_read.get(n, first) for n in names)
        p.lifetime[root] = (first, max(last, first))
    _assign_offsets(p)
    return p


def _inplace_victim(
    graph: Graph, p: Plan, node, i: int, last_read: dict, members: dict, exact, keep: frozenset
):
    """The input whose memory ``node`` may write its output into, or None: a tensor that is its
    allocation's whole memory in C order (the allocation itself or an exact view of it)."""
    out = graph.tensors[node.output]
    for name in node.inputs:
        info = graph.tensors[name]
        if info.data is not None or info.shape != out.shape or info.dtype is not out.dtype:
            continue
        root = p.root.get(name)
        if root is None or (name != root and name not in exact):
            continue  # a strided or partial view: its elements are not out's, in order
        if root in keep:
            continue  # a graph input read in place from the caller's array
        if p.nbytes[root] != _nbytes(graph, name):
            continue
        if any(last_read.get(n, -1) > i for n in members[root]):
            continue  # something still reads this memory after the node
        if any(n != name and p.root.get(n) == root for n in node.inputs):
            continue
        if name in graph.outputs or any(n in graph.outputs for n in members[root]):
            continue
        return name
    return None


def _assign_offsets(p: Plan) -> None:
    """First fit in birth order over the allocations' lifetimes (see the module docstring)."""
    placed: list = []  # (offset, size, first, last)
    top = 0
    for name in sorted(p.nbytes, key=lambda n: (p.lifetime[n][0], -p.nbytes[n])):
        size = -(-p.nbytes[name] // ALIGN) * ALIGN
        first, last = p.lifetime[name]
        busy = sorted((o, s) for o, s, f, la in placed if f <= last and first <= la)
        offset = 0
        for o, s in busy:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        p.offset[name] = offset
        placed.append((offset, size, first, last))
        top = max(top, offset + size)
    p.arena_bytes = top
