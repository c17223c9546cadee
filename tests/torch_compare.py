"""Checking a gpucore function against PyTorch's (when installed): the same float64 inputs
through both, values compared exactly-ish, gradients of ``sum(out * w)`` compared, and
gpucore's gradient also checked by finite differences (``gradcheck``).

    same_as_torch(lambda m, x: m.cumsum(x, 1), np_inputs...)

``fn(module, *tensors)`` is called with ``gpucore`` and with ``torch`` as ``module``, so one
lambda states the call for both.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore.autograd import gradcheck


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "cpu") else t.numpy()


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def same_as_torch(fn, *arrays, grad=True, atol=1e-10, rtol=1e-8, check_fd=True):
    """Run ``fn(module, *tensors)`` with gpucore and torch on ``arrays`` (float arrays as float64
    tensors that require grad when ``grad``; others as they are) and compare every output, their
    dtypes' kinds and the inputs' gradients."""
    torch = pytest.importorskip("torch")
    arrays = [np.asarray(a) for a in arrays]
    is_f = [a.dtype.kind == "f" for a in arrays]
    gs = [gpucore.tensor(a, requires_grad=grad and f) for a, f in zip(arrays, is_f)]
    ts = [torch.tensor(a, requires_grad=grad and f) for a, f in zip(arrays, is_f)]
    go, to = _outs(fn(gpucore, *gs)), _outs(fn(torch, *ts))
    assert len(go) == len(to)
    for g, t in zip(go, to):
        assert tuple(g.shape) == tuple(t.shape), (tuple(g.shape), tuple(t.shape))
        assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (g.dtype, t.dtype)
        np.testing.assert_allclose(_np(g), _np(t), atol=atol, rtol=rtol)
    if not grad or not any(is_f) or not go[0].dtype.is_floating_point or go[0].numel() == 0:
        return go
    w = np.linspace(-1, 1, go[0].numel()).reshape(tuple(go[0].shape))
    (go[0] * gpucore.tensor(w)).sum().backward()
    (to[0] * torch.tensor(w)).sum().backward()
    for g, t, f in zip(gs, ts, is_f):
        if not f:
            continue
        tg = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
        gg = g.grad.numpy() if g.grad is not None else np.zeros(tuple(g.shape))
        np.testing.assert_allclose(gg, tg, atol=1e-9, rtol=1e-7)
    if check_fd:
        diff = [gpucore.tensor(a, requires_grad=True) for a, f in zip(arrays, is_f) if f]

        def f(*xs):
            it = iter(xs)
            args = [next(it) if fl else gpucore.tensor(a) for a, fl in zip(arrays, is_f)]
            return _outs(fn(gpucore, *args))[0]

        assert gradcheck(f, tuple(diff), atol=1e-6, rtol=1e-4)
    return go
