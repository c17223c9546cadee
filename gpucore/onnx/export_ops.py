"""The exporter's table: one emitter per runtime op, writing ONNX nodes (opset 17).

An emitter gets the ``Emit`` context, the graph node, and returns nothing: it appends ONNX nodes
whose last output is the node's output name. The exporter writes primitives only (a captured
layer norm stays mean/sub/mul/..., as captured); ONNX Runtime's own passes fuse them. Static
shapes: view ops become a Reshape to the captured output shape.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D

OPSET = 17

# registry op -> ONNX op for ops that map one to one, inputs in order, no attributes
_SAME = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "matmul": "MatMul",
    "maximum": "Max", "minimum": "Min", "neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log",
    "sqrt": "Sqrt", "reciprocal": "Reciprocal", "relu": "Relu", "sigmoid": "Sigmoid",
    "tanh": "Tanh", "sin": "Sin", "cos": "Cos", "erf": "Erf", "floor": "Floor", "ceil": "Ceil",
    "sign": "Sign", "clone": "Identity", "contiguous": "Identity", "eq": "Equal", "lt": "Less",
    "gt": "Greater", "le": "LessOrEqual", "ge": "GreaterOrEqual", "where": "Where",
    "logical_not": "Not", "logical_and": "And", "logical_or": "Or", "isnan": "IsNaN",
}  # fmt: skip

ONNX_DTYPE = {
    D.float32: 1, D.uint8: 2, D.int8: 3, D.uint16: 4, D.int16: 5, D.int32: 6, D.int64: 7,
    D.bool_: 9, D.float16: 10, D.float64: 11, D.uint32: 12, D.uint64: 13, D.bfloat16: 16,
}  # fmt: skip

EMITTERS: dict = {}


def emitter(*names):
    def register(fn):
        for n in names:
            EMITTERS[n] = fn
        return fn

    return register


def _same(e, node) -> None:
    e.node(_SAME[node.op], node.inputs, node.output)


for _op in _SAME:
    EMITTERS[_op] = _same


def _axes(dims, ndim: int) -> list:
    return [int(d) % max(ndim, 1) for d in dims]


@emitter("view", "reshape", "flatten", "squeeze", "unsqueeze")
def _reshape(e, node) -> None:
    e.node("Reshape", [node.inputs[0], e.shape_tensor(e.shape(node.output))], node.output)


@emitter("permute")
def _permute(e, node) -> None:
    e.node("Transpose", node.inputs[:1], node.output, perm=list(node.attrs["dims"]))


@emitter("transpose")
def _transpose(e, node) -> None:
    n = len(e.shape(node.inputs[0]))
    perm = list(range(n))
    a, b = _axes((node.attrs["dim0"], node.attrs["dim1"]), n)
    perm[a], perm[b] = perm[b], perm[a]
    e.node("Transpose", node.inputs[:1], node.output, perm=perm)


@emitter("expand")
def _expand(e, node) -> None:
    e.node("Expand", [node.inputs[0], e.shape_tensor(e.shape(node.output))], node.output)


@emitter("getitem")
def _getitem(e, node) -> None:
    """Basic indexing (slices with positive steps, ints, None, Ellipsis): one Slice, then a
    Reshape to the captured shape (dropping int-indexed dims, adding None's)."""
    src = e.shape(node.inputs[0])
    key = node.attrs["key"]
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        real = sum(1 for k in key if k is not None and k is not Ellipsis)
        key = key[:i] + (slice(None),) * (len(src) - real) + key[i + 1 :]
    starts, ends, axes, steps = [], [], [], []
    dim = 0
    for k in key:
        if k is None:
            continue
        if isinstance(k, slice) and k == slice(None):
            dim += 1
            continue
        if not isinstance(src[dim], (int, np.integer)) or _symbolic(k):
            e.unsupported(node, "a slice or index of a dynamic axis")
        if isinstance(k, slice):
            start, stop, step = k.indices(src[dim])
            if step <= 0:
                e.unsupported(node, "a slice with a negative step")
        elif isinstance(k, (int, np.integer)):
            start = int(k) % src[dim]
            stop, step = start + 1, 1
        else:
            e.unsupported(node, f"an index of type {type(k).__name__}")
        if (start, stop, step) != (0, src[dim], 1):
            starts.append(start)
            ends.append(stop)
            axes.append(dim)
            steps.append(step)
        dim += 1
    x = node.inputs[0]
    if axes:
        args = [np.array(v, dtype=np.int64) for v in (starts, ends, axes, steps)]
        x = e.node("Slice", [x] + [e.const(a, n) for a, n in zip(args, "seas")], e.tmp())
    e.node("Reshape", [x, e.shape_tensor(e.shape(node.output))], node.output)


def _symbolic(k) -> bool:
    parts = (k.start, k.stop, k.step) if isinstance(k, slice) else (k,)
    return any(p is not None and not isinstance(p, (int, np.integer)) for p in parts)


@emitter("linear")
def _linear(e, node) -> None:
    x, w = node.inputs[0], node.inputs[1]
    if len(e.shape(x)) == 2:  # Gemm keeps the weight as it is (and its state_dict name)
        e.node("Gemm", node.inputs, node.output, transB=1)
        return
    wt = e.transposed_constant(w)
    if len(node.inputs) > 2:
        y = e.node("MatMul", [x, wt], e.tmp())
        e.node("Add", [y, node.inputs[2]], node.output)
    else:
        e.node("MatMul", [x, wt], node.output)


@emitter("conv2d")
def _conv2d(e, node) -> None:
    a = node.attrs
    ph, pw = a.get("padding", (0, 0))
    e.node(
        "Conv",
        node.inputs,
        node.output,
        strides=list(a.get("stride", (1, 1))),
        pads=[ph, pw, ph, pw],
        dilations=list(a.get("dilation", (1, 1))),
        group=int(a.get("groups", 1)),
    )


@emitter("max_pool2d")
def _max_pool2d(e, node) -> None:
    a = node.attrs
    if a.get("output_index", 0) != 0:
        e.unsupported(node, "the indices output of max_pool2d")
    ph, pw = a["padding"]
    e.node(
        "MaxPool",
        node.inputs[:1],
        node.output,
        kernel_shape=list(a["kernel"]),
        strides=list(a["stride"]),
        pads=[ph, pw, ph, pw],
        dilations=list(a["dilation"]),
        ceil_mode=int(a["ceil_mode"]),
    )


def _reduce(onnx_op: str, axes_as_input: bool):
    def emit(e, node) -> None:
        n = len(e.shape(node.inputs[0]))
        dims = node.attrs.get("dims")
        axes = list(range(n)) if dims is None or dims == () else _axes(dims, n)
        keep = int(bool(node.attrs.get("keepdim", False)))
        if axes_as_input:
            ax = e.const(np.array(axes, dtype=np.int64), "axes")
            e.node(onnx_op, [node.inputs[0], ax], node.output, keepdims=keep)
        else:
            e.node(onnx_op, node.inputs[:1], node.output, axes=axes, keepdims=keep)

    return emit


EMITTERS["sum"] = _reduce("ReduceSum", True)
EMITTERS["mean"] = _reduce("ReduceMean", False)
EMITTERS["amax"] = _reduce("ReduceMax", False)
EMITTERS["amin"] = _reduce("ReduceMin", False)


@emitter("max_dim", "min_dim")
def _max_dim(e, node) -> None:
    n = len(e.shape(node.inputs[0]))
    axis = _axes((node.attrs["dim"],), n)[0]
    keep = int(bool(node.attrs.get("keepdim", False)))
    if node.attrs.get("output_index", 0) == 0:
        op = "ReduceMax" if node.op == "max_dim" else "ReduceMin"
        e.node(op, node.inputs[:1], node.output, axes=[axis], keepdims=keep)
    else:
        op = "ArgMax" if node.op == "max_dim" else "ArgMin"
        e.node(op, node.inputs[:1], node.output, axis=axis, keepdims=keep)


@emitter("argmax", "argmin")
def _argmax(e, node) -> None:
    op = "ArgMax" if node.op == "argmax" else "ArgMin"
    keep = int(bool(node.attrs.get("keepdim", False)))
    dim = node.attrs.get("dim")
    if dim is None:  # over the flattened tensor
        flat = e.const(np.array([-1], dtype=np.int64), "flat")
        x = e.node("Reshape", [node.inputs[0], flat], e.tmp())
        y = e.node(op, [x], e.tmp(), axis=0, keepdims=0)
        e.node("Reshape", [y, e.shape_tensor(e.shape(node.output))], node.output)
        return
    axis = _axes((dim,), len(e.shape(node.inputs[0])))[0]
    e.node(op, node.inputs[:1], node.output, axis=axis, keepdims=keep)


@emitter("softmax", "log_softmax")
def _softmax(e, node) -> None:
    n = len(e.shape(node.inputs[0]))
    op = "Softmax" if node.op == "softmax" else "LogSoftmax"
    e.node(op, node.inputs[:1], node.output, axis=_axes((node.attrs["dim"],), n)[0])


@emitter("gelu")
def _gelu(e, node) -> None:
    x = node.inputs[0]
    half = e.const(np.array(0.5, dtype=e.np_dtype(x)), "half")
    one = e.const(np.array(1.0, dtype=e.np_dtype(x)), "one")
    if node.attrs.get("approximate", "none") == "tanh":
        c = e.const(np.array(np.sqrt(2 / np.pi), dtype=e.np_dtype(x)), "c")
        k = e.const(np.array(0.044715, dtype=e.np_dtype(x)), "k")
        x3 = e.node("Mul", [e.node("Mul", [x, x], e.tmp()), x], e.tmp())
        inner = e.node(
            "Mul", [e.node("Add", [x, e.node("Mul", [x3, k], e.tmp())], e.tmp()), c], e.tmp()
        )
        t = e.node("Tanh", [inner], e.tmp())
    else:
        r2 = e.const(np.array(np.sqrt(2.0), dtype=e.np_dtype(x)), "sqrt2")
        t = e.node("Erf", [e.node("Div", [x, r2], e.tmp())], e.tmp())
    s = e.node("Mul", [e.node("Add", [t, one], e.tmp()), half], e.tmp())
    e.node("Mul", [x, s], node.output)


@emitter("clamp")
def _clamp(e, node) -> None:
    dt = e.np_dtype(node.inputs[0])
    lo, hi = node.attrs.get("min"), node.attrs.get("max")
    args = [node.inputs[0]]
    args.append("" if lo is None else e.const(np.array(lo, dtype=dt), "min"))
    args.append("" if hi is None else e.const(np.array(hi, dtype=dt), "max"))
    e.node("Clip", args, node.output)


@emitter("to_dtype")
def _cast(e, node) -> None:
    e.node("Cast", node.inputs[:1], node.output, to=ONNX_DTYPE[node.attrs["dtype"]])


@emitter("cat")
def _cat(e, node) -> None:
    n = len(e.shape(node.output))
    e.node("Concat", node.inputs, node.output, axis=_axes((node.attrs["dim"],), n)[0])


@emitter("gather")
def _gather(e, node) -> None:
    n = len(e.shape(node.inputs[0]))
    e.node("GatherElements", node.inputs[:2], node.output, axis=_axes((node.attrs["dim"],), n)[0])


@emitter("index_select")
def _index_select(e, node) -> None:
    n = len(e.shape(node.inputs[0]))
    e.node("Gather", node.inputs[:2], node.output, axis=_axes((node.attrs["dim"],), n)[0])


@emitter("qlinear_dynamic")
def _qlinear_dynamic(e, node) -> None:
    """The float-input form (a quantize_dynamic Linear, runtime/passes/dynamic_linear.py) as
    ONNX Runtime's ``quantize_dynamic`` writes a MatMul with per-channel weights:
    DynamicQuantizeLinear -> MatMulInteger (the int8 weight [K, N] written as uint8 w + 128,
    zero points 128 per column: ONNX Runtime computes this form exactly) -> Cast ->
    Mul(a_scale * w_scales) [-> Add(bias)] [-> Relu]. ONNX's DynamicQuantizeLinear picks the
    activations' parameters as ONNX does (no eps floor; x / scale rounded before the zero point
    is added), not as PyTorch: within one activation quantization step of the gpucore layer
    (gpucore.onnx.load runs it as ONNX does, bit for bit)."""
    if len(node.inputs) > 4:
        e.unsupported(node, "the uint8-input form (ONNX's own dynamic quantization)")
    x, w, ws = node.inputs[:3]
    n = e.shape(w)[0]
    q, s, z = e.tmp(), e.tmp(), e.tmp()
    e.nodes.append(
        e.helper.make_node(
            "DynamicQuantizeLinear", [x], [q, s, z], name=f"{q}/DynamicQuantizeLinear"
        )
    )
    # The weights as uint8 w + 128 with zero points 128 (the same integer products): ONNX
    # Runtime's uint8 x int8 kernel on AVX2 without VNNI saturates pairs of products of
    # full-range int8 weights at int16 (vpmaddubsw); its uint8 x uint8 kernel is exact.
    w_zp = e.const(np.full(n, 128, np.uint8), "w_zero_point")
    data = e.graph.tensors[w].data
    if data is None:
        e.unsupported(node, "a weight that is not a constant")
    w_u8 = e.const((np.asarray(data).T.astype(np.int16) + 128).astype(np.uint8), "w_uint8")
    acc = e.node("MatMulInteger", [q, w_u8, z, w_zp], e.tmp())
    scales = e.node("Mul", [s, ws], e.tmp())
    f = e.node("Cast", [acc], e.tmp(), to=ONNX_DTYPE[D.float32])
    steps = (["add"] if len(node.inputs) > 3 else []) + (["relu"] if node.attrs.get("relu") else [])
    y = e.node("Mul", [f, scales], node.output if not steps else e.tmp())
    for i, step in enumerate(steps):
        out = node.output if i == len(steps) - 1 else e.tmp()
        y = e.node("Add", [y, node.inputs[3]], out) if step == "add" else e.node("Relu", [y], out)
