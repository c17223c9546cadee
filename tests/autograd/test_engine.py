"""The backward engine: leaves and grad_fn, backward() and its gradient/inputs arguments, who
owns a leaf's .grad storage, retain_graph and accumulation, errors, graph shapes (broadcasting,
views, diamonds, several roots), gradient dtypes, and its limits (deep chains, an op's backward
returning the wrong number of gradients).

Expected gradients are derived by hand (noted next to each) or by central differences in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import leaf, num_grad
from helpers import to_np as npv

import gpucore as gc
from gpucore import AutogradError
from gpucore.autograd import grad


# ----------------------------------------------------------------------------- leaves, grad_fn
def test_requires_grad_leaf_and_grad_fn_names():
    x = leaf([1.0, 2.0])
    c = gc.tensor([3.0, 4.0], dtype=gc.float64)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None and x.grad is None
    assert not c.requires_grad and c.is_leaf
    y = x * c
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "MulBackward"
    assert (x + c).grad_fn.name() == "AddBackward"
    assert x.exp().grad_fn.name() == "ExpBackward"
    assert x.sum().grad_fn.name() == "SumBackward"
    # ops on tensors that don't require grad record nothing
    z = c * c
    assert not z.requires_grad and z.grad_fn is None and z.is_leaf


def test_requires_grad_constructor_and_int_dtype_rejected():
    x = gc.tensor([1.0], requires_grad=True)
    assert x.requires_grad
    with pytest.raises(TypeError, match="floating point"):
        gc.tensor([1, 2]).requires_grad_()


def test_non_differentiable_outputs_do_not_require_grad():
    x = leaf([1.0, -2.0, 3.0])
    assert not (x > 0).requires_grad
    assert not x.argmax().requires_grad


def test_simple_backward_values():
    # f = sum(x*y + x**2): df/dx = y + 2x, df/dy = x
    xv, yv = np.array([1.0, -2.0, 0.5]), np.array([3.0, 4.0, -1.0])
    x, y = leaf(xv), leaf(yv)
    (x * y + x**2).sum().backward()
    np.testing.assert_allclose(npv(x.grad), yv + 2 * xv)
    np.testing.assert_allclose(npv(y.grad), xv)
    assert x.grad.shape == x.shape and not x.grad.requires_grad


def test_backward_with_gradient_argument():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x  # dy_i/dx_i = 2 x_i
    y.backward(gradient=gc.tensor([1.0, 10.0, 100.0], dtype=gc.float64))
    np.testing.assert_allclose(npv(x.grad), [2.0, 40.0, 600.0])


def test_backward_gradient_shape_mismatch_raises():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"\(2,\)"):
        (x * 2).backward(gradient=gc.ones(2, dtype=gc.float64))


def test_backward_on_leaf_itself():
    x = leaf([1.0, 2.0])
    x.backward(gradient=gc.tensor([3.0, 4.0], dtype=gc.float64))
    np.testing.assert_allclose(npv(x.grad), [3.0, 4.0])


def test_backward_inputs_limits_accumulation():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * y).sum().backward(inputs=[x])
    np.testing.assert_allclose(npv(x.grad), [3.0, 4.0])
    assert y.grad is None


def test_backward_inputs_non_leaf():
    x = leaf([1.0, 2.0])
    h = x * 3
    (h * h).sum().backward(inputs=[h])  # d/dh = 2h
    np.testing.assert_allclose(npv(h.grad), [6.0, 12.0])
    assert x.grad is None


def test_backward_inputs_never_aliases_the_callers_gradient():
    # clone's backward passes the gradient through unchanged: .grad must still be its own copy
    # (as without inputs=), or an in-place update of .grad (clip_grad_norm_) would change G.
    x = leaf([1.0, 2.0])
    g = gc.ones(2)
    x.clone().backward(g, inputs=[x])
    x.grad.mul_(5)
    assert g.tolist() == [1.0, 1.0] and x.grad.tolist() == [5.0, 5.0]
    x.clone().backward(g, inputs=[x])  # accumulates
    assert x.grad.tolist() == [6.0, 6.0]


# ----------------------------------------------------------------------------- retain/second
def _storage(t) -> int:
    return gc._cpu.data_ptr(t._data)


def test_a_fresh_gradient_becomes_the_leafs_grad_without_a_copy():
    w = gc.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    b = gc.tensor(np.zeros(3, np.float32), requires_grad=True)  # a 1-D gradient too
    x = gc.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    with gc.dispatch.trace_ops() as ops:
        gc.nn.functional.linear(x, w, b).sum().backward()
    assert "clone" not in [name for name, _, _ in ops]
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x.numpy().sum(0), (3, 1)))
    np.testing.assert_allclose(b.grad.numpy(), [2.0, 2.0, 2.0])


def test_one_gradient_sent_to_two_leaves_gives_each_its_own_storage():
    a = gc.tensor([1.0, 2.0], requires_grad=True)
    b = gc.tensor([3.0, 4.0], requires_grad=True)
    ((a + b) * gc.tensor([5.0, 6.0])).sum().backward()  # add's backward returns (g, g)
    assert _storage(a.grad) != _storage(b.grad)
    a.grad.add_(1.0)
    np.testing.assert_array_equal(b.grad.numpy(), [5.0, 6.0])


@pytest.mark.parametrize("keep", ["tensor", "detached", "numpy_view"])
def test_a_gradient_kept_by_a_hook_is_never_the_leafs_grad(keep):
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    kept = []

    def hook(g):
        kept.append({"tensor": g, "detached": g.detach(), "numpy_view": g.numpy()[::1]}[keep])

    x.register_hook(hook)
    (x * gc.tensor([2.0, 3.0, 4.0])).sum().backward()
    x.grad.mul_(0.0)
    np.testing.assert_array_equal(np.asarray(kept[0]), [2.0, 3.0, 4.0])


def test_the_callers_gradient_is_never_the_leafs_grad():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    g = gc.tensor([3.0, 4.0])
    (x + 0.0).backward(g)  # add's backward hands the caller's tensor straight to the leaf
    assert _storage(x.grad) != _storage(g)
    x.grad.zero_()
    np.testing.assert_array_equal(g.numpy(), [3.0, 4.0])


def test_backward_twice_without_retain_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(AutogradError, match="retain_graph") as ei:
        y.backward()
    assert isinstance(ei.value, RuntimeError)


def test_backward_twice_with_retain_graph_accumulates():
    xv = np.array([0.5, -1.0])
    x = leaf(xv)
    y = (x.exp() * x).sum()  # d/dx = e^x (1 + x)
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(npv(x.grad), 2 * np.exp(xv) * (1 + xv))


def test_accumulation_over_two_graphs_and_zeroing():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()  # 3 + 2x
    np.testing.assert_allclose(npv(x.grad), [5.0, 7.0])
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [3.0, 3.0])


def test_accumulation_adds_into_the_existing_grad_in_place():
    """As PyTorch's AccumulateGrad without create_graph: the .grad tensor a caller holds sees
    the sum (its version moves), one tensor set as two parameters' .grad collects both, and
    backward(create_graph=True) accumulates out of place (a new tensor, differentiable)."""
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    held = x.grad
    v0 = held._vbox[0]  # the storage's version counter
    (x * x).sum().backward()  # 3 + 2x
    assert x.grad is held and held._vbox[0] > v0
    np.testing.assert_allclose(npv(held), [5.0, 7.0])

    a, b = leaf([1.0, 1.0]), leaf([2.0, 2.0])
    shared = gc.zeros(2, dtype=gc.float64)
    a.grad = shared
    b.grad = shared
    (a * 2 + b * 5).sum().backward()
    np.testing.assert_allclose(npv(shared), [7.0, 7.0])  # 0 + 2 + 5

    y = leaf([1.0, 2.0])
    (y * y).sum().backward(create_graph=True)  # 2y, differentiable
    first = y.grad
    (y * y).sum().backward(create_graph=True)
    assert y.grad is not first and y.grad.requires_grad
    np.testing.assert_allclose(npv(first), [2.0, 4.0])
    np.testing.assert_allclose(npv(y.grad), [4.0, 8.0])


def test_accumulation_into_a_read_only_grad_makes_a_new_tensor():
    x = leaf([1.0, 2.0])
    ro = np.array([10.0, 10.0])
    ro.flags.writeable = False
    x.grad = gc.from_numpy(ro)
    (x * 3).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [13.0, 13.0])
    np.testing.assert_array_equal(ro, [10.0, 10.0])


def test_accumulation_matches_torch_for_a_held_grad():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    x = leaf([1.0, 2.0])
    for lib_x in (t, x):
        (lib_x * 3).sum().backward()
        held = lib_x.grad
        (lib_x * lib_x).sum().backward()
        assert lib_x.grad is held
    np.testing.assert_array_equal(npv(x.grad), t.grad.numpy())


def test_grad_retain_graph_and_second_call_raises():
    x = leaf([1.0, 2.0])
    y = (x.sin() * 2).sum()
    (g1,) = grad(y, x, retain_graph=True)
    (g2,) = grad(y, x)
    np.testing.assert_allclose(npv(g1), 2 * np.cos([1.0, 2.0]))
    np.testing.assert_allclose(npv(g2), npv(g1))
    with pytest.raises(AutogradError, match="retain_graph"):
        grad(y, x)


# ----------------------------------------------------------------------------- errors
def test_backward_non_scalar_without_gradient_raises_with_shape():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(AutogradError, match=r"\(2, 2\)"):
        (x * 2).backward()


def test_backward_on_tensor_not_requiring_grad_raises():
    with pytest.raises(AutogradError, match="does not require grad"):
        gc.ones(3).sum().backward()
    x = leaf([1.0])
    with gc.no_grad():
        y = x * 2
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


# ----------------------------------------------------------------------------- graph shapes
@pytest.mark.parametrize(
    "xs, ys",
    [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((5,), ()), ((1, 1), (2, 3))],
)
def test_broadcasting_gradient_reduction(xs, ys):
    rng = np.random.default_rng(0)
    xv, yv = rng.standard_normal(xs), rng.standard_normal(ys)
    x, y = leaf(xv), leaf(yv)
    w = rng.standard_normal(np.broadcast_shapes(xs, ys))
    (x * y * gc.tensor(w, dtype=gc.float64)).sum().backward()
    assert x.grad.shape == xs and y.grad.shape == ys
    np.testing.assert_allclose(npv(x.grad), num_grad(lambda a: (a * yv * w).sum(), xv), atol=1e-6)
    np.testing.assert_allclose(npv(y.grad), num_grad(lambda b: (xv * b * w).sum(), yv), atol=1e-6)


def test_gradients_through_views():
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((2, 3, 4))
    wv = rng.standard_normal((4, 3))

    def np_f(a):
        r = a.reshape(6, 4).T  # (4, 6)
        s = r[1:3, ::2]  # (2, 3)
        e = np.broadcast_to(a[0, :, :1].T, (2, 3))  # expand a (1, 3) slice
        return ((s + e) ** 2).sum() + (a.transpose(2, 1, 0)[:, :, 1] * wv).sum()

    x = leaf(xv)
    r = x.reshape(6, 4).T
    s = r[1:3, ::2]
    e = x[0, :, :1].T.expand(2, 3)
    out = ((s + e) ** 2).sum() + (x.permute(2, 1, 0)[:, :, 1] * gc.tensor(wv)).sum()
    np.testing.assert_allclose(out.item(), np_f(xv))
    out.backward()
    np.testing.assert_allclose(npv(x.grad), num_grad(np_f, xv), atol=1e-6)


def test_diamond_graph_and_tensor_used_twice():
    # a = x*2; b = a.exp(); c = a*a; out = sum(b*c) = sum(e^{2x} 4x^2)
    # d/dx = 2 e^{2x} 4x^2 + e^{2x} 8x
    xv = np.array([0.3, -0.7, 1.1])
    x = leaf(xv)
    a = x * 2
    out = (a.exp() * (a * a)).sum()
    out.backward()
    e = np.exp(2 * xv)
    np.testing.assert_allclose(npv(x.grad), 8 * e * xv**2 + 8 * e * xv, rtol=1e-12)


def test_same_leaf_as_both_operands():
    x = leaf([3.0, -4.0])
    (x * x * x).sum().backward()  # 3x^2
    np.testing.assert_allclose(npv(x.grad), [27.0, 48.0])


def test_multiple_roots_one_backward():
    x = leaf([1.0, 2.0])
    a = x * 2
    b = a * a  # b depends on a: both are roots
    gc.autograd.backward([a.sum(), b.sum()])
    np.testing.assert_allclose(npv(x.grad), 2 + 8 * np.array([1.0, 2.0]))


def test_gradient_dtype_matches_leaf_dtype():
    x = leaf([1.0, 2.0], dtype=gc.float32)
    w = gc.tensor([0.1, 0.2], dtype=gc.float64)
    y = (x.to(gc.float64) * w).sum()
    assert y.dtype is gc.float64
    y.backward()
    assert x.grad.dtype is gc.float32
    np.testing.assert_allclose(npv(x.grad), [0.1, 0.2], rtol=1e-6)
    # promotion inside a binary op (float32 * float64) also casts back
    x2 = leaf([1.0, 2.0], dtype=gc.float32)
    (x2 * w).sum().backward()
    assert x2.grad.dtype is gc.float32
    np.testing.assert_allclose(npv(x2.grad), [0.1, 0.2], rtol=1e-6)


def test_float32_grads_match_float64_reference():
    rng = np.random.default_rng(2)
    xv = rng.standard_normal((4, 5)).astype(np.float32)
    x = leaf(xv, dtype=gc.float32)
    (x.tanh() * x).sum().backward()
    x64 = xv.astype(np.float64)
    expected = np.tanh(x64) + x64 * (1 - np.tanh(x64) ** 2)
    np.testing.assert_allclose(npv(x.grad), expected, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- engine limits
def test_root_gradient_cast_to_output_dtype():
    x = leaf([1.0, 2.0], dtype=gc.float32)
    x.backward(gradient=gc.tensor([3.0, 4.0], dtype=gc.float64))
    assert x.grad.dtype is gc.float32
    y = x * 2
    y.backward(gradient=gc.tensor([1.0, 1.0], dtype=gc.float64))
    assert x.grad.dtype is gc.float32
    np.testing.assert_allclose(npv(x.grad), [5.0, 6.0])


def test_deep_chain_has_no_recursion_limit():
    x = leaf([1.0])
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [1.0001**5000], rtol=1e-9)


def test_backward_returning_wrong_number_of_gradients_raises():
    from gpucore.backends.cpu.kernels import KERNELS
    from gpucore.ops.registry import REGISTRY, apply, defop

    name = "_test_engine_bad_arity"
    op = defop(name, infer=lambda a, b: (a.shape, a.dtype), backward=lambda ctx, g: (g,))
    KERNELS[name] = lambda out, a, b: np.add(a, b, out=out)
    try:
        x = leaf([1.0, 2.0])
        out = apply(op, x, x)
        np.testing.assert_allclose(npv(out), [2.0, 4.0])
        with pytest.raises(AutogradError, match="1 gradients for an op with 2 inputs"):
            out.sum().backward()
    finally:
        REGISTRY.pop(name, None)
        KERNELS.pop(name, None)


def test_a_root_given_twice_sums_its_gradients():
    """``grad([y, y], x, [g1, g2])`` is ``grad(y, x, g1 + g2)``, as PyTorch (the root's edges are
    counted once, so its input becomes ready)."""
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    (gx,) = gc.autograd.grad([y, y], x, [gc.ones(2), gc.tensor([1.0, 2.0])])
    np.testing.assert_array_equal(gx.numpy(), [6.0, 9.0])
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    gc.autograd.backward([y, y], [gc.ones(2), gc.ones(2)])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_grad_runs_only_the_nodes_on_paths_to_its_inputs():
    """As PyTorch: autograd.grad (and backward(inputs=)) computes nothing off the paths from the
    outputs to the inputs asked for; a backward elsewhere in the graph never runs."""
    runs = []

    class Traced(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            runs.append(1)
            return g * 2

    x = gc.tensor([1.0, 2.0], requires_grad=True)
    w = gc.tensor([3.0, 4.0], requires_grad=True)
    y = Traced.apply(x)
    z = (y * w).sum()
    (gw,) = grad(z, [w], retain_graph=True)
    np.testing.assert_array_equal(npv(gw), [2.0, 4.0])
    (gy,) = grad(z, [y], retain_graph=True)  # y's own node is not needed past y
    np.testing.assert_array_equal(npv(gy), [3.0, 4.0])
    assert runs == []
    z.backward(inputs=[w], retain_graph=True)
    assert runs == [] and x.grad is None
    (gx,) = grad(z, [x])
    np.testing.assert_array_equal(npv(gx), [6.0, 8.0])
    assert runs == [1]
