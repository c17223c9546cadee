"""Reduction kernels (gpucore/ops/reduce.py): sum, mean, amax/amin, max/min along a dim (values
and indices), argmax/argmin, all/any. Floats reduce in C over a contiguous [outer, n, inner]
view; integers and bools use numpy."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import _isf, _oni, kernel


def _reduce_float(code, out, x, dims):
    xc, outer, n, inner = _oni(x, dims)
    _cpu.reduce(code, xc.reshape(-1), out.reshape(-1), outer, n, inner)


@kernel("sum")
def _sum(out, x, dims, keepdim, shape):
    if _isf(x):
        _reduce_float(_cpu.REDUCE_SUM, out, x, dims)
    else:
        np.copyto(out, np.sum(x, axis=dims, keepdims=keepdim, dtype=np.int64))


@kernel("mean")
def _mean(out, x, dims, keepdim, shape):
    _reduce_float(_cpu.REDUCE_MEAN, out, x, dims)


def _extreme(code, np_fn):
    def run(out, x, dims, keepdim, shape):
        if _isf(x):
            _reduce_float(code, out, x, dims)
        else:
            np.copyto(out, np_fn(x, axis=dims, keepdims=keepdim))

    return run


kernel("amax")(_extreme(_cpu.REDUCE_MAX, np.amax))
kernel("amin")(_extreme(_cpu.REDUCE_MIN, np.amin))


def _dim_reduce(vcode, icode, np_arg):
    def run(outs, x, dim, keepdim):
        vals, idx = outs
        if x.ndim == 0:
            vals[...] = x
            idx[...] = 0
            return
        if _isf(x):
            _reduce_float(vcode, vals, x, (dim,))
            _reduce_float(icode, idx, x, (dim,))
        else:
            i = np_arg(x, axis=dim, keepdims=True)
            np.copyto(idx, i.reshape(idx.shape))
            np.copyto(vals, np.take_along_axis(x, i, axis=dim).reshape(vals.shape))

    return run


kernel("max_dim")(_dim_reduce(_cpu.REDUCE_MAX, _cpu.REDUCE_ARGMAX, np.argmax))
kernel("min_dim")(_dim_reduce(_cpu.REDUCE_MIN, _cpu.REDUCE_ARGMIN, np.argmin))


def _arg(code, np_fn):
    def run(out, x, dim, keepdim):
        if dim is None or x.ndim == 0:
            x = x.reshape(-1)
            dim = 0
        if _isf(x):
            _reduce_float(code, out, x, (dim,))
        else:
            np.copyto(out, np_fn(x, axis=dim).reshape(out.shape))

    return run


kernel("argmax")(_arg(_cpu.REDUCE_ARGMAX, np.argmax))
kernel("argmin")(_arg(_cpu.REDUCE_ARGMIN, np.argmin))


@kernel("all")
def _all(out, x, dims, keepdim):
    np.copyto(out, np.all(x, axis=dims, keepdims=keepdim))


@kernel("any")
def _any(out, x, dims, keepdim):
    np.copyto(out, np.any(x, axis=dims, keepdims=keepdim))
