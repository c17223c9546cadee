"""``load``: an ONNX model as a runtime ``CompiledModel``.

The file is read and checked (proto.py), exact-GELU patterns become one node (rewrite.py), and
the graph is interpreted by ``Program`` under the runtime's tracer (``capture``): every ONNX node
becomes the gpucore registry ops its handler calls, so the result goes through the same passes,
planner and executors as ``gpucore.compile``. The capture is shapes-only (runtime/capture/
trace.py): an op that reads the inputs becomes a node from its shape rule, with no kernel run,
so loading costs no inference; static values (initializers, Shape arithmetic) are computed as
before. Symbolic input dims (a ``dim_param``, or no ``dim_value``) become dynamic axes: the
model is traced at size 2 and at a few neighbouring sizes, and the runtime solves every size
that follows them.
"""

from __future__ import annotations

import numpy as np

from ..dispatch import device_policy, vulkan_backend
from ..runtime.capture.dynamic import capture
from ..runtime.capture.trace import CaptureError
from ..runtime.model import CompiledModel, _pick_device
from .context import Program
from .errors import UnsupportedOperator
from .ops import HANDLERS
from .proto import GPUCORE_TYPES, TYPE_NAMES, bad, check, elements, read
from .rewrite import fuse_gelu

EXAMPLE_SIZE = 2  # the traced size of a dynamic dim (1 could be mistaken for broadcasting)


def load(
    model,
    *,
    device: str = "auto",
    dynamic: bool = True,
    executor: str = "compiled",
    optimize: bool = True,
) -> CompiledModel:
    """An ONNX model (a path, the file's bytes or an ``onnx.ModelProto``) as a CompiledModel.

    device: "cpu", "vulkan" or "auto" (as ``gpucore.compile``). dynamic: symbolic input dims
    become dynamic axes (one model for every size); False fixes them at 1. executor, optimize:
    as ``gpucore.compile``. Raises UnsupportedOperator for an op, attribute value, dtype or
    opset gpucore.onnx does not support, SerializationError (naming the file) for a model that
    cannot be read: malformed or truncated protobuf, a name nothing defines, a cycle, a tensor
    claiming more than ``gpucore.onnx.proto.MAX_ELEMENTS`` elements.
    """
    dev = _pick_device(device)
    proto, source, raw = read(model, split=True)
    info = check(proto, source, raw)
    del proto  # the checked copy holds what is needed
    fuse_gelu(info)
    examples, axes = example_inputs(info, dynamic)
    program = Program(info, HANDLERS, dynamic=bool(axes), int8=int8_nodes(dev))
    names = [v.name for v in info.inputs]
    try:
        # traced under the CPU's policy whatever the device: the graph is the device's to lower
        # (a Vulkan policy would trace a convolution as im2col + matmul, which the int8 fusion
        # of a quantized one cannot match; the Vulkan executor records conv2d nodes itself)
        with device_policy("cpu"):
            graph = capture(program, examples, axes or None, names, shapes_only=True)
    except CaptureError as e:
        if not axes:
            raise
        symbols = sorted({s for a in axes.values() for s in a.values()})
        raise CaptureError(
            f"{source}: one graph cannot serve every size of the dynamic dims {symbols}: {e} "
            "(in ONNX terms: a value computed from those sizes feeds a tensor op that gpucore "
            "cannot express size by size; load with dynamic=False to fix them at 1)"
        ) from e
    _name_outputs(graph, info)
    # ONNX's outputs are a flat list, whatever container the Program returns them in: the old
    # rule (ir/output_tree.py's None), one output as a Tensor, several as a tuple
    graph.output_tree = None
    cm = CompiledModel(graph, device=dev, optimize=optimize, executor=executor)
    if cm.symbols:
        cm._example_sizes = cm._check(examples)[1]
    cm._executor(cm._sizes_default())  # build now: errors surface at load, not at first run
    return cm


def int8_nodes(device: str) -> bool:
    """Whether quantization imports as the runtime's int8 nodes for ``device`` (else float
    compositions): on the CPU; on Vulkan where the device has shaderFloat64, which the int8
    shaders need for ONNX's QuantizeLinear and DynamicQuantizeLinear rounding (correctly rounded
    divisions; runtime/executors/vulkan_quant.py)."""
    if device == "cpu":
        return True
    be = vulkan_backend(required=False, allow_cpu=True)
    return be is not None and bool(be.ctx.float64)


def example_inputs(info, dynamic: bool) -> tuple:
    """(zero-filled example arrays, dynamic axes {input: {axis: symbol}}) for the inputs."""
    examples, axes = [], {}
    for v in info.inputs:
        dt = GPUCORE_TYPES.get(v.elem_type)
        if dt is None:
            raise UnsupportedOperator(
                f"{info.source}: input {v.name!r} has element type "
                f"{TYPE_NAMES.get(v.elem_type, v.elem_type)}, which gpucore does not support"
            )
        if v.dims is None:
            raise UnsupportedOperator(
                f"{info.source}: input {v.name!r} has no shape (not even a rank); give the "
                "model's inputs shapes (onnx.tools.update_model_dims.update_inputs_outputs_dims)"
            )
        shape = []
        for axis, d in enumerate(v.dims):
            if isinstance(d, int):
                shape.append(d)
            elif dynamic:
                axes.setdefault(v.name, {})[axis] = d or f"{v.name}_{axis}"
                shape.append(EXAMPLE_SIZE)
            else:
                shape.append(1)
        elements(shape, info.source, f"input {v.name!r}")
        if axes.get(v.name) and 0 in shape:
            raise bad(info.source, f"input {v.name!r} has a size-0 dim and a dynamic one")
        examples.append(np.zeros(shape, dt.np))
    return examples, axes


def _name_outputs(graph, info) -> None:
    """The captured graph's outputs (output / output_<i>) renamed to the ONNX outputs' names;
    a tensor already holding such a name is renamed out of the way first."""
    wanted = [o.name for o in info.outputs]
    if len(set(wanted)) != len(wanted):
        raise bad(info.source, f"graph outputs {wanted} repeat a name")
    for name in wanted:
        if name in graph.tensors and name not in graph.outputs:
            if name in graph.inputs:
                raise UnsupportedOperator(
                    f"{info.source}: graph output {name!r} is a graph input returned as it is"
                )
            graph.rename(name, graph.fresh_name("gpucore.onnx.renamed"))
    temps = []
    for old in list(graph.outputs):  # through fresh names: the two lists may share names
        temps.append(graph.fresh_name("gpucore.onnx.output"))
        graph.rename(old, temps[-1])
    for tmp, new in zip(temps, wanted):
        graph.rename(tmp, new)
    graph.validate()
