"""Memory formats, as torch.memory_format: ``contiguous_format`` (row-major), ``channels_last``
(a 4-D [N, C, H, W] tensor stored as [N, H, W, C]), ``channels_last_3d`` (5-D, [N, D, H, W, C]
in memory) and ``preserve_format`` (keep the input's format: the default of ``clone`` and the
``*_like`` factories; ``to`` keeps it when it returns the tensor itself, and a copy ``to`` makes
(another dtype or device, as ``save`` / ``load`` and pickling) is row-major, where PyTorch keeps
the format: the values are the same).

A channels-last tensor is what PyTorch's is: the same shape and values, other strides (a
permuted view of a row-major array). Vision scripts ask for it (``model.to(memory_format=
gpucore.channels_last)``, ``x.contiguous(memory_format=...)``); the values of every op are the
same in either format, and gpucore's ops return row-major results (PyTorch's convolutions keep
channels-last), so the format is a layout request, never a change of results.
"""

from __future__ import annotations

from .errors import ArgumentTypeError, ShapeError

__all__ = [
    "memory_format",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
]


class memory_format:  # noqa: N801 - PyTorch's name (torch.memory_format)
    """A memory format: compare by identity with the module's constants."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"gpucore.{self._name}"

    def __reduce__(self) -> str:
        return self._name  # pickled by name: loads as the same constant


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the dims in storage order (outermost first) of the channels-last formats
_ORDER = {channels_last: (0, 2, 3, 1), channels_last_3d: (0, 2, 3, 4, 1)}


def _check(fmt, op: str) -> memory_format:
    if not isinstance(fmt, memory_format):
        raise ArgumentTypeError(
            f"{op}(): memory_format must be a gpucore.memory_format (gpucore.channels_last, "
            f"...), got {type(fmt).__name__}"
        )
    return fmt


def storage_order(fmt, ndim: int, op: str) -> tuple | None:
    """The dim order ``fmt`` stores a tensor of ``ndim`` dims in; None for row-major. A
    channels-last format needs its rank (4 or 5); preserve_format names no order."""
    if fmt is None or _check(fmt, op) is contiguous_format:
        return None
    if fmt is preserve_format:
        raise ValueError(f"{op}(): preserve_format is not a layout to convert to")
    order = _ORDER[fmt]
    if ndim != len(order):
        raise ShapeError(
            f"{op}(): {fmt._name} needs a tensor of rank {len(order)}, got rank {ndim}"
        )
    return order


def is_contiguous_as(data, fmt, op: str = "is_contiguous") -> bool:
    """Whether the array ``data`` is dense in ``fmt``'s order (row-major for contiguous_format);
    a tensor of another rank is not channels-last."""
    if fmt is None or _check(fmt, op) is contiguous_format:
        return bool(data.flags.c_contiguous)
    if fmt is preserve_format:
        raise ValueError(f"{op}(): preserve_format is not a layout to test for")
    order = _ORDER[fmt]
    return data.ndim == len(order) and bool(data.transpose(order).flags.c_contiguous)


def _inverse(order: tuple) -> tuple:
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return tuple(inv)


def to_format(t, fmt, op: str):
    """t with its values stored in ``fmt`` (itself when it already is): a row-major copy of the
    permuted view, permuted back; it stays in the autograd graph. preserve_format: t's own
    channels-last format if it is dense in one, else row-major."""
    if fmt is preserve_format:
        fmt = preserved(t)
    order = storage_order(fmt, t.ndim, op)
    if order is None:
        return t.contiguous()
    if is_contiguous_as(t._data, fmt, op):
        return t
    return t.permute(order).contiguous().permute(_inverse(order))


def preserved(t):
    """The channels-last format t is stored in (not also row-major), else None: what
    ``preserve_format`` keeps."""
    for fmt, order in _ORDER.items():
        if t.ndim == len(order) and not t._data.flags.c_contiguous:
            if is_contiguous_as(t._data, fmt):
                return fmt
    return None


def like(out, t, fmt, op: str):
    """A new tensor ``out`` made for ``t`` (a ``*_like`` result, a clone) put in the format
    asked for: t's own channels-last format for preserve_format."""
    if fmt is None or _check(fmt, op) is preserve_format:
        fmt = preserved(t)
        if fmt is None:
            return out
    return to_format(out, fmt, op)
