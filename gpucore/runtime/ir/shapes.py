"""Shape checking: every node's declared output shape and dtype re-derived from its inputs.

A captured graph is consistent by construction; a loaded one is only what its file claims. The
planner sizes the arena from the declared shapes, so before anything is allocated or run,
``check_shapes`` recomputes each node's output from the op's own rule (a registry op's
``infer``, a view's data-less result, a fused op's shape rule) and raises GraphError naming the
node when the file's claim differs.
"""

from __future__ import annotations

import numpy as np

from ...ops.registry import REGISTRY
from .graph import Graph, GraphError
from .ops import TensorSpec, op_info, proto_array


def _gemm_shape(shapes: list, attrs: dict) -> tuple:
    a, b = shapes[0], shapes[1]
    if len(a) < 2 or len(b) < 2:
        raise ValueError("gemm operands need at least 2 dims")
    m, ka = (a[-1], a[-2]) if attrs["trans_a"] else (a[-2], a[-1])
    kb, n = (b[-1], b[-2]) if attrs["trans_b"] else (b[-2], b[-1])
    if ka != kb:
        raise ValueError(f"gemm: inner sizes {ka} and {kb} differ")
    batch = np.broadcast_shapes(a[:-2], b[:-2])
    if len(shapes) > 2 and shapes[2] not in ((n,), ()):
        raise ValueError(f"gemm: bias of shape {shapes[2]} for {n} columns")
    return tuple(batch) + (m, n)


def _attention_shape(shapes: list, attrs: dict) -> tuple:
    q, k, v = shapes[:3]
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or q[-1] != k[-1] or k[-2] != v[-2]:
        raise ValueError(f"attention: q {q}, k {k}, v {v} do not fit")
    b, h, s = q[:3]
    return (b, s, h, v[-1]) if attrs.get("heads_last") else (b, h, s, v[-1])


def _conv_act_shape(shapes: list, attrs: dict) -> tuple:
    x, w = shapes[0], shapes[1]
    if len(x) != 4 or len(w) != 4 or x[1] != w[1]:
        raise ValueError(f"conv2d_act: input {x} and weight {w} do not fit")
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = (x[2] + 2 * ph - dh * (w[2] - 1) - 1) // sh + 1
    ow = (x[3] + 2 * pw - dw * (w[3] - 1) - 1) // sw + 1
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0 or oh < 1 or ow < 1:
        raise ValueError(f"conv2d_act: bad geometry {attrs} for input {x}, weight {w}")
    out = (x[0], w[0], oh, ow)
    want = 2 + bool(attrs["bias"]) + bool(attrs["res"])
    if len(shapes) != want or (attrs["bias"] and tuple(shapes[2]) != (w[0],)):
        raise ValueError(f"conv2d_act: {len(shapes)} inputs {shapes} for {attrs}")
    if attrs["res"] and tuple(shapes[-1]) != out:
        raise ValueError(f"conv2d_act: residual {shapes[-1]} for an output {out}")
    if attrs["act"] not in (None, "relu"):
        raise ValueError(f"conv2d_act: act {attrs['act']!r} is not None or 'relu'")
    return out


def _same_as_input(shapes: list, attrs: dict) -> tuple:
    n = attrs.get("n")
    if n is not None and (n < 1 or int(np.prod(shapes[0], dtype=np.int64)) % n):
        raise ValueError(f"layer_norm: n={n} does not divide the input {shapes[0]}")
    return shapes[0]


FUSED_SHAPES = {
    "gemm": _gemm_shape,
    "attention": _attention_shape,
    "layer_norm": _same_as_input,
    "silu": _same_as_input,
    "conv2d_act": _conv_act_shape,
}
# fused ops whose output dtype is not their first input's: (input dtypes, attrs) -> dtype
# (the quantized ops, ir/quantized.py, fill it)
FUSED_DTYPES: dict = {}


def expected(graph: Graph, node) -> tuple:
    """(shape, dtype) the node's op gives for its inputs."""
    ins = [graph.tensors[n] for n in node.inputs]
    info = op_info(node.op)
    if info.view is not None:
        arr = info.view(proto_array(ins[0].shape, ins[0].dtype.itemsize), node.attrs)
        return tuple(arr.shape), ins[0].dtype
    rule = FUSED_SHAPES.get(node.op)
    if rule is not None:
        typed = FUSED_DTYPES.get(node.op)
        dtype = typed([t.dtype for t in ins], node.attrs) if typed else ins[0].dtype
        return rule([t.shape for t in ins], node.attrs), dtype
    rop = REGISTRY[node.op]
    attrs = {k: v for k, v in node.attrs.items() if k != "output_index"}
    specs = rop.infer(*[TensorSpec(t.shape, t.dtype) for t in ins], **attrs)
    if isinstance(specs, list):
        specs = specs[node.attrs.get("output_index", 0)]
    return tuple(specs[0]), specs[1]


def check_shapes(graph: Graph) -> None:
    """GraphError naming the first node whose declared output is not what its op gives."""
    for node in graph.order():
        declared = graph.tensors[node.output]
        try:
            shape, dtype = expected(graph, node)
        except Exception as e:  # noqa: BLE001 - any failure of the op's own rule: a bad graph
            raise GraphError(f"node {node.output} ({node.op}): {e}") from None
        if tuple(shape) != tuple(declared.shape) or dtype is not declared.dtype:
            raise GraphError(
                f"node {node.output} ({node.op}) declares {declared.dtype.name}"
                f"{list(declared.shape)} but its inputs give {dtype.name}{list(shape)}"
            )
