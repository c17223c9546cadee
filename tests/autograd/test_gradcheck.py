"""gradcheck / gradgradcheck: True on correct gradients, an AutogradError naming the worst element
on wrong ones (a test-only op with a deliberately wrong backward)."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore import AutogradError
from gpucore.autograd import gradcheck, gradgradcheck
from gpucore.backends.cpu.kernels import KERNELS
from gpucore.ops.registry import REGISTRY, apply, defop


def rand(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return gc.tensor(rng.uniform(-1, 1, size=shape), dtype=gc.float64, requires_grad=True)


@pytest.fixture
def square_op():
    """``square`` with a registrable backward: the fixture yields a factory taking the factor
    the backward uses (2 is right, anything else is wrong) and removes the ops afterwards."""
    names = []

    def make(factor, off_by_index=None):
        name = f"_test_gradcheck_square_{len(names)}"
        names.append(name)

        def bwd(ctx, g):
            (x,) = ctx.saved
            gx = g * x * factor
            if off_by_index is not None:
                bump = np.zeros(tuple(x.shape))
                bump.reshape(-1)[off_by_index] = 0.5
                gx = gx + g * gc.tensor(bump, dtype=gx.dtype)
            return gx

        op = defop(name, infer=lambda x: (x.shape, x.dtype), save_inputs=(0,), backward=bwd)

        def kernel(out, x):
            np.multiply(x, x, out=out)

        KERNELS[name] = kernel
        return lambda t: apply(op, t)

    yield make
    for n in names:
        REGISTRY.pop(n, None)
        KERNELS.pop(n, None)


def test_gradcheck_true_on_builtin_ops():
    x, y = rand(3, 4), rand(4, seed=1)
    assert gradcheck(lambda a, b: (a * b).tanh() + (a - b).sigmoid() * a, [x, y])
    assert gradcheck(lambda a: a.softmax(1), [x])
    assert gradcheck(lambda a: a.reshape(4, 3).T[1:, ::2].exp(), [x])
    assert gradcheck(lambda a: a.sum(1, keepdim=True) * a, [x])
    assert gradcheck(lambda a, b: a @ b.reshape(4, 1), [x, y])


def test_gradcheck_multiple_outputs_and_non_tensor_args():
    x = rand(2, 3)
    assert gradcheck(lambda a, k: (a * k, a.exp()), [x, 3.0])


def test_gradcheck_ignores_inputs_without_grad():
    x = rand(3)
    c = gc.tensor([1.0, 2.0, 3.0], dtype=gc.float64)
    assert gradcheck(lambda a, b: a * b, [x, c])


def test_gradcheck_no_differentiable_input_raises():
    with pytest.raises(AutogradError, match="requires grad"):
        gradcheck(lambda a: a * 2, [gc.ones(3, dtype=gc.float64)])


def test_custom_op_correct_backward_passes(square_op):
    sq = square_op(2.0)
    x = rand(2, 3)
    np.testing.assert_allclose(sq(x).detach().numpy(), x.detach().numpy() ** 2)
    assert gradcheck(sq, [x])
    assert gradgradcheck(lambda t: sq(t) * t, [x])


def test_custom_op_wrong_backward_raises_with_worst_element(square_op):
    sq = square_op(2.0, off_by_index=4)  # only element 4's gradient is wrong, by 0.5
    x = rand(2, 3)
    with pytest.raises(AutogradError, match="worst") as ei:
        gradcheck(sq, [x])
    msg = str(ei.value)
    assert "input element 4" in msg and "output element 4" in msg
    assert "(1, 1)" in msg  # element 4 of a (2, 3) input
    assert "analytic" in msg and "numerical" in msg and "(2, 3)" in msg


def test_custom_op_wrong_everywhere_raises_and_no_raise_returns_false(square_op):
    sq = square_op(3.0)
    x = rand(4)
    with pytest.raises(AutogradError, match="mismatch"):
        gradcheck(sq, [x])
    assert gradcheck(sq, [x], raise_exception=False) is False


def test_gradcheck_tolerances_matter(square_op):
    sq = square_op(2.0 * (1 + 1e-4))  # relative error 1e-4
    x = rand(3)
    assert gradcheck(sq, [x], rtol=1e-3)
    with pytest.raises(AutogradError):
        gradcheck(sq, [x], atol=1e-9, rtol=1e-6)


def test_fixture_cleans_up(square_op):
    square_op(2.0)
    assert any(n.startswith("_test_gradcheck_square_") for n in REGISTRY)


def test_registry_clean_after_fixture():
    assert not any(n.startswith("_test_gradcheck_square_") for n in REGISTRY)
    assert not any(n.startswith("_test_gradcheck_square_") for n in KERNELS)


def test_gradgradcheck_on_builtin_compositions():
    x = rand(2, 3)
    assert gradgradcheck(lambda a: (a.tanh() * 2).softmax(1) * a.sigmoid(), [x])
    assert gradgradcheck(lambda a: a**3, [x])


def test_gradgradcheck_catches_wrong_second_derivative(square_op):
    # the first derivative is right (x*x has gradient 2x), but the backward's own backward is
    # not: factor 2 applied via a constant is fine, so break the second order by making the
    # backward not differentiable w.r.t. x (detached).
    name = "_test_gradcheck_square_detached"

    def bwd(ctx, g):
        (x,) = ctx.saved
        return g * x.detach() * 2

    op = defop(name, infer=lambda x: (x.shape, x.dtype), save_inputs=(0,), backward=bwd)
    KERNELS[name] = lambda out, x: np.multiply(x, x, out=out)
    try:
        x = rand(3)
        assert gradcheck(lambda t: apply(op, t), [x])
        with pytest.raises(AutogradError):
            gradgradcheck(lambda t: apply(op, t), [x])
    finally:
        REGISTRY.pop(name, None)
        KERNELS.pop(name, None)


def test_gradgradcheck_multiple_outputs_and_linear_parts():
    x, y = rand(2, 3), rand(3, seed=1)
    assert gradgradcheck(lambda a, b: (a * b, (a * a).sum(0) + b), [x, y])
    assert gradgradcheck(lambda a: a * 2, [x])  # the first gradient is constant
