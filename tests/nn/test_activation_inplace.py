"""F's in-place activations (relu_, elu_, celu_, selu_, leaky_relu_, hardtanh_, rrelu_,
threshold_) against PyTorch: the input is modified and returned, values and gradients through a
non-leaf, a leaf that requires grad refused, float64 numpy formulas, and the Vulkan device."""

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F

SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# (name, extra args, float64 formula, its derivative)
CASES = [
    ("relu_", (), lambda x: np.maximum(x, 0), lambda x: (x > 0) * 1.0),
    ("elu_", (0.5,), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)),
     lambda x: np.where(x > 0, 1.0, 0.5 * np.exp(x))),
    ("celu_", (0.7,), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x / 0.7)),
     lambda x: np.where(x > 0, 1.0, np.exp(x / 0.7))),
    ("selu_", (), lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x)),
     lambda x: SELU_S * np.where(x > 0, 1.0, SELU_A * np.exp(x))),
    ("leaky_relu_", (0.2,), lambda x: np.where(x > 0, x, 0.2 * x),
     lambda x: np.where(x > 0, 1.0, 0.2)),
    ("hardtanh_", (-0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8),
     lambda x: ((x > -0.5) & (x < 0.8)) * 1.0),
    ("rrelu_", (0.1, 0.3), lambda x: np.where(x >= 0, x, 0.2 * x),
     lambda x: np.where(x >= 0, 1.0, 0.2)),
    ("threshold_", (0.1, -2.0), lambda x: np.where(x > 0.1, x, -2.0),
     lambda x: (x > 0.1) * 1.0),
]  # fmt: skip
X = np.random.default_rng(0).uniform(-2, 2, (3, 5))
X[0, 0] = 0.5  # away from every kink


@pytest.mark.parametrize("name,args,f,df", CASES, ids=[c[0] for c in CASES])
def test_inplace_activation_values_and_gradients(name, args, f, df):
    a = gpucore.tensor(X)
    r = getattr(F, name)(a, *args)
    assert r is a  # modified in place and returned
    np.testing.assert_allclose(a.numpy(), f(X), rtol=1e-12, atol=1e-12)
    # through a non-leaf: the gradient of sum(y * y) where y is the activated copy
    x = gpucore.tensor(X, requires_grad=True)
    y = x * 1.0
    getattr(F, name)(y, *args)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * f(X) * df(X), rtol=1e-10, atol=1e-12)
    with pytest.raises(gpucore.AutogradError, match="leaf"):
        getattr(F, name)(gpucore.tensor(X, requires_grad=True), *args)
    with gpucore.no_grad():  # a leaf may be updated without recording
        leaf = gpucore.tensor(X, requires_grad=True)
        getattr(F, name)(leaf, *args)
    np.testing.assert_allclose(leaf.detach().numpy(), f(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,args,f,df", CASES, ids=[c[0] for c in CASES])
def test_inplace_activation_as_torch(name, args, f, df):
    torch = pytest.importorskip("torch")
    tf = getattr(torch.nn.functional, name)
    a, t = gpucore.tensor(X), torch.tensor(X)
    getattr(F, name)(a, *args)
    assert tf(t, *args) is t
    np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    x, tx = gpucore.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    y, ty = x * 1.0, tx * 1.0
    getattr(F, name)(y, *args)
    tf(ty, *args)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    # PyTorch's celu_ backward is accurate to about 1e-8 only (celu's own formula is exact)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-7, atol=1e-7)
    with pytest.raises(RuntimeError):
        tf(torch.tensor(X, requires_grad=True), *args)


def test_rrelu_inplace_training_draws_slopes_in_range():
    x = gpucore.tensor(-np.ones((200,)))
    F.rrelu_(x, 0.1, 0.3, training=True)
    v = -x.numpy()
    assert ((v >= 0.1) & (v <= 0.3)).all() and v.std() > 0.01


def test_inplace_activations_on_vulkan(vulkan):
    for name, args, f, _ in CASES:
        a = gpucore.tensor(X.astype(np.float32), device="vulkan")
        r = getattr(F, name)(a, *args)
        assert r is a and a.device.type == "vulkan"
        np.testing.assert_allclose(a.cpu().numpy(), f(X), rtol=1e-5, atol=1e-6, err_msg=name)


def test_hardtanh_and_threshold_inplace_on_integers_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([-3, 0, 1, 3, 7], dtype=np.int64)
    cases = (
        ("hardtanh_", ()), ("hardtanh_", (-2.5, 2.5)), ("threshold_", (0, 5)),
        ("threshold_", (0.5, 5.7)), ("hardtanh", ()), ("relu6", ()), ("threshold", (1, -4)),
    )  # fmt: skip
    for name, args in cases:
        a, t = gpucore.tensor(x), torch.tensor(x)
        out, tout = getattr(F, name)(a, *args), getattr(torch.nn.functional, name)(t, *args)
        assert (out is a) == name.endswith("_") and out.dtype is gpucore.int64
        np.testing.assert_array_equal(out.numpy(), tout.numpy())
