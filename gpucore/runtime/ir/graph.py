"""The runtime's graph IR: single-output nodes over named tensors.

One representation flows through the whole pipeline (capture, passes, planner, executors, the
saved file), as in the runtime seed and ONNX:

- a ``TensorInfo`` per tensor name: shape, dtype, and for constants (weights, folded values)
  the data; graph inputs and constants have no producer node;
- a ``Node`` computes exactly one tensor from named inputs: ``op`` names an entry of the runtime
  op table (gpucore/runtime/ir/ops.py: every registry op plus the runtime's fused ops) and
  ``attrs`` holds its keyword attributes. A registry op with several outputs is captured as one
  node per output used (``attrs["output_index"]``); the others become scratch;
- producer and consumer indices are kept up to date by the mutation methods, and the
  topological order is cached until the next mutation;
- ``output_tree`` (ir/output_tree.py): how the flat ``outputs`` nest into what the captured
  model returned, or None (one output as it is, several as a tuple).

Passes mutate a graph through ``add_node``, ``remove_node``, ``set_input``, ``replace_uses``
and ``add_constant`` only, so the indices never go stale.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from ...dtypes import dtype as DType
from ...dtypes import from_numpy_dtype
from ...errors import GpucoreError
from .output_tree import leaf_count


class GraphError(GpucoreError, ValueError):
    """A graph that breaks the IR's rules (a dangling name, a cycle, a duplicate output)."""


class TensorInfo:
    """Metadata of one named tensor; ``data`` is set for constants (weights included)."""

    __slots__ = ("name", "shape", "dtype", "data")

    def __init__(self, name: str, shape: tuple, dtype: DType, data: np.ndarray | None = None):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.data = data

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        kind = "const " if self.data is not None else ""
        return f"{kind}{self.name}: {self.dtype.name}{list(self.shape)}"


class Node:
    """One op application: ``output = op(*inputs, **attrs)``."""

    __slots__ = ("op", "inputs", "output", "attrs")

    def __init__(self, op: str, inputs: list, output: str, attrs: dict | None = None):
        self.op = op
        self.inputs = list(inputs)
        self.output = output
        self.attrs = dict(attrs or {})

    def __repr__(self) -> str:
        attrs = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
        return f"{self.output} = {self.op}({', '.join(self.inputs)}{attrs})"


class Graph:
    """A dataflow graph of single-output nodes; see the module docstring."""

    def __init__(self):
        self.tensors: dict[str, TensorInfo] = {}
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.output_tree = None  # the model's output structure (ir/output_tree.py)
        self.producer: dict[str, Node] = {}
        self.consumers: dict[str, list[Node]] = {}
        self._order: list[Node] | None = None
        self._names = itertools.count()

    # ------------------------------------------------------------------ building
    def fresh_name(self, hint: str = "t") -> str:
        """A tensor name not used yet in this graph."""
        while True:
            name = f"{hint}_{next(self._names)}"
            if name not in self.tensors:
                return name

    def add_tensor(self, name: str, shape: tuple, dtype: DType, data=None) -> TensorInfo:
        if name in self.tensors:
            raise GraphError(f"tensor {name!r} is defined twice")
        info = TensorInfo(name, shape, dtype, data)
        self.tensors[name] = info
        self.consumers.setdefault(name, [])
        return info

    def add_input(self, name: str, shape: tuple, dtype: DType) -> str:
        self.add_tensor(name, shape, dtype)
        self.inputs.append(name)
        return name

    def add_constant(self, data: np.ndarray, name: str | None = None, dtype=None) -> str:
        """A constant tensor holding ``data`` (kept as a C-contiguous array, marked read-only:
        the compiled executor packs constant GEMM operands once, ir/packing.py)."""
        data = np.require(data, requirements="C")  # (0-d stays 0-d)
        data.flags.writeable = False
        dt = dtype if dtype is not None else from_numpy_dtype(data.dtype)
        name = name or self.fresh_name("const")
        self.add_tensor(name, data.shape, dt, data)
        return name

    def add_node(
        self, op: str, inputs: list, shape: tuple, dtype: DType, attrs=None, output=None
    ) -> Node:
        """Append a node computing a new tensor (named ``output`` or a fresh name)."""
        for name in inputs:
            if name not in self.tensors:
                raise GraphError(f"{op}: input tensor {name!r} is not in the graph")
        output = output or self.fresh_name(op)
        self.add_tensor(output, shape, dtype)
        node = Node(op, inputs, output, attrs)
        self.nodes.append(node)
        self.producer[output] = node
        for name in inputs:
            self.consumers[name].append(node)
        self._order = None
        return node

    # ------------------------------------------------------------------ mutation
    def remove_node(self, node: Node) -> None:
        """Remove ``node`` and its output tensor (which must have no consumers left)."""
        if self.consumers.get(node.output) or node.output in self.outputs:
            raise GraphError(f"cannot remove {node!r}: its output is still used")
        self.nodes.remove(node)
        for name in node.inputs:
            lst = self.consumers[name]
            lst.remove(node)
        del self.producer[node.output]
        del self.tensors[node.output]
        del self.consumers[node.output]
        self._order = None

    def set_input(self, node: Node, index: int, name: str) -> None:
        """Make ``node`` read ``name`` as its input ``index``."""
        if name not in self.tensors:
            raise GraphError(f"tensor {name!r} is not in the graph")
        old = node.inputs[index]
        node.inputs[index] = name
        self.consumers[old].remove(node)
        self.consumers[name].append(node)
        self._order = None

    def set_inputs(self, node: Node, names: list) -> None:
        """Replace all of ``node``'s inputs."""
        for old in node.inputs:
            self.consumers[old].remove(node)
        node.inputs = list(names)
        for name in names:
            if name not in self.tensors:
                raise GraphError(f"tensor {name!r} is not in the graph")
            self.consumers[name].append(node)
        self._order = None

    def replace_uses(self, old: str, new: str) -> None:
        """Every reader of ``old`` (nodes and graph outputs) reads ``new`` instead."""
        for node in list(self.consumers[old]):
            for i, name in enumerate(node.inputs):
                if name == old:
                    node.inputs[i] = new
                    self.consumers[new].append(node)
            self.consumers[old].remove(node)
        self.outputs = [new if o == old else o for o in self.outputs]
        self._order = None

    def rename(self, old: str, new: str) -> None:
        """Rename tensor ``old`` to ``new`` everywhere (producer, readers, inputs, outputs)."""
        if new in self.tensors:
            raise GraphError(f"cannot rename {old!r} to {new!r}: the name is taken")
        info = self.tensors.pop(old)
        info.name = new
        self.tensors[new] = info
        self.consumers[new] = self.consumers.pop(old)
        for reader in self.consumers[new]:
            reader.inputs = [new if n == old else n for n in reader.inputs]
        node = self.producer.pop(old, None)
        if node is not None:
            node.output = new
            self.producer[new] = node
        self.inputs = [new if n == old else n for n in self.inputs]
        self.outputs = [new if n == old else n for n in self.outputs]
        self._order = None

    def bypass(self, node: Node, source: str) -> None:
        """Remove ``node``, its readers reading ``source`` instead; when node's output is a
        graph output, ``source`` takes its name (outputs keep their names through passes)."""
        out = node.output
        if out in self.outputs:
            self.outputs[self.outputs.index(out)] = source
            self.replace_uses(out, source)
            self.remove_node(node)
            self.rename(source, out)
            return
        self.replace_uses(out, source)
        self.remove_node(node)

    def remove_tensor(self, name: str) -> None:
        """Drop an unused constant (or input-less tensor without a producer)."""
        if self.consumers.get(name) or name in self.outputs or name in self.producer:
            raise GraphError(f"cannot remove tensor {name!r}: it is still used")
        if name in self.inputs:
            raise GraphError(f"cannot remove graph input {name!r}")
        del self.tensors[name]
        self.consumers.pop(name, None)

    # ------------------------------------------------------------------ queries
    def readers(self, name: str) -> list:
        """The distinct nodes reading ``name``."""
        out: list = []
        for node in self.consumers.get(name, ()):
            if all(node is not r for r in out):
                out.append(node)
        return out

    def is_constant(self, name: str) -> bool:
        return self.tensors[name].data is not None

    def sole_consumer(self, name: str) -> Node | None:
        """The one node reading ``name`` (possibly as several of its inputs), when exactly one
        does and it is not a graph output (the condition under which a fusion may make
        ``name`` disappear)."""
        readers = self.consumers.get(name, ())
        if not readers or name in self.outputs or any(r is not readers[0] for r in readers):
            return None
        return readers[0]

    def order(self) -> list[Node]:
        """The nodes in a topological order (cached; stable: capture order where possible)."""
        if self._order is None:
            self._order = self._topological()
        return self._order

    def _topological(self) -> list[Node]:
        ready = set(self.inputs) | {n for n, t in self.tensors.items() if t.data is not None}
        pending = {id(n): sum(1 for i in n.inputs if i not in ready) for n in self.nodes}
        done: list[Node] = []
        queue = [n for n in self.nodes if pending[id(n)] == 0]
        position = {id(n): i for i, n in enumerate(self.nodes)}
        heap = [(position[id(n)], id(n), n) for n in queue]
        heapq.heapify(heap)
        while heap:
            _, _, node = heapq.heappop(heap)
            done.append(node)
            for reader in self.consumers[node.output]:
                k = id(reader)
                pending[k] -= reader.inputs.count(node.output)
                if pending[k] == 0:
                    heapq.heappush(heap, (position[k], k, reader))
        if len(done) != len(self.nodes):
            stuck = [n for n in self.nodes if pending[id(n)] > 0][:3]
            raise GraphError(f"the graph has a cycle or an undefined input near {stuck}")
        return done

    def validate(self) -> None:
        """Check every rule of the IR (GraphError names the first broken one)."""
        for name in self.inputs:
            if name in self.producer or self.tensors[name].data is not None:
                raise GraphError(f"graph input {name!r} must have no producer and no data")
        for node in self.nodes:
            for name in node.inputs:
                if name not in self.tensors:
                    raise GraphError(f"{node!r} reads undefined tensor {name!r}")
            if self.producer.get(node.output) is not node:
                raise GraphError(f"{node!r}: producer index is stale")
        for name in self.outputs:
            if name not in self.tensors:
                raise GraphError(f"graph output {name!r} is not defined")
        if self.output_tree is not None:
            try:
                count = leaf_count(self.output_tree, len(self.outputs))
            except ValueError as e:
                raise GraphError(str(e)) from None
            if count != len(self.outputs):
                raise GraphError(
                    f"the output tree holds {count} outputs, the graph has {len(self.outputs)}"
                )
        self._order = None
        self.order()

    def copy(self) -> Graph:
        """A structural copy (constants' arrays shared, not copied)."""
        g = Graph()
        for info in self.tensors.values():
            if info.name not in self.producer:
                g.add_tensor(info.name, info.shape, info.dtype, info.data)
        g.inputs = list(self.inputs)
        for node in self.order():
            info = self.tensors[node.output]
            g.add_node(node.op, node.inputs, info.shape, info.dtype, dict(node.attrs), node.output)
        g.outputs = list(self.outputs)
        g.output_tree = self.output_tree
        g._names = itertools.count(next(self._names))
        return g

    def __str__(self) -> str:
        lines = ["graph("]
        lines += [f"  input  {self.tensors[n]!r}" for n in self.inputs]
        consts = [t for t in self.tensors.values() if t.data is not None]
        lines += [f"  {t!r}" for t in consts[:20]]
        if len(consts) > 20:
            lines.append(f"  ... {len(consts) - 20} more constants")
        for node in self.order():
            t = self.tensors[node.output]
            lines.append(f"  {node!r}  -> {t.dtype.name}{list(t.shape)}")
        lines.append(f"  return {', '.join(self.outputs)}")
        lines.append(")")
        return "\n".join(lines)

    def op_counts(self) -> dict:
        """{op name: number of nodes} (for tests and printing)."""
        counts: dict = {}
        for node in self.nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        return counts
