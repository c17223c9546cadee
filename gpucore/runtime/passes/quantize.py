"""The passes of static quantization (gpucore/quantization/static.py), each ``(Graph) -> bool``:

1. ``insert_qdq(qparams, per_channel)`` makes the pass that writes the QDQ form (ONNX's): every
   activation tensor named in ``qparams`` ({name: (scale, zero_point)}, uint8) is read through
   ``dequantize_linear(quantize_linear(t))``; the constant weight of every float32 ``gemm``
   (2-D weight; an activation other than relu that the float pipeline fused into it, such as a
   transformer FFN's GELU, is split off again as its own node, since the int8 epilogue has only
   relu) and ``conv2d`` (groups 1) whose input is such a tensor
   becomes an int8 constant (symmetric over [-127, 127]; one scale per output channel, or one
   for all with ``per_channel=False``) read through ``dequantize_linear``;
2. ``sink_dequantize``: a view (reshape, flatten, ...) or ``max_pool2d`` of a dequantized tensor
   runs on the uint8 values instead (``qmax_pool2d``), the dequantize moving below it (max
   commutes with the monotone quantization);
   ``pool_uint8``: max pooling of uint8 values converted to float32 and back (an ONNX MaxPool
   on a quantized tensor) is ``qmax_pool2d`` too;
3. ``remove_qdq_pairs``: ``quantize_linear(dequantize_linear(q))`` with the same parameters is
   ``q``;
4. ``fuse_quantized``: ``dequantize(x) -> gemm / conv2d(dequantized weight, bias) [-> relu]
   [-> quantize]`` becomes one ``qlinear`` / ``qconv2d`` with the requantizing epilogue (uint8 out
   when a quantize follows, else float32 out), so chains of quantized layers pass uint8 between
   them.

5. ``fold_dequantized_constants``: a per-channel dequantized constant no fusion took becomes
   a float32 constant;
6. ``fuse_dynamic_quantized``: ONNX dynamic quantization's ``qmatmul_integer(a, w, zero point)
   -> Cast -> Mul(a_scale * w_scales) [-> Add(bias)]`` becomes one ``qlinear_dynamic``
   (ir/dynamic_quant.py: the int8 GEMM's float32 epilogue, as ONNX Runtime's
   MatMulIntegerToFloat).

``QUANT_PIPELINE`` runs 2-6 (and dead-code elimination) after ``insert_qdq``; the runtime's
``PIPELINE`` runs them too, for the QDQ form an ONNX model brings (gpucore.onnx).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import BY_NAME
from ..ir.graph import Graph
from ..ir.ops import op_info
from .cleanup import eliminate_dead_code

_QMAX = 127
# gemm epilogue activations (passes/fuse.py) -> the node computing them on their own
_ACT_NODES = {
    "sigmoid": ("sigmoid", {}),
    "tanh": ("tanh", {}),
    "gelu": ("gelu", {"approximate": "none"}),
    "gelu_tanh": ("gelu", {"approximate": "tanh"}),
}


def quantize_weight(w: np.ndarray, per_channel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scales [out channels]) of float ``w`` (dim 0 = output channels):
    symmetric over [-127, 127] (ONNX Runtime's symmetric int8 range), ``scale = max|w| / 127``,
    values rounded half to even. -128 never occurs, so the AVX2 int8 kernel keeps its fast path
    (a weight of -128 sends it to the exact reference kernel, cpu/README.md *Int8 GEMM*)."""
    w32 = np.asarray(w, np.float32)
    rows = w32.reshape(w32.shape[0], -1)
    amax = np.abs(rows).max(axis=1) if rows.size else np.zeros(w32.shape[0], np.float32)
    if not per_channel:
        amax = np.full_like(amax, amax.max() if amax.size else 0)
    eps = np.float32(np.finfo(np.float32).eps)
    scale = np.maximum(amax.astype(np.float32) / np.float32(_QMAX), eps).astype(np.float32)
    inv = np.float32(1) / scale
    q = np.clip(np.rint(rows * inv[:, None]), -_QMAX, _QMAX).astype(np.int8)
    return q.reshape(w32.shape), scale


def _params(attrs: dict) -> tuple:
    return float(attrs["scale"]), int(attrs["zero_point"])


def _quantizable(graph: Graph, node, qparams: dict) -> bool:
    """Whether ``node`` is a float32 gemm / conv2d with a constant weight (and bias) whose input
    has parameters."""
    t = graph.tensors
    if node.inputs[0] not in qparams or t[node.output].dtype.name != "float32":
        return False
    w = t[node.inputs[1]]
    if w.data is None or w.dtype.name != "float32":
        return False
    if len(node.inputs) > 2 and t[node.inputs[2]].data is None:
        return False
    if node.op == "gemm":
        a = node.attrs
        return (
            len(w.shape) == 2
            and not a["trans_a"]
            and a["alpha"] == 1.0
            and (a["act"] in (None, "relu") or a["act"] in _ACT_NODES)
            and (len(node.inputs) == 2 or t[node.inputs[2]].shape == (t[node.output].shape[-1],))
        )
    if node.op == "conv2d":
        return node.attrs.get("groups", 1) == 1 and len(w.shape) == 4
    return False


def split_activation(graph: Graph, node) -> None:
    """Move ``node``'s (a gemm's) epilogue activation out into a node of its own reading the
    gemm, which keeps the output's name (outputs keep their names through passes)."""
    out = node.output
    info = graph.tensors[out]
    op, attrs = _ACT_NODES[node.attrs["act"]]
    readers = list(graph.readers(out))
    pre = graph.fresh_name(out)
    graph.rename(out, pre)
    node.attrs["act"] = None
    graph.add_node(op, [pre], info.shape, info.dtype, dict(attrs), output=out)
    for r in readers:
        graph.set_inputs(r, [out if n == pre else n for n in r.inputs])
    graph.outputs = [out if o == pre else o for o in graph.outputs]


def insert_qdq(qparams: dict, per_channel: bool = True):
    """The pass writing the QDQ form for ``qparams`` (see the module docstring)."""

    def insert_qdq_pass(graph: Graph) -> bool:
        changed = False
        done: dict = {}  # float tensor -> its dequantized replacement
        for name, (scale, zp) in qparams.items():
            if name not in graph.tensors or name in graph.outputs or not graph.readers(name):
                continue
            info = graph.tensors[name]
            if info.dtype.name != "float32" or info.data is not None:
                continue
            attrs = {"scale": float(scale), "zero_point": int(zp)}
            q = graph.add_node("quantize_linear", [name], info.shape, BY_NAME["uint8"], attrs)
            readers = [r for r in graph.readers(name) if r is not q]
            dq = graph.add_node("dequantize_linear", [q.output], info.shape, info.dtype, attrs)
            for r in readers:
                graph.set_inputs(r, [dq.output if n == name else n for n in r.inputs])
            done[name] = dq.output
            changed = True
        inverse = {v: k for k, v in done.items()}
        for node in list(graph.order()):
            if node.op not in ("gemm", "conv2d") or node.inputs[0] not in inverse:
                continue
            if not _quantizable(graph, node, {node.inputs[0]: None}):
                continue
            if node.op == "gemm" and node.attrs["act"] in _ACT_NODES:
                split_activation(graph, node)
            w = graph.tensors[node.inputs[1]].data
            if node.op == "gemm" and not node.attrs["trans_b"]:
                w = w.T  # [K, N] -> [N, K]: the int8 weight is always [out, in]
            wq, scales = quantize_weight(w, per_channel)
            base = node.inputs[1]
            wq_name = graph.add_constant(wq, name=_free(graph, f"{base}.int8"))
            s_name = graph.add_constant(scales, name=_free(graph, f"{base}.scale"))
            dqw = graph.add_node(
                "dequantize_linear", [wq_name, s_name], wq.shape, BY_NAME["float32"], {"axis": 0}
            )
            graph.set_input(node, 1, dqw.output)
            if node.op == "gemm":
                node.attrs["trans_b"] = True
            changed = True
        return changed

    return insert_qdq_pass


def _free(graph: Graph, name: str) -> str:
    return name if name not in graph.tensors else graph.fresh_name(name)


def sink_dequantize(graph: Graph) -> bool:
    """view(dequantize(q)) -> dequantize(view(q)); max_pool2d(dequantize(q)) ->
    dequantize(qmax_pool2d(q))."""
    changed = False
    for dq in list(graph.order()):
        if dq.op != "dequantize_linear" or dq not in graph.nodes or len(dq.inputs) != 1:
            continue
        reader = graph.sole_consumer(dq.output)
        if reader is None or reader.inputs[0] != dq.output or len(reader.inputs) != 1:
            continue
        info = graph.tensors[reader.output]
        if op_info(reader.op).view is not None:
            moved = graph.add_node(reader.op, [dq.inputs[0]], info.shape, BY_NAME["uint8"])
            moved.attrs = dict(reader.attrs)
        elif reader.op == "max_pool2d" and _plain_pool(reader.attrs):
            a = reader.attrs
            attrs = {k: tuple(a[k]) for k in ("kernel", "stride", "padding", "dilation")}
            moved = graph.add_node(
                "qmax_pool2d", [dq.inputs[0]], info.shape, BY_NAME["uint8"], attrs
            )
        else:
            continue
        new = graph.add_node("dequantize_linear", [moved.output], info.shape, info.dtype)
        new.attrs = dict(dq.attrs)
        graph.bypass(reader, new.output)
        graph.remove_node(dq)  # its one reader is gone
        changed = True
    return changed


def _plain_pool(attrs: dict) -> bool:
    """max_pool2d's values only (no indices), every window holding an element."""
    if attrs.get("output_index", 0) != 0:
        return False
    k, p = attrs.get("kernel"), attrs.get("padding")
    return k is not None and p is not None and all(2 * pp <= kk for kk, pp in zip(k, p))


def pool_uint8(graph: Graph) -> bool:
    """to_dtype(uint8 -> float32) -> max_pool2d -> to_dtype(uint8) -> qmax_pool2d: max pooling
    of 8-bit values as an ONNX model's MaxPool on a quantized tensor computes it (exact: every
    uint8 is a float32, and max commutes with the conversion)."""
    changed = False
    for pool in list(graph.order()):
        if pool.op != "max_pool2d" or pool not in graph.nodes or not _plain_pool(pool.attrs):
            continue
        up = graph.producer.get(pool.inputs[0])
        down = graph.sole_consumer(pool.output)
        if up is None or down is None or up.op != "to_dtype" or down.op != "to_dtype":
            continue
        t = graph.tensors
        if t[up.inputs[0]].dtype.name != "uint8" or t[down.output].dtype.name != "uint8":
            continue
        if graph.sole_consumer(up.output) is not pool:
            continue
        attrs = {k: tuple(pool.attrs[k]) for k in ("kernel", "stride", "padding", "dilation")}
        info = t[down.output]
        q = graph.add_node("qmax_pool2d", [up.inputs[0]], info.shape, info.dtype, attrs)
        graph.bypass(down, q.output)
        changed = True
    if changed:
        eliminate_dead_code(graph)
    return changed


def remove_qdq_pairs(graph: Graph) -> bool:
    """quantize_linear(dequantize_linear(q)) with the same scale and zero point -> q."""
    changed = False
    for q in list(graph.order()):
        if q.op != "quantize_linear" or q not in graph.nodes:
            continue
        dq = graph.producer.get(q.inputs[0])
        if dq is None or dq.op != "dequantize_linear" or len(dq.inputs) != 1:
            continue
        if _params(dq.attrs) != _params(q.attrs):
            continue
        if graph.tensors[dq.inputs[0]].shape != graph.tensors[q.output].shape:
            continue
        graph.bypass(q, dq.inputs[0])
        changed = True
    return changed


def _channel_dq(graph: Graph, name: str, dtype: str):
    """The per-channel dequantize node of a ``dtype`` constant producing ``name``, or None."""
    node = graph.producer.get(name)
    if node is None or node.op != "dequantize_linear" or len(node.inputs) != 2:
        return None
    if not all(graph.is_constant(n) for n in node.inputs):
        return None
    return node if graph.tensors[node.inputs[0]].dtype.name == dtype else None


def _weight_dq(graph: Graph, w_dq, trans_b: bool, n_out: int):
    """(int8 weight [out, in], scales [out]) of per-channel dequantize node ``w_dq``, each a
    constant's name or a new array, or None: the scales along axis 0 of [out, in] (conv2d, gemm
    with trans_b) or along axis 1 of a 2-D [in, out] (gemm without: ONNX MatMul's weight, then
    transposed), or along any axis when they are all equal (a per-tensor weight)."""
    w = graph.tensors[w_dq.inputs[0]]
    s = graph.tensors[w_dq.inputs[1]].data
    scales = w_dq.inputs[1]
    if w_dq.attrs.get("axis") != (0 if trans_b else 1):
        if not (s.size and np.all(s == s.reshape(-1)[0])):
            return None
        scales = np.full(n_out, s.reshape(-1)[0], np.float32)
    if trans_b:
        return (w_dq.inputs[0], scales) if w.shape[0] == n_out else None
    if len(w.shape) != 2 or w.shape[1] != n_out:
        return None
    return np.ascontiguousarray(w.data.T), scales


def _named(graph: Graph, v, hint: str) -> str:
    """``v`` (a constant's name, or an array to become one)."""
    return v if isinstance(v, str) else graph.add_constant(v, name=_free(graph, hint))


def _bias(graph: Graph, name: str, a_scale: float, scales: np.ndarray, n_out: int):
    """The fused op's bias for ``name``: a float32 constant [n_out] as it is; an int32 constant
    dequantized with scales a_scale * w_scales (ONNX's quantized bias) as those integers, which
    the kernel adds to its sums; other dequantized int32 constants as float32; else None."""
    info = graph.tensors[name]
    if graph.is_constant(name):
        return name if info.shape == (n_out,) and info.dtype.name == "float32" else None
    node = _channel_dq(graph, name, "int32")
    if node is None or node.attrs.get("axis") != 0 or info.shape != (n_out,):
        return None
    q, s = (graph.tensors[n].data for n in node.inputs)
    want = np.float32(a_scale) * scales.astype(np.float32)
    if np.array_equal(s.astype(np.float32), want):
        return node.inputs[0]
    return graph.add_constant((q.astype(np.float32) * s.astype(np.float32)).astype(np.float32))


def fuse_quantized(graph: Graph) -> bool:
    """dequantize -> gemm / conv2d [-> relu] [-> quantize] into qlinear / qconv2d."""
    changed = False
    for node in list(graph.order()):
        if node.op not in ("gemm", "conv2d") or node not in graph.nodes:
            continue
        xdq = graph.producer.get(node.inputs[0])
        if xdq is None or xdq.op != "dequantize_linear" or len(xdq.inputs) != 1:
            continue
        a = node.attrs
        if node.op == "gemm":
            if a["trans_a"] or a["alpha"] != 1.0 or a["act"] not in (None, "relu"):
                continue
            relu = a["act"] == "relu"
        elif a.get("groups", 1) != 1:
            continue
        else:
            relu = False
        trans_b = node.op == "conv2d" or a["trans_b"]
        w_dq = _channel_dq(graph, node.inputs[1], "int8")
        n_out = graph.tensors[node.output].shape[1 if node.op == "conv2d" else -1]
        weight = None if w_dq is None else _weight_dq(graph, w_dq, trans_b, n_out)
        if weight is None:
            continue
        s = weight[1] if not isinstance(weight[1], str) else graph.tensors[weight[1]].data
        bias = node.inputs[2:]
        if bias:
            b = _bias(graph, bias[0], xdq.attrs["scale"], s, n_out)
            if b is None:
                continue
            bias = [b]
        base = w_dq.inputs[0]
        wq = [_named(graph, weight[0], f"{base}.t"), _named(graph, weight[1], f"{base}.scales")]
        last = node
        nxt = graph.sole_consumer(last.output)
        if not relu and nxt is not None and nxt.op == "relu":
            relu, last = True, nxt
            nxt = graph.sole_consumer(last.output)
        a_scale, a_zp = _params(xdq.attrs)
        attrs = {"a_scale": a_scale, "a_zero_point": a_zp, "relu": relu, "out_scale": None}
        if nxt is not None and nxt.op == "quantize_linear":
            out_scale, out_zp = _params(nxt.attrs)
            attrs.update(out_scale=out_scale, out_zero_point=out_zp)
            last = nxt
        if node.op == "conv2d":
            attrs.update({k: tuple(node.attrs[k]) for k in ("stride", "padding", "dilation")})
        info = graph.tensors[last.output]
        op = "qlinear" if node.op == "gemm" else "qconv2d"
        fused = graph.add_node(op, [xdq.inputs[0], *wq, *bias], info.shape, info.dtype, attrs)
        graph.bypass(last, fused.output)
        changed = True
    if changed:
        eliminate_dead_code(graph)
    return changed


def fold_dequantized_constants(graph: Graph) -> bool:
    """Per-channel dequantized constants no ``fuse_quantized`` took (a grouped convolution's
    weight, a MatMul weight quantized along its rows, ...) become float32 constants, as constant
    folding would have made them: the float op reads them as it would read any weight."""
    changed = False
    for node in list(graph.order()):
        if node.op != "dequantize_linear" or len(node.inputs) != 2 or node not in graph.nodes:
            continue
        if not all(graph.is_constant(n) for n in node.inputs) or node.output in graph.outputs:
            continue
        value = op_info(node.op).evaluate(
            [graph.tensors[n].data for n in node.inputs], node.attrs, None
        )
        name = graph.add_constant(np.ascontiguousarray(value, np.float32))
        graph.replace_uses(node.output, name)
        graph.remove_node(node)
        changed = True
    return changed


def _one_float(graph: Graph, name: str) -> bool:
    """Whether ``name`` is one float32 value (shape () or [1])."""
    info = graph.tensors[name]
    return info.dtype.name == "float32" and len(info.shape) <= 1 and int(np.prod(info.shape)) == 1


def _channel_vector(graph: Graph, name: str, n: int):
    """A float32 constant ``name`` broadcasting to [n] along the last dim (shape (), [1], [n]
    or [1, ..., n]) as [n] values: the name itself when it has that shape, else an array
    (``_named`` makes it a constant); None otherwise."""
    info = graph.tensors[name]
    shape = tuple(info.shape)
    if not graph.is_constant(name) or info.dtype.name != "float32":
        return None
    if shape == (n,):
        return name
    if any(d != 1 for d in shape[:-1]) or (shape and shape[-1] not in (1, n)):
        return None
    return np.ascontiguousarray(np.broadcast_to(info.data.reshape(-1), (n,)), np.float32)


def _scale_product(graph: Graph, name: str, n: int):
    """(activation scale, w_scales [n] constant) of ``name`` = mul(one float32 value, per-column
    float32 constant) in either order, else None."""
    node = graph.producer.get(name)
    if node is None or node.op != "mul" or len(node.inputs) != 2:
        return None
    for sc, ws in (node.inputs, node.inputs[::-1]):
        if _one_float(graph, sc) and not graph.is_constant(sc):
            vec = _channel_vector(graph, ws, n)
            if vec is not None:
                return sc, vec, ws
    return None


def fuse_dynamic_quantized(graph: Graph) -> bool:
    """ONNX Runtime's dynamic quantization, ``qmatmul_integer(a, w, zp) -> to_dtype(float32) ->
    mul(a_scale * w_scales) [-> add(bias)]``, into one ``qlinear_dynamic``: the int8 GEMM with
    its float32 epilogue (ONNX Runtime's MatMulIntegerToFloat), the same float32 operations."""
    changed = False
    for node in list(graph.order()):
        if node.op != "mul" or node not in graph.nodes or len(node.inputs) != 2:
            continue
        for f, s in (node.inputs, node.inputs[::-1]):
            cast = graph.producer.get(f)
            if cast is None or cast.op != "to_dtype" or graph.tensors[f].dtype.name != "float32":
                continue
            acc = graph.producer.get(cast.inputs[0])
            if acc is None or acc.op != "qmatmul_integer" or len(acc.inputs) != 3:
                continue
            shape = graph.tensors[acc.output].shape
            if graph.sole_consumer(acc.output) is not cast or graph.sole_consumer(f) is not node:
                continue
            scales = _scale_product(graph, s, int(shape[-1]))
            if scales is None or graph.tensors[node.output].shape != shape:
                continue
            last, bias = node, []
            add = graph.sole_consumer(node.output)
            if add is not None and add.op == "add" and len(add.inputs) == 2:
                other = add.inputs[1] if add.inputs[0] == node.output else add.inputs[0]
                b = None if other == node.output else _channel_vector(graph, other, int(shape[-1]))
                if b is not None and graph.tensors[add.output].shape == shape:
                    last, bias = add, [_named(graph, b, f"{other}.vec")]
            a, w, zp = acc.inputs
            ins = [a, w, scales[0], zp, _named(graph, scales[1], f"{scales[2]}.vec"), *bias]
            info = graph.tensors[last.output]
            fused = graph.add_node("qlinear_dynamic", ins, info.shape, info.dtype, {})
            graph.bypass(last, fused.output)
            changed = True
            break
    if changed:
        eliminate_dead_code(graph)
    return changed


QUANT_PIPELINE = (
    sink_dequantize,
    pool_uint8,
    remove_qdq_pairs,
    fuse_quantized,
    fuse_dynamic_quantized,
    fold_dequantized_constants,
    eliminate_dead_code,
)
