"""Finite-difference checks of analytic gradients, in float64."""

from __future__ import annotations

import numpy as np

from .. import autograd
from ..creation import zeros_like
from ..errors import AutogradError
from ..tensor import Tensor


def _flat_outputs(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _numeric_jacobian(fn, inputs, i, eps):
    x = inputs[i]
    base = x.detach().numpy().astype(np.float64)
    cols = []
    for j in range(base.size):
        vals = []
        for sign in (1, -1):
            pert = base.copy()
            pert.reshape(-1)[j] += sign * eps
            args = list(inputs)
            args[i] = Tensor._wrap(pert.astype(x.dtype.np), x.dtype)
            outs = _flat_outputs(fn(*[a.detach() if isinstance(a, Tensor) else a for a in args]))
            vals.append(
                np.concatenate([o.detach().numpy().astype(np.float64).reshape(-1) for o in outs])
            )
        cols.append((vals[0] - vals[1]) / (2 * eps))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


def _analytic_jacobian(fn, inputs, diff_idx):
    outs = _flat_outputs(fn(*inputs))
    sizes = [o.numel() for o in outs]
    rows = []
    for k in range(len(outs)):
        for j in range(sizes[k]):
            gouts = []
            for kk, o in enumerate(outs):
                g = zeros_like(o, device="cpu")  # written through _data: host memory
                if kk == k:
                    g._data.reshape(-1)[j] = 1.0
                gouts.append(g)
            used = [o for o in outs if o.requires_grad]
            gu = [g for o, g in zip(outs, gouts) if o.requires_grad]
            if not used:
                rows.append([np.zeros(inputs[i].numel()) for i in diff_idx])
                continue
            grads = autograd.grad(
                used, [inputs[i] for i in diff_idx], gu, retain_graph=True, allow_unused=True
            )
            rows.append(
                [
                    np.zeros(inputs[i].numel())
                    if g is None
                    else g.detach().numpy().astype(np.float64).reshape(-1)
                    for i, g in zip(diff_idx, grads)
                ]
            )
    return [np.array([r[n] for r in rows]) for n in range(len(diff_idx))]


def gradcheck(
    fn,
    inputs,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Compare analytic gradients of ``fn`` with central differences.

    Inputs that require grad should be float64 (as in PyTorch) for the differences to be
    meaningful. Returns True, or raises AutogradError naming the input, the worst element and
    both values (returns False with raise_exception=False).
    """
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]
    if not diff_idx:
        raise AutogradError("gradcheck: no input requires grad")
    analytic = _analytic_jacobian(fn, inputs, diff_idx)
    for n, i in enumerate(diff_idx):
        num = _numeric_jacobian(fn, inputs, i, eps)
        ana = analytic[n]
        if num.shape != ana.shape:
            num = num.reshape(ana.shape)
        err = np.abs(ana - num) - (atol + rtol * np.abs(num))
        if err.size and np.nanmax(np.where(np.isnan(ana) != np.isnan(num), np.inf, err)) > 0:
            flat = np.nanargmax(np.where(np.isnan(ana) != np.isnan(num), np.inf, err))
            o, j = np.unravel_index(flat, err.shape)
            msg = (
                f"gradcheck: Jacobian mismatch for input {i} (shape {tuple(inputs[i].shape)}): "
                f"worst at output element {o}, input element {j} (index "
                f"{tuple(int(k) for k in np.unravel_index(j, tuple(inputs[i].shape)))}): "
                f"analytic {float(ana[o, j])!r} vs numerical {float(num[o, j])!r} "
                f"(atol={atol}, rtol={rtol})"
            )
            if raise_exception:
                raise AutogradError(msg)
            return False
    return True


def gradgradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3) -> bool:
    """gradcheck of the gradient itself (second derivatives through create_graph=True).

    The first gradient is taken of sum(w * out) over fn's outputs, with fixed random weights w
    (so every second-derivative term counts, unlike with a plain sum).
    """
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    diff_mask = [isinstance(x, Tensor) and x._requires_grad for x in inputs]
    rng = np.random.default_rng(0)
    weights: dict = {}

    def weight(k, o):
        if k not in weights:
            w = rng.uniform(0.5, 1.5, size=tuple(o.shape))
            weights[k] = Tensor._wrap(np.ascontiguousarray(w, dtype=o.dtype.np), o.dtype)
        return weights[k]

    def first_grads(*args):
        # The numerical pass hands in detached copies: make them differentiable again.
        args = [
            a.detach().requires_grad_() if r and not a._requires_grad else a
            for a, r in zip(args, diff_mask)
        ]
        outs = _flat_outputs(fn(*args))
        ds = [a for a, r in zip(args, diff_mask) if r]
        terms = [(o * weight(k, o)).sum() for k, o in enumerate(outs) if o.requires_grad]
        if not terms:
            return tuple(zeros_like(d) for d in ds)
        loss = terms[0]
        for t in terms[1:]:
            loss = loss + t
        gs = autograd.grad(loss, ds, create_graph=True, allow_unused=True)
        return tuple(zeros_like(d) if g is None else g for d, g in zip(ds, gs))

    return gradcheck(first_grads, inputs, eps=eps, atol=atol, rtol=rtol)
