"""``onnx.backend.base.Backend`` over gpucore: the interface ONNX's conformance harness
(``onnx.backend.test.BackendTest``) and other ONNX tools drive.

    from gpucore.onnx import backend
    rep = backend.prepare(model_proto, device="CPU")     # or "VULKAN"
    outputs = rep.run([x])                               # a namedtuple of numpy arrays
    backend.run_node(node_proto, [a, b])                 # one node, at the newest opset

``prepare`` is ``gpucore.onnx.load`` (the model is checked and compiled at once, so an
unsupported op raises UnsupportedOperator there); ``run`` feeds the model's real inputs (graph
inputs with an initializer are defaults and skipped) in order or by name.

gpucore compiles shapes: the shape / axes / pads / count operands of Reshape, Slice, Reduce*,
... (``STATIC_OPERANDS``) must be known at load time. A graph input they are computed from (as
in ONNX's node tests, which make every operand an input) is bound at ``run``: the model is
compiled for the values given (once per distinct set of values) with those inputs as
initializers. A model older than the importer reads (opset < 7) is first upgraded to opset
``UPGRADE_TO`` by ``onnx.version_converter``. Devices: "CPU" and "VULKAN" (gpucore's Vulkan
device; a CPU-type Vulkan device such as lavapipe counts when GPUCORE_VULKAN_ALLOW_CPU=1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .proto import MIN_OPSET, read, require_onnx

require_onnx()  # a clear ImportError (how to install it) when onnx is missing

import onnx  # noqa: E402
import onnx.version_converter  # noqa: E402
from onnx.backend.base import Backend, BackendRep, namedtupledict  # noqa: E402

DEVICES = {"CPU": "cpu", "VULKAN": "vulkan"}
UPGRADE_TO = 13  # the opset older models are converted to

# {op type: indices of the inputs gpucore needs at load time}: shapes, axes, pads, counts
_REDUCE = (
    "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceSumSquare "
    "ReduceLogSum ReduceLogSumExp"
).split()
STATIC_OPERANDS = {
    **dict.fromkeys(_REDUCE, (1,)),
    **dict.fromkeys(("Reshape", "Expand", "Tile", "Squeeze", "Unsqueeze", "Split"), (1,)),
    **dict.fromkeys(("CumSum", "CumProd", "Trilu", "TopK", "OneHot"), (1,)),
    "Slice": (1, 2, 3, 4),
    "Pad": (1, 2, 3),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "ConstantOfShape": (0,),
    "CenterCropPad": (1,),
    **dict.fromkeys(("HannWindow", "HammingWindow", "BlackmanWindow"), (0,)),
    "Range": (0, 1, 2),
    "Dropout": (1, 2),
}


def _device(device: str) -> str:
    """gpucore's name for an ONNX backend device ("CPU", "VULKAN", with an optional ":0")."""
    kind, _, index = str(device).upper().partition(":")
    if kind not in DEVICES or index not in ("", "0"):
        raise ValueError(f"gpucore.onnx.backend: unknown device {device!r} (have {list(DEVICES)})")
    return DEVICES[kind]


def _as_array(a) -> np.ndarray:
    if isinstance(a, onnx.TensorProto):
        return onnx.numpy_helper.to_array(a)
    return np.asarray(a)


def _upgraded(model):
    """``model`` converted to opset ``UPGRADE_TO`` when it is older than the importer reads."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None or opset >= MIN_OPSET:
        return model
    return onnx.version_converter.convert_version(model, UPGRADE_TO)


def real_inputs(model) -> list:
    """The names of a ModelProto's graph inputs that no initializer gives a value."""
    inits = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in inits]


def bound_inputs(model) -> list:
    """The real graph inputs a ``STATIC_OPERANDS`` slot of a node reads, directly or through
    the nodes that compute it (not through Shape / Size, which read only sizes)."""
    real = real_inputs(model)
    needed = set()
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx"):
            slots = STATIC_OPERANDS.get(node.op_type, ())
            needed.update(node.input[i] for i in slots if i < len(node.input) and node.input[i])
    grew = True
    while grew:  # back through the producers of what is needed, to a fixed point
        grew = False
        for node in model.graph.node:
            if node.op_type in ("Shape", "Size") or not needed.intersection(node.output):
                continue
            new = {n for n in node.input if n and n not in needed}
            if new:
                needed |= new
                grew = True
    return [n for n in real if n in needed]


class GpucoreRep(BackendRep):
    """A prepared model: ``run(inputs)`` -> a namedtuple of numpy arrays, one per graph output.

    ``input_names``: the inputs ``run`` expects, in order. ``model``: the runtime
    ``CompiledModel`` (None until the first run when inputs are bound, see the module
    docstring).
    """

    def __init__(self, proto, device: str, options: dict, model=None):
        self._proto = proto
        self._device = device
        self._options = options
        self.model = model
        self.input_names = real_inputs(proto)
        self.output_names = [o.name for o in proto.graph.output]
        self.bound = bound_inputs(proto)
        self._compiled: dict = {}  # values of the bound inputs -> CompiledModel

    def _compile(self, feeds: dict):
        """The CompiledModel for the bound inputs' values in ``feeds``."""
        # lazy: the importer imports the runtime, which this module's import should not
        from .importer import load

        values = [feeds[n] for n in self.bound]
        key = tuple((a.dtype.str, a.shape, a.tobytes()) for a in values)
        cm = self._compiled.get(key)
        if cm is None:
            proto = onnx.ModelProto()
            proto.CopyFrom(self._proto)
            for name, a in zip(self.bound, values):
                proto.graph.initializer.append(onnx.numpy_helper.from_array(a, name))
            cm = load(proto, device=self._device, **self._options)
            self._compiled[key] = self.model = cm
        return cm

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        """Outputs for ``inputs``: a list (graph input order), a dict by name, or one array."""
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ValueError(f"gpucore.onnx.backend: inputs {missing} are missing")
            arrays = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, (list, tuple)):
            arrays = list(inputs)
        else:
            arrays = [inputs]
        if len(arrays) != len(self.input_names):
            raise ValueError(
                f"gpucore.onnx.backend: the model takes {len(self.input_names)} inputs "
                f"{self.input_names}, got {len(arrays)}"
            )
        feeds = dict(zip(self.input_names, (_as_array(a) for a in arrays)))
        cm = self._compile(feeds) if self.bound else self.model
        outs = cm.run_arrays([feeds[n] for n in cm.input_names])
        return namedtupledict("Outputs", self.output_names)(*outs)


class GpucoreBackend(Backend):
    """gpucore as an ONNX backend (see the module docstring)."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs: Any) -> bool:
        """Whether ``device`` is one gpucore has here (ops are checked by ``prepare``)."""
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> GpucoreRep:
        """The model (ModelProto, bytes or path) compiled for ``device``. kwargs: ``dynamic``
        (default True: symbolic dims become dynamic axes; False fixes them at 1), ``executor``
        and ``optimize``, as ``gpucore.onnx.load``; others (the harness's rtol, atol) are
        ignored."""
        # lazy: the importer imports the runtime, which this module's import should not
        from .importer import load

        options = {k: v for k, v in kwargs.items() if k in ("dynamic", "executor", "optimize")}
        options.setdefault("dynamic", True)
        model, _ = read(model)  # (bytes and paths checked as gpucore.onnx.load checks them)
        dev = _device(device)
        model = _upgraded(model)
        rep = GpucoreRep(model, dev, options)
        if not rep.bound:
            rep.model = load(model, device=dev, **options)
        return rep

    @classmethod
    def run_model(cls, model, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        """``prepare(model, device).run(inputs)``."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node,
        inputs: Any,
        device: str = "CPU",
        outputs_info=None,
        **kwargs: Any,
    ) -> tuple:
        """One NodeProto run on ``inputs`` (arrays in the node's input order, None for an
        omitted optional input, or a dict by name), in a one-node model at ``opset_version``
        (default: the newest the installed onnx knows)."""
        helper = onnx.helper
        if isinstance(inputs, dict):
            inputs = [inputs.get(n) for n in node.input]
        feeds, values = {}, []
        for name, a in zip(node.input, inputs):
            if name and a is not None:
                a = np.asarray(a)
                feeds[name] = a
                values.append(
                    helper.make_tensor_value_info(
                        name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape
                    )
                )
        outs = []
        for i, name in enumerate(n for n in node.output if n):
            info = outputs_info[i] if outputs_info and i < len(outputs_info) else None
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(info[0])) if info else 0
            outs.append(helper.make_tensor_value_info(name, elem, info[1] if info else None))
        opset = int(kwargs.pop("opset_version", onnx.defs.onnx_opset_version()))
        graph = helper.make_graph([node], "run_node", values, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain, opset)])
        return cls.prepare(model, device, **kwargs).run(feeds)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """ "CPU" always; "VULKAN" when gpucore finds a Vulkan device (lavapipe only with
        GPUCORE_VULKAN_ALLOW_CPU=1)."""
        try:
            name = _device(device)
        except ValueError:
            return False
        if name == "cpu":
            return True
        # lazy: probing Vulkan loads the driver, which only a Vulkan user should pay for
        from .. import dispatch

        return dispatch.vulkan_backend(required=False) is not None


prepare = GpucoreBackend.prepare
run_model = GpucoreBackend.run_model
run_node = GpucoreBackend.run_node
supports_device = GpucoreBackend.supports_device
is_compatible = GpucoreBackend.is_compatible

__all__ = [
    "GpucoreBackend",
    "GpucoreRep",
    "is_compatible",
    "prepare",
    "run_model",
    "run_node",
    "supports_device",
]
