"""Quantized tensors in gpucore.save / gpucore.load: the parts a ``QuantizedTensor`` is saved as
(``QuantizedTensor._checkpoint_parts``: plain fields in the file's JSON structure, its integers
and per-channel parameters as tensors) and their reassembly, checked, when a file is loaded
(the "qtensor" node of ``gpucore/io/structure.py`` calls ``from_checkpoint``).

The saved integers are the tensor's own (int8/uint8: a quarter of float32's bytes); the file's
checksums cover them and the header digest the fields, so a tampered file is refused like a float
one. Quantized tensors load on the CPU whatever ``map_location`` says (they live in host memory).
"""

from __future__ import annotations

from .. import dtypes as D
from .qtensor import STORAGE, QuantizedTensor, make_per_channel, make_per_tensor

__all__ = ["CHECKPOINT_FIELDS", "from_checkpoint"]

QDTYPES = tuple(STORAGE)  # qint8, quint8, qint32


CHECKPOINT_FIELDS = {
    "per_tensor_affine": ({"dtype", "qscheme", "scale", "zero_point"}, {"int_repr"}),
    "per_channel_affine": ({"dtype", "qscheme", "axis"}, {"int_repr", "scales", "zero_points"}),
}


def from_checkpoint(meta: dict, tensors: dict) -> QuantizedTensor:
    """The quantized tensor ``_checkpoint_parts`` described; ValueError (or TypeError) naming
    the problem when the parts do not fit together (a corrupt or hand-made file)."""
    names = [d.name for d in QDTYPES]
    dtype = next((d for d in QDTYPES if d.name == meta["dtype"]), None)
    if dtype is None:
        raise ValueError(f"quantized dtype {meta['dtype']!r} is none of {names}")
    tensors = {k: t.to("cpu") if t.is_vulkan else t for k, t in tensors.items()}  # host-only
    int_repr = tensors["int_repr"]
    if int_repr.dtype is not STORAGE[dtype]:
        raise ValueError(f"{dtype} needs {STORAGE[dtype]} integers, the file has {int_repr.dtype}")
    if meta["qscheme"] == "per_tensor_affine":
        return make_per_tensor(int_repr, meta["scale"], meta["zero_point"])
    scales, zero_points = tensors["scales"], tensors["zero_points"]
    if scales.dtype is not D.float64 or zero_points.dtype is not D.int64:
        raise ValueError("per-channel scales must be float64 and zero points int64")
    return make_per_channel(int_repr, scales, zero_points, meta["axis"])
