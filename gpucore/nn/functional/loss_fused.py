"""cross_entropy's training-step lane: host logits [N, C] and int64 class indices [N], reduction
'mean' or 'sum', as one graph node where the plain path records three ops (the per-row losses,
their sum, the division by the count) and runs each through the registry.

The same kernels in the same order, so the same bits, forward and backward:

- forward: the cross_entropy kernel (rows and their log-sum-exp), the sum kernel over the rows
  (the SUM op's call for a 1-D tensor), and the IEEE division of that sum by the count of
  targets that are not ignore_index, the count rounded to the logits' dtype first as a Python
  number operand is (0 targets: NaN, as 0 / 0);
- backward: the incoming gradient divided by the count (div's backward), repeated over the rows
  (sum's), then the cross_entropy_backward kernel. Under create_graph it is written in registry
  ops instead (div, expand, cross_entropy_backward), so a double backward works as on the plain
  path.

Only where nothing could tell the difference (gpucore/nn/modules/relu_fusion.py's rule): no
profiler (its per-op events stay cross_entropy, sum and div), trace_ops, graph capture or
autocast region in this thread, a dispatch policy that runs the ops in the C extension
(dispatch.cpu_fast), contiguous inputs; otherwise cross_entropy takes the plain path. What stays
visible is the graph: ``loss.grad_fn`` is one Cross_entropyBackward node whose inputs are the
logits' node and the target's (None), where the plain path has DivBackward -> SumBackward ->
Cross_entropyBackward (PyTorch: NllLossBackward -> LogSoftmaxBackward).
"""

from __future__ import annotations

import numpy as np

from ... import _cpu, dispatch
from ... import dtypes as D
from ...autograd.grad_mode import _state as _grad_state
from ...autograd.graph import Ctx, Node
from ...errors import GpucoreIndexError
from ...ops import nn as nn_ops
from ...ops.registry import AUTOCAST, _edge, apply
from ...tensor import HOST_READ_HOOK, Tensor

_host_empty = _cpu.host_empty
_xent_forward = _cpu.cross_entropy_forward
_xent_backward = _cpu.cross_entropy_backward
_reduce = _cpu.reduce
_SUM = _cpu.REDUCE_SUM
_ndarray = np.ndarray
_NO_GRAD_IN = (True, False)

# ENABLED[0] = False sends every call down the plain path (tests' A/B; the same bits).
ENABLED = [True]


def _empty(shape: tuple, npdt, n: int) -> np.ndarray:
    # as the CPU backend's empty_array: a block of the caching allocator, the array's base
    return _ndarray(shape, npdt, _host_empty(n * npdt.itemsize))


class _ReducedXent:
    """The op of the one node (not a registry op: it is never applied, only recorded):
    ``name`` for the node's name, ``backward`` for the engine."""

    name = "cross_entropy"

    @staticmethod
    def backward(ctx, g):
        logits, target, lse = ctx.saved
        a = ctx.attrs
        denom = a["denom"]
        dt = logits._dtype
        n, c = logits._data.shape
        if _grad_state.enabled or g._dev is not None or g._dtype is not dt or g._data.shape != ():
            # create_graph (or a gradient off the host): the plain path's registry ops
            if denom is not None:
                g = g / Tensor._wrap(np.array(denom, dt.np), dt)
            rows = g.reshape((1,)).expand((n,))
            gx = apply(nn_ops.XENT_BACKWARD, logits, target, lse, rows, ignore_index=a["ii"])
            return gx, None
        npdt = dt.np
        v = npdt.type(g._data[()])
        if denom is not None:
            v = _divide(v, npdt.type(denom))
        rows = _empty((n,), npdt, n)
        rows.fill(v)
        out = _empty((n, c), npdt, n * c)
        _xent_backward(logits._data, target._data, lse._data, rows, out, n, c, a["ii"])
        return Tensor._from_kernel(out, dt), None


def _divide(a, b):
    """a / b for numpy scalars of one float dtype: the hardware's IEEE division, as the div
    kernel's (0 / 0 gives the CPU's default NaN), without numpy's warnings for a zero b."""
    if b == 0:
        with np.errstate(all="ignore"):
            return a / b
    return a / b


def reduced_cross_entropy(input: Tensor, target: Tensor, ignore_index: int, mean: bool):
    """The loss (a 0-d tensor) for host float32 / float64 logits [N, C] and int64 targets [N]
    (the caller checked those), or None where the plain path must run (see the docstring)."""
    x, t = input._data, target._data
    if (
        not ENABLED[0]
        or not dispatch.cpu_fast(x.size)
        or AUTOCAST[0] is not None
        or HOST_READ_HOOK[0] is not None
        or not x.flags.c_contiguous
        or not t.flags.c_contiguous
        or type(ignore_index) is not int
        or x.size == 0
    ):
        return None
    dt = input._dtype
    npdt = dt.np
    n, c = x.shape
    rows = _empty((n,), npdt, n)
    lse = _empty((n,), npdt, n)
    try:
        _xent_forward(x, t, rows, lse, n, c, ignore_index)
    except IndexError as e:
        raise GpucoreIndexError(f"cross_entropy(): {e}") from None
    total = _empty((), npdt, 1)
    _reduce(_SUM, rows, total.reshape(1), 1, n, 1)
    denom = None
    if mean:
        denom = int(np.count_nonzero(t != ignore_index))
        total[()] = _divide(total[()], npdt.type(denom))
    out = Tensor._from_kernel(total, dt)
    if _grad_state.enabled and input._requires_grad:
        lse_t = Tensor._from_kernel(lse, dt)
        ctx = Ctx("cross_entropy", (input, target, lse_t), {"ii": ignore_index, "denom": denom},
                  _NO_GRAD_IN)  # fmt: skip
        node = Node(_ReducedXent, ctx, (_edge(input), None), ((x.shape, dt), (t.shape, D.int64)))
        out._grad_fn = node
        out._requires_grad = True
    return out
