"""Indexing kernels (gpucore/ops/indexing.py): gather (shaders/gather.comp), which also serves
index_select and embedding inside captured graphs (they lower to gather there).

Out-of-range indices: an eager call whose index is a host tensor is checked here, on the host,
before anything is recorded, and raises the CPU kernel's IndexError. An index that lives on the
device is not read back (that would wait for the device on every call): the shader never
addresses memory with an index outside [0, n) and writes NaN (float data) or 0 (other dtypes)
for its element instead.

Any data dtype of 1, 4 or 8 bytes (bool, float32/int32, int64/float64); the index is int64, read
in place whatever its strides (an expanded index_select index has stride 0)."""

from __future__ import annotations

import threading

import numpy as np

from .... import dtypes as D
from ....errors import GpucoreIndexError
from .common import _dispatch, flat_local_size, groups_1d, kernel
from .elementwise import _collapse, _Layout

# gather.comp: n, ndim, x_off, i_off, y_off, x_dstride, dim_size | shape[8], x_stride[8],
# i_stride[8]
_PUSH = _Layout(7, 8, 3)
# the element an out-of-range index yields, as (low word, high word), by dtype
_FILL = {
    np.dtype(np.float32): (0x7FC00000, 0),
    np.dtype(np.float64): (0, 0x7FF80000),
    np.dtype(np.float16): (0x7E00, 0),
    np.dtype(np.uint16): (0x7FC0, 0),  # bfloat16's NaN; a uint16 array (tagged) fills 0
}
_host_index = threading.local()  # a host index seen by _accepts_gather, checked by the kernel


def _accepts_gather(inputs, specs):
    x, index = inputs
    shape, dt = specs
    _host_index.values = None
    if index._dtype is not D.int64 or x._dtype.itemsize not in (1, 2, 4, 8) or dt is not x._dtype:
        return False
    if sum(n != 1 for n in shape) > _PUSH.dims:
        return False
    note_host_index(index)
    return True


def note_host_index(index) -> None:
    """Keep the values of an index that is a host tensor (read for free) for check_host_index;
    called by a kernel's accepts(), which sees tensors where the kernel sees device arrays."""
    _host_index.values = None
    if getattr(index, "_dev", True) is None and index._data.size:
        _host_index.values = index._data


def check_host_index(index: np.ndarray, size: int, op: str = "gather"):
    """The CPU kernel's IndexError for a host index noted by note_host_index with values outside
    [0, size); an index on the device is not read back (its shader ignores such values)."""
    values = getattr(_host_index, "values", None)
    _host_index.values = None
    if values is None or values.shape != index.shape:
        return
    lo, hi = int(values.min()), int(values.max())
    if lo < 0 or hi >= size:
        raise GpucoreIndexError(
            f"{op}(): index values must be in [0, {size}); got values in [{lo}, {hi}]"
        )


@kernel("gather", accepts=_accepts_gather)
def _gather(be, out, x, index, dim, src):
    check_host_index(index, x.shape[dim])
    n = out.size
    if n == 0:
        return
    ox, oi, oy = be.operand(x), be.operand(index), be.operand(out)
    shape = out.shape
    xs = [0 if k == dim else st for k, st in enumerate(ox.strides)]
    ys = [st // out.itemsize for st in out.strides]
    sh, (xs, is_, _) = _collapse(shape, [xs, list(oi.strides), ys])
    if len(sh) > _PUSH.dims:
        raise ValueError(f"internal: gather of {len(sh)} dims after merging exceeds the shader's 8")
    elem = out.itemsize
    if elem < 4:
        per = 4 // elem
        assert oy.offset % per == 0, "byte and 16-bit outputs must start on a 32-bit word"
        y_off, words = oy.offset // per, -(-n // per)
    else:
        y_off, words = oy.offset * (elem // 4), n
    head = [n, len(sh), ox.offset, oi.offset, y_off, ox.strides[dim], x.shape[dim]]
    fill_lo, fill_hi = (0, 0) if D.is_uint16(out) else _FILL.get(out.dtype, (0, 0))
    _dispatch(
        be,
        "gather",
        (elem, fill_lo, fill_hi),
        [(x, ox, False), (index, oi, False), (out, oy, True)],
        _PUSH.pack(head, sh, (xs, is_)),
        groups_1d(words, flat_local_size(be)),
    )


_gather.half = True  # 16-bit items are moved as bits (backend.py never widens gather)
