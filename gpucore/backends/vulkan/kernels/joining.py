"""Joining kernels (gpucore/ops/joining.py): cat, as one strided copy per input into its slice of
the output (shaders/copy.comp, common.py's ``copy_array``). Inputs are read in place whatever
their strides; any dtype of 1, 2, 4 or 8 bytes (bool, float16 and bfloat16 through copy.comp's
byte modes, which write only their own bytes of a word shared with a neighbouring input's
slice)."""

from __future__ import annotations

from .common import copy_array, copy_ok, kernel


def _accepts_cat(inputs, specs):
    shape, dt = specs
    return (
        all(t._dtype is dt for t in inputs)
        and all(copy_ok(t._data) for t in inputs)
        and (sum(n != 1 for n in shape) + (dt.itemsize == 8) <= 8)
    )


@kernel("cat", accepts=_accepts_cat)
def _cat(be, out, *ts, dim, sizes):
    start = 0
    lead = (slice(None),) * dim
    for t, n in zip(ts, sizes):
        if n:
            copy_array(be, out[lead + (slice(start, start + n),)], t)
        start += n


_cat.half = True  # float16 / bfloat16 are 16-bit items to copy.comp (backend.py never widens cat)
