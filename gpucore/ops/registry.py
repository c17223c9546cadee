"""The op registry: one entry per op, the single source of truth.

An entry (OpDef) holds the op's name, its shape/dtype rule (``infer``), which tensors its backward
needs (``save``), and its backward written in gpucore ops (so it runs on whichever backend the
forward ran and is itself differentiable). Kernels live in each backend's table keyed by the op
name (``gpucore/backends/<name>/kernels/<family>.py``); view ops have a ``view`` function instead.

Adding an op: one ``defop`` call in the module of its family here, plus a kernel per backend.
See ``gpucore/ops/README.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter as _itemgetter
from time import perf_counter as _perf_counter

import numpy as _np

from .. import _cpu, dispatch
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.graph import Ctx, Node, accumulate_node, grad_fn_of
from ..backends.cpu import empty_array as _empty_array
from ..backends.cpu.kernels import FAST as _CPU_FAST
from ..backends.cpu.kernels import KERNELS as _CPU_KERNELS
from ..dtypes import LIMITED as _LIMITED
from ..dtypes import LIMITED_OPS as _LIMITED_OPS
from ..dtypes import float32 as _F32
from ..dtypes import float64 as _F64
from ..errors import DeviceError, DTypeError
from ..tensor import Tensor
from .api import not_tensor, public

REGISTRY: dict[str, OpDef] = {}
# The graph capture hook (gpucore/runtime/capture/trace.py): not None while some thread traces
# a model; ``capturing()`` gives the calling thread's Tracer, to which ``apply`` hands its ops.
CAPTURE: list = [None]
# ``apply`` passes inputs through AUTOCAST[0](op name, inputs) while an autocast region is open
# in some thread (gpucore/amp/autocast_mode.py: it casts for the ops on its lists).
AUTOCAST: list = [None]
_TRUE1 = (True,)
_NONE1 = (None,)

# cpu/fastpath.c builds result Tensors itself: it needs the class (its slots) and the dtypes.
_cpu.fast_setup(Tensor, _F32, _F64, _np.dtype(_np.float32), _np.dtype(_np.float64), _np.ndarray)
_fast_view = _cpu.fast_view


class OpDef:
    """Registry entry of one op."""

    __slots__ = (
        "name",
        "infer",
        "backward",
        "save_inputs",
        "save_outputs",
        "view",
        "float_only",
        "save_for",
        "elementwise",
        "fast",
        "plans",
        "function",
        "samples",
        "arg_names",
    )

    def __init__(
        self,
        name,
        infer,
        backward,
        save_inputs,
        save_outputs,
        view,
        float_only,
        save_for=None,
        elementwise=False,
    ):
        self.name = name
        self.elementwise = elementwise
        self.fast = _CPU_FAST.get(name) if elementwise else None
        self.plans = {}  # record(): needs_in pattern -> what to save
        self.save_for = save_for
        self.infer = infer
        self.backward = backward
        self.save_inputs = save_inputs
        self.save_outputs = save_outputs
        self.view = view
        self.float_only = float_only
        self.function = None  # the public function defop's variants made, if any
        self.samples = None  # callable -> list of ops.samples.Sample (the op's test inputs)
        self.arg_names = None  # the inputs' names where known, for apply's argument errors

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def defop(
    name: str,
    *,
    infer: Callable | None = None,
    backward: Callable | None = None,
    save_inputs: tuple = (),
    save_outputs: tuple = (),
    view: Callable | None = None,
    float_only: bool = False,
    save_for: dict | None = None,
    elementwise: bool = False,
    variants: tuple = (),
    samples: Callable | None = None,
) -> OpDef:
    """Register an op.

    infer(*inputs, **attrs) -> (shape, dtype), or a list of them for ops with extra outputs (the
    first output is the differentiable one). backward(ctx, grad) -> one gradient per input (or
    None); ``ctx.saved`` holds the inputs listed in save_inputs followed by the outputs listed in
    save_outputs, ``ctx.attrs`` the op's keyword attributes. view(array, **attrs) makes a view op.

    save_inputs may name optional trailing inputs: a call without one saves None in its place.
    save_for maps a saved input's index to the inputs whose gradients need it: the input is saved
    only when one of those requires grad (else ctx.saved holds None in its place), as PyTorch
    does, so that ``y[0] = y[1] * 2`` does not keep (and version-check) ``y[1]``.

    elementwise: inputs of one shape and one float dtype give one output of that shape and
    dtype, computed by the CPU kernel as ``kernel(out, *arrays, **attrs)``. Such calls on small
    host tensors take the fast lane of ``apply`` (no infer, no backend selection).

    variants: the public forms of an op whose public form is just ``apply(op, *inputs)``:
    "function" (``gpucore.<name>``), "method" (``Tensor.<name>``), "inplace" (``Tensor.<name>_``).
    Ops that normalise arguments declare their function with ``api.public`` instead.

    samples: ``samples() -> [Sample, ...]`` (see ``ops/samples.py``), the inputs and float64
    reference with which tests/ops/test_every_op.py checks the op on every backend.
    """
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is registered twice")
    op = OpDef(
        name, infer, backward, save_inputs, save_outputs, view, float_only, save_for, elementwise
    )
    op.samples = samples
    if variants:
        op.function = _op_function(op, variants)
    REGISTRY[name] = op
    return op


def _op_function(op: OpDef, variants: tuple) -> Callable:
    unknown = set(variants) - {"function", "method", "inplace"}
    if unknown:
        raise ValueError(f"defop({op.name!r}): unknown variants {sorted(unknown)}")

    def fn(input: Tensor) -> Tensor:
        return apply(op, input)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise {op.name}, as torch.{op.name}."
    op.arg_names = ("input",)
    return public(
        op.name,
        function="function" in variants,
        method="method" in variants,
        inplace="inplace" in variants,
        check_args=False,  # apply checks the input: no wrapper around the fast lane
    )(fn)


def mark_elementwise(*ops: OpDef) -> None:
    """Declare ops elementwise (see defop's ``elementwise``) after registering them."""
    for op in ops:
        op.elementwise = True
        op.fast = _CPU_FAST.get(op.name)


def capturing():
    """The Tracer recording the calling thread's ops (runtime/capture/trace.py), or None. A
    capture in another thread changes nothing this thread's ops do (their fast lanes, so their
    bits and speed, stay). Hot paths test ``CAPTURE[0] is not None`` first: with no capture
    running anywhere they pay only that test."""
    cap = CAPTURE[0]  # (read once: the last capture to end clears it from another thread)
    return None if cap is None else cap.here()


def apply(op: OpDef, *inputs, **attrs):
    """Run ``op`` on tensors ``inputs``: pick a backend, run its kernel, record the graph.

    Returns the output tensor, or a tuple when the op has extra outputs.
    """
    if CAPTURE[0] is not None:
        tracer = capturing()
        if tracer is not None:
            return tracer(op, inputs, attrs)
    autocast = AUTOCAST[0]  # (read once: another thread's autocast region may close meanwhile)
    if autocast is not None:
        inputs = autocast(op.name, inputs)
    elif op.view is not None and type(inputs[0]) is Tensor:
        return view_of(op, inputs[0], op.view(inputs[0]._data, **attrs), attrs)
    if op.elementwise:
        fast = op.fast
        if fast is not None and not attrs:
            out = fast[0](fast[1], *inputs)  # the whole op in C, or None
            if out is not None:
                if op.backward is not None and _grad_state.enabled:
                    record(op, inputs, (out,), attrs)
                return out
        out = _fast_elementwise(op, inputs, attrs)
        if out is not None:
            return out
    return apply_general(op, inputs, attrs)


def view_of(op: OpDef, src: Tensor, arr, attrs: dict) -> Tensor:
    """The output of view op ``op`` on ``src`` whose array ``arr`` the caller already made
    (``op.view(src._data, **attrs)``): what ``apply`` returns for it, without its general path.
    Views cost only this on the hot path (reshape, transpose, split), as PyTorch's do."""
    if (CAPTURE[0] is not None and capturing()) or AUTOCAST[0] is not None:
        return apply(op, src, **attrs)
    out = _fast_view(src, arr, op, attrs)  # Tensor._make_view's C call, without its frame
    if out is None:
        out = Tensor._make_view(src, arr, op, attrs)  # (which raises what the lane declined)
    if src._requires_grad and _grad_state.enabled and src._dtype.is_floating_point:
        record(op, (src,), (out,), attrs)
    return out


def apply_general(op: OpDef, inputs: tuple, attrs: dict):
    """``apply`` without its fast lanes and capture hook (same results): what graph capture
    runs for each op it records."""
    for t in inputs:
        if type(t) is not Tensor and not isinstance(t, Tensor):
            raise _not_tensor(op, inputs)
        if t._dtype in _LIMITED and op.view is None and op.name not in _LIMITED_OPS:
            raise _limited(op, t._dtype)
    if op.view is not None:
        out = Tensor._make_view(inputs[0], op.view(inputs[0]._data, **attrs), op, attrs)
        outs = (out,)
    else:
        specs = op.infer(*inputs, **attrs)
        outs = _run(dispatch.backend_for(op, inputs, specs), op, specs, inputs, attrs)
        out = outs[0]

    if op.backward is not None and _grad_state.enabled and out._dtype.is_floating_point:
        record(op, inputs, outs, attrs)
    return outs if len(outs) > 1 else out


def apply_on(backend, op: OpDef, *inputs, **attrs):
    """``apply`` on the backend the caller chose instead of the dispatch policy's: for ops whose
    result must be made where the caller asks (random sampling into ``device=``). No autograd:
    such ops have no backward."""
    if CAPTURE[0] is not None:
        tracer = capturing()
        if tracer is not None:
            return tracer(op, inputs, attrs, backend)
    return apply_on_general(backend, op, inputs, attrs)


def apply_on_general(backend, op: OpDef, inputs: tuple, attrs: dict):
    """``apply_on`` without the capture hook."""
    for t in inputs:
        if not isinstance(t, Tensor):
            raise _not_tensor(op, inputs)
    specs = op.infer(*inputs, **attrs)
    if backend.name != "cpu" and not backend.supports(op, inputs, specs):
        raise DeviceError(f"{op.name}: the {backend.name} backend has no kernel for these inputs")
    outs = _run(backend, op, specs, inputs, attrs)
    return outs if len(outs) > 1 else outs[0]


def _limited(op: OpDef, dt) -> DTypeError:
    """The error of an op PyTorch does not implement for uint16 / uint32 / uint64."""
    return DTypeError(
        f"{op.name}: not implemented for {dt} tensors, as in PyTorch (uint16, uint32 and uint64 "
        "have limited support: creation, casts, eq/ne, mul, bitwise and/or/xor, sum, cumsum, "
        "sort, cat, indexing); convert with .to(gpucore.int64) first"
    )


def _not_tensor(op: OpDef, inputs) -> TypeError:
    """The ArgumentTypeError for the first input of ``op`` that is not a Tensor (an op's inputs
    are Tensors: a public function that takes numbers or arrays converts them first)."""
    i = next(i for i, t in enumerate(inputs) if not isinstance(t, Tensor))
    names = op.arg_names
    return not_tensor(op.name, names[i] if names and i < len(names) else None, i + 1, inputs[i])


def _run(backend, op: OpDef, specs, inputs, attrs) -> tuple:
    """Run ``op`` on ``backend`` (profiled and traced when asked), outputs as Tensors."""
    if dispatch.profiling[0]:
        t0 = _perf_counter()
        arrays = backend.run(op, specs, inputs, attrs)
        dispatch.profile_event(op.name, backend.name, _perf_counter() - t0)
    else:
        arrays = backend.run(op, specs, inputs, attrs)
    outs = _wrap_results(arrays, specs, backend.owner)
    if dispatch._trace.records is not None:
        dispatch.record(op.name, backend.name, outs[0].shape)
    return outs


def _wrap_results(arrays: tuple, specs, owner) -> tuple:
    """The Tensors over a backend's output arrays (``owner``: None for host memory)."""
    if type(specs) is tuple:
        dt = specs[1]
        if owner is None:
            return (Tensor._from_kernel(arrays[0], dt),)
        return (Tensor._wrap(arrays[0], dt, dev=owner),)
    if owner is None:
        return tuple([Tensor._from_kernel(a, dt) for a, (_, dt) in zip(arrays, specs)])
    return tuple([Tensor._wrap(a, dt, dev=owner) for a, (_, dt) in zip(arrays, specs)])


def _fast_elementwise(op: OpDef, inputs, attrs):
    """The fast lane: host tensors of one shape and one float dtype, on the CPU by the policy,
    nothing tracing: allocate, run the CPU kernel, record. None when any of that does not hold
    (then apply takes the general path, which gives the same result)."""
    first = inputs[0]
    if type(first) is not Tensor or first._dev is not None:
        return None
    dt = first._dtype
    if dt is not _F32 and dt is not _F64:
        return None
    data = first._data
    shape = data.shape
    arrays = [data]
    for t in inputs[1:]:
        if type(t) is not Tensor or t._dev is not None or t._dtype is not dt:
            return None
        d = t._data
        if d.shape != shape:
            return None
        arrays.append(d)
    if not dispatch.cpu_fast(data.size):
        return None
    out = _empty_array(shape, dt.np)
    _CPU_KERNELS[op.name](out, *arrays, **attrs)
    t = Tensor._from_kernel(out, dt)
    if op.backward is not None and _grad_state.enabled:
        record(op, inputs, (t,), attrs)
    return t


def _edge(t):
    """edge_of(t) for an input that requires grad, with its common cases inline."""
    fn = t._grad_fn
    if fn is not None:
        return fn if fn.version is None else grad_fn_of(t)
    acc = t._acc
    return acc if acc is not None else accumulate_node(t)


def _save_plan(op: OpDef, needs_in: tuple):
    """What ``op`` saves when the inputs needing grad are ``needs_in``, as indices into
    ``(None,) + inputs + outs`` (0 for a skipped input, 1 + k for input k, 1 + len(inputs) + k
    for output k): an ``itemgetter`` of them, or the one index when it saves one tensor (cached
    per op and pattern)."""
    sf = op.save_for
    n_in = len(needs_in)
    idx = []
    for i in op.save_inputs:
        if i >= n_in:  # an optional trailing input this call did not pass
            idx.append(0)
        elif sf is None or i not in sf or any(needs_in[j] for j in sf[i]):
            idx.append(1 + i)
        else:
            idx.append(0)
    idx.extend(1 + n_in + i for i in op.save_outputs)
    plan = _itemgetter(*idx) if len(idx) > 1 else idx[0]
    op.plans[needs_in] = plan
    return plan


def record(op: OpDef, inputs, outs, attrs) -> None:
    """Attach a graph node for ``op`` to ``outs[0]`` when an input requires grad (for ops whose
    forward does not go through ``apply``, such as device moves)."""
    # Unrolled for the one- and two-input ops, no generator expressions: this runs on every
    # differentiable op, and small-tensor training is bound by it.
    n = len(inputs)
    if n == 2:
        a, b = inputs
        ra = a._requires_grad
        rb = b._requires_grad
        if not (ra or rb):
            return
        needs_in = (ra, rb)
        # _edge inline (a call per input costs more than its body)
        ea = eb = None
        if ra:
            ea = a._grad_fn
            if ea is None:
                ea = a._acc
                if ea is None:
                    ea = accumulate_node(a)
            elif ea.version is not None:
                ea = grad_fn_of(a)
        if rb:
            eb = b._grad_fn
            if eb is None:
                eb = b._acc
                if eb is None:
                    eb = accumulate_node(b)
            elif eb.version is not None:
                eb = grad_fn_of(b)
        edges = (ea, eb)
        meta = ((a._data.shape, a._dtype), (b._data.shape, b._dtype))
    elif n == 1:
        a = inputs[0]
        if not a._requires_grad:
            return
        needs_in = _TRUE1
        ea = a._grad_fn
        if ea is None:
            ea = a._acc
            if ea is None:
                ea = accumulate_node(a)
        elif ea.version is not None:
            ea = grad_fn_of(a)
        edges = (ea,)
        meta = ((a._data.shape, a._dtype),)
    else:
        lst = []
        for t in inputs:
            lst.append(t._requires_grad)
        if True not in lst:
            return
        needs_in = tuple(lst)
        e = []
        m = []
        for t in inputs:
            fn = None
            if t._requires_grad:  # _edge inline
                fn = t._grad_fn
                if fn is None:
                    fn = t._acc
                    if fn is None:
                        fn = accumulate_node(t)
                elif fn.version is not None:
                    fn = grad_fn_of(t)
            e.append(fn)
            m.append((t._data.shape, t._dtype))
        edges = tuple(e)
        meta = tuple(m)
    saved = ()
    if op.save_inputs or op.save_outputs:
        pick = op.plans.get(needs_in)
        if pick is None:
            pick = _save_plan(op, needs_in)
        if type(inputs) is not tuple:
            inputs = tuple(inputs)
        if type(outs) is not tuple:
            outs = tuple(outs)
        both = _NONE1 + inputs + outs
        saved = (both[pick],) if pick.__class__ is int else pick(both)
    out = outs[0]
    node = Node(op, Ctx(op.name, saved, attrs, needs_in), edges, meta)
    if op.view is not None:
        node.version = out._vbox[0]
    out._grad_fn = node
    out._requires_grad = True
