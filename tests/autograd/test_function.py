"""gpucore.autograd.Function: custom forward/backward pairs as research code writes them (a
gradient reversal layer, a straight-through estimator, a saved-output exp), both forward styles
(ctx in forward, setup_context), several outputs with non-differentiable ones, materialized and
absent gradients, saved-tensor checks, retain_graph, gradcheck, once_differentiable, errors;
gradients against hand formulas in float64."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import AutogradError
from gpucore.autograd import Function, gradcheck, once_differentiable


def _x(n=6, lo=-1.0, hi=1.0):
    return gpucore.tensor(np.linspace(lo, hi, n), requires_grad=True)


class GradReverse(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None


class SavedExp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ProductSumArgmax(Function):
    """Three outputs (x * w, sum(x + w), argmax(x)), the last one an index."""

    @staticmethod
    def forward(x, w):
        return x * w, (x + w).sum(), gpucore.argmax(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.mark_non_differentiable(output[2])

    @staticmethod
    def backward(ctx, g_prod, g_sum, g_idx):
        x, w = ctx.saved_tensors
        assert g_idx is None or float(g_idx.abs().sum()) == 0
        return g_prod * w + g_sum, g_prod * x + g_sum


def test_gradient_reversal_and_saved_output():
    x = _x()
    (GradReverse.apply(x * 2, 0.5).sum() + SavedExp.apply(x).sum()).backward()
    xs = np.linspace(-1, 1, 6)
    np.testing.assert_allclose(x.grad.numpy(), -0.5 * 2 + np.exp(xs), rtol=1e-12)


def test_several_outputs_setup_context_and_non_differentiable():
    x, w = _x(), _x(lo=0.5, hi=2.0)
    prod, total, idx = ProductSumArgmax.apply(x, w)
    assert prod.requires_grad and total.requires_grad and not idx.requires_grad
    assert prod.grad_fn.name() == "ProductSumArgmaxBackward"
    (prod.sum() * 2 + total * 3).backward()
    xs, ws = np.linspace(-1, 1, 6), np.linspace(0.5, 2, 6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * ws + 3, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), 2 * xs + 3, rtol=1e-12)
    # only one output used: the others' gradients arrive as zeros
    x.grad = None
    ProductSumArgmax.apply(x, w)[1].backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(6))


def test_unmaterialized_grads_are_none():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append((ga is None, gb is None))
            return ga * 2 if gb is None else ga * 2 + gb * 3

    x = _x(3)
    Two.apply(x)[0].sum().backward()
    assert seen == [(False, True)]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_straight_through_estimator_and_no_grad():
    class RoundSTE(Function):
        @staticmethod
        def forward(ctx, x):
            return gpucore.round(x)

        @staticmethod
        def backward(ctx, g):
            return g

    x = _x()
    RoundSTE.apply(x * 3).pow(2).sum().backward()
    xs = np.linspace(-1, 1, 6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.round(3 * xs) * 3, rtol=1e-12)
    with gpucore.no_grad():
        assert not SavedExp.apply(x).requires_grad
    assert not SavedExp.apply(gpucore.ones(2)).requires_grad  # no input requires grad


def test_retain_graph_saved_tensor_checks_and_gradcheck():
    x = _x(4)
    y = SavedExp.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(np.linspace(-1, 1, 4)), rtol=1e-12)
    with pytest.raises(AutogradError, match="second time"):
        y.backward()
    z = x * 1
    out = SavedExp.apply(z).sum()
    y2 = SavedExp.apply(z)
    y2.mul_(2)  # the saved output modified in place
    with pytest.raises(AutogradError, match="modified by an in-place operation"):
        y2.sum().backward()
    out.backward()
    assert gradcheck(SavedExp.apply, (gpucore.tensor(np.linspace(-1, 1, 4), requires_grad=True),))


def test_errors():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(AutogradError, match="incorrect number of gradients"):
        TooFew.apply(_x(), _x()).sum().backward()

    class Dirty(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

    with pytest.raises(NotImplementedError, match="mark_dirty"):
        Dirty.apply(_x())
    with pytest.raises(RuntimeError, match="static forward"):
        SavedExp()(_x())
    with pytest.raises(TypeError, match="save_for_backward can only save tensors"):

        class SavesInt(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(3)
                return x

        SavesInt.apply(_x())


def test_matches_torch():
    torch = pytest.importorskip("torch")
    xs = np.linspace(-1, 1, 5)

    class TorchExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    xt = torch.tensor(xs, requires_grad=True)
    (TorchExp.apply(xt) * torch.tensor(xs)).sum().backward()
    xg = gpucore.tensor(xs, requires_grad=True)
    (SavedExp.apply(xg) * gpucore.tensor(xs)).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
