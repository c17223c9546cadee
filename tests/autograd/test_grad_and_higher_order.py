"""autograd.grad (gradients returned, not accumulated: grad_outputs, allow_unused, intermediate
inputs) and higher-order gradients through create_graph, checked by hand and against central
differences in float64."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import leaf, num_grad
from helpers import to_np as npv

import gpucore as gc
from gpucore import AutogradError
from gpucore.autograd import grad


# ----------------------------------------------------------------------------- autograd.grad
def test_grad_returns_without_accumulating():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 5.0])
    gx, gy = grad((x * y).sum(), [x, y])
    np.testing.assert_allclose(npv(gx), [3.0, 5.0])
    np.testing.assert_allclose(npv(gy), [1.0, 2.0])
    assert x.grad is None and y.grad is None
    assert not gx.requires_grad


def test_grad_outputs_and_multiple_outputs():
    x = leaf([1.0, 2.0])
    a, b = x * 2, x * x
    (g,) = grad(
        [a, b],
        [x],
        grad_outputs=[
            gc.tensor([1.0, 1.0], dtype=gc.float64),
            gc.tensor([10.0, 100.0], dtype=gc.float64),
        ],
    )
    # 2*1 + 2x*w
    np.testing.assert_allclose(npv(g), [2 + 20.0, 2 + 400.0])


def test_grad_allow_unused():
    x, y = leaf([1.0, 2.0]), leaf([3.0])
    out = (x * 2).sum()
    with pytest.raises(AutogradError, match="allow_unused"):
        grad(out, [x, y], retain_graph=True)
    gx, gy = grad(out, [x, y], allow_unused=True)
    np.testing.assert_allclose(npv(gx), [2.0, 2.0])
    assert gy is None


def test_grad_input_not_requiring_grad_raises():
    x = leaf([1.0])
    c = gc.ones(1, dtype=gc.float64)
    with pytest.raises(AutogradError, match="does not require grad"):
        grad((x * c).sum(), [c])


def test_grad_with_respect_to_intermediate():
    x = leaf([1.0, 2.0])
    h = x * 3
    out = (h * h).sum()
    gh, gx = grad(out, [h, x])
    np.testing.assert_allclose(npv(gh), 2 * np.array([3.0, 6.0]))
    np.testing.assert_allclose(npv(gx), 18 * np.array([1.0, 2.0]))


# ----------------------------------------------------------------------------- higher order
def test_second_and_third_derivative_of_cube():
    xv = np.array([-1.5, 0.5, 2.0])
    x = leaf(xv)
    y = (x**3).sum()
    (g1,) = grad(y, x, create_graph=True)
    assert g1.requires_grad
    np.testing.assert_allclose(npv(g1), 3 * xv**2)
    (g2,) = grad(g1.sum(), x, create_graph=True)
    np.testing.assert_allclose(npv(g2), 6 * xv)
    (g3,) = grad(g2.sum(), x)
    np.testing.assert_allclose(npv(g3), [6.0, 6.0, 6.0])


def test_backward_create_graph_gives_differentiable_grad():
    xv = np.array([0.5, 1.5])
    x = leaf(xv)
    (x**3).sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(npv(g), 3 * xv**2)
    (gg,) = grad(g.sum(), x)
    np.testing.assert_allclose(npv(gg), 6 * xv)


def test_grad_of_grad_used_in_a_loss():
    # gradient penalty: L = sum(x * dy/dx) with y = sum(x^2) -> L = sum(2x^2), dL/dx = 4x
    xv = np.array([1.0, -2.0, 3.0])
    x = leaf(xv)
    (g,) = grad((x * x).sum(), x, create_graph=True)
    (g * x).sum().backward()
    np.testing.assert_allclose(npv(x.grad), 4 * xv)


@pytest.mark.parametrize(
    "name",
    ["tanh", "sigmoid", "softmax", "tanh_softmax", "log_softmax_sigmoid"],
)
def test_second_derivatives_vs_finite_differences(name):
    rng = np.random.default_rng(3)
    xv = rng.uniform(-1.5, 1.5, size=(2, 4))
    wv = rng.standard_normal((2, 4))
    w = gc.tensor(wv, dtype=gc.float64)
    fns = {
        "tanh": lambda x: x.tanh() * x,
        "sigmoid": lambda x: x.sigmoid() * x.sigmoid(),
        "softmax": lambda x: x.softmax(1),
        "tanh_softmax": lambda x: (x.tanh() * 2).softmax(1) * x,
        "log_softmax_sigmoid": lambda x: x.sigmoid().log_softmax(0),
    }
    f = fns[name]

    def first_grad(v, create_graph):
        x = leaf(v)
        (g,) = grad((f(x) * w).sum(), x, create_graph=create_graph)
        return x, g

    # Hessian-vector product with u: d/dx <grad f, u>, vs finite differences of the gradient.
    u = rng.standard_normal((2, 4))
    x, g = first_grad(xv, True)
    (hvp,) = grad((g * gc.tensor(u, dtype=gc.float64)).sum(), x)
    expected = num_grad(lambda v: (npv(first_grad(v, False)[1]) * u).sum(), xv)
    np.testing.assert_allclose(npv(hvp), expected, rtol=1e-5, atol=1e-7)


def test_no_graph_is_recorded_during_plain_backward():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    assert not x.grad.requires_grad and x.grad.grad_fn is None
