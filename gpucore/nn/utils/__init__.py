"""Gradient clipping and parameter/vector conversion, as torch.nn.utils; variable-length
sequences (PackedSequence, ...) in its submodule rnn, BatchNorm folding in fusion; the hook
forms of weight_norm / remove_weight_norm in weight_norm and of spectral_norm /
remove_spectral_norm in spectral_norm; parametrizations (register_parametrization, ...) in
parametrize, and the weight_norm built on them in parametrizations (both loaded on first access:
they import the layers, which import this package).

The norms stay tensors (no host round trip) unless error_if_nonfinite asks for a check.
"""

from __future__ import annotations

import math

from ...autograd.grad_mode import no_grad
from ...creation import tensor
from ...errors import ShapeError
from ...ops.joining import cat, stack
from ...tensor import Tensor
from . import fusion, rnn
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "fusion",
    "rnn",
    "parametrize",
    "parametrizations",
    "weight_norm",
    "remove_weight_norm",
    "spectral_norm",
    "remove_spectral_norm",
    "clip_grad_norm_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "clip_grad_value_",
    "parameters_to_vector",
    "vector_to_parameters",
]


def _param_list(parameters) -> list:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def _common_float(tensors):
    """The widest floating dtype among the tensors (for combining per-tensor norms)."""
    return max((t.dtype for t in tensors), key=lambda d: d.itemsize)


def get_total_norm(
    tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
) -> Tensor:
    """The norm of ``tensors`` (a tensor or an iterable of them, typically gradients) taken
    together: the norm of their norms, in the widest of their float dtypes, as PyTorch (for
    p > 0 and inf the norm of the concatenation; for 0 and -inf, PyTorch's norm of the per-tensor
    norms). norm_type: any p (1, 2, 0.5 ...), 0, inf or -inf. No tensors: a 0.
    ``error_if_nonfinite`` raises on a NaN or infinite total."""
    return _total_norm(_param_list(tensors), norm_type, error_if_nonfinite, "get_total_norm")


def _total_norm(tensors: list, norm_type, error_if_nonfinite: bool, op: str) -> Tensor:
    tensors = [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    if math.isnan(norm_type) or norm_type < 0 and norm_type != -math.inf:
        raise ValueError(f"{op}(): norm_type must be >= 0, inf or -inf, got {norm_type}")
    with no_grad():
        dt = _common_float(tensors)
        if norm_type == math.inf:
            norms = [t.abs().amax().to(dt) for t in tensors]
            total = norms[0] if len(norms) == 1 else stack(norms).amax()
        elif norm_type == 0 or norm_type == -math.inf:  # (vector_norm's counts and minima)
            norms = [t.norm(norm_type).to(dt) for t in tensors]
            total = stack(norms).norm(norm_type)
        else:
            norms = [t.norm(norm_type).to(dt) for t in tensors]
            total = norms[0] if len(norms) == 1 else stack(norms).norm(norm_type)
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(
            f"{op}(): the total norm of order {norm_type} of the gradients is non-finite "
            f"({float(total)}), so it cannot be clipped; set error_if_nonfinite=False to scale "
            "them anyway"
        )
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale the gradients of ``parameters`` in place by ``min(1, max_norm / (total_norm +
    1e-6))``, given their total norm (``get_total_norm``), as PyTorch."""
    grads = [p.grad for p in _param_list(parameters) if p.grad is not None]
    if not grads:
        return
    total = total_norm if isinstance(total_norm, Tensor) else tensor(float(total_norm))
    with no_grad():
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef if coef.dtype is g.dtype else coef.to(g.dtype))


def clip_grad_norm_(
    parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach=None,
) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their joint norm (the norm of
    all gradients concatenated) is at most max_norm; returns that norm (before clipping) as a
    tensor. norm_type: any p > 0 (1, 2...) or inf. Gradients are multiplied by
    ``min(1, max_norm / (total_norm + 1e-6))``, as PyTorch (``get_total_norm`` then
    ``clip_grads_with_norm_``).
    """
    params = _param_list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return tensor(0.0)
    total = _total_norm(grads, norm_type, error_if_nonfinite, "clip_grad_norm_")
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of ``parameters`` in place to [-clip_value, clip_value]."""
    v = float(clip_value)
    with no_grad():
        for p in _param_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(-v, v)


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor."""
    return cat([p.reshape(-1) for p in _param_list(parameters)])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into the parameters (in place)."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise TypeError("vector_to_parameters(): expected a 1-D gpucore Tensor")
    params = _param_list(parameters)
    total = sum(p.numel() for p in params)
    if vec.numel() != total:
        raise ShapeError(
            f"vector_to_parameters(): vector has {vec.numel()} elements, parameters need {total}"
        )
    i = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[i : i + n].reshape(p.shape))
            i += n


def __getattr__(name: str):
    if name in ("parametrize", "parametrizations"):
        # loaded on first access: they import nn.modules, whose rnn imports this package
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
