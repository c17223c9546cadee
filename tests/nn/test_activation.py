"""Activations, functional and modules: relu, gelu, sigmoid, tanh, softmax/log_softmax (registry
ops), leaky_relu, the smooth and hard activations, softmin, glu and prelu, and their modules.
Forward against numpy float64 references, first and second derivatives, in-place variants,
stability at extremes, bad input, PyTorch's reprs and, where installed, PyTorch itself."""

import math

import numpy as np
import pytest
from helpers import (
    assert_close,
    check_grad,
    check_op,
    np_gelu,
    np_log_softmax,
    np_softmax,
    rand,
    to_np,
)
from nn_cases import ACTIVATION_CASES, Case, ours
from nn_checks import (
    check_parameter_gradients,
    module_tests,
)
from nn_refs import PRELU_W, P, X, np_prelu

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F

SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.logaddexp(0, beta * x) / beta)


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ============================================================================= registry ops
# relu, gelu, sigmoid, tanh and the softmaxes are registry ops with kernels
KERNEL_ACT = {
    "relu": (F.relu, lambda x: np.maximum(x, 0)),
    "gelu": (F.gelu, np_gelu),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: np_gelu(x, "tanh")),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (F.tanh, np.tanh),
    "softmax": (lambda x: F.softmax(x, dim=-1), lambda x: np_softmax(x, -1)),
    "log_softmax": (lambda x: F.log_softmax(x, dim=0), lambda x: np_log_softmax(x, 0)),
}


@pytest.mark.parametrize("name", KERNEL_ACT)
def test_kernel_activation(name):
    fn, np_fn = KERNEL_ACT[name]
    check_op(fn, np_fn, [(7, 13, 5)], grad=False, low=-4, high=4)
    check_op(fn, np_fn, [(3, 4)], low=-4, high=4)


@pytest.mark.parametrize("name", KERNEL_ACT)
def test_kernel_activation_gradgrad(name):
    fn, _ = KERNEL_ACT[name]
    w = gpucore.tensor(rand((3, 4), seed=9), dtype=gpucore.float64)
    check_grad(lambda x: fn(x) * w, rand((3, 4), -3, 3), gradgrad=True)


def test_relu_inplace():
    x = gpucore.tensor([-1.0, 2.0])
    y = F.relu(x, inplace=True)
    assert y is x and x.tolist() == [0.0, 2.0]


def test_softmax_needs_dim():
    with pytest.raises(TypeError, match="dim"):
        F.softmax(gpucore.zeros(3))
    with pytest.raises(TypeError, match="dim"):
        F.log_softmax(gpucore.zeros(3))


def test_activations_match_torch():
    torch = pytest.importorskip("torch")
    x = rand((4, 6), -5, 5)
    pairs = [
        (F.relu, torch.relu),
        (F.sigmoid, torch.sigmoid),
        (F.tanh, torch.tanh),
        (lambda v: F.softmax(v, dim=1), lambda v: torch.softmax(v, 1)),
        (lambda v: F.log_softmax(v, dim=0), lambda v: torch.log_softmax(v, 0)),
    ]
    for mine, theirs in pairs:
        assert_close(
            mine(gpucore.tensor(x, dtype=gpucore.float64)),
            theirs(torch.tensor(x)).numpy(),
            rtol=1e-12,
            atol=1e-14,
        )


# ============================================================================= compositions
ACT = {
    "silu": (F.silu, lambda x: x * np_sigmoid(x)),
    "mish": (F.mish, lambda x: x * np.tanh(np.logaddexp(0, x))),
    "softplus": (F.softplus, np_softplus),
    "softplus_beta": (
        lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        lambda x: np_softplus(x, 2.0, 3.0),
    ),
    "elu": (F.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "elu_alpha": (lambda x: F.elu(x, alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "selu": (F.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    "celu": (
        lambda x: F.celu(x, alpha=1.5),
        lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5)),
    ),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: np.clip(x, -0.5, 1.5)),
    "relu6": (lambda x: F.relu6(x * 2), lambda x: np.clip(x * 2, 0, 6)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "logsigmoid": (F.logsigmoid, lambda x: -np.logaddexp(0, -x)),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "softmin": (lambda x: F.softmin(x, dim=1), lambda x: np_softmax(-x, 1)),
    "glu": (lambda x: F.glu(x, dim=0), lambda x: x[:3] * np_sigmoid(x[3:])),
    "glu_last": (F.glu, lambda x: x[..., :2] * np_sigmoid(x[..., 2:])),
}


@pytest.mark.parametrize("name", ACT)
def test_activation(name):
    fn, np_fn = ACT[name]
    check_op(fn, np_fn, [(6, 4)], low=-5, high=5)
    check_op(fn, np_fn, [(6, 4, 4)], grad=False, low=-30, high=30)


@pytest.mark.parametrize(
    "name",
    [
        "silu",
        "mish",
        "elu",
        "selu",
        "celu",
        "softplus",
        "logsigmoid",
        "softsign",
        "tanhshrink",
        "glu",
    ],
)
def test_activation_gradgrad(name):
    fn, _ = ACT[name]
    check_grad(fn, rand((6, 4), -3, 3, seed=3), gradgrad=True)


def test_activations_stable_at_extremes():
    x = gpucore.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    for fn in (F.silu, F.mish, F.softplus, F.elu, F.selu, F.celu, F.logsigmoid, F.softsign):
        out = to_np(fn(x))
        assert np.isfinite(out).all(), fn.__name__
    assert_close(F.logsigmoid(x), [-1000.0, -50.0, -math.log(2), 0.0, 0.0], atol=1e-6)
    xg = f64([-1000.0, -1.0, 1000.0], grad=True)
    for fn in (F.elu, F.selu, F.celu, F.mish, F.softplus):
        xg.grad = None
        fn(xg).sum().backward()
        assert np.isfinite(to_np(xg.grad)).all(), fn.__name__


@pytest.mark.parametrize(
    "name", ["silu", "mish", "elu", "selu", "celu", "hardtanh", "relu6", "hardsigmoid", "hardswish"]
)
def test_activation_inplace(name):
    fn = getattr(F, name)
    a = rand((3, 4), -4, 4, seed=1)
    x = gpucore.tensor(a)
    ref = to_np(fn(gpucore.tensor(a)))
    y = fn(x, inplace=True)
    assert y is x
    assert_close(x, ref)
    # in-place on a non-leaf keeps autograd right
    w = f64(a, grad=True)
    h = w * 1.0
    fn(h, inplace=True).sum().backward()
    w2 = f64(a, grad=True)
    fn(w2).sum().backward()
    assert_close(w.grad, to_np(w2.grad))


def test_hardtanh_family_gradients_at_bounds():
    # PyTorch: hardtanh/relu6/hardsigmoid pass no gradient at their bounds; hardswish's is
    # -0.5 at -3 and 1.5 at 3.
    x = f64([-1.0, 1.0, 0.0, 0.5], grad=True)
    F.hardtanh(x).sum().backward()
    assert to_np(x.grad).tolist() == [0.0, 0.0, 1.0, 1.0]
    x = f64([0.0, 6.0, 3.0], grad=True)
    F.relu6(x).sum().backward()
    assert to_np(x.grad).tolist() == [0.0, 0.0, 1.0]
    x = f64([-3.0, 3.0, 0.0], grad=True)
    F.hardsigmoid(x).sum().backward()
    assert_close(x.grad, [0.0, 0.0, 1 / 6])
    x = f64([-3.0, 3.0, -4.0, 4.0], grad=True)
    F.hardswish(x).sum().backward()
    assert_close(x.grad, [-0.5, 1.5, 0.0, 1.0])


def test_activation_errors():
    with pytest.raises(TypeError, match="softmin"):
        F.softmin(gpucore.zeros(3))
    with pytest.raises(gpucore.ShapeError, match="glu.*even.*size 5"):
        F.glu(gpucore.zeros(3, 5))
    with pytest.raises(gpucore.ShapeError, match="glu"):
        F.glu(gpucore.tensor(1.0))
    with pytest.raises(IndexError, match="glu"):
        F.glu(gpucore.zeros(2, 2), dim=2)
    with pytest.raises(ValueError, match="hardtanh.*min_val"):
        F.hardtanh(gpucore.zeros(2), 1.0, -1.0)
    with pytest.raises(ValueError, match="celu.*alpha"):
        F.celu(gpucore.zeros(2), alpha=0.0)
    with pytest.raises(ValueError, match="softplus.*beta"):
        F.softplus(gpucore.zeros(2), beta=0)
    with pytest.raises(gpucore.DTypeError, match="silu"):
        F.silu(gpucore.tensor([1, 2]))
    with pytest.raises(TypeError, match="elu"):
        F.elu([1.0, 2.0])


def test_leaky_relu():
    check_op(
        lambda x: F.leaky_relu(x, 0.1),
        lambda x: np.where(x > 0, x, 0.1 * x),
        [(3, 5)],
        gradgrad=True,
    )
    x = gpucore.tensor([-2.0, 0.0, 3.0])
    assert F.leaky_relu(x, 0.5, inplace=True) is x and x.tolist() == [-1.0, 0.0, 3.0]
    m = nn.LeakyReLU(inplace=True)
    y = gpucore.tensor([-1.0, 1.0])
    assert m(y) is y
    assert_close(y, [-0.01, 1.0])


def test_prelu():
    w = np.array([0.1, -0.3, 0.7])

    def np_prelu(x, w):
        return np.where(x > 0, x, x * w.reshape(1, 3, *([1] * (x.ndim - 2))))

    check_op(F.prelu, np_prelu, [(2, 3, 4), (3,)])
    check_op(F.prelu, lambda x, a: np.where(x > 0, x, x * a), [(5, 2), (1,)])
    check_op(F.prelu, np_prelu, [(4, 3), (3,)])
    with pytest.raises(gpucore.ShapeError, match="prelu.*parameter numbers = 4.*channel size = 3"):
        F.prelu(gpucore.zeros(2, 3), gpucore.zeros(4))
    with pytest.raises(gpucore.ShapeError, match="prelu"):
        F.prelu(gpucore.tensor(1.0), gpucore.zeros(2))
    check_op(F.prelu, np_prelu, [(2, 3)], vals=[rand((2, 3)), w], noncontig=False)


# ============================================================================= modules
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # activations
        (lambda: nn.PReLU(3)(z(2, 4, 5)), gpucore.ShapeError, "channel size = 4"),
        (lambda: nn.GLU(dim=1)(z(2, 3, 4)), gpucore.ShapeError, "even"),
        (lambda: nn.Hardtanh(3, -2), ValueError, "min_val"),  # PyTorch: an AssertionError
        (lambda: nn.CELU(alpha=0.0)(z(2)), ValueError, "alpha"),
        (lambda: nn.SiLU()(gpucore.tensor([1, 2])), gpucore.DTypeError, "silu"),
    ]


MODULE_ERRORS = _module_errors()


(
    test_module_forward,
    test_module_input_gradients,
    test_module_errors,
    test_module_match_torch,
) = module_tests(ACTIVATION_CASES, MODULE_ERRORS)


@pytest.mark.parametrize("case", [c for c in ACTIVATION_CASES if c.params], ids=repr)
def test_module_parameter_gradients(case):
    check_parameter_gradients(case)


def test_activation_modules():
    x = rand((3, 4), -3, 3)
    t = f32(x)
    cases = [
        (nn.ReLU(), np.maximum(x, 0), "ReLU()"),
        (nn.LeakyReLU(0.2), np.where(x > 0, x, 0.2 * x), "LeakyReLU(negative_slope=0.2)"),
        (nn.Sigmoid(), 1 / (1 + np.exp(-x)), "Sigmoid()"),
        (nn.Tanh(), np.tanh(x), "Tanh()"),
        (nn.Softmax(dim=1), np.exp(x) / np.exp(x).sum(1, keepdims=True), "Softmax(dim=1)"),
        (nn.LogSoftmax(dim=0), x - np.log(np.exp(x).sum(0, keepdims=True)), "LogSoftmax(dim=0)"),
        (nn.GELU(approximate="tanh"), None, "GELU(approximate='tanh')"),
        (nn.Flatten(0), x.reshape(-1), "Flatten(start_dim=0, end_dim=-1)"),
    ]
    for m, ref, r in cases:
        assert repr(m) == r
        if ref is not None:
            assert_close(m(t), ref, rtol=1e-5, atol=1e-6)
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    with pytest.warns(UserWarning, match="dim"):
        assert_close(nn.Softmax()(t), np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-5)
    assert nn.Unflatten(1, (2, 2))(t).shape == (3, 2, 2)


def test_softmin_implicit_dim_warns_as_pytorch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        out = nn.Softmin()(f64(X))
    assert_close(out, np_softmax(-X, 0))  # a 3-D input: dim 0, PyTorch's legacy choice


INPLACE = ["SiLU", "Mish", "ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish"]


@pytest.mark.parametrize("case", [c for c in ACTIVATION_CASES if c.name in INPLACE], ids=repr)
def test_module_inplace(case):
    x = f32(X)
    out = ours(case, gpucore.float32)(x)
    assert out is not x and to_np(x).tolist() == X.tolist()  # the default leaves x alone
    inplace = Case(
        case.name, *case.args, inputs=case.inputs, ref=case.ref, inplace=True, **case.kwargs
    )
    m = ours(inplace, gpucore.float32)
    assert m.inplace is True
    assert m(x) is x
    assert_close(x, case.ref(X), rtol=1e-5, atol=1e-6)
    # on a non-leaf, autograd sees through the in-place op
    w = f64(X, grad=True)
    ours(inplace)(w * 1.0).sum().backward()
    w2 = f64(X, grad=True)
    ours(case)(w2).sum().backward()
    assert_close(w.grad, to_np(w2.grad), rtol=1e-12, atol=1e-12)
    with pytest.raises(gpucore.AutogradError, match="leaf"):
        ours(inplace)(f64(X, grad=True))


def test_prelu_parameters():
    m = nn.PReLU()
    assert m.num_parameters == 1 and m.init == 0.25
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    assert to_np(m.weight).tolist() == [0.25]
    m = nn.PReLU(num_parameters=3, init=0.1)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert list(m.state_dict()) == ["weight"] and list(m.buffers()) == []
    assert tuple(m.weight.shape) == (3,) and m.weight.dtype is gpucore.float32
    assert_close(m.weight, [0.1, 0.1, 0.1])
    m.load_state_dict({"weight": gpucore.tensor(PRELU_W)})
    assert_close(m(f32(P)), np_prelu(P, PRELU_W))
    m.reset_parameters()
    assert_close(m.weight, [0.1, 0.1, 0.1])


def test_prelu_weight_gradient_by_hand():
    m = nn.PReLU(3).double()
    m.load_state_dict({"weight": f64(PRELU_W)})
    g = rand(P.shape, seed=21)
    x = f64(P, grad=True)
    (m(x) * f64(g)).sum().backward()
    assert_close(m.weight.grad, np.where(P > 0, 0.0, P * g).sum((0, 2)), rtol=1e-12)
    assert_close(x.grad, np.where(P > 0, g, g * PRELU_W.reshape(1, 3, 1)), rtol=1e-12)
