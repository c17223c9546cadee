"""Pattern fusion: primitive subgraphs become the runtime's fused ops (gpucore/runtime/ir/fused.py).

Every fusion follows the sole-consumer rule: an intermediate it removes must be read by nothing
else (``Graph.sole_consumer``), so a fusion never duplicates work or changes another reader's
input. Patterns:

- GEMM epilogues: ``gemm -> add(bias)`` (a vector along the last dim) and ``-> relu / sigmoid /
  tanh / gelu`` become the gemm's bias and activation;
- attention: ``gemm(q, k, trans_b, alpha=scale) -> [add(mask) | where(mask, ., -inf)] ->
  softmax(-1) -> gemm(., v)``, a constant mask that is exactly the causal one becoming
  ``causal=True``;
- layer norm: ``mean -> sub -> square -> mean -> add eps -> sqrt -> reciprocal -> mul
  [-> mul weight] [-> add bias]`` (also with ``pow(., 2)``, ``rsqrt`` and ``div`` by the sqrt);
- GELU's tanh form ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` and its exact
  form ``0.5 * x * (1 + erf(x / sqrt(2)))`` (or ``x * sqrt(0.5)``) in any order of the
  products; SiLU ``x * sigmoid(x)``;
- convolution followed by a per-channel affine (a folded eval-mode batch norm): into the
  convolution's weight and bias;
- convolution epilogues: ``conv2d [-> add(res)] [-> relu]`` (res a tensor of the output's
  shape and dtype: a ResNet block's shortcut) into ``conv2d_act``.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Graph
from .matmul import constant_is_vector

_ACTS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}


def _const(graph: Graph, name: str):
    return graph.tensors[name].data


def _scalar(graph: Graph, name: str):
    data = _const(graph, name)
    if data is None or data.size != 1:
        return None
    return float(data.reshape(-1)[0])


def _other(node, name: str) -> str | None:
    """The input of a two-input node that is not ``name`` (None if both are)."""
    a, b = node.inputs
    if a == name and b != name:
        return b
    if b == name and a != name:
        return a
    return None


def _shape(graph: Graph, name: str) -> tuple:
    return graph.tensors[name].shape


# ------------------------------------------------------------------------ gemm epilogues
def fuse_gemm_epilogue(graph: Graph) -> bool:
    """gemm -> add(bias vector) and gemm -> activation into the gemm."""
    changed = False
    for node in list(graph.order()):
        if node.op != "gemm" or node not in graph.nodes:
            continue
        out = graph.tensors[node.output]
        reader = graph.sole_consumer(node.output)
        if (
            reader is not None
            and reader.op == "add"
            and len(node.inputs) == 2
            and not node.attrs["act"]
            and _shape(graph, reader.output) == out.shape
            and out.shape
        ):
            other = _other(reader, node.output)
            vec = constant_is_vector(graph, other, out.shape[-1]) if other else None
            if vec is not None and graph.tensors[other].dtype is out.dtype:
                bias = other if graph.tensors[other].shape == (out.shape[-1],) else None
                bias = bias or graph.add_constant(vec.copy(), dtype=out.dtype)
                graph.set_inputs(node, node.inputs + [bias])
                graph.bypass(reader, node.output)
                changed = True
                reader = graph.sole_consumer(node.output)
        if reader is None or node.attrs["act"] or _shape(graph, reader.output) != out.shape:
            continue
        act = _ACTS.get(reader.op)
        if reader.op == "gelu":
            act = "gelu_tanh" if reader.attrs.get("approximate") == "tanh" else "gelu"
        if act is not None:
            node.attrs["act"] = act
            graph.bypass(reader, node.output)
            changed = True
    return changed


# ----------------------------------------------------------------------------- attention
def _causal_mask(mask: np.ndarray) -> bool:
    """Whether an additive or bool mask is exactly the causal one (top-left aligned)."""
    if mask.ndim < 2:
        return False
    sq, skv = mask.shape[-2:]
    m = mask.reshape(-1, sq, skv)
    keep = np.tril(np.ones((sq, skv), bool))
    if mask.dtype == np.bool_:
        return bool((m == keep).all())
    if mask.dtype.kind != "f":
        return False
    return bool(((m == 0) == keep).all() and np.isneginf(m[:, ~keep]).all())


def fuse_attention(graph: Graph) -> bool:
    """gemm(q, k^T) [+ mask] -> softmax(last dim) -> gemm(p, v) into attention."""
    changed = False
    for first in list(graph.order()):
        if first.op != "gemm" or first not in graph.nodes:
            continue
        at = first.attrs
        if at["trans_a"] or not at["trans_b"] or at["act"] or len(first.inputs) != 2:
            continue
        q, k = first.inputs
        if len(_shape(graph, q)) != 4 or _shape(graph, q)[:-2] != _shape(graph, k)[:-2]:
            continue
        scores = first.output
        mask = None
        causal = False
        nxt = graph.sole_consumer(scores)
        if nxt is not None and nxt.op == "where":
            mask = _where_mask(graph, nxt, scores)
            if mask is None:
                continue
            if _causal_mask(_const(graph, mask)):
                mask, causal = None, True
            scores = nxt.output
            nxt = graph.sole_consumer(scores)
        elif (
            nxt is not None
            and nxt.op == "add"
            and _shape(graph, nxt.output) == _shape(graph, scores)
        ):
            mask = _other(nxt, scores)
            data = _const(graph, mask) if mask else None
            if mask is None or graph.tensors[mask].dtype is not graph.tensors[scores].dtype:
                continue
            if data is not None and _causal_mask(data):
                mask, causal = None, True
            scores = nxt.output
            nxt = graph.sole_consumer(scores)
        if nxt is None or nxt.op != "softmax" or nxt.attrs["dim"] % 4 != 3:
            continue
        second = graph.sole_consumer(nxt.output)
        if second is None or second.op != "gemm" or second.inputs[0] != nxt.output:
            continue
        st = second.attrs
        if st["trans_a"] or st["trans_b"] or st["act"] or st["alpha"] != 1.0:
            continue
        if len(second.inputs) != 2:
            continue
        v = second.inputs[1]
        if _shape(graph, v)[:-2] != _shape(graph, q)[:-2]:
            continue
        out = graph.tensors[second.output]
        inputs = [q, k, v] + ([mask] if mask else [])
        attrs = {"scale": float(at["alpha"]), "causal": causal, "heads_last": False}
        fused = graph.add_node("attention", inputs, out.shape, out.dtype, attrs)
        graph.bypass(second, fused.output)
        _write_heads_last(graph, fused)
        changed = True
    return changed


def _where_mask(graph: Graph, node, scores: str):
    """For ``where(cond, scores, -inf)`` (True may attend) or torch's masked_fill form
    ``where(cond, -inf, scores)`` with a constant cond: an additive float mask constant (0 or
    -inf, what every attention kernel takes), else None."""
    cond, a, b = node.inputs
    data = _const(graph, cond)
    if data is None or data.dtype != np.bool_:
        return None
    if _shape(graph, node.output) != _shape(graph, scores):
        return None
    if a == scores and _scalar(graph, b) == -np.inf:
        keep = data
    elif b == scores and _scalar(graph, a) == -np.inf:
        keep = ~data
    else:
        return None
    dtype = graph.tensors[scores].dtype
    additive = np.where(keep, 0.0, -np.inf).astype(dtype.np)
    return graph.add_constant(additive, dtype=dtype)


def _write_heads_last(graph: Graph, att) -> None:
    """attention -> permute(0, 2, 1, 3) -> contiguous copy (how models merge the heads back)
    becomes attention writing [B, S, H, D] itself (``heads_last``): the copy disappears."""
    view = graph.sole_consumer(att.output)
    if view is None or view.op != "strided" or view.attrs["offset"] != 0:
        return
    b, h, s, d = graph.tensors[att.output].shape
    # the copy's elements in [B, S, H, D] order: the view's dims and strides equal those of
    # permute(0, 2, 1, 3) but for dims of size 1 (nn.MultiheadAttention's sequence-first
    # [S, B, H, D] at batch 1, or the heads merged in the view)
    want = ((b, h * s * d), (s, d), (h, s * d), (d, 1))
    got = tuple(zip(view.attrs["shape"], view.attrs["strides"]))
    if [x for x in want if x[0] != 1] != [x for x in got if x[0] != 1]:
        return
    copy = graph.sole_consumer(view.output)
    if copy is None or copy.op != "clone":
        return
    info = graph.tensors[copy.output]
    attrs = dict(att.attrs, heads_last=True)
    fused = graph.add_node("attention", list(att.inputs), (b, s, h, d), info.dtype, attrs)
    out = fused.output
    if info.shape != (b, s, h, d):  # the same elements, in the copy's shape
        strides = tuple(math.prod(info.shape[i + 1 :]) for i in range(len(info.shape)))
        reshape = {"shape": info.shape, "strides": strides, "offset": 0}
        out = graph.add_node("strided", [out], info.shape, info.dtype, reshape).output
    graph.bypass(copy, out)


# ---------------------------------------------------------------------------- layer norm
def _square_of(graph: Graph, node, x: str) -> bool:
    if node.op == "mul" and node.inputs == [x, x] and graph.sole_consumer(x) is None:
        return True
    if node.op == "pow" and node.inputs[0] == x:
        return _scalar(graph, node.inputs[1]) == 2.0
    return node.op == "square" and node.inputs == [x]


def _match_layer_norm(graph: Graph, mean1) -> tuple | None:
    """(x, normalized tensor node, eps, n) for the layer-norm core starting at ``mean1``."""
    x = mean1.inputs[0]
    shape = _shape(graph, x)
    dims = mean1.attrs.get("dims")
    if not mean1.attrs.get("keepdim") or not shape or not dims:
        return None
    if tuple(dims) != tuple(range(len(shape) - len(dims), len(shape))):
        return None
    sub = graph.sole_consumer(mean1.output)
    if sub is None or sub.op != "sub" or sub.inputs != [x, mean1.output]:
        return None
    xc = sub.output
    readers = graph.readers(xc)
    if len(readers) != 2 or xc in graph.outputs:
        return None
    sq = next((r for r in readers if _square_of(graph, r, xc)), None)
    final = next((r for r in readers if r is not sq), None)
    if sq is None or final is None:
        return None
    mean2 = graph.sole_consumer(sq.output)
    if mean2 is None or mean2.op != "mean" or mean2.attrs.get("dims") != dims:
        return None
    add = graph.sole_consumer(mean2.output)
    if add is None or add.op != "add" or add.inputs[0] != mean2.output:
        return None
    eps = _scalar(graph, add.inputs[1])
    root = graph.sole_consumer(add.output)
    if eps is None or root is None:
        return None
    if root.op == "rsqrt" and final.op == "mul" and _other(final, xc) == root.output:
        pass
    elif root.op == "sqrt":
        recip = graph.sole_consumer(root.output)
        if final.op == "div" and final.inputs == [xc, root.output]:
            pass
        elif recip is None or recip.op != "reciprocal" or _other(final, xc) != recip.output:
            return None
        elif final.op != "mul" or graph.sole_consumer(recip.output) is not final:
            return None
    else:
        return None
    return x, final, eps, math.prod(shape[len(shape) - len(dims) :])


def fuse_layer_norm(graph: Graph) -> bool:
    """The layer-norm subgraph (see the module docstring) into one layer_norm node."""
    changed = False
    for mean1 in list(graph.order()):
        if mean1.op != "mean" or mean1 not in graph.nodes:
            continue
        hit = _match_layer_norm(graph, mean1)
        if hit is None:
            continue
        x, last, eps, n = hit
        inputs = [x]
        attrs = {"n": n, "eps": eps, "has_weight": False, "has_bias": False}
        dtype = graph.tensors[x].dtype
        for flag, op in (("has_weight", "mul"), ("has_bias", "add")):
            nxt = graph.sole_consumer(last.output)
            if nxt is None or nxt.op != op or _shape(graph, nxt.output) != _shape(graph, x):
                continue
            other = _other(nxt, last.output)
            data = _const(graph, other) if other else None
            if data is None or data.size != n or graph.tensors[other].dtype is not dtype:
                continue
            inputs.append(graph.add_constant(data.reshape(-1).copy(), dtype=dtype))
            attrs[flag] = True
            last = nxt
        info = graph.tensors[x]
        fused = graph.add_node("layer_norm", inputs, info.shape, info.dtype, attrs)
        graph.bypass(last, fused.output)
        changed = True
    return changed


# ---------------------------------------------------------------------- gelu tanh, silu
def _factors(graph: Graph, node, out: list, top: bool) -> None:
    """The leaves of the product tree rooted at mul ``node`` (inner muls read only there)."""
    for name in node.inputs:
        src = graph.producer.get(name)
        if src is not None and src.op == "mul" and graph.sole_consumer(name) is node:
            _factors(graph, src, out, False)
        else:
            out.append(name)


def _is_cube(graph: Graph, name: str, x: str) -> bool:
    node = graph.producer.get(name)
    if node is None:
        return False
    if node.op == "pow":
        return node.inputs[0] == x and _scalar(graph, node.inputs[1]) == 3.0
    if node.op == "mul":
        leaves: list = []
        _factors(graph, node, leaves, True)
        return leaves == [x, x, x]
    return False


def _close(value, want: float) -> bool:
    return value is not None and abs(value - want) <= 1e-6 * abs(want)


def fuse_gelu_tanh(graph: Graph) -> bool:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))) into gelu(approximate='tanh')."""
    changed = False
    for t in list(graph.order()):
        if t.op != "tanh" or t not in graph.nodes:
            continue
        inner = graph.producer.get(t.inputs[0])
        if inner is None or inner.op != "mul":
            continue
        leaves: list = []
        _factors(graph, inner, leaves, True)
        consts = [n for n in leaves if _scalar(graph, n) is not None]
        if len(leaves) != 2 or len(consts) != 1:
            continue
        if not _close(_scalar(graph, consts[0]), math.sqrt(2 / math.pi)):
            continue
        poly = graph.producer.get(next(n for n in leaves if n not in consts))
        if poly is None or poly.op != "add":
            continue
        x = cubic = None
        for a, b in (poly.inputs, poly.inputs[::-1]):
            term = graph.producer.get(b)
            if term is not None and term.op == "mul":
                tl: list = []
                _factors(graph, term, tl, True)
                c = [n for n in tl if _scalar(graph, n) is not None]
                rest = [n for n in tl if n not in c]
                if len(c) != 1 or not _close(_scalar(graph, c[0]), 0.044715):
                    continue
                # x**3 as one factor (pow, or a product read only there), or x*x*x*c flat
                if (len(rest) == 1 and _is_cube(graph, rest[0], a)) or rest == [a, a, a]:
                    x, cubic = a, term
        if x is None or cubic is None:
            continue
        if _gelu_at(graph, t, x, "tanh"):
            changed = True
    return changed


def _gelu_at(graph: Graph, inner, x: str, approximate: str) -> bool:
    """Replace ``0.5 * x * (1 + inner)`` by ``gelu(x, approximate)`` (``inner``: the tanh or erf
    node of the scaled x) when inner's output is read only by the ``1 +`` and that only by the
    product (``_half_x_times``); returns whether it did."""
    one_plus = graph.sole_consumer(inner.output)
    if one_plus is None or one_plus.op != "add":
        return False
    if _scalar(graph, _other(one_plus, inner.output) or inner.output) != 1.0:
        return False
    top = _half_x_times(graph, one_plus, x)
    if top is None:
        return False
    info = graph.tensors[top.output]
    fused = graph.add_node("gelu", [x], info.shape, info.dtype, {"approximate": approximate})
    graph.bypass(top, fused.output)
    return True


def _half_x_times(graph: Graph, one_plus, x: str):
    """The top node of the product ``0.5 * x * one_plus`` (any order, inner products read only
    there) that reads ``one_plus``'s output, else None."""
    top = graph.sole_consumer(one_plus.output)
    while top is not None and top.op == "mul":
        up = graph.sole_consumer(top.output)
        if up is None or up.op != "mul":
            break
        top = up
    if top is None or top.op != "mul":
        return None
    leaves: list = []
    _factors(graph, top, leaves, True)
    halves = [n for n in leaves if _scalar(graph, n) == 0.5]
    if len(halves) != 1 or sorted(leaves) != sorted([x, one_plus.output, halves[0]]):
        return None
    return top if graph.tensors[top.output].shape == _shape(graph, x) else None


def fuse_gelu_erf(graph: Graph) -> bool:
    """0.5 * x * (1 + erf(x / sqrt(2))) (or erf(x * sqrt(0.5))) into gelu (exact): how
    exporters write nn.GELU (ONNX's Div / Erf / Add / Mul) and how a model spells it out."""
    changed = False
    for erf in list(graph.order()):
        if erf.op != "erf" or erf not in graph.nodes:
            continue
        scaled = graph.producer.get(erf.inputs[0])
        if scaled is None or scaled.op not in ("mul", "div") or len(scaled.inputs) != 2:
            continue
        if graph.sole_consumer(scaled.output) is not erf:
            continue
        x, c = scaled.inputs
        if scaled.op == "mul" and _scalar(graph, c) is None:
            x, c = c, x
        want = math.sqrt(2) if scaled.op == "div" else math.sqrt(0.5)
        if not _close(_scalar(graph, c), want) or _shape(graph, x) != _shape(graph, erf.output):
            continue
        if _gelu_at(graph, erf, x, "none"):
            changed = True
    return changed


def fuse_silu(graph: Graph) -> bool:
    """x * sigmoid(x) into silu(x)."""
    changed = False
    for sig in list(graph.order()):
        if sig.op != "sigmoid" or sig not in graph.nodes:
            continue
        x = sig.inputs[0]
        mul = graph.sole_consumer(sig.output)
        if mul is None or mul.op != "mul" or _other(mul, sig.output) != x:
            continue
        info = graph.tensors[mul.output]
        if info.shape != _shape(graph, x):
            continue
        fused = graph.add_node("silu", [x], info.shape, info.dtype)
        graph.bypass(mul, fused.output)
        changed = True
    return changed


# ------------------------------------------------------------------- conv + affine (BN)
def _per_channel(graph: Graph, name: str, channels: int, ndim: int):
    """A constant that varies along dim 1 of an [N, C, H, W] result only, as a [C] vector."""
    data = _const(graph, name)
    if data is None or data.dtype.kind != "f":
        return None
    shape = (1,) * (ndim - data.ndim) + data.shape
    if len(shape) != ndim or any(s != 1 for i, s in enumerate(shape) if i != 1):
        return None
    if shape[1] not in (1, channels):
        return None
    return np.broadcast_to(data.reshape(-1), (channels,)).astype(np.float64)


def fuse_conv_affine(graph: Graph) -> bool:
    """conv2d -> mul/div/add/sub by a per-channel constant into the conv's weight and bias."""
    changed = False
    for conv in list(graph.order()):
        if conv.op != "conv2d" or conv not in graph.nodes:
            continue
        w = _const(graph, conv.inputs[1])
        b = _const(graph, conv.inputs[2]) if len(conv.inputs) > 2 else None
        if w is None or (len(conv.inputs) > 2 and b is None):
            continue
        out = graph.tensors[conv.output]
        o = w.shape[0]
        scale = np.ones(o)
        shift = np.zeros(o) if b is None else b.astype(np.float64)
        last = conv
        while True:
            reader = graph.sole_consumer(last.output)
            if reader is None or reader.op not in ("mul", "div", "add", "sub"):
                break
            if _shape(graph, reader.output) != out.shape:
                break
            other = _other(reader, last.output)
            if other is None or (reader.op in ("div", "sub") and reader.inputs[0] != last.output):
                break
            c = _per_channel(graph, other, o, len(out.shape))
            if c is None:
                break
            if reader.op == "mul":
                scale, shift = scale * c, shift * c
            elif reader.op == "div":
                scale, shift = scale / c, shift / c
            elif reader.op == "add":
                shift = shift + c
            else:
                shift = shift - c
            last = reader
        if last is conv:
            continue
        dt = w.dtype
        new_w = graph.add_constant((w * scale.reshape(-1, 1, 1, 1)).astype(dt))
        new_b = graph.add_constant(shift.astype(dt))
        fused = graph.add_node("conv2d", [conv.inputs[0], new_w, new_b], out.shape, out.dtype)
        fused.attrs = dict(conv.attrs)
        graph.bypass(last, fused.output)
        changed = True
    return changed


# ------------------------------------------------------------------- conv epilogue (ResNet)
def fuse_conv_epilogue(graph: Graph) -> bool:
    """conv2d [-> add(res)] [-> relu] into conv2d_act (float32 / float64, at least one of the
    two): the add's other operand must have the output's shape and dtype (no broadcasting)."""
    changed = False
    for conv in list(graph.order()):
        if conv.op != "conv2d" or conv not in graph.nodes:
            continue
        out = graph.tensors[conv.output]
        if out.dtype.np not in (np.float32, np.float64) or len(out.shape) != 4:
            continue
        last, res = conv, None
        reader = graph.sole_consumer(conv.output)
        if reader is not None and reader.op == "add" and _shape(graph, reader.output) == out.shape:
            other = _other(reader, conv.output)
            info = graph.tensors[other] if other else None
            if info is not None and info.shape == out.shape and info.dtype is out.dtype:
                last, res = reader, other
        reader = graph.sole_consumer(last.output)
        act = None
        if reader is not None and reader.op == "relu":
            last, act = reader, "relu"
        if last is conv:
            continue
        inputs = list(conv.inputs) + ([res] if res else [])
        attrs = {k: conv.attrs[k] for k in ("stride", "padding", "dilation")}
        attrs.update(bias=len(conv.inputs) > 2, res=res is not None, act=act)
        fused = graph.add_node("conv2d_act", inputs, out.shape, out.dtype, attrs)
        graph.bypass(last, fused.output)
        changed = True
    return changed
