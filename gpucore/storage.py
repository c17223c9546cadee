"""What a host storage's version box records besides the version, for caches of its contents.

Every Tensor over one storage (the storage itself, its views, ``detach()`` aliases) shares one
version box, ``_vbox``: a list whose item 0 counts the writes gpucore made (in-place ops, optimizer
updates, collectives). A cache of a host storage's contents kept elsewhere (a device copy, see
backends/vulkan/residency.py) is valid while that count is the one it was made at, with two
exceptions this module takes care of:

- Writes through a numpy array the user holds (``t.numpy()``, ``np.asarray(t)``) bump nothing,
  as in PyTorch. ``export`` hands out such arrays as views gpucore can watch: exporting drops the
  storage's caches and ``exported`` is True while any exported array (or a numpy view derived
  from one, which keeps it alive) exists; a cache made after the last one died holds its writes.
- Memory a tensor shares with an array the user passed in (``from_numpy``, ``as_tensor``) can be
  written behind gpucore's back at any time: only memory gpucore allocated itself (a ``HostBuffer``
  of the caching allocator) is cacheable (``host_root`` is None for anything else).

The extra state is ``_vbox[1]``, a ``StorageState``, appended on first use: it lives and dies
with the storage's tensors, so a cache never outlives its storage nor survives its reuse.
"""

from __future__ import annotations

import weakref

import numpy as np

from ._cpu import HostBuffer as _HostBuffer
from ._cpu import data_ptr as _data_ptr

_ndarray = np.ndarray


class StorageState:
    """Caches of one host storage's contents and the user arrays that may write it."""

    __slots__ = ("version", "copies", "owner", "exports", "__weakref__")

    def __init__(self):
        self.version = -1  # the version the copies were made at
        self.copies: dict = {}  # view layout -> a copy of that view's values (owner's memory)
        self.owner = None  # the backend holding the copies
        # id -> weak reference of each exported array still alive (its callback removes it;
        # it holds the dict, not this object, so the copies die with the storage)
        self.exports: dict = {}


def state(vbox: list, create: bool = False) -> StorageState | None:
    """The storage state of version box ``vbox`` (made when ``create``), or None."""
    if len(vbox) > 1:
        return vbox[1]
    if not create:
        return None
    st = StorageState()
    vbox.append(st)
    return st


def host_root(arr: np.ndarray) -> np.ndarray | None:
    """The array over gpucore-allocated host memory that ``arr`` views (``arr`` itself when it
    is one), or None when ``arr``'s memory is not the caching allocator's."""
    root = arr
    base = root.base
    while type(base) is _ndarray:
        root = base
        base = root.base
    return root if type(base) is _HostBuffer else None


def exported(vbox: list) -> bool:
    """True while a numpy array exported from the storage of ``vbox`` is alive."""
    return len(vbox) > 1 and bool(vbox[1].exports)


# Until a cache of storage contents exists (residency.device_copy sets WATCHING on its first
# call: a Vulkan device under the auto policy), ``export`` hands out the tensor's own array, as
# numpy() always did (watching costs ~7 us a call; the CPU path never needs it), and marks the
# storage with UNWATCHED: a state whose export never dies, so that storage is never cached.
WATCHING: list = [False]
UNWATCHED = StorageState()
UNWATCHED.exports[0] = "exported before caches of storages existed"


def export(t) -> np.ndarray:
    """``t``'s host data as a numpy array the caller may keep and write: for gpucore-allocated
    memory a view whose life is watched (see the module docstring), else ``t._data`` itself."""
    arr = t._data
    vbox = t._vbox
    if not WATCHING[0]:
        if len(vbox) == 1:
            vbox.append(UNWATCHED)
        return arr
    root = host_root(arr) if arr.size else None
    if root is None:
        return arr
    st = state(vbox, create=True)
    if st is UNWATCHED:
        return arr
    st.copies.clear()
    # The anchor is an array straight over the HostBuffer: numpy makes a view's base the first
    # array up the chain whose own base is of another type, so every view of the array returned
    # here (and every view of those) keeps the anchor alive, however the user derives it. (The
    # allocator's arrays start at their buffer's start: backends/cpu.empty_array.)
    off = _data_ptr(arr) - _data_ptr(root)
    if arr.flags.c_contiguous:
        anchor = np.frombuffer(root.base, arr.dtype, arr.size, off)
        out = anchor.reshape(arr.shape)
    else:
        anchor = np.frombuffer(root.base, np.uint8)
        out = _ndarray(arr.shape, arr.dtype, buffer=anchor, offset=off, strides=arr.strides)
    if not arr.flags.writeable:
        out.flags.writeable = False
    refs = st.exports
    ref = weakref.ref(anchor, lambda r, refs=refs: refs.pop(id(r), None))
    refs[id(ref)] = ref
    return out
