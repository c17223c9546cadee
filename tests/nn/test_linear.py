"""linear and bilinear, functional and module: forward against numpy float64, one GEMM with the
bias fused, transposed weights, gradients (first and second order), errors and the module's repr;
PyTorch where installed."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np
from nn_checks import check_function_vs_torch, check_module_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def test_linear_functional():
    check_op(F.linear, lambda x, w, b: x @ w.T + b, [(3, 5), (4, 5), (4,)])
    check_op(F.linear, lambda x, w: x @ w.T, [(2, 3, 5), (4, 5)])
    check_op(F.linear, lambda x, w, b: x @ w.T + b, [(5,), (2, 5), (2,)], noncontig=False)
    with pytest.raises(gpucore.ShapeError, match=r"linear\(\).*\(3, 4\)"):
        F.linear(gpucore.zeros(2, 3), gpucore.zeros(3, 4))
    with pytest.raises(gpucore.ShapeError, match="bias"):
        F.linear(gpucore.zeros(2, 4), gpucore.zeros(3, 4), gpucore.zeros(4))
    with pytest.raises(gpucore.DTypeError, match=r"linear\(\).*float64"):
        F.linear(gpucore.zeros(2, 4), gpucore.zeros(3, 4, dtype=gpucore.float64))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (65, 257, 33), (7, 784, 10), (130, 31, 129)])
def test_linear_is_one_gemm_with_bias_and_contiguous_gradients(m, k, n):
    x, w, b = rand((m, k), seed=1), rand((n, k), seed=2), rand((n,), seed=3)
    with gpucore.dispatch.trace_ops() as ops:
        out = F.linear(f32(x), f32(w), f32(b))
    assert [name for name, _, _ in ops] == ["linear"]  # bias fused into the GEMM
    assert_close(out, x @ w.T + b, rtol=1e-4, atol=1e-5)
    # the weight as a transposed view (e.g. tied embeddings) folds into the packing
    wt = f32(np.ascontiguousarray(w.T)).t()
    assert n == k == 1 or not wt.is_contiguous()
    assert_close(F.linear(f32(x), wt), x @ w.T, rtol=1e-4, atol=1e-5)
    xs, ws, bs = (gpucore.tensor(a, dtype=gpucore.float32, requires_grad=True) for a in (x, w, b))
    g = rand((m, n), seed=4)
    F.linear(xs, ws, bs).backward(f32(g))
    assert_close(xs.grad, g @ w, rtol=1e-4, atol=1e-5)
    assert_close(ws.grad, g.T @ x, rtol=1e-4, atol=1e-5)
    assert_close(bs.grad, g.sum(0), rtol=1e-4, atol=1e-5)
    assert ws.grad.is_contiguous()  # the optimizer and the leaf get a plain [out, in] buffer


@pytest.mark.parametrize("dtype", [gpucore.float32, gpucore.float64])
def test_linear_bias_gradient_is_the_sum_op(dtype):
    """The backward's bias gradient (its reduce kernel called without the registry, where no
    graph is recorded): the SUM op's bits, close to float64, and a non-contiguous incoming
    gradient (through the registry) the same."""
    x, w, b = rand((33, 17), seed=1), rand((9, 17), seed=2), rand((9,), seed=3)
    g = rand((33, 9), seed=4)
    xs, ws, bs = (gpucore.tensor(a, dtype=dtype, requires_grad=True) for a in (x, w, b))
    F.linear(xs, ws, bs).backward(gpucore.tensor(g, dtype=dtype))
    assert np.array_equal(to_np(bs.grad), to_np(gpucore.tensor(g, dtype=dtype).sum(0)))
    assert_close(bs.grad, g.sum(0), rtol=1e-5, atol=1e-6)
    bs.grad = None
    gt = gpucore.tensor(np.ascontiguousarray(g.T), dtype=dtype).t()  # a strided view
    F.linear(xs, ws, bs).backward(gt)
    assert np.array_equal(to_np(bs.grad), to_np(gpucore.tensor(g, dtype=dtype).sum(0)))


def test_linear_bias_gradient_goes_through_the_registry_when_traced_or_profiled():
    """The bias gradient's shortcut respects the fast lanes' gate: under trace_ops and the
    profiler the SUM op runs through the registry (so they see it), with the same bits."""
    x, w, g = rand((6, 5), seed=1), rand((4, 5), seed=2), rand((6, 4), seed=3)
    xs, ws, bs = (gpucore.tensor(a, requires_grad=True) for a in (x, w, rand((4,), seed=4)))
    F.linear(xs, ws, bs).backward(f32(g))
    fast = to_np(bs.grad)
    bs.grad = None
    with gpucore.dispatch.trace_ops() as ops:
        F.linear(xs, ws, bs).backward(f32(g))
    assert ("sum", "cpu", (4,)) in ops
    assert np.array_equal(to_np(bs.grad), fast)
    bs.grad = None
    with gpucore.profiler() as prof:
        F.linear(xs, ws, bs).backward(f32(g))
    assert "sum" in [e[0] for e in prof.events]
    assert np.array_equal(to_np(bs.grad), fast)


def test_linear_gradients_and_second_order():
    check_grad(
        F.linear, rand((4, 5), seed=1), rand((3, 5), seed=2), rand((3,), seed=3), gradgrad=True
    )
    check_grad(F.linear, rand((2, 3, 5), seed=1), rand((3, 5), seed=2))


def test_linear_module():
    m = nn.Linear(5, 3)
    assert repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    assert m.weight.shape == (3, 5) and m.bias.shape == (3,)
    x = rand((4, 5))
    ref = x @ to_np(m.weight).T + to_np(m.bias)
    assert_close(m(f32(x)), ref, rtol=1e-5)
    m = nn.Linear(5, 3, bias=False, dtype=gpucore.float64)
    assert m.bias is None and "bias" not in m.state_dict() and m.weight.dtype is gpucore.float64
    assert repr(m).endswith("bias=False)")
    assert m(f64(x)).dtype is gpucore.float64
    assert nn.Identity(3, foo=1)(m.weight) is m.weight


# ============================================================================= bilinear
def test_bilinear_against_einsum():
    def ref(x1, x2, w, b):
        return np.einsum("...i,kij,...j->...k", x1, w, x2) + b

    check_op(F.bilinear, ref, [(2, 3, 4), (2, 3, 5), (6, 4, 5), (6,)])
    check_op(
        lambda x1, x2, w: F.bilinear(x1, x2, w),
        lambda x1, x2, w: ref(x1, x2, w, 0),
        [(4,), (5,), (2, 4, 5)],
    )
    with pytest.raises(gpucore.ShapeError, match=r"bilinear\(\)"):
        F.bilinear(gpucore.zeros(2, 4), gpucore.zeros(3, 5), gpucore.zeros(6, 4, 5))
    with pytest.raises(gpucore.ShapeError, match="bias"):
        F.bilinear(
            gpucore.zeros(2, 4), gpucore.zeros(2, 5), gpucore.zeros(6, 4, 5), gpucore.zeros(5)
        )


def test_bilinear_matches_torch():
    torch = pytest.importorskip("torch")
    check_function_vs_torch(
        F.bilinear,
        torch.nn.functional.bilinear,
        [rand((2, 3, 4)), rand((2, 3, 5), seed=1), rand((6, 4, 5), seed=2), rand((6,), seed=3)],
    )
    for bias in (True, False):
        check_module_vs_torch(
            nn.Bilinear(4, 5, 3, bias=bias),
            torch.nn.Bilinear(4, 5, 3, bias=bias),
            [rand((7, 4)), rand((7, 5), seed=1)],
        )


def test_bilinear_module_init_and_repr():
    gpucore.manual_seed(0)
    m = nn.Bilinear(16, 3, 200)
    assert repr(m) == "Bilinear(in1_features=16, in2_features=3, out_features=200, bias=True)"
    assert tuple(m.weight.shape) == (200, 16, 3) and tuple(m.bias.shape) == (200,)
    w = to_np(m.weight)
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.24  # U(-1/sqrt(16), 1/sqrt(16))
    assert nn.Bilinear(2, 3, 4, bias=False).bias is None
