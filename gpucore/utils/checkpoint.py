"""Activation checkpointing, as torch.utils.checkpoint: ``checkpoint(fn, *args)`` runs fn without
keeping its intermediate tensors and runs it again during backward to get them, trading compute
for memory; ``checkpoint_sequential`` does so per segment of a Sequential.

Built on ``gpucore.autograd.Function``: forward runs fn under no_grad (saving only the inputs and
the random generator's state), backward restores that state, re-runs fn with gradients on from
detached copies of the inputs, and backpropagates the incoming gradients through the result. The
parameters used inside get their gradients there, accumulated into ``.grad``, for both
``use_reentrant`` values (a constant input that requires grad keeps the graph when no argument
does, as PyTorch's non-reentrant variant allows). So ``backward()`` through a checkpoint gives
PyTorch's gradients. As PyTorch's reentrant variant, a checkpoint refuses (with an error naming
it) ``autograd.grad`` and ``backward(inputs=...)`` through it (the parameters inside would get
``.grad``), a backward with ``create_graph=True`` (the recomputed graph is not kept: a gradient
penalty would silently lose its term) and tensors that require grad inside a list, tuple or dict
argument (pass them as arguments of their own). Tensors that ``function`` reads from a closure
get no gradient through it; ``context_fn`` and ``determinism_check`` are not supported.
"""

from __future__ import annotations

import warnings

from .. import random as _random
from ..autograd import backward as _backward
from ..autograd.engine import returns_gradients
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..creation import tensor
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]

# an input that requires grad, so that a checkpoint of inputs that do not still joins the graph
# (the parameters inside need their gradients)
_ANCHOR = tensor(0.0, requires_grad=True)


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, preserve_rng_state, kwargs, anchor, *args):
        ctx.fn, ctx.kwargs, ctx.n = fn, kwargs, len(args)
        ctx.rng = _random.get_rng_state() if preserve_rng_state else None
        ctx.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_pos))
        with no_grad():
            return fn(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        if returns_gradients():
            raise RuntimeError(
                "checkpoint: not compatible with autograd.grad() or backward(inputs=...) through "
                "it (the parameters inside would get .grad); call .backward() without inputs, or "
                "the function without checkpoint"
            )
        if is_grad_enabled():  # the engine runs backward functions in grad mode for create_graph
            raise NotImplementedError(
                "checkpoint: a backward with create_graph=True (double backward, a gradient "
                "penalty) through a checkpoint is not supported: the recomputed graph is not "
                "kept; call the function without checkpoint there"
            )
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_pos, ctx.saved_tensors):
            args[i] = t.detach().requires_grad_(t.requires_grad)
        now = _random.get_rng_state()
        if ctx.rng is not None:
            _random.set_rng_state(ctx.rng)  # the same dropout masks as the first run
        try:
            with enable_grad():
                outputs = ctx.fn(*args, **ctx.kwargs)
        finally:
            _random.set_rng_state(now)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [
            (o, g)
            for o, g in zip(outputs, grads)
            if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        if pairs:
            _backward([o for o, _ in pairs], [g for _, g in pairs])
        grads_in = tuple(a.grad if isinstance(a, Tensor) else None for a in args)
        return (None, None, None, None, *grads_in)


def checkpoint(
    function,
    *args,
    use_reentrant: bool | None = None,
    context_fn=None,
    determinism_check: str = "default",
    debug: bool = False,
    preserve_rng_state: bool = True,
    **kwargs,
):
    """``function(*args, **kwargs)``, its intermediate tensors recomputed during backward
    instead of kept (see the module docstring)."""
    if use_reentrant is None:
        warnings.warn(
            "gpucore.utils.checkpoint: the use_reentrant parameter should be passed explicitly "
            "(as PyTorch asks); both values give the same gradients here",
            stacklevel=2,
        )
    if context_fn is not None:
        raise NotImplementedError("checkpoint(): context_fn is not supported")
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    for a in (*args, *kwargs.values()):
        if _holds_grad_tensor(a):
            raise NotImplementedError(
                "checkpoint(): a tensor that requires grad inside a "
                f"{type(a).__name__} argument gets no gradient through the checkpoint; pass it "
                "as an argument of its own"
            )
    return _Checkpoint.apply(function, preserve_rng_state, kwargs, _ANCHOR, *args)


def _holds_grad_tensor(a) -> bool:
    """Whether container ``a`` (list, tuple, dict, nested) holds a tensor that requires grad."""
    if isinstance(a, (list, tuple)):
        return any(isinstance(v, Tensor) and v.requires_grad or _holds_grad_tensor(v) for v in a)
    if isinstance(a, dict):
        return _holds_grad_tensor(list(a.values()))
    return False


def checkpoint_sequential(
    functions, segments: int, input, use_reentrant: bool | None = None, **kwargs
):
    """Run a Sequential (or a list of modules / functions) in ``segments`` pieces, each but the
    last under ``checkpoint``."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)

    def run(start: int, end: int):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run(end + 1, len(functions) - 1)(input)
