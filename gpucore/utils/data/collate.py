"""Collation: how a DataLoader turns a list of samples into a batch (PyTorch's
``torch.utils.data._utils.collate``, same rules and same extension point).

``default_collate`` keeps the samples' structure and stacks their leaves: tensors and numpy
arrays along a new first dim, Python floats into a float64 tensor, ints into int64 (bools into
bool), numpy scalars into a tensor of their dtype; strings and bytes stay a list. Mappings keep
their type and keys, namedtuples their type; tuples and other sequences are transposed (a tuple
of fields becomes a list of batched fields, as in PyTorch). ``default_convert`` (used when
automatic batching is off) only turns numpy arrays and scalars into tensors.

``collate(batch, collate_fn_map=...)`` is the engine: ``collate_fn_map`` maps a type (or a
tuple of types) to a function ``fn(batch, *, collate_fn_map)``, looked up by exact type first,
then by isinstance in insertion order. Extend a copy of ``default_collate_fn_map`` to teach it a
type of your own.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable

import numpy as np

from ...backends.cpu import empty_array
from ...creation import as_tensor
from ...creation import tensor as _tensor
from ...dtypes import bfloat16
from ...ops.joining import stack
from ...tensor import Tensor

__all__ = [
    "collate",
    "default_collate",
    "default_collate_fn_map",
    "default_collate_err_msg_format",
    "default_convert",
]

_np_str_obj_array = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

CollateMap = dict


def _is_numpy(obj) -> bool:
    t = type(obj)
    return t.__module__ == "numpy" and t.__name__ not in ("str_", "string_", "bytes_")


def default_convert(data):
    """Numpy arrays (not of strings or objects) and numpy scalars become tensors, inside any
    mapping, namedtuple or sequence (tuples become lists); everything else is left as it is."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if _is_numpy(data):
        if isinstance(data, np.ndarray) and _np_str_obj_array.search(data.dtype.str):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        return _rebuild_mapping(data, converted)
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(elem, items: dict):
    """``items`` in ``elem``'s mapping type (a copy for mutable ones), else a dict."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(items)
            return clone
        return type(elem)(items)
    except TypeError:
        return items


def _rebuild_sequence(elem, items: list):
    """``items`` in ``elem``'s sequence type (a copy for mutable ones), else a list."""
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(elem)(items)
    except TypeError:
        return items


def collate(batch: list, *, collate_fn_map: CollateMap | None = None):
    """Collate ``batch`` (a list of samples of one structure): leaves through
    ``collate_fn_map`` (exact type, then isinstance), containers recursively."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        items = {
            key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem
        }
        return _rebuild_mapping(elem, items)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        return fields if isinstance(elem, tuple) else _rebuild_sequence(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Tensors of one shape stacked along a new dim 0."""
    elem = batch[0]
    if elem.dtype != bfloat16 and all(
        t.is_cpu and not t.requires_grad and t.dtype == elem.dtype and t.shape == elem.shape
        for t in batch
    ):
        # The common case, host tensors outside autograd: one numpy copy, not an op per sample,
        # into gpucore's own memory (a device copy of it can be reused: see gpucore/storage.py)
        arrays = [t._host() for t in batch]
        out = empty_array((len(arrays),) + arrays[0].shape, arrays[0].dtype)
        np.stack(arrays, out=out)
        return Tensor._wrap(out, elem.dtype)
    return stack(list(batch), 0)


def collate_numpy_array_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Numpy arrays of one shape stacked into one tensor (their dtype, promoted if they
    differ); arrays of strings or objects are refused."""
    elem = batch[0]
    if _np_str_obj_array.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    if all(b.shape == elem.shape and b.dtype == elem.dtype for b in batch):
        return as_tensor(np.stack(batch))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Numpy scalars into a 1-D tensor of their dtype."""
    return as_tensor(np.array(batch))


def collate_float_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Python floats into a float64 tensor (PyTorch's rule)."""
    # float64 whatever the default floating dtype (gpucore.tensor(batch) would follow it)
    return as_tensor(np.asarray(batch, dtype=np.float64))


def collate_int_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    """Python ints into an int64 tensor (bools into a bool one)."""
    return _tensor(batch)


def collate_str_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> list:
    """Strings and bytes stay a list."""
    return batch


default_collate_fn_map: dict[type | tuple[type, ...], Callable] = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch: list):
    """PyTorch's default collation of a list of samples into a batch (see the module's
    docstring): ``default_collate([(x0, 0), (x1, 1)])`` is ``[stack([x0, x1]), tensor([0, 1])]``.
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
