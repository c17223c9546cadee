"""Module backward hooks, as PyTorch's ``register_full_backward_hook`` and
``register_full_backward_pre_hook``: ``hook(module, grad_input, grad_output)`` runs when the
gradients with respect to the module's tensor inputs are computed, ``pre_hook(module,
grad_output)`` when those of its outputs arrive; either may return replacements.

The first registration on a module installs a forward pre-hook and a forward hook (so modules
without backward hooks pay nothing): the inputs pass through an identity ``Function`` whose
backward sees the inputs' gradients, the outputs through one whose backward sees theirs; a
per-call record carries the output gradients from the one to the other. When no input requires
grad, the hooks run with ``grad_input`` all None once the output gradients are known, as
PyTorch's.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from ..autograd.function import Function
from ..autograd.grad_mode import _state as _grad_state
from ..tensor import Tensor


class _Record:
    __slots__ = ("module", "state", "grad_output", "n_inputs", "inputs_hooked")

    def __init__(self, module, state, n_inputs: int):
        self.module, self.state = module, state
        self.grad_output = None
        self.n_inputs = n_inputs
        self.inputs_hooked = False


def _call_hooks(rec: _Record, grad_input: tuple) -> tuple:
    for hook in list(rec.state["hooks"].values()):
        r = hook(rec.module, grad_input, rec.grad_output)
        if r is not None:
            r = r if isinstance(r, tuple) else (r,)
            if len(r) != len(grad_input):
                raise RuntimeError(
                    f"backward hook returned {len(r)} gradients for {len(grad_input)} inputs; "
                    "return one per input tensor (or None)"
                )
            grad_input = r
    return grad_input


class _InputsHook(Function):
    @staticmethod
    def forward(ctx, rec, *tensors):
        ctx.rec = rec
        out = tuple(t.view_as(t) for t in tensors)
        return out if len(out) > 1 else out[0]

    @staticmethod
    def backward(ctx, *grads):
        return (None, *_call_hooks(ctx.rec, grads))


class _OutputsHook(Function):
    @staticmethod
    def forward(ctx, rec, *tensors):
        ctx.rec = rec
        out = tuple(t.view_as(t) for t in tensors)
        return out if len(out) > 1 else out[0]

    @staticmethod
    def backward(ctx, *grads):
        rec = ctx.rec
        for hook in list(rec.state["pre_hooks"].values()):
            r = hook(rec.module, grads)
            if r is not None:
                grads = r if isinstance(r, tuple) else (r,)
        rec.grad_output = grads
        if not rec.inputs_hooked and rec.state["hooks"]:  # no input needs a gradient: now
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to module "
                "outputs since no inputs require gradients",
                UserWarning,
                stacklevel=2,
            )
            _call_hooks(rec, (None,) * rec.n_inputs)
        return (None, *grads)


def hook_tables(module) -> dict:
    """The module's backward-hook tables ('hooks', 'pre_hooks'), made and wired into its
    forward hooks on first use."""
    state = module.__dict__.get("_full_backward_state")
    if state is None:
        state = {"hooks": OrderedDict(), "pre_hooks": OrderedDict(), "calls": []}
        object.__setattr__(module, "_full_backward_state", state)

        def before(mod, args):
            rec = _Record(mod, state, sum(isinstance(a, Tensor) for a in args))
            state["calls"].append(rec)
            if not _grad_state.enabled:
                return None
            pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
            if not pos:
                return None
            rec.inputs_hooked = True
            wrapped = _InputsHook.apply(rec, *(args[i] for i in pos))
            wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
            args = list(args)
            for i, w in zip(pos, wrapped):
                args[i] = w
            return tuple(args)

        def after(mod, args, out):
            rec = state["calls"].pop()
            if not _grad_state.enabled:
                return None
            outs = out if isinstance(out, tuple) else (out,)
            pos = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
            if not pos:
                return None
            wrapped = _OutputsHook.apply(rec, *(outs[i] for i in pos))
            wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
            new = list(outs)
            for i, w in zip(pos, wrapped):
                new[i] = w
            return tuple(new) if isinstance(out, tuple) else new[0]

        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)
    return state
