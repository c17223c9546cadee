"""Graph nodes: what an op leaves behind for backward.

A node is micrograd's idea made explicit: the op that produced a tensor, the context it saved, and
one edge per input pointing at the node that produced that input (or at the AccumulateGrad node of
a leaf). Edges point at nodes, not tensors, so an in-place op that later gives a tensor a new
grad_fn does not rewrite history.
"""

from __future__ import annotations

import weakref

from ..errors import AutogradError
from .grad_mode import set_grad_enabled


class Ctx:
    """What an op saves for its backward: tensors (version-checked) and plain attributes."""

    __slots__ = ("_saved", "_versions", "attrs", "op_name", "released", "needs_input_grad")

    def __init__(self, op_name: str, saved: tuple, attrs: dict, needs_input_grad: tuple = ()):
        self.op_name = op_name
        self.needs_input_grad = needs_input_grad
        self._saved = saved
        if saved:
            versions = []  # a loop: a generator expression costs ~0.4 us per op
            for t in saved:
                versions.append(None if t is None else t._vbox[0])
            self._versions = tuple(versions)
        else:
            self._versions = ()
        self.attrs = attrs
        self.released = False

    @property
    def saved(self) -> tuple:
        """The saved tensors; raises if the graph was freed or one was modified in place since."""
        if self.released:
            raise AutogradError(
                f"{self.op_name}: trying to backward through the graph a second time (its saved "
                "tensors were freed after the first backward); pass retain_graph=True to the "
                "first backward() if you need to call it twice"
            )
        for t, v in zip(self._saved, self._versions):
            if t is not None and t._vbox[0] != v:
                raise AutogradError(
                    f"{self.op_name}: a tensor of shape {tuple(t.shape)} saved for backward was "
                    f"modified by an in-place operation (version {t._vbox[0]}, expected {v}); "
                    "use an out-of-place op or .clone() the tensor before modifying it"
                )
        return self._saved


class Node:
    """A recorded op application. ``next`` has one edge (Node or None) per op input."""

    __slots__ = ("op", "ctx", "next", "in_meta", "pre_hooks", "version", "__weakref__")

    def __init__(self, op, ctx: Ctx, next_edges: tuple, in_meta: tuple):
        self.op = op
        self.ctx = ctx
        self.next = next_edges
        self.in_meta = in_meta  # (shape, dtype) per input, to fit incoming gradients
        self.pre_hooks = None
        # For the node of a view op: the storage version its output was made at. When the storage
        # is later modified in place (through the base or another view), the view's history is
        # stale and grad_fn_of() rebuilds it from the base.
        self.version = None

    def name(self) -> str:
        return f"{self.op.name.capitalize()}Backward"

    def apply(self, grad):
        ctx = self.ctx
        if ctx.released:
            _ = ctx.saved  # raises the explanatory error
        return self.op.backward(ctx, grad)

    def release(self):
        self.ctx.released = True
        self.ctx._saved = ()

    def add_pre_hook(self, fn, last: bool = False):
        """Run ``fn(grad)`` on the gradient arriving here before the node uses it; a returned
        tensor replaces the gradient. ``last`` hooks (retain_grad) run after all others, so they
        see the final gradient whatever the registration order."""
        if self.pre_hooks is None:
            self.pre_hooks = ([], [])
        hooks = self.pre_hooks[1 if last else 0]
        hooks.append(fn)
        return _HookHandle(hooks, fn)

    def __repr__(self) -> str:
        return f"<{self.name()}>"


class SplitNode(Node):
    """The node the outputs of split / chunk / tensor_split / unbind share. It saves no tensors
    (its backward is a cat of the outputs' gradients), so, as PyTorch's SplitBackward, it may be
    backpropagated through again, each time through other outputs, without retain_graph."""

    __slots__ = ()

    def release(self):
        pass  # nothing saved: a later backward through another output stays valid


class OutputSlot(Node):
    """The grad_fn of output ``index`` of an op with several differentiable outputs (split,
    chunk, unbind: PyTorch's SplitBackward with its output_nr). Its one edge is the op's node;
    the engine files the gradient that reaches this slot under ``index`` (a dict index ->
    gradient, outputs that got none absent) instead of summing it, so the op's backward sees
    every output's gradient at once and can join them in one pass (one cat, not one
    zero-filled input-sized tensor per output)."""

    __slots__ = ("index",)

    def __init__(self, target: Node, index: int, meta: tuple):
        super().__init__(target.op, None, (target,), (meta,))
        self.index = index

    def name(self) -> str:
        return self.next[0].name()

    def apply(self, grad):
        return (grad,)

    def release(self):
        pass  # the op's node holds what the backward needs


class AccumulateGrad(Node):
    """Terminal node of a leaf that requires grad: sums incoming gradients into ``leaf.grad``."""

    __slots__ = ("_leaf", "post_hooks")

    def __init__(self, leaf):
        super().__init__(None, None, (), ())
        self.post_hooks = None  # fn(leaf) after .grad is updated (DDP starts reductions here)
        # Weak: the leaf holds this node (for its hooks), so a strong link back would make a
        # cycle that keeps a discarded model's memory alive until the cycle collector runs.
        self._leaf = weakref.ref(leaf)

    @property
    def leaf(self):
        """The leaf tensor, or None once it has been freed."""
        return self._leaf()

    def name(self) -> str:
        return "AccumulateGrad"

    def add_post_hook(self, fn):
        """Run ``fn(leaf)`` each time a gradient has been accumulated into ``leaf.grad``."""
        if self.post_hooks is None:
            self.post_hooks = []
        self.post_hooks.append(fn)
        return _HookHandle(self.post_hooks, fn)


class _HookHandle:
    """Returned by register_hook; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn):
        self._hooks = hooks
        self._fn = fn

    def remove(self):
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


def accumulate_node(leaf) -> AccumulateGrad:
    """The one AccumulateGrad node of a leaf (cached on it so all uses, and hooks, share it)."""
    node = leaf._acc
    if node is None:
        node = AccumulateGrad(leaf)
        leaf._acc = node
    return node


def view_base(t):
    """t's base: the tensor its view steps replay from. A base that later became a view itself
    (t_ / transpose_ / squeeze_ ... in place) hands its old layout to a hidden base, which the
    views made before then replay from; the link is shortened on the way."""
    b = t._base
    if b is not None and b._base is not None:
        t._base = b = b._base
    return b


def grad_fn_of(t):
    """t's grad_fn, first rebuilt from its base when t is a view whose storage was modified in
    place after the view was made (so ``y = x * 2; v = y[0]; y.mul_(3)`` gives v the history of
    the modified y, as PyTorch)."""
    fn = t._grad_fn
    if fn is not None and fn.version is not None and fn.version != t._vbox[0]:
        base = view_base(t)
        if base is None or not base._requires_grad:
            fn.version = t._vbox[0]
            return fn
        # gpucore.ops imports ops.inplace, which imports this module: a module-level cycle
        from ..ops.indexing import replay_views

        with set_grad_enabled(True):
            v = replay_views(base, t._view_ops)
        t._grad_fn = fn = v._grad_fn
    return fn


def edge_of(t):
    """The edge an op input contributes: its grad_fn, its AccumulateGrad, or None."""
    if t._grad_fn is not None:
        return grad_fn_of(t)
    if t._requires_grad:
        return accumulate_node(t)
    return None
