"""A tensor's autograd state and hooks: assigning .grad, numpy() on tensors requiring grad,
detach / detach_ / requires_grad_, register_hook on leaves and non-leaves (seeing the summed
gradient, replacing it, removal, with autograd.grad too) and retain_grad."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import leaf
from helpers import to_np as npv

import gpucore as gc
from gpucore import AutogradError
from gpucore.autograd import grad
from gpucore.autograd.engine import queue_callback


# ----------------------------------------------------------------------------- .grad, detach
def test_assigning_grad_checks_shape():
    x = leaf([1.0, 2.0, 3.0])
    x.grad = gc.ones(3, dtype=gc.float64)
    (x * 2).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [3.0, 3.0, 3.0])
    with pytest.raises(ValueError, match=r"\(2,\)"):
        x.grad = gc.zeros(2)
    with pytest.raises(TypeError):
        x.grad = [1.0, 2.0, 3.0]
    x.grad = None
    assert x.grad is None


def test_numpy_on_requires_grad_raises():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="detach"):
        x.numpy()
    with pytest.raises(RuntimeError, match="detach"):
        (x * 2).numpy()
    assert x.detach().numpy().tolist() == [1.0]


def test_detach_cuts_graph_and_shares_storage():
    x = leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    (y * d).sum().backward()  # d is constant: grad = 2 * d = 4x
    np.testing.assert_allclose(npv(x.grad), [4.0, 8.0])
    with gc.no_grad():
        d.add_(1)
    np.testing.assert_allclose(npv(y), [3.0, 5.0])  # storage shared


def test_detach_in_place():
    x = leaf([1.0, 2.0])
    y = x * 2
    assert y.detach_() is y
    assert not y.requires_grad and y.is_leaf and y.grad_fn is None
    z = y * x
    z.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [2.0, 4.0])


def test_requires_grad_in_place():
    x = gc.tensor([1.0, 2.0], dtype=gc.float64)
    assert x.requires_grad_() is x and x.requires_grad
    (x * x).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [2.0, 4.0])
    x.requires_grad_(False)
    assert not x.requires_grad
    with pytest.raises(AutogradError, match="detach"):
        (leaf([1.0]) * 2).requires_grad_(False)


# ----------------------------------------------------------------------------- hooks
def test_hook_on_non_leaf_sees_summed_gradient_and_replaces_it():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    seen = []

    def hook(g):
        seen.append(npv(g).copy())
        return g * 10

    y.register_hook(hook)
    (y * y + y).sum().backward()  # dL/dy = 2y + 1, reaching y along two paths
    assert len(seen) == 1
    yv = 2 * np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(seen[0], 2 * yv + 1)
    np.testing.assert_allclose(npv(x.grad), 2 * 10 * (2 * yv + 1))


def test_hook_on_leaf_and_remove():
    x = leaf([1.0, 2.0])
    seen = []
    h = x.register_hook(lambda g: seen.append(npv(g).copy()))
    (x * x).sum().backward()
    np.testing.assert_allclose(seen[0], [2.0, 4.0])
    np.testing.assert_allclose(npv(x.grad), [2.0, 4.0])
    h2 = x.register_hook(lambda g: g * 0)
    (x * 3).sum().backward()
    np.testing.assert_allclose(seen[1], [3.0, 3.0])
    np.testing.assert_allclose(npv(x.grad), [2.0, 4.0])  # second hook zeroed the new part
    h.remove()
    h2.remove()
    h2.remove()  # removing twice is harmless
    (x * 3).sum().backward()
    assert len(seen) == 2
    np.testing.assert_allclose(npv(x.grad), [5.0, 7.0])


def test_hook_runs_with_autograd_grad_too():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: g + 1)
    (gx,) = grad(y.sum(), x)
    np.testing.assert_allclose(npv(gx), [4.0, 4.0])  # (1 + 1) * 2


def test_retain_grad_sees_gradient_after_hooks():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 10)  # registered after retain_grad, still runs before it
    y.sum().backward()
    np.testing.assert_allclose(npv(y.grad), [10.0, 10.0])
    np.testing.assert_allclose(npv(x.grad), [20.0, 20.0])


def test_hook_returning_wrong_shape_raises():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: g.sum())
    with pytest.raises(AutogradError, match=r"shape \(2,\)"):
        y.sum().backward()


def test_register_hook_on_tensor_without_grad_raises():
    with pytest.raises(AutogradError, match="doesn't require gradient"):
        gc.ones(2).register_hook(lambda g: g)


def test_retain_grad():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    z = y * y
    z.sum().backward()
    np.testing.assert_allclose(npv(y.grad), 2 * np.array([3.0, 6.0]))
    np.testing.assert_allclose(npv(x.grad), 18 * np.array([1.0, 2.0]))
    w = x * 2  # without retain_grad, a non-leaf keeps no .grad
    w.sum().backward()
    assert w.grad is None


def test_post_accumulate_grad_hook_sees_the_accumulated_grad():
    w = gc.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.numpy().copy()))
    (w * 3).sum().backward()
    (w * w).sum().backward()  # accumulates: 3 + 2w
    assert [s.tolist() for s in seen] == [[3.0, 3.0], [5.0, 7.0]]
    handle.remove()
    (w * 3).sum().backward()
    assert len(seen) == 2
    with pytest.raises(AutogradError, match="leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)


def test_queue_callback_runs_once_after_the_whole_backward():
    a = gc.tensor([1.0], requires_grad=True)
    b = gc.tensor([2.0], requires_grad=True)
    order = []

    def hook(p):
        order.append("a")
        queue_callback(lambda: order.append(("done", b.grad.tolist())))

    a.register_post_accumulate_grad_hook(hook)
    (a * b).sum().backward()
    assert order == ["a", ("done", [1.0])]  # b's gradient was there when the callback ran
    with pytest.raises(AutogradError, match="during a backward pass"):
        queue_callback(lambda: None)
