"""Clean-up passes: dead-code elimination and constant folding."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ir.ops import op_info

# Folding may not turn a small constant into a big one (expand of a scalar to a huge shape):
# above this many bytes, a folded result must not exceed its inputs' total size.
FOLD_GROWTH_LIMIT = 1 << 20


def eliminate_dead_code(graph: Graph) -> bool:
    """Remove nodes whose output nothing reads, then constants nothing reads."""
    changed = False
    live_outputs = set(graph.outputs)
    again = True
    while again:
        again = False
        for node in reversed(graph.order()):
            if not graph.consumers[node.output] and node.output not in live_outputs:
                graph.remove_node(node)
                changed = again = True
    for name, info in list(graph.tensors.items()):
        if info.data is not None and not graph.consumers[name] and name not in live_outputs:
            graph.remove_tensor(name)
            changed = True
    return changed


def constant_fold(graph: Graph) -> bool:
    """Evaluate nodes whose inputs are all constants; their outputs become constants."""
    changed = False
    for node in list(graph.order()):
        if not node.inputs or not all(graph.is_constant(i) for i in node.inputs):
            continue
        if node.output in graph.outputs:
            continue  # an output stays a node's output (the executors copy outputs out)
        if _fusable_dequantize(graph, node):
            continue
        ins = [graph.tensors[i] for i in node.inputs]
        info = graph.tensors[node.output]
        nbytes = info.dtype.itemsize * int(np.prod(info.shape, dtype=np.int64))
        if nbytes > FOLD_GROWTH_LIMIT and nbytes > sum(t.data.nbytes for t in ins):
            continue
        value = op_info(node.op).evaluate([t.data for t in ins], node.attrs, [t.dtype for t in ins])
        value = np.require(np.asarray(value, dtype=info.dtype.np), requirements="C")
        if value.shape != info.shape:
            value = value.reshape(info.shape)
        name = graph.add_constant(value, dtype=info.dtype)
        graph.replace_uses(node.output, name)
        graph.remove_node(node)
        changed = True
    if changed:
        eliminate_dead_code(graph)
    return changed


def _fusable_dequantize(graph: Graph, node) -> bool:
    """A per-channel dequantized int8 weight or int32 bias (the QDQ form, passes/quantize.py)
    that only gemm / conv2d nodes with a dequantized input read: it stays a node, for
    ``fuse_quantized`` to take the integers themselves."""
    if node.op != "dequantize_linear" or len(node.inputs) != 2:
        return False
    readers = graph.readers(node.output)
    for r in readers:
        x = graph.producer.get(r.inputs[0])
        if r.op not in ("gemm", "conv2d") or r.inputs[0] == node.output:
            return False
        if x is None or x.op != "dequantize_linear" or len(x.inputs) != 1:
            return False
    return bool(readers)


def eliminate_common_subexpressions(graph: Graph) -> bool:
    """Merge nodes computing the same op of the same inputs with equal attributes (a model
    that writes ``x - mu`` twice computes it once), so that patterns see one tensor."""
    changed = False
    seen: dict = {}
    for node in list(graph.order()):
        if node.op in _NONDETERMINISTIC:
            continue
        key = (node.op, tuple(node.inputs), repr(sorted(node.attrs.items())))
        first = seen.get(key)
        if first is None or first.output not in graph.tensors:
            seen[key] = node
            continue
        if graph.tensors[first.output].dtype is not graph.tensors[node.output].dtype:
            continue
        if node.output in graph.outputs and first.output in graph.outputs:
            continue  # two outputs keep their own nodes
        if node.output in graph.outputs:
            node, first = first, node  # keep the output's node; the other one goes
            seen[key] = first
        graph.bypass(node, first.output)
        changed = True
    return changed


_NONDETERMINISTIC = frozenset({"uniform", "normal", "dropout_mask", "rand_bits", "randint"})
