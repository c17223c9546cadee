"""Custom differentiable functions, as torch.autograd.Function: a subclass defines
``forward(ctx, *args)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``) and
``backward(ctx, *grad_outputs)``, and is called through ``apply``.

``apply`` runs forward with gradients off, then, when an input tensor requires grad, attaches one
graph node to the outputs (an ``OutputSlot`` per output when there are several, so the node's
backward sees every output's gradient at once, as the split ops'). The engine calls the node
with the gradients; it calls the user's backward with one gradient per output (zeros for outputs
that got none, unless ``ctx.set_materialize_grads(False)``) and hands back one gradient per
tensor input. Saved tensors are version-checked like the ops' (an in-place change after
``save_for_backward`` raises at backward).

Not supported: ``ctx.mark_dirty`` (a forward that modifies its input in place; it raises), and
forward-mode (``jvp``) / ``vmap``.
"""

from __future__ import annotations

import functools

from ..errors import AutogradError
from ..tensor import Tensor
from .grad_mode import _state as _grad_state
from .grad_mode import no_grad
from .graph import Ctx, Node, OutputSlot, edge_of

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` of a Function: saved tensors and any attributes forward sets on it."""

    def __init__(self, needs_input_grad: tuple):
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self._saved: tuple = ()
        self._versions: tuple = ()
        self._non_differentiable: set = set()
        self.released = False
        self.op_name = "Function"

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors (or None) for backward, as ``ctx.saved_tensors``."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save tensors (or None), got {type(t).__name__};"
                    " set non-tensor values as attributes of ctx"
                )
        self._saved = tensors
        self._versions = tuple(None if t is None else t._vbox[0] for t in tensors)

    # graph.py's check of an op's saved tensors (freed by a backward, modified in place since),
    # read through the same attribute names
    saved_tensors = Ctx.saved

    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs that get no gradient (indices, masks): they do not require grad."""
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """False: backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors) -> None:
        raise NotImplementedError(
            "ctx.mark_dirty: gpucore's Functions cannot modify their inputs in place; return a "
            "new tensor from forward instead"
        )


class _FunctionOp:
    """The ``op`` of a Function's node (what the engine and OutputSlot read: its name)."""

    __slots__ = ("name", "fn")

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__


class FunctionNode(Node):
    """A Function application: ``next`` has an edge per tensor input; ``outs`` the outputs'
    (shape, dtype), for the zeros of outputs that got no gradient."""

    __slots__ = ("fctx", "arg_pos", "n_args", "outs", "multi")

    def name(self) -> str:
        return f"{self.op.name}Backward"

    def apply(self, grad):
        ctx = self.fctx
        _ = ctx.saved_tensors  # raises the explanatory error after a release
        if self.multi:
            grads = [grad.get(i) for i in range(len(self.outs))]
        else:
            grads = [grad]
        if ctx.materialize_grads:
            from ..creation import zeros  # creation imports the ops, which import autograd

            grads = [
                zeros(shape, dtype=dtype) if g is None and shape is not None else g
                for g, (shape, dtype) in zip(grads, self.outs)
            ]
        result = self.op.fn.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) < self.n_args or any(r is not None for r in result[self.n_args :]):
            raise AutogradError(
                f"{self.name()}: function backward returned an incorrect number of gradients "
                f"(expected {self.n_args}, got {len(result)})"
            )
        return tuple(result[p] for p in self.arg_pos)

    def release(self):
        self.fctx.released = True
        self.fctx._saved = ()


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._op = _FunctionOp(cls)


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable functions; call them with ``MyFn.apply(*args)``."""

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward to be differentiated")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated; define "
            "forward as a @staticmethod and call the function with .apply(...)"
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor)]
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx = FunctionCtx(needs)
        ctx.op_name = f"{cls.__name__}Backward"
        new_style = cls.setup_context is not Function.setup_context
        with no_grad():
            if new_style:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not (_grad_state.enabled and any(needs)):
            return output
        outs = output if isinstance(output, tuple) else (output,)
        outs = tuple(_fresh(o, args) for o in outs)
        node = FunctionNode(
            cls._op,
            None,
            tuple(edge_of(a) if a._requires_grad else None for _, a in tensors),
            tuple((a._data.shape, a._dtype) for _, a in tensors),
        )
        node.fctx = ctx
        node.arg_pos = tuple(i for i, _ in tensors)
        node.n_args = len(args)
        node.multi = len(outs) > 1
        node.outs = tuple(
            (o._data.shape, o._dtype) if isinstance(o, Tensor) else (None, None) for o in outs
        )
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor) or id(o) in ctx._non_differentiable:
                continue
            if not o._dtype.is_floating_point:
                continue  # integer outputs carry no gradient, as PyTorch
            o._grad_fn = OutputSlot(node, i, node.outs[i]) if node.multi else node
            o._requires_grad = True
        return outs if isinstance(output, tuple) else outs[0]


def _fresh(o, args):
    """An output that is one of the inputs, returned as it is, becomes a new tensor sharing its
    data (the input keeps its own history; PyTorch makes it a view likewise)."""
    if isinstance(o, Tensor) and any(o is a for a in args):
        with no_grad():
            return o.view_as(o)
    return o


def once_differentiable(fn):
    """Decorate a Function's backward that is not itself differentiable: it runs with gradients
    off, so a double backward through it finds no graph."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper
