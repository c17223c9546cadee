"""gpucore's inference runtime: capture a model once, optimise and plan it, run it whole.

    model -> capture (capture/) -> Graph (ir/) -> passes (passes/) -> plan (planner/)
          -> executor (executors/: interpreted or one C program on the CPU, a replayed command
             buffer on Vulkan)

``gpucore.compile(model, example_inputs)`` returns a ``CompiledModel``;
``InferenceSession`` wraps one (or a saved file) with ONNX Runtime's interface; ``load`` reads
what ``CompiledModel.save`` wrote.
"""

from . import ir  # noqa: F401 - fills the runtime op table
from .capture.trace import CaptureError
from .ir.graph import Graph, GraphError
from .model import CompiledModel, InputError, compile
from .session import InferenceSession, load

__all__ = [
    "CaptureError",
    "CompiledModel",
    "Graph",
    "GraphError",
    "InferenceSession",
    "InputError",
    "compile",
    "load",
]
