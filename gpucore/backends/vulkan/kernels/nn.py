"""Vulkan kernels: softmax / log_softmax (+ backward) and fused cross-entropy (+ backward).

Softmax (shaders/softmax.comp) works on the [outer, n, inner] layout of reduce.py: a workgroup
per row (inner == 1) or an invocation per column, in one fused dispatch; rows too long for the
parallelism at hand take two (partial stats per chunk into a device scratch array, then combine
and write). Cross-entropy (shaders/cross_entropy.comp) reads int64 targets as their low and
high 32-bit words. float16 / bfloat16 tensors are read and written by both shaders themselves
(their HALF constant: float32 arithmetic and stats, one rounding per result, no widened copies).

Out-of-range targets. The CPU kernel raises IndexError for a target outside [0, C) that is not
ignore_index; a shader cannot raise, and reading a device tensor back would force a sync. So:
- a target tensor on the host (the usual case: labels from a data loader) is checked with numpy
  where it already is, at no device cost: ``accepts`` (which sees the tensors, not ignore_index)
  keeps a copy of the targets when some value is outside [0, C), and the kernel (which sees
  ignore_index) raises the CPU's IndexError before recording anything. The copy is used only
  when it equals the uploaded targets, so a check left over from a call that never ran is inert;
- a target already on the device is read back and checked the same way before anything is
  recorded: that waits for the work producing it (a sync), the price of the CPU's IndexError
  instead of a silently NaN loss (labels usually come from the host, where the check is free).
  The shader still indexes no memory for such a target (its loss and gradient row are NaN), so
  nothing is read out of bounds should a check ever be bypassed.
"""

from __future__ import annotations

import threading

import numpy as np

from .... import _cpu
from .... import dtypes as D
from ....errors import GpucoreIndexError
from . import reduce64
from .common import _push, contiguous, groups_1d, kernel, launch
from .reduce import oni, shader, split, use_rows, wg_size

# softmax.comp's OP and MODE codes, from cpu/opcodes.def
_OP, _MODE = _cpu.OPCODES["softmax_op"], _cpu.OPCODES["softmax_mode"]
SOFTMAX, LOG_SOFTMAX = _OP["SOFTMAX"], _OP["LOG_SOFTMAX"]
SOFTMAX_BWD, LOG_SOFTMAX_BWD = _OP["SOFTMAX_BACKWARD"], _OP["LOG_SOFTMAX_BACKWARD"]
FUSED, STATS, APPLY = _MODE["FUSED"], _MODE["STATS"], _MODE["APPLY"]


# half.glsl's HALF_F16 / HALF_BF16 by numpy dtype (bfloat16 arrays are uint16)
_HALF_KIND = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}
_FLOATS = (D.float32, D.float16, D.bfloat16)


def _same_float(inputs, specs):
    """Every input and output float32, float16 or bfloat16, all of one dtype (the shaders read
    and write halves themselves)."""
    dt = inputs[0]._dtype
    outs = specs if isinstance(specs, list) else [specs]
    return (
        dt in _FLOATS and all(t._dtype is dt for t in inputs) and all(odt is dt for _, odt in outs)
    )


def _softmax_pass(be, op, mode, x, y, out, st, outer, n, inner, nch, chunk, wg, rows):
    ox, oy, oo = be.operand(x), be.operand(y), be.operand(out)
    ost = be.operand(st)
    push = _push(outer, n, inner, chunk, nch, ox.offset, oy.offset, oo.offset, ost.offset)
    writes_out = mode != STATS
    operands = [(x, False), (y, False), (out, writes_out), (st, mode == STATS)]
    total = outer * nch * (wg if rows else inner)
    launch(
        be,
        shader(be, "softmax"),
        (op, mode, 0 if rows else 1, _HALF_KIND[out.dtype]),
        operands,
        push,
        groups_1d(total, wg),
        local=wg,
    )


def softmax_like(be, op, out, x, y, dim):
    """out = op(x) along dim (forward), or the backward of op from grad x and output y."""
    dims = (dim,) if x.ndim else ()
    xc, outer, n, inner = oni(be, x, dims)
    if outer * n * inner == 0:
        return
    yc = oni(be, y, dims)[0] if y is not None else xc
    wg = wg_size(be)
    rows = use_rows(n, inner, wg)
    nch, chunk = split(outer, n, inner, wg)
    if nch == 1:
        _softmax_pass(be, op, FUSED, xc, yc, out, xc, outer, n, inner, 1, n, wg, rows)
        return
    st = be.empty_array((outer * nch * inner * 2,), np.float32)
    _softmax_pass(be, op, STATS, xc, yc, out, st, outer, n, inner, nch, chunk, wg, rows)
    _softmax_pass(be, op, APPLY, xc, yc, out, st, outer, n, inner, nch, chunk, wg, rows)


def _accepts_softmax(inputs, specs):
    """_same_float's dtypes, or float64 (reduce64.py's composition; flagged float64_math below)."""
    if inputs[0]._dtype is D.float64:
        return specs[1] is D.float64
    return _same_float(inputs, specs)


@kernel("softmax", accepts=_accepts_softmax)
def _softmax(be, out, x, dim):
    if x.dtype == np.float64:
        reduce64.softmax64(be, out, x, dim)
        return
    softmax_like(be, SOFTMAX, out, x, None, dim)


_softmax.float64_math = True


@kernel("log_softmax", accepts=_same_float)
def _log_softmax(be, out, x, dim):
    softmax_like(be, LOG_SOFTMAX, out, x, None, dim)


@kernel("softmax_backward", accepts=_same_float)
def _softmax_backward(be, out, g, y, dim):
    softmax_like(be, SOFTMAX_BWD, out, g, y, dim)


@kernel("log_softmax_backward", accepts=_same_float)
def _log_softmax_backward(be, out, g, y, dim):
    softmax_like(be, LOG_SOFTMAX_BWD, out, g, y, dim)


for _k in (_softmax, _log_softmax, _softmax_backward, _log_softmax_backward):
    _k.half = True  # softmax.comp reads and writes float16 / bfloat16 (backend.py never widens)


# ----------------------------------------------------------------------------- cross-entropy
_host_check = threading.local()  # targets seen by _xent_accepts that need ignore_index
_ON_DEVICE = object()  # _host_check.values for targets that live on the device


def _xent_accepts(inputs, specs):
    logits, target = inputs
    dt = logits._dtype
    ok = dt in _FLOATS and target._dtype is D.int64 and all(odt is dt for _, odt in specs)
    _host_check.values = None
    if ok and target._dev is not None and target._data.size:
        _host_check.values = _ON_DEVICE  # read back and checked in the kernel
    elif ok and target._dev is None and target._data.size:
        t = target._data
        c = logits.shape[1]
        if int(t.min()) < 0 or int(t.max()) >= c:
            _host_check.values = np.array(t)  # decided in the kernel, which knows ignore_index
    return ok


def _raise_for_bad_targets(be, target: np.ndarray, c: int, ignore_index: int):
    """Raise the CPU kernel's IndexError when this call's targets came from the host holding a
    value outside [0, c) that is not ignore_index (see the module docstring)."""
    values = getattr(_host_check, "values", None)
    _host_check.values = None
    if values is _ON_DEVICE:
        if be.ctx.stream.capture is not None:
            return  # a captured step cannot read them: a bad target gives a NaN loss (shader)
        values = be.host_view(target)  # the targets were on the device: wait and read them
    elif values is None or values.shape != target.shape or not np.array_equal(values, target):
        return
    bad = np.flatnonzero(((values < 0) | (values >= c)) & (values != ignore_index))
    if bad.size:
        i = int(bad[0])
        raise GpucoreIndexError(
            f"cross_entropy(): target[{i}] = {int(values[i])} is out of range for c = {c} "
            f"classes (expected 0 <= target < {c} or ignore_index = {ignore_index})"
        )


def _xent_bwd_accepts(inputs, specs):
    logits, target, lse, g = inputs
    dt = logits._dtype
    return (
        dt in _FLOATS
        and target._dtype is D.int64
        and all(t._dtype is dt for t in (lse, g))
        and specs[1] is dt
    )


def _xent_push(be, n, c, logits, target, lse, g, out, ignore_index):
    ign = int(ignore_index) & 0xFFFFFFFFFFFFFFFF
    return _push(
        n,
        c,
        be.operand(logits).offset,
        2 * be.operand(target).offset,
        be.operand(lse).offset,
        be.operand(g).offset,
        be.operand(out).offset,
        ign & 0xFFFFFFFF,
        ign >> 32,
    )


@kernel("cross_entropy", accepts=_xent_accepts)
def _xent(be, outs, logits, target, ignore_index):
    loss, lse = outs
    n, c = logits.shape
    if n == 0:
        return
    _raise_for_bad_targets(be, target, c, ignore_index)
    logits, target = contiguous(be, logits), contiguous(be, target)
    wg = wg_size(be)
    serial = c < wg
    push = _xent_push(be, n, c, logits, target, lse, loss, logits, ignore_index)
    operands = [(logits, False), (target, False), (lse, True), (loss, True), (logits, False)]
    groups = groups_1d(n, wg) if serial else groups_1d(n * wg, wg)
    spec = (0, int(serial), _HALF_KIND[logits.dtype])
    launch(be, shader(be, "cross_entropy"), spec, operands, push, groups, local=wg)


@kernel("cross_entropy_backward", accepts=_xent_bwd_accepts)
def _xent_backward(be, out, logits, target, lse, g, ignore_index):
    n, c = logits.shape
    if n * c == 0:
        return
    logits, target = contiguous(be, logits), contiguous(be, target)
    lse, g = contiguous(be, lse), contiguous(be, g)
    wg = wg_size(be)
    push = _xent_push(be, n, c, logits, target, lse, g, out, ignore_index)
    operands = [(logits, False), (target, False), (lse, False), (g, False), (out, True)]
    spec = (1, 0, _HALF_KIND[logits.dtype])
    launch(be, shader(be, "cross_entropy"), spec, operands, push, groups_1d(n * c, wg), local=wg)


_xent.half = _xent_backward.half = True  # cross_entropy.comp reads and writes halves itself
