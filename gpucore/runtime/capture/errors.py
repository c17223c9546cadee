"""The exceptions of graph capture (trace.py, router.py)."""

from __future__ import annotations

from ...errors import GpucoreError


class CaptureError(GpucoreError, RuntimeError):
    """The model cannot be captured as it is (the message says why and what to change)."""


class ValuesNeeded(BaseException):  # noqa: N818 - a signal, not an error
    """A shapes-only trace met a host read of an input-dependent value (which it did not
    compute). A BaseException, so that the model's own ``except Exception`` clauses (the ONNX
    importer wraps handler failures) let it through to ``capture``, which traces again."""
