"""The ONNX importer's own error (everything else it raises is gpucore's: SerializationError for a
file that cannot be read as a model, CaptureError / InputError from the runtime)."""

from __future__ import annotations

from ..errors import GpucoreError


class UnsupportedOperator(GpucoreError, NotImplementedError):
    """An ONNX operator, attribute value, dtype or domain the importer does not support.

    Raised at load time; the message names the node, the op, the opset and (where one is to
    blame) the attribute. ``node``, ``op``, ``opset`` and ``attribute`` hold the same facts.
    """

    def __init__(
        self,
        message: str,
        *,
        node: str | None = None,
        op: str | None = None,
        opset: int | None = None,
        attribute: str | None = None,
    ):
        super().__init__(message)
        self.node = node
        self.op = op
        self.opset = opset
        self.attribute = attribute
