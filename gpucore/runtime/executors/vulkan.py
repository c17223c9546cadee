"""The Vulkan executor: the whole graph recorded once into a command buffer, replayed per run.

Constants are uploaded once and stay resident. A runner owns an arena in device memory (the
plan's offsets, as on the CPU) and a ``Capture`` (gpucore/backends/vulkan/capture.py) holding
every dispatch and barrier of the graph, recorded by the same Vulkan kernels eager gpucore runs.
A run writes the inputs into their arena slots, replays the command buffer (one submit, one
wait: the host cost does not grow with the number of ops) and reads the outputs back.

The graph goes through the passes without the CPU-only SiLU fusion (a C kernel but no shader
yet: its primitive ops run as they are); a ``gemm`` node runs the GEMM shader with its alpha,
bias and activation epilogue, ``layer_norm`` and ``attention`` nodes their own shaders (one
dispatch each, kernels/fused.py; attention reads the permuted q / k / v views in place and, with
``heads_last``, writes the merged [B, S, H, D] heads through a permuted view of its output).
The quantized ops of a statically quantized model (``quantize_linear``, ``qlinear``,
``qconv2d``, ``qmax_pool2d``, ...) and of ONNX dynamic quantization
(``dynamic_quantize_linear``, ``qlinear_dynamic``) run as int8 shaders, the CPU executor's bits
(executors/vulkan_quant.py, which also lists the quantized nodes that stay CPU-only). A node
without a shader for its dtypes is refused when the model is compiled (DeviceError naming it):
compile for the CPU.
"""

from __future__ import annotations

import numpy as np

from ... import dispatch
from ...backends.vulkan.capture import record
from ...backends.vulkan.kernels import KERNELS as VK_KERNELS
from ...backends.vulkan.kernels import copy_array
from ...backends.vulkan.kernels import fused as vk_fused
from ...backends.vulkan.kernels.gemm import gemm as vk_gemm
from ...backends.vulkan.kernels.gemm64 import gemm64 as vk_gemm64
from ...backends.vulkan.kernels.gemm64 import supported as vk_gemm64_supported
from ...backends.vulkan.kernels.reduce64 import attention64 as vk_attention64
from ...dtypes import bfloat16, bool_, float16, float32, float64
from ...errors import DeviceError
from ...ops.registry import REGISTRY
from ..ir.ops import TensorSpec, op_info
from ..planner.plan import Plan
from . import vulkan_quant
from .cpu import _Pool, bind_arrays

GEMM_DTYPES = (float32, float16, bfloat16)


def _record_gemm(be, out, ins, attrs):
    a, b = ins[0], ins[1]
    if attrs["trans_a"]:
        a = np.swapaxes(a, -1, -2)
    if attrs["trans_b"]:
        b = np.swapaxes(b, -1, -2)
    batch = out.shape[:-2]
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    bias = ins[2] if len(ins) > 2 else None
    if out.dtype == np.float64:  # gemm64.comp (checked: the device has shaderFloat64, no act)
        vk_gemm64(be, out, a, b, alpha=float(attrs["alpha"]), bias=bias)
        return None
    if out.dtype == np.float32:
        vk_gemm(be, out, a, b, alpha=float(attrs["alpha"]), bias=bias, activation=attrs["act"])
        return None
    # float16 / bfloat16: float32 accumulation, epilogue and C, rounded once (as the CPU)
    return be.run_widened(
        lambda be, c, bias=None: vk_gemm(
            be, c, a, b, alpha=float(attrs["alpha"]), bias=bias, activation=attrs["act"]
        ),
        out,
        [bias] if bias is not None else [],
        {},
    )


def _record_layer_norm(be, out, ins, attrs):
    it = iter(ins[1:])  # inputs: [x, weight?, bias?]
    w = next(it) if attrs["has_weight"] else None
    b = next(it) if attrs["has_bias"] else None
    vk_fused.layer_norm(be, out, ins[0], w, b, attrs["n"], float(attrs["eps"]))


def _record_attention(be, out, ins, attrs):
    if attrs.get("heads_last"):
        out = out.transpose(0, 2, 1, 3)  # out is [B, S, H, D]: write it through the view
    mask = ins[3] if len(ins) > 3 else None
    q, k, v = ins[:3]
    if q.dtype == np.float64:  # composed (reduce64.py): checked non-causal, shaderFloat64
        return vk_attention64(be, out, q, k, v, mask, float(attrs["scale"]))
    vk_fused.attention(be, out, q, k, v, mask, float(attrs["scale"]), bool(attrs["causal"]))


# The runtime's own ops recorded by a function here (every other op runs its registry kernel).
_RECORDERS = {
    "gemm": _record_gemm,
    "layer_norm": _record_layer_norm,
    "attention": _record_attention,
}


def _record_conv2d(be, out, ins, attrs) -> np.ndarray:
    """conv2d as im2col (shaders/im2col.comp) into a workspace, then one batched GEMM with the
    bias in its epilogue; returns the workspace (the capture keeps it)."""
    x, w = ins[0], ins[1]
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = out.shape[2:]
    k = c * kh * kw
    col = be.empty_array((n, k, oh * ow), out.dtype)  # float32, or float64 (gemm64 below)
    VK_KERNELS["im2col"](
        be,
        col,
        x,
        kernel=(kh, kw),
        stride=attrs["stride"],
        padding=attrs["padding"],
        dilation=attrs["dilation"],
        src=(n, c, h, wd),
    )
    a = np.broadcast_to(w.reshape(o, k), (n, o, k))
    bias = ins[2].reshape(o, 1) if len(ins) > 2 else None
    if out.dtype == np.float64:
        vk_gemm64(be, out.reshape(n, o, oh * ow), a, col, bias=bias)
    else:
        vk_gemm(be, out.reshape(n, o, oh * ow), a, col, bias=bias)
    return col


def _widened(be, rec, out, ins, attrs) -> list:
    """Recorder ``rec`` (float32 shaders) on float16 / bfloat16 operands: widened to float32,
    the result rounded back (as the CPU computes them); returns what the capture must keep."""
    keep: list = []

    def run(be, o, *xs):
        keep.append(rec(be, o, list(xs), attrs))

    return be.run_widened(run, out, list(ins), {}) + keep


class VulkanExecutor:
    """Replays the graph's recorded command buffer (see the module docstring)."""

    name = "vulkan"

    def __init__(self, plan: Plan):
        self.plan = plan
        self.graph = plan.graph
        self.be = dispatch.vulkan_backend(required=True, allow_cpu=True)
        self.profile = None
        self.widened: set = set()  # nodes whose float32 kernel runs on widened half operands
        self._check_supported()
        g = self.graph
        # the int8 weights of the quantized GEMM / convolution nodes, packed once
        self.qweights = vulkan_quant.pack_weights(self.be, g, [s.node for s in plan.steps])
        packed = vulkan_quant.packed_only(g, self.qweights)
        self.constants = {
            name: self.be.upload(np.require(t.data, requirements="C"), t.dtype)
            for name, t in g.tensors.items()
            if t.data is not None and name not in packed
        }
        self.pool = _Pool(self._bind)
        self.pool.give(self.pool.take())  # record one capture now: errors show at compile

    def _check_supported(self) -> None:
        g = self.graph
        for step in self.plan.steps:
            node = step.node
            if step.kind == "view":
                continue
            out = g.tensors[node.output]
            dts = [out.dtype] + [g.tensors[n].dtype for n in node.inputs]
            why = ""
            if step.kind == "copy":  # copy.comp: 32-bit words, pairs of them, bytes, 16-bit
                supported = out.dtype.itemsize in (1, 2, 4, 8)
            elif node.op in vulkan_quant.QUANT_OPS:  # int8 shaders (executors/vulkan_quant.py)
                reason = vulkan_quant.unsupported(g, node, self.be.ctx.float64)
                supported = reason is None
                why = f" ({reason})" if reason else ""
            elif node.op in ("gemm", "conv2d", "layer_norm", "attention"):
                # float32, or every operand float16 or every one bfloat16 (an attention mask
                # may be bool): GEMM reads halves itself, the others run widened to float32
                floats = [d for d in dts if not (node.op == "attention" and d is bool_)]
                supported = all(d is floats[0] for d in floats) and floats[0] in GEMM_DTYPES
                if node.op in ("gemm", "conv2d") and all(d is float64 for d in dts):
                    supported = self._gemm64_ok(node)
                if node.op == "attention" and all(d is float64 for d in floats):
                    supported = self.be.ctx.float64 and not node.attrs.get("causal")
                if supported and floats[0] in (float16, bfloat16) and node.op != "gemm":
                    self.widened.add(node.output)
            else:
                rop = REGISTRY.get(node.op)
                supported = False
                if rop is not None and rop.infer is not None and node.op in VK_KERNELS:
                    ins = [TensorSpec(g.tensors[n].shape, g.tensors[n].dtype) for n in node.inputs]
                    attrs = {k: v for k, v in node.attrs.items() if k != "output_index"}
                    specs = rop.infer(*ins, **attrs)
                    supported = self.be.supports(rop, ins, specs, direct=True)
                    if not supported and self.be.supports(rop, ins, specs):
                        supported = True  # a float32 kernel on float16 / bfloat16 operands
                        self.widened.add(node.output)
            if not supported:
                operands = ", ".join(
                    f"{g.tensors[n].dtype.name}{list(g.tensors[n].shape)}" for n in node.inputs
                )
                if float64 in dts and not self.be.ctx.float64:
                    why = f" ({self.be.ctx.info.name} has no shaderFloat64 / shaderInt64)"
                raise DeviceError(
                    f"device='vulkan': node {node.output} ({node.op} of {operands}) has no "
                    f"Vulkan shader for these inputs{why}; compile the model with device='cpu'"
                )

    def _gemm64_ok(self, node) -> bool:
        """A float64 gemm / conv2d (im2col's word pairs, then one batched GEMM) node runs on
        gemm64.comp: a device with shaderFloat64, no activation."""
        g = self.graph
        shapes = [tuple(g.tensors[n].shape) for n in node.inputs[:2]]
        if node.op == "conv2d":
            shapes = [(1, 1), (1, 1)]  # [n, o, k] @ [n, k, oh * ow]: one batch dim
        return (
            self.be.ctx.float64 and node.attrs.get("act") is None and vk_gemm64_supported(*shapes)
        )

    def _bind(self):
        be = self.be
        arena = be.empty_array((max(self.plan.arena_bytes, 4),), np.uint8)
        arrays, scratch = bind_arrays(self.plan, arena)
        arrays.update(self.constants)
        # views of constants and of arena tensors, rebuilt over the device arrays
        for step in self.plan.steps:
            if step.kind == "view":
                node = step.node
                arrays[node.output] = op_info(node.op).view(arrays[node.inputs[0]], node.attrs)
        g = self.graph

        ins = [arrays[n] for n in g.inputs]
        outs = [arrays[n] for n in g.outputs]

        temps: list = []  # the kernels' workspace, alive as long as the capture
        memo: dict = {}  # dynamic quantization's workspaces shared by nodes (vulkan_quant.py)

        def record_all():
            for a in ins:
                _staging_copy(be, a, upload=True)
            for step, sc in zip(self.plan.steps, scratch):
                node = step.node
                if step.kind == "view":
                    continue
                out = arrays[node.output]
                args = [arrays.get(n) for n in node.inputs]  # None: a packed-only weight
                be.ctx.stream.label = node.op
                if step.kind == "copy":
                    copy_array(be, out, op_info(node.op).view(args[0], node.attrs))
                elif node.op in vulkan_quant.QUANT_OPS:
                    temps.append(vulkan_quant.record(be, out, args, node, g, self.qweights, memo))
                elif node.op in _RECORDERS or node.op == "conv2d":
                    rec = _RECORDERS.get(node.op, _record_conv2d)
                    if node.output in self.widened:  # float32 shaders on half operands
                        temps.append(_widened(be, rec, out, args, node.attrs))
                    else:
                        temps.append(rec(be, out, args, node.attrs))
                else:
                    attrs = dict(node.attrs)
                    index = attrs.pop("output_index", None)
                    fn = VK_KERNELS[node.op]
                    target = out if index is None else list(sc[:index]) + [out] + list(sc[index:])
                    if node.output in self.widened:
                        temps.append(be.run_widened(fn, target, args, attrs))
                    else:
                        fn(be, target, *args, **attrs)
            for o in outs:
                _staging_copy(be, o, upload=False)

        cap = record(be.ctx, record_all)
        cap.keep.extend([arena, arrays, scratch, temps])

        def runner(inputs):
            for dst, src in zip(ins, inputs):
                np.copyto(dst, src)  # host-mapped memory: the replay's staging copies move it
            cap.replay()
            return [np.array(o) for o in outs]

        runner.capture = cap
        runner.arena = arena
        return runner

    def run(self, inputs: list) -> list:
        runner = self.pool.take()
        try:
            return runner(inputs)
        finally:
            self.pool.give(runner)

    def dispatches(self) -> int:
        """Dispatches and copies one replay submits."""
        runner = self.pool.take()
        try:
            return runner.capture.count
        finally:
            self.pool.give(runner)


def _staging_copy(be, arr: np.ndarray, upload: bool) -> None:
    """On a device whose memory the host cannot map, record the copy between an input's or
    output's host-visible staging range and device memory (no-op where memory is mapped)."""
    blk, off = be.ctx.memory.locate(arr)
    if blk.staging is None or not arr.size:
        return
    if upload:
        be.ctx.stream.copy(blk.staging.buffer, off, blk.buffer, off, arr.nbytes, blk)
    else:
        be.ctx.stream.copy(blk.buffer, off, blk.staging.buffer, off, arr.nbytes, blk.staging)
