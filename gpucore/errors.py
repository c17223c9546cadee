"""The exception hierarchy: every error gpucore raises on purpose is a GpucoreError.

Each subclass also derives from the builtin a Python user would catch (ValueError, TypeError, ...),
so ``except ValueError`` keeps working for code written against PyTorch or numpy.
"""


class GpucoreError(Exception):
    """Root of every exception gpucore raises deliberately."""


class ShapeError(GpucoreError, ValueError):
    """Shapes that do not fit the op (not broadcastable, wrong rank, size mismatch)."""


class DTypeError(GpucoreError, TypeError):
    """A dtype the op does not support, or operands whose dtypes cannot be combined."""


class GradDTypeError(DTypeError, RuntimeError):
    """A tensor whose dtype cannot require gradients (integer, bool) asked to: a DTypeError, and
    also the RuntimeError PyTorch raises for it, so ``except RuntimeError`` keeps working."""


class ArgumentTypeError(GpucoreError, TypeError):
    """An argument of the wrong Python type: None, a str or a numpy array where a Tensor is
    expected (``exp(): argument 'input' (position 1) must be Tensor, not str``, as PyTorch)."""


class DeviceError(GpucoreError, RuntimeError):
    """A device that is missing, unusable or out of memory."""


class SerializationError(GpucoreError, ValueError):
    """A file that cannot be saved or loaded (corrupt, truncated, hostile header)."""


class GpucoreIndexError(GpucoreError, IndexError):
    """A dim or index out of range."""


class AutogradError(GpucoreError, RuntimeError):
    """Misuse of autograd: backward twice, non-scalar without gradient, stale saved tensors."""


class DistError(GpucoreError, RuntimeError):
    """A distributed call that cannot run: no process group, MPI missing, mismatched tensors
    between ranks (PyTorch's ``torch.distributed.DistError``)."""


class DistBackendError(DistError):
    """A collective that did not complete: another rank failed, died or timed out."""


class LinAlgError(GpucoreError, RuntimeError):
    """A linear-algebra routine failed on its input: a singular matrix given to inv or solve, a
    matrix that is not positive-definite given to cholesky (PyTorch's torch.linalg.LinAlgError)."""


__all__ = [
    "GpucoreError",
    "ShapeError",
    "DTypeError",
    "GradDTypeError",
    "ArgumentTypeError",
    "DeviceError",
    "SerializationError",
    "GpucoreIndexError",
    "AutogradError",
    "DistError",
    "DistBackendError",
    "LinAlgError",
]
