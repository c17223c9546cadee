"""The backward engine: one topological pass over the graph (Kahn's algorithm).

Gradients arriving at a node are summed first, then the node's backward runs once. Incoming
gradients are fitted to the input they belong to (summed over broadcast dims, cast to its dtype),
so op backward formulas never deal with broadcasting.
"""

from __future__ import annotations

from ..errors import AutogradError
from .grad_mode import set_grad_enabled
from .graph import AccumulateGrad


def _fit(g, shape, dtype):
    """Reduce a gradient to an input's shape (undoing broadcasting) and cast to its dtype."""
    if g.shape != shape:
        g = g.sum_to_size(shape)
    if g.dtype is not dtype:
        g = g.to(dtype)
    return g


def run_backward(roots, root_grads, retain_graph: bool, create_graph: bool, capture=None):
    """Propagate ``root_grads`` from ``roots`` (nodes) to the leaves.

    With ``capture`` (a dict node -> None), the gradients arriving at those nodes are recorded and
    returned instead of being accumulated into leaves' ``.grad`` (autograd.grad semantics).
    """
    deps: dict = {}
    seen = set()
    stack = [r for r in roots if r is not None]
    for r in stack:
        seen.add(r)
    while stack:
        n = stack.pop()
        for e in n.next:
            if e is None:
                continue
            deps[e] = deps.get(e, 0) + 1
            if e not in seen:
                seen.add(e)
                stack.append(e)

    pending: dict = {}
    for r, g in zip(roots, root_grads):
        if r is None:
            continue
        pending[r] = pending[r] + g if r in pending else g
    ready = [r for r in dict.fromkeys(roots) if r is not None and deps.get(r, 0) == 0]

    with set_grad_enabled(create_graph):
        while ready:
            node = ready.pop()
            g = pending.pop(node, None)
            if g is not None and node.pre_hooks:
                for hook in node.pre_hooks[0] + node.pre_hooks[1]:
                    r = hook(g)
                    if r is not None:
                        if not hasattr(r, "shape") or r.shape != g.shape:
                            raise AutogradError(
                                f"hook {getattr(hook, '__name__', hook)!r} on {node.name()} "
                                f"returned {_describe(r)} in place of a gradient of shape "
                                f"{tuple(g.shape)}; a hook must return None or a tensor of "
                                "the gradient's shape"
                            )
                        g = r
            if capture is not None and node in capture:
                capture[node] = g
            if isinstance(node, AccumulateGrad):
                if capture is None and g is not None:
                    leaf = node.leaf
                    if leaf is not None:  # a leaf nobody holds any more gets no gradient
                        _accumulate(leaf, g, create_graph)
                continue
            grads = None
            if g is not None:
                grads = node.apply(g)
                if not isinstance(grads, tuple):
                    grads = (grads,)
                if len(grads) != len(node.next):
                    raise AutogradError(
                        f"{node.name()}: backward returned {len(grads)} gradients for an op with "
                        f"{len(node.next)} inputs; return one gradient (or None) per input"
                    )
                if not retain_graph:
                    node.release()
            for i, e in enumerate(node.next):
                if e is None:
                    continue
                gi = grads[i] if grads is not None else None
                if gi is not None:
                    shape, dtype = node.in_meta[i]
                    gi = _fit(gi, shape, dtype)
                    pending[e] = pending[e] + gi if e in pending else gi
                deps[e] -= 1
                if deps[e] == 0:
                    ready.append(e)
    return capture


def _describe(v) -> str:
    shape = getattr(v, "shape", None)
    return f"a tensor of shape {tuple(shape)}" if shape is not None else repr(type(v).__name__)


def _accumulate(leaf, g, create_graph: bool):
    if g.shape != leaf.shape:
        raise AutogradError(
            f"gradient of shape {tuple(g.shape)} does not match the leaf's shape "
            f"{tuple(leaf.shape)}"
        )
    if g.dtype is not leaf.dtype:
        g = g.to(leaf.dtype)
    if not create_graph:
        g = g.detach()
    if leaf.grad is None:
        # A fresh contiguous copy: the same tensor may flow to several leaves or be kept by a hook.
        leaf.grad = g.clone() if not create_graph else g
    else:
        leaf.grad = leaf.grad + g
    if leaf.grad._dev is not leaf._dev:
        # .grad lives where its leaf does (the clone or sum above may have run on the other
        # device under the policy, e.g. a CPU leaf used on the Vulkan device)
        leaf.grad = leaf.grad.to(leaf.device.type)
