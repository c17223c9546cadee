"""Module backward hooks, as PyTorch's ``register_full_backward_hook`` and
``register_full_backward_pre_hook``: ``hook(module, grad_input, grad_output)`` runs when the
gradients with respect to the module's inputs are computed, ``pre_hook(module, grad_output)``
when those of its outputs arrive; either may return replacements.

The tables live in the module's own ``_full_backward_state`` (None on the class, so
Module.__call__ pays one attribute check on modules without backward hooks); when it is set,
Module.__call__ wraps the inputs (``wrap_inputs``, after the forward pre-hooks) and the outputs
(``wrap_outputs``, after the forward hooks). As in PyTorch:

- the inputs are wrapped after the forward pre-hooks ran (the gradients are those of the
  arguments forward() received) and the outputs after the forward hooks (those of what the
  caller gets), whatever the order of registration;
- ``grad_input`` has one entry per positional argument of the call: None for one that is not
  a tensor (keyword arguments are not seen), zeros for a tensor that does not require grad;
  a replacement must have the same length. ``grad_output`` has one per output (one for a
  non-tuple output), None for a non-tensor output or one that got no gradient;
- the hooks are the ones registered when the module was called; when no input requires grad,
  the hooks run with ``grad_input`` all None once the output gradients are known, with
  PyTorch's warning.

The hooks read the module they are called with, so a deep copy of a module carries its hooks
(the same functions, as PyTorch's) and they act on the copy.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from ..autograd.function import Function
from ..autograd.grad_mode import _state as _grad_state
from ..tensor import Tensor


class _Record:
    """One call of a module with backward hooks: what its two nodes share."""

    __slots__ = (
        "module",
        "hooks",
        "pre_hooks",
        "grad_output",
        "n_inputs",
        "in_pos",
        "n_outputs",
        "out_pos",
    )

    def __init__(self, module, state, n_inputs: int):
        self.module = module
        self.hooks = list(state["hooks"].values())
        self.pre_hooks = list(state["pre_hooks"].values())
        self.grad_output = None
        self.n_inputs = n_inputs
        self.in_pos = None  # positions of the tensor arguments, when one requires grad
        self.n_outputs = 0
        self.out_pos = None


def _pack(positions, values, size: int) -> tuple:
    res = [None] * size
    for p, v in zip(positions, values):
        res[p] = v
    return tuple(res)


def _replaced(grads: tuple, returned, what: str, expected: str = "") -> tuple:
    """``grads`` as a hook left them: ``returned`` (a tuple, or one gradient) in their place
    unless None; PyTorch's error when the count differs."""
    if returned is None:
        return grads
    returned = returned if isinstance(returned, tuple) else (returned,)
    if len(returned) != len(grads):
        raise RuntimeError(f"{what}, got {len(returned)}, but expected {len(grads)}{expected}")
    return returned


def _pass_through(ctx, rec, tensors: tuple):
    """The hook nodes' forward: each tensor as a view of itself (so the node sits between the
    module and its neighbours), those without grad marked so."""
    ctx.rec = rec
    out = tuple(t.view_as(t) for t in tensors)
    ctx.mark_non_differentiable(*(o for o, t in zip(out, tensors) if not t.requires_grad))
    return out if len(out) > 1 else out[0]


class _InputsHook(Function):
    @staticmethod
    def forward(ctx, rec, *tensors):
        return _pass_through(ctx, rec, tensors)

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        if rec.grad_output is None:  # the gradient did not come through the outputs
            return (None, *grads)
        res = _pack(rec.in_pos, grads, rec.n_inputs)
        for hook in rec.hooks:
            res = _replaced(
                res,
                hook(rec.module, res, rec.grad_output),
                "Backward hook returned an invalid number of grad_input",
                " (one per positional argument of the call)",
            )
        rec.grad_output = None
        return (None, *(res[p] for p in rec.in_pos))


class _OutputsHook(Function):
    @staticmethod
    def forward(ctx, rec, *tensors):
        ctx.set_materialize_grads(False)  # an output that got no gradient: None, as PyTorch
        return _pass_through(ctx, rec, tensors)

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        go = _pack(rec.out_pos, grads, rec.n_outputs)
        for hook in rec.pre_hooks:
            go = _replaced(
                go,
                hook(rec.module, go),
                "Backward pre hook returned an invalid number of grad_output",
            )
        rec.grad_output = go
        if rec.in_pos is None:  # no input requires grad: the hooks run now
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to module "
                "outputs since no inputs require gradients",
                UserWarning,
                stacklevel=2,
            )
            gi = (None,) * rec.n_inputs
            for hook in rec.hooks:
                r = hook(rec.module, gi, go)
                if r is not None and not (isinstance(r, tuple) and all(g is None for g in r)):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients."
                    )
            rec.grad_output = None
        return (None, *(go[p] for p in rec.out_pos))


def _wrap(fn, rec, values: tuple):
    """values with its tensors passed through fn (one node); the tensor positions, or None
    when none requires grad (values then unchanged)."""
    pos = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    if not any(values[i].requires_grad for i in pos):
        return values, None
    wrapped = fn.apply(rec, *(values[i] for i in pos))
    wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
    new = list(values)
    for i, w in zip(pos, wrapped):
        new[i] = w
    return (tuple(new) if type(values) is tuple else type(values)(*new)), pos


def wrap_inputs(module, state: dict, args: tuple):
    """(args, record): Module.__call__'s step after the forward pre-hooks, for a module with
    backward-hook tables ``state``: the inputs forward receives, passed through one node that
    gives the hooks grad_input; record None when no hook runs (no grad mode, none registered)."""
    if not (_grad_state.enabled and (state["hooks"] or state["pre_hooks"])):
        return args, None
    rec = _Record(module, state, len(args))
    args, rec.in_pos = _wrap(_InputsHook, rec, args)
    return args, rec


def wrap_outputs(rec, out):
    """Module.__call__'s step after the forward hooks: the output the caller gets, passed
    through one node that gives the hooks grad_output (``out`` itself without a record)."""
    if rec is None:
        return out
    is_tuple = isinstance(out, tuple)
    outs = out if is_tuple else (out,)
    rec.n_outputs = len(outs)
    outs, rec.out_pos = _wrap(_OutputsHook, rec, outs)
    return outs if is_tuple else outs[0]


def _fusion_marker(module, args, out):
    """A forward hook that does nothing: its presence in ``_forward_hooks`` keeps the fast
    paths that skip Module.__call__ for hook-free modules (nn/modules/relu_fusion.py's
    ``_plain``) off for a module with backward hooks."""
    return None


def hook_tables(module) -> dict:
    """The module's backward-hook tables ('hooks', 'pre_hooks'), made on first use."""
    state = module.__dict__.get("_full_backward_state")
    if state is None:
        state = {"hooks": OrderedDict(), "pre_hooks": OrderedDict()}
        object.__setattr__(module, "_full_backward_state", state)
        module.register_forward_hook(_fusion_marker)
    return state
