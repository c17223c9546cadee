"""Joining kernels (gpucore/ops/joining.py): cat, the one joining op with a kernel (stack, split,
chunk, narrow and unbind are compositions). Each input is one strided copy into its slice of the
output (cpu/copy.c; numpy's concatenate took twice as long for a fused projection's three
gradients); numpy for items of other sizes."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import kernel


@kernel("cat")
def _cat(out, *ts, dim, sizes):
    if out.dtype.itemsize not in (1, 2, 4, 8) or any(t.dtype != out.dtype for t in ts):
        np.concatenate(ts, axis=dim, out=out)
        return
    pre, start = (slice(None),) * dim, 0
    for t, n in zip(ts, sizes):
        if n:
            _cpu.copy(t, out[pre + (slice(start, start + n),)])
        start += n
