"""nn.Sequential's ReLU fusion: a Linear, Conv2d or Conv1d followed by a ReLU (and a
Conv2d-ReLU by a MaxPool2d) runs as one op of gpucore/ops/relu_fused.py, the ReLU in the
layer's epilogue and its mask in one pass with the layer's backward.

Only where nothing could tell the difference:

- each module involved runs its class's own forward (the one defined when this module was
  imported) through Module.__call__, with no forward patched on the instance and no forward or
  pre-forward hook (gpucore has no backward or global module hooks);
- the fused output reaches nothing that could modify it. The fused ops save their output as the
  backward mask where the plain ReLU saves its input, so an in-place op on it (a Dropout or ReLU
  with inplace=True, ``y += 1`` by the caller, a hook's) would break a backward that the plain
  path runs. So the block's output must go to the next module of the same Sequential, and that
  module must be one known neither to modify its input nor to hand it on: a Linear, a Conv1d /
  Conv2d / Conv3d, a max or average pooling module, or an activation without inplace=True (a
  consumer); or a module that may hand on its input or a view of it (Flatten, Unflatten,
  Identity, Dropout without inplace=True, which returns its input in eval mode), whose output in
  turn must satisfy the same rule, along the Sequential. All of them plain as above. The last
  module's output escapes to the caller, so a block at the very end of a Sequential (or followed
  only by pass-through modules) never fuses;
- no graph capture (gpucore.compile, ONNX export: they see the Linear / Conv and Relu nodes),
  profiler (its per-op events stay the plain ops', linear and relu), autocast region or
  trace_ops in this thread;
- host tensors of one float32 / float64 dtype that the dispatch policy would run on the CPU, of
  shapes the plain path accepts (anything else, errors included, takes the plain path).

The results are the plain path's bits: outputs, and the gradients of the input, the weights and
the biases (tests/nn/test_relu_fusion.py). What remains visible: a walk of the autograd graph
(``grad_fn.next``) meets one node, Linear_reluBackward, Conv2d_reluBackward or
Conv2d_relu_max_pool2dBackward, where the plain path has the layer's node and ReluBackward (and
Max_pool2dBackward); by the rule above it is never the grad_fn of a tensor the caller gets back
from the Sequential directly.

Cost where nothing fuses: Sequential.forward asks ``starts`` for the positions where a block
could begin, cached per tuple of module classes (a Linear-like class followed by a ReLU-like
one); an empty answer runs the plain loop, with no per-module call into this file.
"""

from __future__ import annotations

from ... import _cpu, dispatch
from ... import dtypes as D
from ...autograd.grad_mode import _state as _grad_state
from ...ops import relu_fused as RF
from ...ops.linalg import LINEAR
from ...ops.pool import MAX_POOL2D
from ...ops.registry import AUTOCAST, CAPTURE, apply, capturing, record
from ...ops.unary import RELU
from ...tensor import Tensor
from ..functional.conv import _fused_conv_ok
from ..functional.pooling import _pool_args
from ..module import Module
from . import activation as A
from . import pooling as P
from .activation import ReLU
from .conv import Conv1d, Conv2d, _Conv
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .pooling import MaxPool2d

_CALL = Module.__call__
_FLOATS = (D.float32, D.float64)
_fast_linear = _cpu.fast_linear

# the class forwards as imported: one patched later on the class is not these, so never fused
_RELU_FWD = ReLU.forward
_LINEAR_FWD = Linear.forward
_CONV_FWD = _Conv.forward
_POOL_FWD = MaxPool2d.forward
_CONV2D, _CONV1D = Conv2d._conv, Conv1d._conv

# The modules a fused output may go to (see the docstring), by class forward: (consumes it,
# has an inplace flag that must be False). A consumer returns a new tensor; the others may
# return their input or a view of it, so the module after them is checked in turn.
_NEXT = {
    _LINEAR_FWD: (True, False),
    _CONV_FWD: (True, False),
    **{c.forward: (True, False) for c in (P.MaxPool1d, P.MaxPool2d, P.AvgPool1d, P.AvgPool2d)},
    **{c.forward: (True, False) for c in (A.Sigmoid, A.Tanh, A.GELU, A.Softplus)},
    **{
        c.forward: (True, True)
        for c in (ReLU, A.LeakyReLU, A.ELU, A.CELU, A.Hardtanh, A._InplaceActivation)
    },
    Dropout.forward: (False, True),
    **{c.forward: (False, False) for c in (Flatten, Unflatten, Identity)},
}


# ENABLED[0] = False turns the fusion off (benchmarks/relu_fusion.py's A/B; the same bits).
ENABLED = [True]


def fusion_open() -> bool:
    """Whether this thread's ops may be fused: on, and no profiler (its per-op events are the
    plain ops'), capture, autocast or trace_ops watching."""
    return (
        ENABLED[0]
        and not dispatch.profiling[0]
        and (CAPTURE[0] is None or capturing() is None)
        and AUTOCAST[0] is None
        and dispatch._trace.records is None
    )


def _plain(m, forward) -> bool:
    """m runs ``forward`` (its class's) through Module.__call__, with no hook to call."""
    t = type(m)
    return (
        t.forward is forward
        and t.__call__ is _CALL
        and "forward" not in m.__dict__
        and not m._forward_hooks
        and not m._forward_pre_hooks
    )


def _host(x, w, b) -> bool:
    """x, w (and b) host tensors of one float32 / float64 dtype."""
    dt = x._dtype
    return (
        dt in _FLOATS
        and x._dev is None
        and isinstance(w, Tensor)
        and w._dtype is dt
        and w._dev is None
        and (b is None or (isinstance(b, Tensor) and b._dtype is dt and b._dev is None))
    )


_PLANS: dict = {}
_BLOCK_CLASSES = (Linear, _Conv)


def starts(mods: tuple) -> frozenset:
    """The positions i of ``mods`` where a block may begin (a Linear or convolution class, a
    ReLU class after it, a module after that): a filter on classes only, cached per tuple of
    classes by subclassing alone (a forward patched on a class, and undone later, must not stick
    in the cache); fuse_at checks the forwards and everything else at each call."""
    key = tuple(map(type, mods))
    plan = _PLANS.get(key)
    if plan is None:
        plan = frozenset(
            i
            for i in range(len(key) - 2)
            if issubclass(key[i], _BLOCK_CLASSES) and issubclass(key[i + 1], ReLU)
        )
        if len(_PLANS) >= 256:  # (Sequentials built on the fly: a bounded cache)
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _consumed(mods: tuple, j: int) -> bool:
    """Whether an output handed to mods[j] reaches a consumer of the same Sequential through
    modules that neither modify nor expose it (the docstring's rule)."""
    for k in range(j, len(mods)):
        m = mods[k]
        t = type(m)
        rule = _NEXT.get(t.forward)
        if (
            rule is None
            or t.__call__ is not _CALL
            or "forward" in m.__dict__
            or m._forward_hooks
            or m._forward_pre_hooks
            or (rule[1] and getattr(m, "inplace", True) is not False)
        ):
            return False
        if rule[0]:
            return True
    return False  # the Sequential's output: the caller gets it


def fuse_at(mods: tuple, i: int, x):
    """(output, modules consumed) when mods[i] and the ReLU after it (and a MaxPool2d after
    that) can run fused on input x; else None (the caller runs mods[i] alone)."""
    if type(x) is not Tensor or not _plain(mods[i + 1], _RELU_FWD):
        return None
    m = mods[i]
    fwd = type(m).forward
    if fwd is _LINEAR_FWD:
        if not _plain(m, fwd) or not _consumed(mods, i + 2):
            return None
        out = _linear_relu(x, m.weight, m.bias)
        return None if out is None else (out, 2)
    if fwd is not _CONV_FWD or not _plain(m, fwd):
        return None
    conv = type(m)._conv
    if conv is _CONV2D:
        pool = None
        if i + 3 < len(mods):
            p = mods[i + 2]
            if _plain(p, _POOL_FWD) and not p.return_indices and _consumed(mods, i + 3):
                pool = p
        # without the pool in the op, the conv-relu output goes to whatever follows the ReLU
        if pool is None and not _consumed(mods, i + 2):
            return None
        return _conv_relu(x, m, pool)
    if (
        conv is _CONV1D
        and x.ndim == 3
        and m.groups == 1
        and m.padding_mode == "zeros"
        and not isinstance(m.padding, str)
        and x._dtype in _FLOATS
        and x._dev is None
        and _consumed(mods, i + 2)
    ):
        # F.conv1d's lowering: conv2d over a height of one, then the height squeezed away (a
        # view of the fused output, so the same rule holds for what consumes it)
        fused = _conv_relu(x.unsqueeze(2), m, None, one_d=True)
        return None if fused is None else (fused[0].squeeze(2), 2)
    return None


def _linear_relu(x: Tensor, w, b):
    """relu(linear(x, w, b)) as one linear_relu op for a 2-D host x, else None."""
    out = _fast_linear(x, w, b, True)  # the plain path's fast lane, with the ReLU: or None
    ins = (x, w) if b is None else (x, w, b)
    if out is not None:
        if _grad_state.enabled:
            record(RF.LINEAR_RELU, ins, (out,), {})
        return out
    if x.ndim != 2 or not _host(x, w, b) or w.ndim != 2 or x.shape[1] != w.shape[1]:
        return None
    n = w.shape[0]
    if b is not None and tuple(b.shape) != (n,):
        return None
    spec = ((x.shape[0], n), x._dtype)
    if dispatch.backend_for(LINEAR, ins, spec) is not dispatch.CPU:
        return None
    if dispatch.backend_for(RELU, (x,), spec) is not dispatch.CPU:
        return None
    return apply(RF.LINEAR_RELU, *ins)


def _conv_relu(x: Tensor, m, pool, one_d: bool = False):
    """(relu(conv2d(x)), 2) or (max_pool2d(relu(conv2d(x))), 3) as one op, or None. one_d: m is
    a Conv1d and x its input with a height of one (F.conv1d's conv2d)."""
    w, b = m.weight, m.bias
    if (
        m.padding_mode != "zeros"
        or m.groups != 1
        or isinstance(m.padding, str)
        or x.ndim != 4
        or not _host(x, w, b)
        or w.ndim != (3 if one_d else 4)
    ):
        return None
    if one_d:
        w = w.unsqueeze(2)
        attrs = {"stride": (1, *m.stride), "padding": (0, *m.padding), "dilation": (1, *m.dilation)}
    else:
        attrs = {"stride": m.stride, "padding": m.padding, "dilation": m.dilation}
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    if c == 0 or c != ci or (b is not None and tuple(b.shape) != (o,)):
        return None
    s, p, d = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    if oh <= 0 or ow <= 0 or kh == 0 or kw == 0:
        return None
    if not _fused_conv_ok(x, w, b, (n, c * kh * kw, oh * ow)):
        return None
    spec = ((n, o, oh, ow), x._dtype)
    if dispatch.backend_for(RELU, (x,), spec) is not dispatch.CPU:
        return None
    ins = (x.contiguous(), w.contiguous()) + (() if b is None else (b.contiguous(),))
    if pool is not None:
        pattrs = _pool_attrs(pool, ins, attrs, spec)
        if pattrs is not None:
            return apply(RF.CONV2D_RELU_MAX_POOL2D, *ins, **attrs, **pattrs)[0], 3
    return apply(RF.CONV2D_RELU, *ins, **attrs), 2


def _pool_attrs(pool, ins, attrs, spec):
    """conv2d_relu_max_pool2d's pool attributes for MaxPool2d ``pool`` over the conv output of
    ``spec``, or None where its plain path would raise or leave the CPU."""
    try:
        k, s, p, d = _pool_args("max_pool2d", pool.kernel_size, pool.stride, pool.padding,
                                pool.dilation)  # fmt: skip
    except (TypeError, ValueError):
        return None
    if any(p[i] > (d[i] * (k[i] - 1) + 1) // 2 for i in range(2)):
        return None
    pattrs = {
        "pool_kernel": k,
        "pool_stride": s,
        "pool_padding": p,
        "pool_dilation": d,
        "ceil_mode": bool(pool.ceil_mode),
    }
    try:
        pspecs = RF._crp_infer(*ins, **attrs, **pattrs)
    except (TypeError, ValueError):  # a window past the input...: the plain path's error
        return None
    # (the conv output's spec stands for max_pool2d's input in the policy's size test)
    if dispatch.backend_for(MAX_POOL2D, ins[:1], [spec, *pspecs]) is not dispatch.CPU:
        return None
    return pattrs
