"""The checks the topic files of tests/nn run on their part of the module table (nn_cases.py):
the forward against the numpy reference in float32 and float64, gradients reaching the input
(gradcheck) and the parameters (finite differences), errors, and PyTorch's module on the same
input and parameters where torch is installed."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, rand, to_np
from nn_cases import ours
from nn_refs import f32, f64

import gpucore


def check_forward(case):
    expected = case.ref(*[v.copy() for v in case.inputs])
    out = ours(case, gpucore.float32)(*[f32(v) for v in case.inputs])
    assert out.dtype is gpucore.float32
    assert_close(out, expected, rtol=1e-5, atol=1e-6, what="float32")
    out = ours(case)(*[f64(v) for v in case.inputs])
    assert out.dtype is gpucore.float64
    assert_close(out, expected, rtol=1e-10, atol=1e-12, what="float64")


# a loss's 'mean' and 'sum' share the backward of its 'none' (and of its default) case
def grad_cases(cases):
    return [c for c in cases if c.kwargs.get("reduction") not in ("mean", "sum")]


def check_input_gradients(case):
    m = ours(case)
    xs = [f64(v, grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    check_grad(m, *xs)


def finite_difference_grads(m, loss, eps=1e-6):
    """Central differences of ``loss()`` with respect to each parameter of ``m``."""
    grads = {}
    for name, p in m.named_parameters():
        base = to_np(p).copy()
        g = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            values = []
            for step in (eps, -eps):
                moved = base.copy()
                moved[i] += step
                with gpucore.no_grad():
                    p.copy_(f64(moved))
                    values.append(loss().item())
            g[i] = (values[0] - values[1]) / (2 * eps)
        with gpucore.no_grad():
            p.copy_(f64(base))
        grads[name] = g
    return grads


def check_parameter_gradients(case):
    m = ours(case)
    xs = [f64(v) for v in case.inputs]
    upstream = f64(rand(case.ref(*case.inputs).shape, seed=20))

    def loss():
        return (m(*xs) * upstream).sum()

    loss().backward()
    numeric = finite_difference_grads(m, loss)
    assert set(numeric) == set(case.params)
    for name, p in m.named_parameters():
        assert p.grad is not None, name
        assert_close(p.grad, numeric[name], rtol=1e-6, atol=1e-8, what=name)


def error_ids(errors):
    return [f"{e.__name__}-{m}" for _, e, m in errors]


def check_error(fn, exc, match):
    assert issubclass(gpucore.ShapeError, ValueError)
    with pytest.raises(exc, match=match):
        fn()


def check_match_torch(case):
    torch = pytest.importorskip("torch")
    m = ours(case)
    tm = case.build(torch.nn, torch.tensor).double()
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    xs = [f64(v, grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    txs = [torch.tensor(v, requires_grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    out, tout = m(*xs), tm(*txs)
    assert_close(out, tout.detach().numpy(), rtol=1e-5, atol=1e-6, what="forward")
    if not case.torch_grad:
        return
    upstream = rand(tuple(tout.shape), seed=40)
    (out * f64(upstream)).sum().backward()
    (tout * torch.tensor(upstream)).sum().backward()
    for i, (x, tx) in enumerate(zip(xs, txs)):
        if i not in case.fixed:
            assert_close(x.grad, tx.grad.numpy(), rtol=1e-5, atol=1e-6, what=f"input {i}")
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        assert_close(p.grad, tp.grad.numpy(), rtol=1e-5, atol=1e-6, what=name)
