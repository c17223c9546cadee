"""``make_graphed_callables``: a module or function whose forward and backward each replay a
captured graph (``torch.cuda.make_graphed_callables``).

For each callable: ``num_warmup_iters`` eager forward + backward passes on ``sample_args`` (lazy
state, pipelines), then the forward captured into one ``VulkanGraph`` and the backward
(``autograd.grad`` of the outputs with respect to the inputs that require grad and the module's
parameters) into a second. The returned callable copies its arguments into the captured inputs,
replays the forward graph and returns the captured outputs (detached, then attached to one
autograd node); that node's backward copies the incoming gradient into the captured gradient
input, replays the backward graph and returns the captured gradients, which the engine
accumulates into ``.grad`` as for any op. A module is returned with its ``forward`` replaced:
graphed while ``module.training`` is what it was at capture, the original otherwise.

As in PyTorch: arguments must be device tensors with the sample's shapes and dtypes (and the
same ``requires_grad``); the callable must not depend on host state that changes between calls;
the outputs of one call are overwritten by the next. One difference: the callable's
differentiable output must be a single tensor (gpucore's graph nodes carry one output); further
outputs that do not require grad may follow it in a tuple.
"""

from __future__ import annotations

from .. import dispatch
from ..autograd import grad as _grad
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..autograd.graph import Ctx, Node, edge_of
from ..creation import ones, zeros
from ..errors import DeviceError
from ..tensor import Tensor
from .graph import VulkanGraph, graph


def make_graphed_callables(
    callables,
    sample_args,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool=None,
):
    """Graphed versions of ``callables`` (a module or function, or a tuple of them, with
    ``sample_args`` a tuple of tensors, or a tuple of such tuples); see the module docstring."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(
            f"make_graphed_callables: {len(callables)} callables but {len(sample_args)} "
            "tuples of sample arguments; give one tuple per callable"
        )
    if int(num_warmup_iters) < 0:
        raise ValueError(
            f"make_graphed_callables: num_warmup_iters must be >= 0, got {num_warmup_iters}"
        )
    out = [
        _graphed(fn, tuple(args), int(num_warmup_iters), bool(allow_unused_input))
        for fn, args in zip(callables, sample_args)
    ]
    return out[0] if just_one else tuple(out)


def _graphed(fn, args: tuple, warmup: int, allow_unused: bool):
    for i, a in enumerate(args):
        if not isinstance(a, Tensor) or a._dev is None:
            raise DeviceError(
                f"make_graphed_callables: sample argument {i} must be a tensor on the 'vulkan' "
                f"device, got {type(a).__name__ if not isinstance(a, Tensor) else a.device}; move "
                "it with .to('vulkan')"
            )
    module = fn if hasattr(fn, "parameters") and hasattr(fn, "forward") else None
    params = tuple(p for p in module.parameters() if p._requires_grad) if module else ()
    if module is not None:
        for p in params:
            if p._dev is None:
                raise DeviceError(
                    "make_graphed_callables: the module's parameters must be on the 'vulkan' "
                    "device; call module.to('vulkan') first"
                )
            if p.grad is not None:
                raise RuntimeError(
                    "make_graphed_callables: the module's parameters have .grad set; call "
                    "zero_grad(set_to_none=True) first (as PyTorch requires)"
                )
    diff_in = tuple(a for a in args if a._requires_grad) + params
    call = fn

    def outputs_of(res):
        outs = res if isinstance(res, tuple) else (res,)
        for o in outs:
            if not isinstance(o, Tensor):
                raise TypeError(
                    f"make_graphed_callables: the callable must return tensors, got "
                    f"{type(o).__name__}"
                )
        diff = [o for o in outs if o._requires_grad]
        if len(diff) > 1 or (diff and diff[0] is not outs[0]):
            raise RuntimeError(
                "make_graphed_callables: gpucore graphs one differentiable output per callable "
                "(the first); return the others detached, or graph the parts separately"
            )
        return outs

    def backward_of(outs, grad_out):
        if not diff_in or not outs[0]._requires_grad:
            return ()
        return _grad(outs[0], diff_in, grad_outputs=grad_out, allow_unused=allow_unused)

    with dispatch.device_policy("vulkan"):
        for _ in range(warmup):
            outs = outputs_of(call(*args))
            backward_of(outs, [_ones_like(outs[0])])
        fwd, bwd = VulkanGraph(), VulkanGraph()
        with graph(fwd):
            static_outs = outputs_of(call(*args))
        first = static_outs[0]
        static_grad_out = zeros(tuple(first.shape), dtype=first.dtype).to("vulkan")
        with graph(bwd):
            static_grads = backward_of(static_outs, [static_grad_out])
    detached = tuple(o.detach() for o in static_outs)
    backward = _GraphedBackward(bwd, static_grad_out, static_grads)

    def graphed(*user_args):
        if len(user_args) != len(args):
            raise TypeError(
                f"graphed callable: expected {len(args)} arguments (as the samples), got "
                f"{len(user_args)}"
            )
        with no_grad():
            for i, (static, new) in enumerate(zip(args, user_args)):
                if new is static:
                    continue
                if not isinstance(new, Tensor) or new.shape != static.shape:
                    raise ValueError(
                        f"graphed callable: argument {i} must be a tensor of shape "
                        f"{tuple(static.shape)} (the sample's), got "
                        f"{getattr(new, 'shape', type(new).__name__)}"
                    )
                static.copy_(new)
        fwd.replay()
        results = tuple(o.detach() for o in detached)
        ins = tuple(a for a, s in zip(user_args, args) if s._requires_grad) + params
        if is_grad_enabled() and static_outs[0]._requires_grad:
            _attach(results[0], backward, ins)
        return results if len(results) > 1 else results[0]

    graphed.forward_graph, graphed.backward_graph = fwd, bwd
    if module is None:
        return graphed
    return _patch_module(module, graphed, module.training)


def _ones_like(t: Tensor) -> Tensor:
    return ones(tuple(t.shape), dtype=t.dtype).to("vulkan")


class _GraphedBackward:
    """The op of the autograd node a graphed callable's output carries: its backward replays
    the captured backward graph."""

    name = "graphed_callable"

    def __init__(self, bwd: VulkanGraph, grad_out: Tensor, grads: tuple):
        self.bwd = bwd
        self.grad_out = grad_out
        self.grads = grads

    def backward(self, ctx, grad):
        with no_grad():
            self.grad_out.copy_(grad)
        self.bwd.replay()
        return tuple(None if g is None else g.detach() for g in self.grads)


def _attach(out: Tensor, op: _GraphedBackward, ins: tuple) -> None:
    edges = tuple(edge_of(t) for t in ins)
    meta = tuple((t._data.shape, t._dtype) for t in ins)
    needs = tuple(True for _ in ins)
    out._grad_fn = Node(op, Ctx(op.name, (), {}, needs), edges, meta)
    out._requires_grad = True


def _patch_module(module, graphed, training: bool):
    original = module.forward

    def forward(*a, **kw):
        if module.training == training and not kw:
            return graphed(*a)
        return original(*a, **kw)

    forward.forward_graph = graphed.forward_graph
    forward.backward_graph = graphed.backward_graph
    module.forward = forward
    return module
