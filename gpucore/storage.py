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
        self.exports = 0  # exported numpy arrays still alive

    def _released(self) -> None:
        self.exports -= 1


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
    return len(vbox) > 1 and vbox[1].exports > 0


def export(t) -> np.ndarray:
    """``t``'s host data as a numpy array the caller may keep and write: for gpucore-allocated
    memory a view whose life is watched (see the module docstring), else ``t._data`` itself."""
    arr = t._data
    root = host_root(arr) if arr.size else None
    if root is None:
        return arr
    buf = root.base
    st = state(t._vbox, create=True)
    st.copies.clear()
    start = _data_ptr(np.frombuffer(buf, np.uint8))
    # A view over the HostBuffer (not over an ndarray): numpy views derived from it keep it as
    # their base, so it lives exactly as long as some user array can write through it.
    view = _ndarray(
        arr.shape, arr.dtype, buffer=buf, offset=_data_ptr(arr) - start, strides=arr.strides
    )
    if not arr.flags.writeable:
        view.flags.writeable = False
    st.exports += 1
    weakref.finalize(view, st._released).atexit = False
    return view
