"""Residency: host tensors that device ops keep reading are not uploaded again.

Device copies. When a device op reads a host tensor, the backend uploads it (a contiguous copy of
the view). The copy is kept in the storage's state (gpucore/storage.py), keyed by the view's
layout, and reused by every later device op that reads the same view while the storage's version
is the one it was made at and no exported numpy array can write the storage behind gpucore's back:
model weights of an inference loop are uploaded once, not at every forward. A host write (an
in-place op, a host optimizer step) bumps the version, and the next device read uploads again.
The kernels get exactly the array a fresh upload would give, so results are the same bits. The
copies are read-only, die with the storage, and are dropped first when device memory runs out.

Migration. A host tensor written on the host at every step (a parameter updated by the
optimizer) would still be uploaded at every step. Under the 'auto' policy, an optimizer update
whose parameter has a current device copy (device ops read it since its last write) moves the
parameter and its state buffers onto the device in place (``migrate``): each Tensor object keeps
its identity but now holds device memory (the parameter adopts its copy; nothing is uploaded for
it), so the update runs on the device and so do later reads. Host reads (``.numpy()``,
``state_dict()``, printing, ``gpucore.save``) then download, as for any device tensor. A storage
moves only when nothing else can see its memory: the tensor is the whole storage, no other tensor
shares it (a ``detach()`` alias, a view, a held ``state_dict()`` entry) and no numpy array views it;
otherwise it stays on the host and is uploaded after each host update, as before.

GPUCORE_VULKAN_RESIDENCY=0 turns both off (``enabled``).
"""

from __future__ import annotations

import os
import sys
import weakref

import numpy as np

from ... import storage as _storage
from ..._cpu import data_ptr as _data_ptr

enabled = os.environ.get("GPUCORE_VULKAN_RESIDENCY", "1").strip() != "0"
# Layouts of one storage kept at once (a weight and its transpose, a few batch slices).
MAX_COPIES = 4
_with_copies: weakref.WeakSet = weakref.WeakSet()  # storage states holding device copies


def device_copy(be, t) -> np.ndarray | None:
    """A contiguous device array holding host tensor ``t``'s values, reused while its storage is
    unchanged; None when the storage cannot be cached (the caller uploads, as without a cache)."""
    _storage.WATCHING[0] = True  # numpy() exports are watched from now on
    data = t._data
    root = _storage.host_root(data)
    if root is None:
        return None
    vbox = t._vbox
    st = _storage.state(vbox, create=True)
    if st.exports:
        return None
    version = vbox[0]
    if st.version != version or st.owner is not be:
        st.copies.clear()
        st.version = version
        st.owner = be
    # the dtype, not only the numpy one: a uint16 tensor and its bfloat16 view share a storage
    key = (_data_ptr(data) - _data_ptr(root), data.shape, data.strides, t._dtype)
    arr = st.copies.get(key)
    if arr is not None:
        be.ctx.bytes_reused += arr.nbytes
        return arr
    # np.require, not np.ascontiguousarray: the latter turns a 0-d array into shape (1,)
    arr = be.upload(np.require(data, requirements="C"), t._dtype)
    arr.flags.writeable = False  # an input of later ops: nothing may write it
    copies = st.copies
    if len(copies) >= MAX_COPIES:
        del copies[next(iter(copies))]
    copies[key] = arr
    _with_copies.add(st)
    return arr


def current_copy(be, t) -> bool:
    """Whether host tensor ``t`` has a device copy on ``be`` made since its storage's last write
    (device ops have read it at this version)."""
    vbox = t._vbox
    if len(vbox) < 2:
        return False
    st = vbox[1]
    return bool(st.copies) and st.owner is be and st.version == vbox[0] and not st.exports


def drop_all() -> int:
    """Forget every device copy (device memory is short); returns how many storages had some."""
    states = list(_with_copies)
    for st in states:
        st.copies.clear()
    _with_copies.clear()
    return len(states)


def sole_owner(t) -> bool:
    """True when host tensor ``t`` is a whole storage of gpucore's that nothing else can see: no
    other tensor shares its version box, no other array its memory, no exported array is alive.
    Reference counts, compared with those of a tensor known to be alone (measured once, as the
    autograd engine's ``_owned`` does: what the interpreter itself holds cancels out)."""
    if t._base is not None or t._dev is not None or _storage.exported(t._vbox):
        return False
    counts = _counts(t)
    if counts is None:
        return False
    alone = _ALONE.get(counts[0])
    if alone is None:
        alone = _ALONE[counts[0]] = _calibrate(counts[0])
    return all(c <= a for c, a in zip(counts[1:], alone[1:]))


def _counts(t):
    """(whether t's array is its storage's root, reference counts of t's version box, array,
    root array and host buffer), or None when t is not a whole gpucore host storage."""
    data = t._data
    root = _storage.host_root(data)
    if root is None or not data.flags.c_contiguous or data.nbytes != root.nbytes:
        return None
    return (
        root is data,
        sys.getrefcount(t._vbox),
        sys.getrefcount(data),
        sys.getrefcount(root),
        sys.getrefcount(root.base),
    )


_ALONE: dict = {}  # whether the array is the root -> the counts of a tensor alone


def _calibrate(is_root: bool) -> tuple:
    from ...backends.cpu import empty_array  # (the CPU backend: loaded long before this runs)
    from ...tensor import Tensor  # (gpucore.tensor imports nothing of the device's)

    arr = empty_array((4,), np.float32) if is_root else empty_array((4,), np.float32).reshape(2, 2)
    t = Tensor._wrap(arr, None)
    del arr
    return _counts(t)


def migrate(be, tensors) -> bool:
    """Move the host storages of ``tensors`` onto device ``be`` in place (same values; each
    Tensor object keeps its identity), all or none: False, with nothing moved, unless each is
    already there or ``sole_owner``. A tensor with a current device copy of its whole storage
    adopts it; the others are uploaded."""
    for t in tensors:
        if t._dev is not be and not sole_owner(t):
            return False
    for t in tensors:
        if t._dev is be:
            continue
        arr = None
        data = t._data
        if current_copy(be, t):
            key = (0, data.shape, data.strides, data.dtype.str)
            arr = t._vbox[1].copies.pop(key, None)
        if arr is None:
            arr = be.upload(np.require(data, requirements="C"), t._dtype)
        else:
            arr.flags.writeable = True  # its own memory from now on (the base is writable)
        del t._vbox[1:]  # the host storage goes, and its state with it
        t._data = arr
        t._dev = be
        be.ctx.tensors_migrated += 1
    return True
