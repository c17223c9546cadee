"""The checks the topic files of tests/nn run on their part of the module table (nn_cases.py):
the forward against the numpy reference in float32 and float64, gradients reaching the input
(gradcheck) and the parameters (finite differences), errors, and PyTorch's module on the same
input and parameters where torch is installed; module_tests makes the tests that run them."""

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


def module_tests(cases, errors):
    """The module tests every topic file runs on its part of the table and its module errors:
    (test_module_forward, test_module_input_gradients, test_module_errors,
    test_module_match_torch), for the topic file to bind to those names, where pytest collects
    them."""

    @pytest.mark.parametrize("case", cases, ids=repr)
    def test_module_forward(case):
        check_forward(case)

    @pytest.mark.parametrize("case", grad_cases(cases), ids=repr)
    def test_module_input_gradients(case):
        check_input_gradients(case)

    @pytest.mark.parametrize("fn,exc,match", errors, ids=error_ids(errors))
    def test_module_errors(fn, exc, match):
        check_error(fn, exc, match)

    @pytest.mark.parametrize("case", cases, ids=repr)
    def test_module_match_torch(case):
        check_match_torch(case)

    return (
        test_module_forward,
        test_module_input_gradients,
        test_module_errors,
        test_module_match_torch,
    )


def _float_inputs(inputs, fixed, make):
    """Differentiable float64 tensors for the float arrays of ``inputs`` (not those at the
    indices in ``fixed``); integer arrays (indices, offsets) and non-arrays as they are."""
    out = []
    for i, v in enumerate(inputs):
        if isinstance(v, np.ndarray):
            grad = v.dtype.kind == "f" and i not in fixed
            out.append(make(v, grad))
        else:
            out.append(v)
    return out


def _compare_outputs_and_grads(torch, out, tout, xs, txs, params=()):
    """Forward (and the indices of a (values, indices) pair) equal, then the gradients of the
    inputs and of the (ours, theirs) parameter pairs under one random upstream gradient."""
    if isinstance(tout, tuple):
        np.testing.assert_array_equal(to_np(out[1]), tout[1].numpy())
        out, tout = out[0], tout[0]
    assert tuple(out.shape) == tuple(tout.shape)
    assert_close(out, tout.detach().numpy(), rtol=1e-5, atol=1e-6, what="forward")
    upstream = rand(tuple(tout.shape), seed=41)
    (out * f64(upstream)).sum().backward()
    (tout * torch.tensor(upstream)).sum().backward()
    pairs = [(x, tx) for x, tx in zip(xs, txs) if isinstance(x, gpucore.Tensor)]
    for i, (x, tx) in enumerate(pairs + list(params)):
        if tx.grad is None:
            assert x.grad is None or not np.any(to_np(x.grad)), f"gradient {i}"
        else:
            assert_close(x.grad, tx.grad.numpy(), rtol=1e-5, atol=1e-6, what=f"gradient {i}")


def check_function_vs_torch(ours_fn, torch_fn, inputs, fixed=()):
    """``ours_fn`` and PyTorch's ``torch_fn`` on the same float64 inputs (numpy arrays become
    tensors; integer arrays stay undifferentiated): outputs and input gradients."""
    torch = pytest.importorskip("torch")
    xs = _float_inputs(inputs, fixed, lambda v, g: f64(v, grad=g) if g else gpucore.tensor(v))
    txs = _float_inputs(inputs, fixed, lambda v, g: torch.tensor(v, requires_grad=g))
    _compare_outputs_and_grads(torch, ours_fn(*xs), torch_fn(*txs), xs, txs)


def check_module_vs_torch(m, tm, inputs, fixed=(), **kwargs):
    """Module ``m`` (gpucore) and ``tm`` (torch) with the same float64 parameters: repr, parameter
    names and shapes, outputs, input and parameter gradients. kwargs go to both forwards."""
    torch = pytest.importorskip("torch")
    assert repr(m) == repr(tm)
    tm = tm.double()
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in tm.named_parameters()]
    m.load_state_dict({k: f64(v.detach().numpy()) for k, v in tm.state_dict().items()})
    m = m.to(gpucore.float64)
    xs = _float_inputs(inputs, fixed, lambda v, g: f64(v, grad=g) if g else gpucore.tensor(v))
    txs = _float_inputs(inputs, fixed, lambda v, g: torch.tensor(v, requires_grad=g))
    params = list(zip(m.parameters(), tm.parameters()))
    _compare_outputs_and_grads(torch, m(*xs, **kwargs), tm(*txs, **kwargs), xs, txs, params)
