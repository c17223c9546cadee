"""The passes of the dynamic quantized Linear (``gpucore.quantization.quantize_dynamic``), each
``(Graph) -> bool``:

1. ``fuse_traced_dynamic_linear``: a captured ``dynamic.Linear`` records its per-call activation
   quantization as graph ops (gpucore/quantization/traced.py: the range, scale, zero point and
   rounding, about twenty nodes) feeding ``qlinear_dynamic(q, w, scale, zp, w_scales[, bias])``;
   the whole pattern becomes the float-input ``qlinear_dynamic(x, w, w_scales[, bias])``
   (runtime/ir/dynamic_quant.py), which quantizes ``x`` in C with the same float32 operations:
   the same bits on every input the eager layer accepts: one whose range max(x, 0) - min(x, 0)
   is finite in float32. The inputs it refuses give NaN everywhere: inf or NaN in x, and finite
   values whose range overflows float32 (such as 3e38 and -3e38);
2. ``fuse_dynamic_linear_relu``: a ``relu`` reading a ``qlinear_dynamic`` (either form) alone
   moves into its epilogue (``relu=True``: ``max(v, 0)``, -0.0 -> +0.0 and NaN kept, as
   gpucore's relu).

The first runs before any other pass of the runtime's ``PIPELINE`` (split_clamp, fold_scalars
and common-subexpression elimination would reshape the pattern it matches), the second after
the views sink below the relu. Both are in ``VULKAN_PIPELINE`` too (the node's shaders:
executors/vulkan_quant.py), but for devices without shaderFloat64
(``passes.vulkan_pipeline(False)``), where the traced primitives run as shaders.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from .cleanup import eliminate_dead_code

_F32 = np.float32
_EPS = float(np.finfo(_F32).eps)


def _node(graph: Graph, name: str, op: str, n_inputs: int):
    """The producer of ``name`` when it is an ``op`` node with ``n_inputs`` inputs, else None."""
    node = graph.producer.get(name)
    if node is None or node.op != op or len(node.inputs) != n_inputs:
        return None
    return node


def _const(graph: Graph, name: str, value: float) -> bool:
    """Whether ``name`` is a float32 constant of one element equal to ``value``."""
    info = graph.tensors[name]
    if info.data is None or info.dtype.name != "float32" or np.size(info.data) != 1:
        return False
    return float(np.asarray(info.data).reshape(-1)[0]) == value


def _clamp255(node) -> bool:
    return node is not None and node.attrs.get("min") == 0.0 and node.attrs.get("max") == 255.0


def _to_u8(graph: Graph, name: str):
    """The input of ``to_dtype(·, uint8)`` producing ``name``, else None."""
    node = _node(graph, name, "to_dtype", 1)
    if node is None or graph.tensors[name].dtype.name != "uint8":
        return None
    return node.inputs[0]


def _reduce_all(graph: Graph, name: str, op: str):
    """The input x of ``op`` (amin / amax) over every dim of x into one value, else None."""
    node = _node(graph, name, op, 1)
    if node is None or node.attrs.get("keepdim"):
        return None
    ndim = len(graph.tensors[node.inputs[0]].shape)
    dims = node.attrs.get("dims")
    if dims is None or sorted(int(d) % max(ndim, 1) for d in dims) != list(range(ndim)):
        return None
    return node.inputs[0]


def _bound(graph: Graph, name: str, op: str, reduce_op: str):
    """x of ``op(reduce_op(x), 0)`` (lo = minimum(amin(x), 0), hi = maximum(amax(x), 0))."""
    node = _node(graph, name, op, 2)
    if node is None or not _const(graph, node.inputs[1], 0.0):
        return None
    return _reduce_all(graph, node.inputs[0], reduce_op)


def _scale_source(graph: Graph, scale: str):
    """(x, lo) of ``scale = maximum((hi - lo) / 255, eps)`` over x's range, else None."""
    top = _node(graph, scale, "maximum", 2)
    if top is None or not _const(graph, top.inputs[1], _EPS):
        return None
    d = _node(graph, top.inputs[0], "div", 2)
    if d is None or not _const(graph, d.inputs[1], 255.0):
        return None
    sub = _node(graph, d.inputs[0], "sub", 2)
    if sub is None:
        return None
    hi, lo = sub.inputs
    x = _bound(graph, hi, "maximum", "amax")
    if x is None or _bound(graph, lo, "minimum", "amin") != x:
        return None
    return x, lo


def _zero_point_ok(graph: Graph, zpf: str, lo: str, scale: str) -> bool:
    """Whether ``zpf = clamp(neg(round(lo / scale)), 0, 255)``."""
    c = _node(graph, zpf, "clamp", 1)
    neg = _node(graph, c.inputs[0], "neg", 1) if _clamp255(c) else None
    r = _node(graph, neg.inputs[0], "round", 1) if neg is not None else None
    d = (
        _node(graph, r.inputs[0], "div", 2)
        if r is not None and not r.attrs.get("decimals")
        else None
    )
    return d is not None and d.inputs == [lo, scale]


def _quantized_source(graph: Graph, qf: str, scale: str, zpf: str):
    """x of ``qf = clamp(round(x * (1 / scale) + zpf), 0, 255)``, else None."""
    c = _node(graph, qf, "clamp", 1)
    r = _node(graph, c.inputs[0], "round", 1) if _clamp255(c) else None
    add = (
        _node(graph, r.inputs[0], "add", 2)
        if r is not None and not r.attrs.get("decimals")
        else None
    )
    if add is None or add.inputs[1] != zpf:
        return None
    mul = _node(graph, add.inputs[0], "mul", 2)
    inv = _node(graph, mul.inputs[1], "div", 2) if mul is not None else None
    if inv is None or inv.inputs[1] != scale or not _const(graph, inv.inputs[0], 1.0):
        return None
    return mul.inputs[0]


def _traced_input(graph: Graph, node):
    """The float32 x whose traced quantization feeds the uint8-input ``qlinear_dynamic``
    ``node``, else None."""
    if len(node.inputs) not in (5, 6) or node.attrs.get("relu"):
        return None
    if not all(graph.is_constant(n) for n in [node.inputs[1], *node.inputs[4:]]):
        return None
    q, _, scale, zp = node.inputs[:4]
    qf, zpf = _to_u8(graph, q), _to_u8(graph, zp)
    src = _scale_source(graph, scale) if qf is not None and zpf is not None else None
    if src is None or not _zero_point_ok(graph, zpf, src[1], scale):
        return None
    x = _quantized_source(graph, qf, scale, zpf)
    if x != src[0] or graph.tensors[x].dtype.name != "float32":
        return None
    return x


def fuse_traced_dynamic_linear(graph: Graph) -> bool:
    """The traced activation quantization + ``qlinear_dynamic`` of a captured dynamic quantized
    Linear into one float-input ``qlinear_dynamic`` (module docstring)."""
    changed = False
    for node in list(graph.order()):
        if node.op != "qlinear_dynamic" or node not in graph.nodes:
            continue
        x = _traced_input(graph, node)
        if x is None:
            continue
        info = graph.tensors[node.output]
        ins = [x, node.inputs[1], *node.inputs[4:]]
        fused = graph.add_node("qlinear_dynamic", ins, info.shape, info.dtype, {"relu": False})
        graph.bypass(node, fused.output)
        changed = True
    if changed:
        eliminate_dead_code(graph)
    return changed


def fuse_dynamic_linear_relu(graph: Graph) -> bool:
    """``relu(qlinear_dynamic(...))``, the relu the product's only reader, into the GEMM's
    epilogue (``relu=True``)."""
    changed = False
    for node in list(graph.order()):
        if node.op != "relu" or node not in graph.nodes or len(node.inputs) != 1:
            continue
        src = graph.producer.get(node.inputs[0])
        if src is None or src.op != "qlinear_dynamic" or src.attrs.get("relu"):
            continue
        if graph.sole_consumer(src.output) is not node or src.output in graph.outputs:
            continue
        info = graph.tensors[node.output]
        attrs = {**src.attrs, "relu": True}
        fused = graph.add_node("qlinear_dynamic", list(src.inputs), info.shape, info.dtype, attrs)
        graph.bypass(node, fused.output)
        graph.remove_node(src)
        changed = True
    return changed
