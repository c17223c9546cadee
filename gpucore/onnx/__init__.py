"""ONNX models on gpucore's inference runtime.

    model = gpucore.onnx.load("model.onnx")                  # a gpucore.runtime.CompiledModel
    y = model(x)                                             # or model.run_arrays([x])
    sess = gpucore.runtime.InferenceSession("model.onnx")    # ONNX Runtime's interface

The importer interprets the ONNX graph with gpucore's ops under the runtime's tracer, so an ONNX
model gets the passes, planner and executors (CPU or Vulkan) of ``gpucore.compile``. ``onnx`` is
an optional dependency (``pip install gpucore[onnx]``), imported by ``load`` only.
"""

from .errors import UnsupportedOperator


def load(model, *, device: str = "auto", dynamic: bool = True, **options):
    """An ONNX model (path, bytes or ``onnx.ModelProto``) as a runtime ``CompiledModel``; see
    ``gpucore.onnx.importer.load`` for the options and the errors."""
    from .importer import load as load_model  # lazy: imports onnx, an optional dependency

    return load_model(model, device=device, dynamic=dynamic, **options)


def export(model, args, f=None, **options):
    """Write a gpucore model as an ONNX model (``torch.onnx.export``'s form); see
    ``gpucore.onnx.exporter.export``."""
    from .exporter import export as export_model  # lazy: imports onnx and the runtime

    return export_model(model, args, f, **options)


def supported_ops() -> list:
    """The ONNX op types the importer has a handler for."""
    from .ops import HANDLERS  # lazy: the handlers import the runtime

    return sorted(HANDLERS)


__all__ = ["UnsupportedOperator", "export", "load", "supported_ops"]
