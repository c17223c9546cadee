"""Normalization, functional and modules: batch_norm (training, eval, running statistics,
cumulative averages), layer_norm, group_norm, instance_norm (running statistics), rms_norm and
normalize, against numpy float64 references, with gradcheck, parameters and buffers as PyTorch
names them, errors, and PyTorch where installed."""

import math

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np
from nn_cases import NORM_CASES
from nn_checks import (
    check_function_vs_torch,
    check_module_vs_torch,
    check_parameter_gradients,
    module_tests,
)
from nn_refs import IN_B, IN_W, np_group_norm, np_instance_norm, np_norm

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def np_batch_norm(x, w=None, b=None, mean=None, var=None, eps=1e-5):
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if mean is None:
        mean, var = x.mean(dims), x.var(dims)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    dims = tuple(range(x.ndim - k, x.ndim))
    y = (x - x.mean(dims, keepdims=True)) / np.sqrt(x.var(dims, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


# ============================================================================= batch_norm
@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 4), (2, 3, 3, 2)])
def test_batch_norm_train_functional(shape):
    c = shape[1]
    check_op(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda x, w, b: np_batch_norm(x, w, b),
        [shape, (c,), (c,)],
        rtol=1e-4,
        atol=1e-5,
        gradgrad=len(shape) == 2,
    )


def test_batch_norm_eval_functional():
    rm, rv = rand((3,), seed=5), rand((3,), 0.5, 2, seed=6)
    check_op(
        lambda x, w, b: F.batch_norm(x, f64(rm), f64(rv), w, b, training=False, eps=1e-3),
        lambda x, w, b: np_batch_norm(x, w, b, rm, rv, eps=1e-3),
        [(2, 3, 4), (3,), (3,)],
        rtol=1e-5,
    )


def test_batch_norm_running_stats():
    bn = nn.BatchNorm2d(3, momentum=0.3)
    assert repr(bn) == (
        "BatchNorm2d(3, eps=1e-05, momentum=0.3, affine=True, bias=True, track_running_stats=True)"
    )
    assert to_np(bn.weight).tolist() == [1, 1, 1] and to_np(bn.bias).tolist() == [0, 0, 0]
    rm, rv = np.zeros(3), np.ones(3)
    for seed in range(3):
        x = rand((4, 3, 2, 2), seed=seed)
        y = bn(f32(x))
        assert_close(y, np_batch_norm(x), rtol=1e-4, atol=1e-5)
        rm = 0.7 * rm + 0.3 * x.mean((0, 2, 3))
        rv = 0.7 * rv + 0.3 * x.var((0, 2, 3), ddof=1)  # unbiased, as PyTorch
    assert_close(bn.running_mean, rm, rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, rv, rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 3
    bn.eval()
    x = rand((2, 3, 2, 2), seed=9)
    assert_close(bn(f32(x)), np_batch_norm(x, mean=rm, var=rv), rtol=1e-4, atol=1e-5)
    assert int(bn.num_batches_tracked) == 3  # eval does not count


def test_batch_norm_cumulative_average_and_options():
    bn = nn.BatchNorm1d(2, momentum=None)
    xs = [rand((5, 2), seed=s) for s in range(3)]
    for x in xs:
        bn(f32(x))
    assert_close(bn.running_mean, np.mean([x.mean(0) for x in xs], 0), rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, np.mean([x.var(0, ddof=1) for x in xs], 0), rtol=1e-5)
    # no running stats: batch statistics in eval too; no affine: no parameters
    bn = nn.BatchNorm1d(2, affine=False, track_running_stats=False).eval()
    assert bn.running_mean is None and list(bn.parameters()) == [] and bn.state_dict() == {}
    nb = nn.BatchNorm1d(2, bias=False)
    assert nb.bias is None and nb.weight is not None and "bias=False" in repr(nb)
    x = rand((6, 2, 3))
    assert_close(bn(f32(x)), np_batch_norm(x), rtol=1e-4, atol=1e-5)
    # track_running_stats=True but training: the module updates stats in place under no_grad
    bn = nn.BatchNorm1d(2)
    xt = gpucore.tensor(rand((4, 2)), dtype=gpucore.float32, requires_grad=True)
    bn(xt).sum().backward()
    assert bn.running_mean.grad_fn is None and not bn.running_mean.requires_grad
    with pytest.raises(ValueError, match="more than 1 value"):
        bn(gpucore.zeros(1, 2))
    with pytest.raises(gpucore.ShapeError, match="2D or 3D"):
        bn(gpucore.zeros(2, 2, 2, 2))
    with pytest.raises(gpucore.ShapeError, match="4D"):
        nn.BatchNorm2d(2)(gpucore.zeros(2, 2, 2))
    with pytest.raises(gpucore.ShapeError, match="channels"):
        bn(gpucore.zeros(3, 4))


def test_batch_norm_module_gradcheck():
    bn = nn.BatchNorm2d(2).double()
    bn.weight.data = f64(rand((2,), 0.5, 1.5))
    bn.bias.data = f64(rand((2,), seed=3))
    check_grad(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
        rand((3, 2, 2, 2)),
        to_np(bn.weight),
        to_np(bn.bias),
    )
    check_grad(lambda x: bn.eval()(x), rand((2, 2, 2, 2)))


# ============================================================================= layer_norm
@pytest.mark.parametrize("ns", [(5,), (3, 5)])
def test_layer_norm(ns):
    shape = (2, 3, 5)
    k = len(ns)
    check_op(
        lambda x, w, b: F.layer_norm(x, ns, w, b, eps=1e-4),
        lambda x, w, b: np_layer_norm(x, k, w, b, eps=1e-4),
        [shape, ns, ns],
        rtol=1e-4,
        atol=1e-5,
        gradgrad=k == 1,
    )
    check_op(
        lambda x: F.layer_norm(x, ns), lambda x: np_layer_norm(x, k), [shape], rtol=1e-4, atol=1e-5
    )


def test_layer_norm_module():
    m = nn.LayerNorm(4)
    assert repr(m) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert m.weight.shape == (4,) and to_np(m.weight).tolist() == [1] * 4
    x = rand((3, 4))
    assert_close(m(f32(x)), np_layer_norm(x, 1), rtol=1e-4, atol=1e-5)
    m = nn.LayerNorm([2, 3], elementwise_affine=False)
    assert list(m.parameters()) == [] and m.normalized_shape == (2, 3)
    assert nn.LayerNorm(4, bias=False).bias is None
    with pytest.raises(gpucore.ShapeError, match="normalized_shape"):
        m(gpucore.zeros(2, 3, 2))


# ============================================================================= group_norm
@pytest.mark.parametrize(
    "shape,g", [((2, 6, 3, 4), 3), ((3, 4, 5), 1), ((2, 4, 3, 2), 4), ((2, 6), 2)]
)
def test_group_norm(shape, g):
    c = shape[1]
    check_op(lambda x: F.group_norm(x, g), lambda x: np_group_norm(x, g), [shape])
    check_op(
        lambda x, w, b: F.group_norm(x, g, w, b, eps=1e-3),
        lambda x, w, b: np_group_norm(x, g, w, b, 1e-3),
        [shape, (c,), (c,)],
    )


def test_group_norm_errors():
    with pytest.raises(gpucore.ShapeError, match="divisible by num_groups.*num_groups=4"):
        F.group_norm(gpucore.zeros(2, 6, 3), 4)
    with pytest.raises(gpucore.ShapeError, match="group_norm.*weight"):
        F.group_norm(gpucore.zeros(2, 6, 3), 3, gpucore.ones(3))
    with pytest.raises(gpucore.ShapeError, match="group_norm.*2 dims"):
        F.group_norm(gpucore.zeros(6), 3)


def test_group_norm_parameters():
    m = nn.GroupNorm(2, 6)
    assert (m.num_groups, m.num_channels, m.eps, m.affine) == (2, 6, 1e-5, True)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert list(m.state_dict()) == ["weight", "bias"] and list(m.buffers()) == []
    assert to_np(m.weight).tolist() == [1.0] * 6 and to_np(m.bias).tolist() == [0.0] * 6
    no_bias = nn.GroupNorm(2, 6, bias=False)
    assert no_bias.bias is None and list(no_bias.state_dict()) == ["weight"]
    plain = nn.GroupNorm(3, 6, affine=False)
    assert plain.weight is None and plain.bias is None and list(plain.state_dict()) == []


# ============================================================================= instance_norm
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 2, 6)])
def test_instance_norm(shape):
    c = shape[1]
    check_op(F.instance_norm, np_instance_norm, [shape])
    check_op(
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        lambda x, w, b: np_instance_norm(x, w, b),
        [shape, (c,), (c,)],
    )


def test_instance_norm_running_stats():
    x = rand((3, 2, 4, 4), seed=5)
    rm, rv = gpucore.zeros(2, dtype=gpucore.float64), gpucore.ones(2, dtype=gpucore.float64)
    out = F.instance_norm(f64(x), rm, rv, momentum=0.2)
    assert_close(out, np_instance_norm(x))
    means = x.mean((2, 3))
    vars_ = x.var((2, 3), ddof=1)
    assert_close(rm, 0.2 * means.mean(0), rtol=1e-9)
    assert_close(rv, 0.8 + 0.2 * vars_.mean(0), rtol=1e-9)
    out = F.instance_norm(f64(x), rm, rv, use_input_stats=False)
    ref = (x - to_np(rm).reshape(1, 2, 1, 1)) / np.sqrt(to_np(rv).reshape(1, 2, 1, 1) + 1e-5)
    assert_close(out, ref)
    check_grad(lambda t: F.instance_norm(t, rm, rv, use_input_stats=False), x)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(gpucore.zeros(2, 3, 1, 1))
    with pytest.raises(ValueError, match="running_mean and running_var"):
        F.instance_norm(gpucore.zeros(2, 3, 4), use_input_stats=False)
    with pytest.raises(gpucore.ShapeError, match="instance_norm.*3 dims"):
        F.instance_norm(gpucore.zeros(2, 3))
    with pytest.raises(gpucore.ShapeError, match="instance_norm.*weight"):
        F.instance_norm(gpucore.zeros(2, 3, 4), weight=gpucore.ones(2))


def test_instance_norm_parameters_and_buffers():
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in m.named_buffers()] == [
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]
    assert list(m.state_dict()) == [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]
    assert to_np(m.running_mean).tolist() == [0.0] * 3
    assert to_np(m.running_var).tolist() == [1.0] * 3
    assert m.num_batches_tracked.dtype is gpucore.int64 and m.num_batches_tracked.item() == 0
    plain = nn.InstanceNorm2d(3)  # PyTorch's defaults: no affine, no running stats
    assert plain.weight is None and plain.running_mean is None
    assert list(plain.state_dict()) == [] and list(plain.parameters()) == []


def test_instance_norm_module_running_stats():
    m = nn.InstanceNorm2d(3, momentum=0.3, affine=True, track_running_stats=True).double()
    m.load_state_dict({"weight": f64(IN_W), "bias": f64(IN_B)}, strict=False)
    mean, var = np.zeros(3), np.ones(3)
    for step in range(2):  # train: instance statistics out, running averages updated
        x = rand((2, 3, 3, 4), seed=30 + step)
        assert_close(m(f64(x)), np_instance_norm(x, IN_W, IN_B), rtol=1e-10, atol=1e-12)
        mean = 0.7 * mean + 0.3 * x.mean((2, 3)).mean(0)
        var = 0.7 * var + 0.3 * x.var((2, 3), ddof=1).mean(0)  # unbiased, averaged over N
        assert_close(m.running_mean, mean, rtol=1e-12, atol=1e-14)
        assert_close(m.running_var, var, rtol=1e-12)
    assert m.num_batches_tracked.item() == 0  # as PyTorch: instance norm never counts batches
    m.eval()  # eval: the running statistics normalize
    x = rand((2, 3, 3, 4), seed=32)
    shape = (1, 3, 1, 1)
    ref = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * IN_W.reshape(
        shape
    ) + IN_B.reshape(shape)
    assert_close(m(f64(x)), ref, rtol=1e-10, atol=1e-12)
    assert_close(m(f64(x[1])), ref[1], rtol=1e-10, atol=1e-12)  # unbatched [C, H, W]
    assert_close(m.running_mean, mean, rtol=1e-12, atol=1e-14)  # eval leaves them alone
    check_grad(m, f64(x, grad=True))


def test_instance_norm_without_running_stats_or_momentum():
    x = rand((2, 3, 3, 4), seed=33)
    plain = nn.InstanceNorm2d(3).double().eval()  # no running stats: instance stats in eval too
    assert_close(plain(f64(x)), np_instance_norm(x), rtol=1e-10, atol=1e-12)
    frozen = nn.InstanceNorm2d(3, momentum=None, track_running_stats=True).double()
    frozen(f64(x))  # momentum None: PyTorch passes 0.0, the averages do not move
    assert to_np(frozen.running_mean).tolist() == [0.0] * 3
    assert to_np(frozen.running_var).tolist() == [1.0] * 3


def test_running_stats_match_torch():
    torch = pytest.importorskip("torch")
    kw = {"momentum": 0.3, "affine": True, "track_running_stats": True}
    m, tm = nn.InstanceNorm2d(3, **kw).double(), torch.nn.InstanceNorm2d(3, **kw).double()
    m.load_state_dict({"weight": f64(IN_W), "bias": f64(IN_B)}, strict=False)
    tm.load_state_dict({"weight": torch.tensor(IN_W), "bias": torch.tensor(IN_B)}, strict=False)
    for step in range(3):
        if step == 2:
            m.eval()
            tm.eval()
        x = rand((2, 3, 3, 4), seed=50 + step)
        assert_close(m(f64(x)), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
        tsd = tm.state_dict()
        for k, v in m.state_dict().items():
            assert_close(v, tsd[k].numpy(), rtol=1e-5, atol=1e-6, what=k)


# ============================================================================= normalize
@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)])
def test_normalize(p, dim):
    check_op(
        lambda x: F.normalize(x, p=p, dim=dim),
        lambda x: x / np.maximum(np_norm(x, p, dim, True), 1e-12),
        [(4, 5)],
    )


def test_normalize_zero_rows_and_eps():
    x = f64([[0.0, 0.0], [3.0, 4.0]], grad=True)
    y = F.normalize(x, dim=1)
    assert_close(y, [[0.0, 0.0], [0.6, 0.8]])
    y.sum().backward()
    assert np.isfinite(to_np(x.grad)).all()
    assert_close(F.normalize(gpucore.tensor([[0.3, 0.4]]), eps=1.0), [[0.3, 0.4]])
    with pytest.raises(TypeError, match="normalize.*out"):
        F.normalize(gpucore.zeros(2, 2), out=gpucore.zeros(2, 2))


# ============================================================================= modules
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # GroupNorm: channels not divisible, input channels != num_channels, too few dims
        (lambda: nn.GroupNorm(4, 6), ValueError, "divisible"),
        (lambda: nn.GroupNorm(2, 6)(z(2, 4, 3)), gpucore.ShapeError, "weight"),
        (lambda: nn.GroupNorm(4, 8, affine=False)(z(2, 6, 3)), gpucore.ShapeError, "divisible"),
        (lambda: nn.GroupNorm(2, 6)(z(6)), gpucore.ShapeError, "dims"),
        # InstanceNorm2d
        (
            lambda: nn.InstanceNorm2d(3, affine=True)(z(2, 4, 3, 3)),
            gpucore.ShapeError,
            "num_features",
        ),
        (lambda: nn.InstanceNorm2d(3)(z(2, 3)), gpucore.ShapeError, "3D or 4D"),
        (lambda: nn.InstanceNorm2d(3)(z(2, 3, 1, 1)), ValueError, "spatial element"),
    ]


MODULE_ERRORS = _module_errors()


(
    test_module_forward,
    test_module_input_gradients,
    test_module_errors,
    test_module_match_torch,
) = module_tests(NORM_CASES, MODULE_ERRORS)


@pytest.mark.parametrize("case", [c for c in NORM_CASES if c.params], ids=repr)
def test_module_parameter_gradients(case):
    check_parameter_gradients(case)


# ============================================================================= rms_norm
def np_rms_norm(x, dims, w=None, eps=None):
    eps = np.finfo(x.dtype).eps if eps is None else eps
    out = x / np.sqrt((x * x).mean(axis=dims, keepdims=True) + eps)
    return out if w is None else out * w


def test_rms_norm_against_a_reference():
    x, w = rand((2, 3, 5)), rand((3, 5), seed=1)
    check_op(
        lambda x, w: F.rms_norm(x, (3, 5), w, 1e-4),
        lambda x, w: np_rms_norm(x, (1, 2), w, 1e-4),
        [(2, 3, 5), (3, 5)],
    )
    out = F.rms_norm(gpucore.tensor(x), 5)
    assert_close(out, np_rms_norm(x, (2,)), rtol=1e-12, atol=1e-12)
    f32_out = F.rms_norm(gpucore.tensor(x, dtype=gpucore.float32), [5])
    expected = np_rms_norm(x.astype(np.float32), (2,)).astype(np.float64)
    assert_close(f32_out, expected, rtol=1e-5, atol=1e-6)
    check_grad(lambda x, w: F.rms_norm(x, (5,), w[0]), x, w)
    with pytest.raises(gpucore.ShapeError, match=r"rms_norm\(\)"):
        F.rms_norm(gpucore.tensor(x), (4,))
    with pytest.raises(gpucore.ShapeError, match="weight"):
        F.rms_norm(gpucore.tensor(x), (5,), gpucore.ones(4))


@pytest.mark.parametrize(
    ("args", "kw"), [((5,), {}), ((5,), dict(eps=1e-3)), ((3, 5), dict(elementwise_affine=False))]
)
def test_rms_norm_module_matches_torch(args, kw):
    torch = pytest.importorskip("torch")
    shape = args[0] if len(args) == 1 else args
    check_module_vs_torch(nn.RMSNorm(shape, **kw), torch.nn.RMSNorm(shape, **kw), [rand((2, 3, 5))])
    tf = torch.nn.functional
    check_function_vs_torch(
        lambda x, w: F.rms_norm(x, (5,), w, kw.get("eps")),
        lambda x, w: tf.rms_norm(x, (5,), w, kw.get("eps")),
        [rand((4, 5)), rand((5,), seed=3)],
    )


def test_rms_norm_module_defaults():
    m = nn.RMSNorm([3, 4])
    assert repr(m) == "RMSNorm((3, 4), eps=None, elementwise_affine=True)"
    assert list(m.state_dict()) == ["weight"] and np.all(to_np(m.weight) == 1)
    assert nn.RMSNorm(4, elementwise_affine=False).weight is None
