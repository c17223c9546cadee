"""Module backward hooks, as PyTorch's ``register_full_backward_hook`` and
``register_full_backward_pre_hook``: ``hook(module, grad_input, grad_output)`` runs when the
gradients with respect to the module's inputs are computed, ``pre_hook(module, grad_output)``
when those of its outputs arrive; either may return replacements.

The tables live in the module's own ``_full_backward_state`` (None on the class, so
Module.__call__ pays one attribute check on modules without backward hooks); when it is set,
Module.__call__ runs the call through ``call_with_backward_hooks``. As in PyTorch:

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


class _InputsHook(Function):
    @staticmethod
    def forward(ctx, rec, *tensors):
        ctx.rec = rec
        out = tuple(t.view_as(t) for t in tensors)
        ctx.mark_non_differentiable(*(o for o, t in zip(out, tensors) if not t.requires_grad))
        return out if len(out) > 1 else out[0]

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        if rec.grad_output is None:  # the gradient did not come through the outputs
            return (None, *grads)
        res = _pack(rec.in_pos, grads, rec.n_inputs)
        for hook in rec.hooks:
            out = hook(rec.module, res, rec.grad_output)
            if out is None:
                continue
            out = out if isinstance(out, tuple) else (out,)
            if len(out) != len(res):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, got {len(out)}, "
                    f"but expected {len(res)} (one per positional argument of the call)"
                )
            res = out
        rec.grad_output = None
        return (None, *(res[p] for p in rec.in_pos))


class _OutputsHook(Function):
    @staticmethod
    def forward(ctx, rec, *tensors):
        ctx.rec = rec
        ctx.set_materialize_grads(False)  # an output that got no gradient: None, as PyTorch
        out = tuple(t.view_as(t) for t in tensors)
        ctx.mark_non_differentiable(*(o for o, t in zip(out, tensors) if not t.requires_grad))
        return out if len(out) > 1 else out[0]

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        go = _pack(rec.out_pos, grads, rec.n_outputs)
        for hook in rec.pre_hooks:
            r = hook(rec.module, go)
            if r is None:
                continue
            r = r if isinstance(r, tuple) else (r,)
            if len(r) != len(go):
                raise RuntimeError(
                    f"Backward pre hook returned an invalid number of grad_output, got {len(r)}, "
                    f"but expected {len(go)}"
                )
            go = r
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


def call_with_backward_hooks(module, args: tuple, kwargs: dict):
    """Module.__call__ for a module whose ``_full_backward_state`` is set: the forward
    pre-hooks, the inputs' wrapping, forward, the forward hooks, the outputs' wrapping."""
    if module._forward_pre_hooks:
        for hook in list(module._forward_pre_hooks.values()):
            r = hook(module, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
    state = module._full_backward_state
    rec = None
    if _grad_state.enabled and (state["hooks"] or state["pre_hooks"]):
        rec = _Record(module, state, len(args))
        args, rec.in_pos = _wrap(_InputsHook, rec, args)
    out = module.forward(*args, **kwargs)
    if module._forward_hooks:
        for hook in list(module._forward_hooks.values()):
            r = hook(module, args, out)
            if r is not None:
                out = r
    if rec is not None:
        is_tuple = isinstance(out, tuple)
        outs = out if is_tuple else (out,)
        rec.n_outputs = len(outs)
        outs, rec.out_pos = _wrap(_OutputsHook, rec, outs)
        out = outs if is_tuple else outs[0]
    return out


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
