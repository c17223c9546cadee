"""The backward engine: one topological pass over the graph (Kahn's algorithm).

Gradients arriving at a node are summed first, then the node's backward runs once (the outputs
of split / chunk / unbind are the exception: their gradients are filed per output, an
``OutputSlot``'s index, for the shared node's one cat). Incoming
gradients are fitted to the input they belong to (summed over broadcast dims, cast to its dtype),
so op backward formulas never deal with broadcasting.
"""

from __future__ import annotations

import sys
import threading

from numpy import ndarray as _ndarray

from .. import dispatch
from .._cpu import HostBuffer as _HostBuffer
from ..creation import ones
from ..errors import AutogradError
from .anomaly_mode import STATE as _ANOMALY
from .anomaly_mode import check_grads
from .grad_mode import _state as _grad_state
from .grad_mode import set_grad_enabled
from .graph import AccumulateGrad, Node, OutputSlot


def _fit(g, shape, dtype):
    """Reduce a gradient to an input's shape (undoing broadcasting) and cast to its dtype."""
    # the slots, not the properties (a Size per call): this runs for every edge of a backward
    if g._data.shape != shape:
        g = g.sum_to_size(shape)
    if g._dtype is not dtype:
        g = g.to(dtype)
    return g


class _Tasks(threading.local):
    def __init__(self):
        self.callbacks = []  # one list per backward running on this thread, innermost last
        self.returning = []  # per backward, innermost last: whether it returns its gradients


_TASKS = _Tasks()


def returns_gradients() -> bool:
    """Whether the innermost backward running on this thread returns its gradients
    (``autograd.grad``, ``backward(inputs=...)``) instead of accumulating every leaf's ``.grad``
    (PyTorch's ``_is_checkpoint_valid`` is its negation)."""
    return bool(_TASKS.returning) and _TASKS.returning[-1]


def queue_callback(fn) -> None:
    """Run ``fn()`` once the backward pass now running on this thread has finished (PyTorch's
    ``Variable._execution_engine.queue_callback``; DDP waits for its reductions there)."""
    if not _TASKS.callbacks:
        raise AutogradError("queue_callback: callbacks can only be queued during a backward pass")
    _TASKS.callbacks[-1].append(fn)


def run_backward(roots, root_grads, retain_graph: bool, create_graph: bool, capture=None):
    """Propagate ``root_grads`` from ``roots`` (nodes) to the leaves, then run the callbacks
    queued meanwhile (``queue_callback``).

    With ``capture`` (a dict node -> None), the gradients arriving at those nodes are recorded and
    returned instead of being accumulated into leaves' ``.grad`` (autograd.grad semantics).
    """
    callbacks: list = []
    _TASKS.callbacks.append(callbacks)
    _TASKS.returning.append(capture is not None)
    try:
        result = _run(roots, root_grads, retain_graph, create_graph, capture)
    finally:
        _TASKS.callbacks.pop()
        _TASKS.returning.pop()
    while callbacks:  # a callback may queue more
        callbacks.pop(0)()
    return result


def _run(roots, root_grads, retain_graph: bool, create_graph: bool, capture):
    # Dependency counts: how many edges reach each node from the roots. An edge met again only
    # counts (its node was pushed when first met, unless it is a root).
    deps: dict = {}
    stack = [r for r in dict.fromkeys(roots) if r is not None]  # a root given twice: once
    seen = set(stack)
    while stack:
        for e in stack.pop().next:
            if e is None:
                continue
            if e in deps:
                deps[e] += 1
            else:
                deps[e] = 1
                if e not in seen:
                    seen.add(e)
                    stack.append(e)

    pending: dict = {}
    for r, g in zip(roots, root_grads):
        if r is None:
            continue
        pending[r] = pending[r] + g if r in pending else g
    ready = [r for r in dict.fromkeys(roots) if r is not None and r not in deps]
    # autograd.grad runs only the nodes on a path to a captured one, as PyTorch (its exec_info):
    # nothing else is computed, and a checkpoint elsewhere in the graph is not re-run
    run = None if capture is None else _on_paths_to(roots, capture)

    # set_grad_enabled(create_graph) written out (this loop runs at every training step)
    prev_mode = _grad_state.enabled
    _grad_state.enabled = bool(create_graph)
    try:
        while ready:
            node = ready.pop()
            g = pending.pop(node, None)
            if g is not None and node.pre_hooks:
                g = _pre_hooks(node, g)
            if capture is not None:
                if node in capture:
                    capture[node] = g
                if node not in run:
                    continue
            cls = node.__class__
            if cls is AccumulateGrad:
                if capture is None and g is not None:
                    leaf = node._leaf()
                    if leaf is not None:  # a leaf nobody holds any more gets no gradient
                        if (
                            leaf._grad is None
                            and not create_graph
                            and leaf._dev is None
                            and g._data.shape == leaf._data.shape
                            and g._dtype is leaf._dtype
                        ):
                            # _accumulate's first case inline (every leaf at every step)
                            if _owned(g):  # nothing else can see this buffer: the leaf takes it
                                leaf._grad = g
                            else:
                                _accumulate(leaf, g, False, owned=False)
                        else:
                            _accumulate(leaf, g, create_graph)
                        if node.post_hooks:
                            for hook in tuple(node.post_hooks):
                                hook(leaf)
                continue
            nxt = node.next
            grads = None
            if g is not None:
                ctx = node.ctx
                if cls is Node and not ctx.released:
                    grads = node.op.backward(ctx, g)  # Node.apply without its frame
                else:
                    grads = node.apply(g)
                if not isinstance(grads, tuple):
                    grads = (grads,)
                if _ANOMALY[0] and _ANOMALY[1]:
                    check_grads(node, grads)
                if len(grads) != len(nxt):
                    raise AutogradError(
                        f"{node.name()}: backward returned {len(grads)} gradients for an op with "
                        f"{len(nxt)} inputs; return one gradient (or None) per input"
                    )
                if not retain_graph:
                    if cls is Node:  # Node.release without its frame
                        ctx.released = True
                        ctx._saved = ()
                    else:
                        node.release()
            if not nxt:
                continue
            # Hand each input's gradient (fitted to it) to the node it came from; a node whose
            # last gradient arrived becomes ready.
            slot = node.index if cls is OutputSlot else None
            meta = node.in_meta
            i = -1
            for e in nxt:
                i += 1
                if e is None:
                    continue
                if grads is not None:
                    gi = grads[i]
                    if gi is not None:
                        shape, dtype = meta[i]
                        if gi._data.shape != shape or gi._dtype is not dtype:
                            gi = _fit(gi, shape, dtype)
                        if slot is not None:  # one output of a multi-output op: filed, not summed
                            pending.setdefault(e, {})[slot] = gi
                        elif e in pending:
                            pending[e] = pending[e] + gi
                        else:
                            pending[e] = gi
                        gi = None  # a gradient held here would read as shared to _owned
                n = deps[e] - 1
                deps[e] = n
                if n == 0:
                    ready.append(e)
            grads = None  # (as gi)
    finally:
        _grad_state.enabled = prev_mode
    return capture


def _on_paths_to(roots, capture) -> set:
    """The nodes with an edge on a path from ``roots`` to a node of ``capture``: the ones whose
    backward must run for those gradients."""
    leads: set = set()  # nodes from which a captured node can be reached
    run: set = set()
    done: set = set()
    for r in roots:
        if r is None or r in done:
            continue
        done.add(r)
        stack = [(r, iter(r.next))]
        while stack:  # depth first; a node is settled once all its inputs are
            node, it = stack[-1]
            for e in it:
                if e is not None and e not in done:
                    done.add(e)
                    stack.append((e, iter(e.next)))
                    break
            else:
                stack.pop()
                if any(e in leads for e in node.next if e is not None):
                    run.add(node)
                    leads.add(node)
                elif node in capture:
                    leads.add(node)
    return run


def _pre_hooks(node, g):
    """The node's pre-hooks on the gradient g arriving there; returns the gradient to use."""
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
    return g


def _describe(v) -> str:
    shape = getattr(v, "shape", None)
    return f"a tensor of shape {tuple(shape)}" if shape is not None else repr(type(v).__name__)


def _accumulate(leaf, g, create_graph: bool, owned=None):
    """Add gradient g into leaf.grad (the leaf's own copy of it). ``owned``: _owned(g), when
    the caller has asked already (it must be asked once per gradient: see _calibrate)."""
    if g._data.shape != leaf._data.shape:
        raise AutogradError(
            f"gradient of shape {tuple(g.shape)} does not match the leaf's shape "
            f"{tuple(leaf.shape)}"
        )
    if g._dtype is not leaf._dtype:
        g = g.to(leaf.dtype)
    if leaf._grad is None:
        if owned is None:
            owned = not create_graph and _owned(g)
        if owned:
            # nothing else can see this buffer: no copy needed (the setter's checks hold: a
            # Tensor of the leaf's shape)
            leaf._grad = g
        else:
            # A fresh contiguous copy: the same tensor may flow to several leaves or be kept
            # by a hook or the caller.
            g = g.detach() if not create_graph else g
            leaf.grad = g.clone() if not create_graph else g
    elif create_graph:
        leaf.grad = leaf.grad + g
    else:
        _add_into_grad(leaf, g.detach())
    if leaf._grad._dev is not leaf._dev:
        # .grad lives where its leaf does (the clone or sum above may have run on the other
        # device under the policy, e.g. a CPU leaf used on the Vulkan device)
        leaf.grad = leaf.grad.to(leaf.device.type)


def _add_into_grad(leaf, g) -> None:
    """leaf.grad += g in place, as PyTorch's AccumulateGrad outside create_graph: a ``.grad``
    the caller holds, or one tensor set as the gradient of two parameters, sees the sum (and
    its version counter moves). Out of place only where the buffer cannot take it: read-only
    memory, or a gradient on another device than g."""
    cur = leaf._grad
    if cur._dev is not g._dev or (cur._dev is None and not cur._data.flags.writeable):
        leaf.grad = cur + g
        return
    prev = _grad_state.enabled
    _grad_state.enabled = False  # the add is not part of any graph (backward may run in grad mode)
    try:
        cur.add_(g)
    finally:
        _grad_state.enabled = prev


# The reference counts _owned sees (of g, its array, its memory block) for a gradient that only
# the engine holds, measured once with a real backward: they depend on the interpreter, not on
# the graph. None until measured; -1 while measuring.
_UNIQUE_REFS = [None]


def _owned(g) -> bool:
    """Whether the gradient tensor ``g`` and its storage are referenced by nothing but the
    engine, so a leaf may take it as its ``.grad`` instead of a copy (PyTorch's AccumulateGrad
    does the same with its use count). Conservative: anything unusual copies."""
    unique = _UNIQUE_REFS[0]
    if unique is None:
        unique = _calibrate()
    if g._grad_fn is not None or g._requires_grad or g._base is not None or g._dev is not None:
        return False
    data = g._data
    if not data.flags.c_contiguous:
        return False
    # numpy keeps the flat array that wraps the block as the base of a reshaped one
    flat = data.base
    if type(flat) is _ndarray:
        block = flat.base
        arrays = (sys.getrefcount(data), sys.getrefcount(flat))
    else:
        block = flat
        arrays = (sys.getrefcount(data),)
    flat = None  # else a 1-D array's block would count this name too
    if type(block) is not _HostBuffer:
        return False
    # No other tensor or numpy view shares the arrays or the block, and only the engine holds g
    counts = (sys.getrefcount(g), max(arrays), sys.getrefcount(block))
    if unique == -1:
        _UNIQUE_REFS.append(counts)
        return False
    return counts[0] <= unique[0] and counts[1] <= unique[1] and counts[2] <= unique[2]


def _calibrate() -> tuple:
    # On the CPU and out of sight of trace_ops() and the profiler: this is not the user's work.
    traced, profiled = dispatch._trace.records, dispatch.profiling[0]
    dispatch._trace.records, dispatch.profiling[0] = None, False
    _UNIQUE_REFS[0] = -1
    try:
        with dispatch.device_policy("cpu"):
            leaf = ones(2, 3, requires_grad=True)
            with set_grad_enabled(True):
                y = (leaf * 2.0).sum()
            run_backward([y._grad_fn], [ones(())], False, False)
        seen = _UNIQUE_REFS[1:]
    finally:
        del _UNIQUE_REFS[1:]
        dispatch._trace.records, dispatch.profiling[0] = traced, profiled
    # One call: the gradient of the product reached the leaf. Anything else: never steal.
    _UNIQUE_REFS[0] = seen[0] if len(seen) == 1 else (0, 0, 0)
    return _UNIQUE_REFS[0]
