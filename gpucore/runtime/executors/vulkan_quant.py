"""The Vulkan executor's recordings of the runtime's quantized ops (gpucore/runtime/ir/
quantized.py), bit for bit with the CPU executor on the same graph:

- ``quantize_linear``: qgemm.comp's QUANTIZE mode (``kernels/qgemm.py: quantize_rows``, the
  rounding of ``_cpu.quantize_u8``, NaN -> 255, or with ``onnx=True`` ONNX's QuantizeLinear as
  ``_cpu.quantize_linear_u8``: a correctly rounded division, ``quantize_onnx_u8``, on devices
  with shaderFloat64) over the flattened tensor;
- ``dequantize_linear`` (per tensor): ``kernels/qtensor.py: dequantize_u8``;
- ``qlinear`` and ``qmatmul_integer`` (attribute zero point): the int8 GEMM shader
  (``kernels/qgemm.py: qgemm``) with its requantizing epilogue (uint8, float32 or int32 out;
  a float32 bias, or ONNX's int32 one added to the int32 sums);
- ``qconv2d`` and ``qconv2d_integer``: the uint8 activation rows of the convolution
  (``im2col_rows``, padded with the activation zero point), the int8 GEMM into [N * oh * ow, O],
  then the NCHW layout of ``_cpu.qconv2d`` (``rows_to_nchw`` for uint8, a strided copy of
  words otherwise);
- ``qmax_pool2d``: ``max_pool2d_u8``;
- ONNX dynamic quantization: ``dynamic_quantize_linear`` (shaders/dynamic_quantize.comp,
  ``kernels/qdynamic.py``: the range, scale and zero point of x computed once per capture into
  a workspace shared by the op's three nodes, then y, or a copy of the scale / zero point: none
  when every reader is an int8 GEMM, which then reads the workspace), ``qlinear_dynamic`` and
  ``qmatmul_integer`` with its zero point a tensor (``qgemm.qgemm_dynamic``: the GEMM reads the
  scale and zero point on the device when it runs, as ``_cpu.qgemm_dynamic``; a relu epilogue
  too); the float-input ``qlinear_dynamic`` (PyTorch's quantize_dynamic Linear,
  runtime/passes/dynamic_linear.py's fusion): PyTorch's scale, zero point and 1 / scale of x
  into a workspace and x's uint8 rows (``kernels/qdynamic.py``: ``dynamic_qparams(torch=True)``,
  ``torch_quantize_rows``), then ``qgemm_dynamic`` reading them, as
  ``_cpu.dynamic_quantize_torch_u8`` -> ``_cpu.qgemm_dynamic``: three or four dispatches, the
  first two or three once per input the nodes share (devices with shaderFloat64).

The int8 weights are packed and uploaded once per executor (``QWeight``, shared by its runners; the
raw constant is not uploaded when only int8 GEMMs read it); the per-channel scales and bias (graph
constants) are folded into the epilogue's factors on the host when a runner records its command
buffer. Refused (DeviceError at compile, naming the node; compile such models for the CPU): ONNX's
QuantizeLinear rounding or DynamicQuantizeLinear on a device without shaderFloat64 (their correctly
rounded divisions; so also PyTorch's dynamic Linear in one node, which runs as its traced
primitives there, passes/__init__.py's vulkan_pipeline), ONNX's QuantizeLinear with a subnormal
scale, K > 65536 (int32 sums), a per-channel ``dequantize_linear`` of a weight, and scales /
weights / biases that are not constants.
"""

from __future__ import annotations

import numpy as np

from ...backends.vulkan.kernels import qdynamic as vk_dq
from ...backends.vulkan.kernels import qtensor as vk_q
from ...backends.vulkan.kernels.common import contiguous, copy_array
from ...backends.vulkan.kernels.qgemm import MAX_K, pack_weight, qgemm, qgemm_dynamic, quantize_rows
from ...errors import DeviceError

QUANT_OPS = frozenset(
    ("quantize_linear", "dequantize_linear", "qlinear", "qconv2d", "qmax_pool2d",
     "qmatmul_integer", "qconv2d_integer", "dynamic_quantize_linear", "qlinear_dynamic")
)  # fmt: skip
_FLT_MIN = float(np.finfo(np.float32).tiny)
_GEMMS = ("qlinear", "qconv2d", "qmatmul_integer", "qconv2d_integer", "qlinear_dynamic")
# the int8 GEMMs reading a DynamicQuantizeLinear's scale / zero point: {op: (scale's input
# index or None, zero point's)}
_DYN_READERS = {"qlinear_dynamic": (2, 3), "qmatmul_integer": (None, 2)}


def unsupported(graph, node, float64: bool) -> str | None:
    """Why the Vulkan executor cannot record ``node`` (a QUANT_OPS op) on a device with
    (``float64``) or without shaderFloat64, or None."""
    ins = node.inputs
    if node.op == "quantize_linear":
        if node.attrs.get("onnx") and not float64:
            return "ONNX's QuantizeLinear rounding needs shaderFloat64 for its exact residuals"
        if node.attrs.get("onnx") and not abs(float(node.attrs["scale"])) >= _FLT_MIN:
            # the shader multiplies by 1 / scale (inf) and devices may flush subnormals
            return "a subnormal scale"
        return None
    if node.op == "dequantize_linear":
        return "a per-channel weight dequantization" if len(ins) != 1 else None
    if node.op == "qmax_pool2d":
        return None
    if node.op == "dynamic_quantize_linear":
        return None if float64 else "DynamicQuantizeLinear's rounded divisions need shaderFloat64"
    if node.op in ("qmatmul_integer", "qconv2d_integer"):
        consts = ins[1:2]
    elif node.op == "qlinear_dynamic":
        if len(ins) < 5 and not float64:  # (vulkan_pipeline leaves the traced ops there)
            return "PyTorch's activation quantization needs shaderFloat64 (rounded divisions)"
        # (the uint8 form's activation scale and zero point: any tensors)
        consts = [ins[1], *ins[2 if len(ins) < 5 else 4 :]]
    else:
        consts = ins[1:]
    if any(graph.tensors[n].data is None for n in consts):
        return "weights, scales and bias must be constants"
    w = graph.tensors[ins[1]].data
    if int(np.prod(w.shape[1:])) > MAX_K:
        return f"K > {MAX_K}"
    return None


def pack_weights(be, graph, nodes) -> dict:
    """{weight name: QWeight} for the int8 GEMM nodes among ``nodes`` (uploaded once)."""
    out: dict = {}
    for node in nodes:
        if node.op in _GEMMS and node.inputs[1] not in out:
            w = np.asarray(graph.tensors[node.inputs[1]].data)
            out[node.inputs[1]] = pack_weight(be, w.reshape(w.shape[0], -1))
    return out


def packed_only(graph, weights: dict) -> set:
    """The names among ``weights`` that no node reads but as an int8 GEMM's weight (input 1):
    their packed copy is all the device needs, so the raw constant is not uploaded."""
    return {
        name
        for name in weights
        if name not in graph.outputs
        and all(
            r.op in _GEMMS and name not in (r.inputs[0], *r.inputs[2:]) for r in graph.readers(name)
        )
    }


def _epilogue(node, graph) -> dict:
    """qgemm's keyword arguments for the node's epilogue (host constants)."""
    a = node.attrs
    if node.op in ("qmatmul_integer", "qconv2d_integer"):
        return {"a_zero_point": int(a["a_zero_point"])}
    host = [np.asarray(graph.tensors[n].data) for n in node.inputs[2:]]
    kw = {
        "a_scale": float(a["a_scale"]),
        "a_zero_point": int(a["a_zero_point"]),
        "w_scales": host[0],
        "bias": host[1] if len(host) > 1 else None,
        "relu": bool(a["relu"]),
    }
    if a.get("out_scale") is not None:
        kw.update(out_scale=float(a["out_scale"]), out_zero_point=int(a["out_zero_point"]))
    return kw


def _dynamic_params(be, x: np.ndarray, node, memo: dict) -> tuple:
    """(workspace, kept arrays) of DynamicQuantizeLinear's parameters of ``node``'s input:
    recorded by the first of its nodes in this capture (x does not change before its last
    reader), reused by the others."""
    name = node.inputs[0]
    if name not in memo:
        memo[name] = vk_dq.dynamic_qparams(be, x)
        return memo[name], [memo[name].ws]
    return memo[name], []


def _direct(graph, node) -> bool:
    """Whether the scale / zero point node ``node`` (output_index 1 or 2) feeds int8 GEMMs alone,
    at the operand they read on the device (its output then is never written)."""
    readers = graph.consumers.get(node.output, ())
    if node.output in graph.outputs or not readers:
        return False
    slot = 0 if node.attrs["output_index"] == 1 else 1
    for r in readers:
        spec = _DYN_READERS.get(r.op)
        i = spec[slot] if spec else None
        if i is None or len(r.inputs) <= i or r.inputs[i] != node.output:
            return False
        if node.output in r.inputs[:i] + r.inputs[i + 1 :]:
            return False
    return True


def _dynamic_operand(ins: list, node, i, memo: dict):
    """The device array an int8 GEMM reads its activations' scale / zero point from (input
    ``i``): the workspace view of a DynamicQuantizeLinear whose output was never written, else
    the input itself."""
    if i is None:
        return None
    return memo.get(("view", node.inputs[i]), ins[i])


def _record_dynamic(be, out, x, ins, node, graph, weights, memo) -> list:
    """dynamic_quantize_linear, qlinear_dynamic and qmatmul_integer with a zero point tensor."""
    if node.op == "dynamic_quantize_linear":
        ws, keep = _dynamic_params(be, x, node, memo)
        index = node.attrs["output_index"]
        if index == 0:
            vk_dq.dynamic_quantize_u8(be, out, x, ws)
            return keep
        view = vk_dq.scale_of(ws) if index == 1 else vk_dq.zero_point_of(ws)
        if _direct(graph, node):
            memo["view", node.output] = view
        else:
            copy_array(be, out, view.reshape(out.shape))
        return keep
    qw = weights[node.inputs[1]]
    if node.op == "qlinear_dynamic" and len(node.inputs) < 5:
        return _record_torch_linear(be, out, x, node, graph, qw, memo)
    si, zi = _DYN_READERS[node.op]
    scale, zp = _dynamic_operand(ins, node, si, memo), _dynamic_operand(ins, node, zi, memo)
    host = [np.asarray(graph.tensors[n].data) for n in node.inputs[4:]]
    kw = {"w_scales": host[0], "bias": host[1] if len(host) > 1 else None} if host else {}
    if node.attrs.get("relu"):
        kw["relu"] = True
    flat = [contiguous(be, v) if v is not None else None for v in (scale, zp)]
    qgemm_dynamic(be, x.reshape(-1, qw.k), qw, out.reshape(-1, qw.n), *flat, **kw)
    return [v for v, orig in zip(flat, (scale, zp)) if v is not orig]


def _record_torch_linear(be, out, x, node, graph, qw, memo: dict) -> list:
    """The float-input qlinear_dynamic: PyTorch's parameters and rows of x, then the GEMM
    reading them (module docstring); returns the workspace to keep. The parameters and rows
    are recorded by the first node reading x in this capture and reused by the others (Q / K
    / V projections of one input: one range pass and one quantization, not three; x does not
    change before its last reader, as for ``_dynamic_params``)."""
    host = [np.asarray(graph.tensors[n].data) for n in node.inputs[2:]]
    key = ("torch", node.inputs[0])
    keep: list = []
    if key not in memo:
        rows = x.reshape(-1, qw.k)
        qp = vk_dq.dynamic_qparams(be, rows, torch=True)
        memo[key] = qp, vk_dq.torch_quantize_rows(be, rows, qp)
        keep = [qp.ws, memo[key][1]]
    qp, q = memo[key]
    qgemm_dynamic(
        be, q[:, : qw.k], qw, out.reshape(-1, qw.n), vk_dq.scale_of(qp), vk_dq.zero_point_of(qp),
        host[0], host[1] if len(host) > 1 else None, bool(node.attrs.get("relu")),
    )  # fmt: skip
    return keep


def record(be, out: np.ndarray, ins: list, node, graph, weights: dict, memo: dict) -> list:
    """Record ``node`` (a supported QUANT_OPS op) writing ``out``; returns the workspace the
    capture must keep. ``memo``: one dict per capture (dynamic quantization's shared
    workspaces)."""
    a = node.attrs
    keep: list = []
    x = contiguous(be, ins[0])
    if x is not ins[0]:
        keep.append(x)
    dynamic = node.op == "qmatmul_integer" and len(node.inputs) > 2
    if dynamic or node.op in ("dynamic_quantize_linear", "qlinear_dynamic"):
        return keep + _record_dynamic(be, out, x, ins, node, graph, weights, memo)
    if node.op == "quantize_linear":
        inv = np.float32(1) / np.float32(a["scale"])  # _cpu.quantize_u8's
        if a.get("onnx"):  # ONNX's rounding: a correctly rounded division
            vk_q.quantize_onnx_u8(be, out, x, float(a["scale"]), int(a["zero_point"]))
        else:
            rows = (x.reshape(1, -1), float(inv), int(a["zero_point"]), out.reshape(1, -1))
            quantize_rows(be, *rows)
    elif node.op == "dequantize_linear":
        vk_q.dequantize_u8(be, out, x, np.float32(a["scale"]), int(a["zero_point"]))
    elif node.op == "qmax_pool2d":
        geo = (a["kernel"], a["stride"], a["padding"], a["dilation"])
        vk_q.max_pool2d_u8(be, out, x, *geo)
    elif node.op in ("qlinear", "qmatmul_integer"):
        qw = weights[node.inputs[1]]
        qgemm(be, x.reshape(-1, qw.k), qw, out.reshape(-1, qw.n), **_epilogue(node, graph))
    else:  # qconv2d, qconv2d_integer
        keep += _record_qconv(be, out, x, node, graph, weights[node.inputs[1]])
    return keep


def _images_per_pass(be, node, n: int, per_image: int, out) -> int:
    """How many images one pass of a quantized convolution takes: as many as keep its input,
    activation rows and result rows within one storage binding (maxStorageBufferRange), a
    multiple of what keeps a uint8 ``out`` chunk starting on a 32-bit word."""
    limit = be.ctx.limits["maxStorageBufferRange"] - be.align  # room for an aligned-down start
    step = min(n, limit // max(per_image, 1))
    if out.dtype == np.uint8 and step < n:
        step -= step % (4 // np.gcd(4, out[0].size))
    if step < 1:
        raise DeviceError(
            f"{node.op} node {node.output!r}: one image's int8 rows need {per_image} bytes, more "
            f"than this device's storage binding ({limit} bytes); compile the model for the CPU"
        )
    return step


def _record_qconv(be, out, x, node, graph, qw) -> list:
    """qconv2d / qconv2d_integer as im2col rows -> int8 GEMM -> NCHW, in passes over images
    small enough for one storage binding each; returns the workspace to keep."""
    a = node.attrs
    kernel = tuple(graph.tensors[node.inputs[1]].shape[2:])
    geo = (kernel, a["stride"], a["padding"], a["dilation"])
    n, o = x.shape[0], qw.n
    oh, ow = out.shape[2:]
    res_cols = -(-o // 4) * 4 if out.dtype == np.uint8 else o
    per_image = max(oh * ow * max(4 * -(-qw.k // 4), res_cols * out.itemsize), x[0].nbytes)
    keep: list = []
    step = _images_per_pass(be, node, n, per_image, out)
    for b0 in range(0, n, step):
        xs, os_ = x[b0 : b0 + step], out[b0 : b0 + step]
        m = xs.shape[0]
        rows, _, _ = vk_q.im2col_rows(be, xs, *geo, int(a["a_zero_point"]))
        if out.dtype == np.uint8:  # rows of whole words, then the shader's transpose
            tmp = be.empty_array((m * oh * ow, res_cols), np.uint8)
            qgemm(be, rows[:, : qw.k], qw, tmp[:, :o], **_epilogue(node, graph))
            vk_q.rows_to_nchw(be, os_, tmp)
        else:  # [m, oh * ow, O] -> NCHW, one strided copy of words
            tmp = be.empty_array((m * oh * ow, o), out.dtype)
            qgemm(be, rows[:, : qw.k], qw, tmp, **_epilogue(node, graph))
            copy_array(
                be, os_.reshape(m, o, oh * ow), tmp.reshape(m, oh * ow, o).transpose(0, 2, 1)
            )
        keep += [rows, tmp]
    return keep
