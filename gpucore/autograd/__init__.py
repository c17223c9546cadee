"""Reverse-mode autograd: backward, grad, grad-mode switches (inference_mode too), gradcheck, DOT
export, custom differentiable functions (``Function``, in function.py), and PyTorch's legacy
``Variable``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import dtypes as D
from ..creation import ones_like
from ..errors import AutogradError, ShapeError
from ..tensor import Tensor
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .dot import export_dot
from .engine import _accumulate, run_backward
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .gradcheck import gradcheck, gradgradcheck
from .graph import accumulate_node, grad_fn_of
from .variable import Variable

__all__ = [
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "backward",
    "grad",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
    "Variable",
    "gradcheck",
    "gradgradcheck",
    "export_dot",
    "detect_anomaly",
    "set_detect_anomaly",
]


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _root_grads(outputs, grad_outputs, fn: str):
    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if i < len(grad_outputs) else None
        if not out._requires_grad:
            raise AutogradError(
                f"{fn}: element {i} of the outputs does not require grad and has no grad_fn; "
                "did you create it under no_grad() or from tensors without requires_grad=True?"
            )
        if g is None:
            if out.numel() != 1:
                raise AutogradError(
                    f"{fn}: grad can be implicitly created only for scalar outputs; output {i} "
                    f"has shape {tuple(out.shape)}; pass gradient= (a tensor of that shape)"
                )
            g = _ones_like(out)
        else:
            if not isinstance(g, Tensor):
                raise TypeError(
                    f"{fn}: gradient {i} must be a Tensor (or None), got {type(g).__name__}"
                )
            if g.shape != out.shape:
                raise ShapeError(
                    f"{fn}: gradient of shape {tuple(g.shape)} does not match output {i} of "
                    f"shape {tuple(out.shape)}"
                )
            if g.dtype is not out.dtype:
                g = g.to(out.dtype)
        grads.append(g)
    return grads


_REGISTRY: list = [None]  # gpucore.ops.registry, once imported


def _ones_like(out):
    """backward()'s implicit gradient: ones like the (one-element) output. A host float32 /
    float64 output takes a numpy array wrapped as it is (~1 us, not creation's ~4 us: this runs
    at every training step); anything else, or a graph capture, goes through ones_like."""
    reg = _REGISTRY[0]
    if reg is None:  # the registry imports this package: imported at the first backward
        from ..ops import registry as reg

        _REGISTRY[0] = reg
    dt = out._dtype
    if (
        out._dev is None
        and (dt is D.float32 or dt is D.float64)
        and (reg.CAPTURE[0] is None or reg.capturing() is None)
    ):
        return Tensor._from_kernel(np.ones(out._data.shape, dt.np), dt)
    return ones_like(out)


def _node_of(t):
    return grad_fn_of(t) if t._grad_fn is not None else accumulate_node(t)


def backward(
    tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None
) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves they depend on.

    ``inputs`` limits accumulation to those leaves. Without ``retain_graph`` the graph's saved
    tensors are freed, and a second backward through it raises.
    """
    outputs = _as_list(tensors)
    grads = _root_grads(outputs, _as_list(grad_tensors), "backward")
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        ins = _as_list(inputs)
        res = grad(
            outputs,
            ins,
            grads,
            retain_graph=retain_graph,
            create_graph=create_graph,
            allow_unused=True,
        )
        for t, g in zip(ins, res):
            if g is not None:
                # as the engine does for leaves: a fresh copy (never the caller's gradient
                # tensor itself), kept on the tensor's device
                _accumulate(t, g, create_graph)
        return
    run_backward([_node_of(o) for o in outputs], grads, retain_graph, create_graph)


def grad(
    outputs,
    inputs: Sequence,
    grad_outputs=None,
    retain_graph=None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated)."""
    outs = _as_list(outputs)
    ins = _as_list(inputs)
    for i, t in enumerate(ins):
        if not t._requires_grad:
            raise AutogradError(f"grad: input {i} does not require grad")
    grads = _root_grads(outs, _as_list(grad_outputs), "grad")
    if retain_graph is None:
        retain_graph = create_graph
    nodes = [_node_of(t) for t in ins]
    capture = {n: None for n in nodes}
    run_backward([_node_of(o) for o in outs], grads, retain_graph, create_graph, capture)
    result = []
    for i, n in enumerate(nodes):
        g = capture[n]
        if g is None and not allow_unused:
            raise AutogradError(
                f"grad: input {i} was not used to compute the outputs; pass allow_unused=True "
                "to get None for it"
            )
        if g is not None and not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)
