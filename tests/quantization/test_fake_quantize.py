"""Fake quantization (gpucore/quantization/fake_quantize.py): values equal to quantize then
dequantize, the straight-through gradient (zero where clipped), PyTorch's results and gradients
bit for bit, the FakeQuantize module (observer, switches, per channel) and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore import quantization as q
from gpucore.errors import ArgumentTypeError, DTypeError, ShapeError
from gpucore.quantization import (
    FakeQuantize,
    MinMaxObserver,
    default_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
)

pytestmark = [  # torch's deprecation notices for its quantized tensors and torch.ao
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def _data(shape=(5, 7, 9), seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)


def test_values_equal_quantize_then_dequantize():
    x = gc.from_numpy(_data())
    y = gc.fake_quantize_per_tensor_affine(x, 0.1, 3, -128, 127)
    q = gc.quantize_per_tensor(x, 0.1, 3, gc.qint8)
    np.testing.assert_allclose(y.numpy(), q.dequantize().numpy(), rtol=0, atol=1e-6)
    assert y.dtype is gc.float32 and y.shape == x.shape


def test_gradient_passes_inside_the_range_and_is_zero_where_clipped():
    x = gc.tensor([-20.0, -12.8, -1.0, 0.0, 0.26, 12.7, 12.75, 30.0], requires_grad=True)
    y = gc.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
    assert y.requires_grad and y.grad_fn is not None
    (y * gc.arange(1, 9).float()).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0]
    assert y.detach().tolist()[:2] == pytest.approx([-12.8, -12.8])


def test_gradient_through_a_graph_and_under_no_grad():
    w = gc.randn(4, 3, requires_grad=True)
    x = gc.randn(2, 4)
    loss = (x @ gc.fake_quantize_per_tensor_affine(w, 0.05, 0, -128, 127)).pow(2).sum()
    loss.backward()
    assert w.grad.shape == (4, 3) and float(w.grad.abs().sum()) > 0
    with gc.no_grad():
        assert not gc.fake_quantize_per_tensor_affine(w, 0.05, 0, -128, 127).requires_grad


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_per_channel_uses_each_channels_parameters(axis):
    a = _data()
    c = a.shape[axis]
    rng = np.random.default_rng(1)
    s = rng.uniform(0.01, 0.3, c).astype(np.float32)
    z = rng.integers(-10, 10, c)
    x = gc.from_numpy(a).requires_grad_()
    y = gc.fake_quantize_per_channel_affine(x, gc.from_numpy(s), gc.from_numpy(z), axis, -128, 127)
    shape = [1, 1, 1]
    shape[axis] = c
    s3, z3 = s.reshape(shape), z.reshape(shape)
    q = np.rint(a * (np.float32(1) / s3)) + z3
    want = ((np.clip(q, -128, 127) - z3).astype(np.float32) * s3).astype(np.float32)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), ((q >= -128) & (q <= 127)).astype(np.float32))


def test_float64_inputs_keep_their_dtype():
    x = gc.randn(3, dtype=gc.float64, requires_grad=True)
    y = gc.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255)
    assert y.dtype is gc.float64
    y.sum().backward()
    assert x.grad.dtype is gc.float64


def test_fake_quantize_module_observes_then_quantizes():
    fq = FakeQuantize(observer=MinMaxObserver, quant_min=0, quant_max=255)
    x = gc.from_numpy(_data())
    y = fq(x)
    s, z = fq.calculate_qparams()
    assert fq.scale.tolist() == s.tolist() and fq.zero_point.tolist() == z.tolist()
    assert fq.zero_point.dtype is gc.int32
    np.testing.assert_array_equal(
        y.numpy(), gc.fake_quantize_per_tensor_affine(x, s, z, 0, 255).numpy()
    )
    fq.disable_observer()
    fq(x * 10)
    assert fq.scale.tolist() == s.tolist()
    fq.disable_fake_quant()
    assert fq(x) is x
    fq.enable_fake_quant()
    fq.enable_observer()
    assert set(fq.state_dict()) >= {"scale", "zero_point", "fake_quant_enabled"}


def test_per_channel_fake_quantize_module_and_training_step():
    fq = default_per_channel_weight_fake_quant()
    w = gc.randn(4, 6, requires_grad=True)
    y = fq(w)
    assert fq.scale.shape == (4,) and fq.is_per_channel and fq.ch_axis == 0
    y.sum().backward()
    assert w.grad.shape == (4, 6)
    assert default_fake_quant().quant_max == 127  # reduce_range halves [0, 255], as PyTorch
    assert default_weight_fake_quant().qscheme is gc.per_tensor_symmetric


def test_torch_compatible_repr():
    text = repr(default_fake_quant())
    assert "fake_quant_enabled=" in text and "(activation_post_process): " in text


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (
            lambda x: gc.fake_quantize_per_tensor_affine(x.numpy(), 0.1, 0, 0, 255),
            ArgumentTypeError,
            "input",
        ),
        (
            lambda x: gc.fake_quantize_per_tensor_affine(x.int(), 0.1, 0, 0, 255),
            DTypeError,
            "floating",
        ),
        (lambda x: gc.fake_quantize_per_tensor_affine(x, 0.0, 0, 0, 255), ValueError, "positive"),
        (lambda x: gc.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255), ValueError, "between"),
        (lambda x: gc.fake_quantize_per_tensor_affine(x, 0.1, 0, 10, 5), ValueError, "quant_min"),
        (
            lambda x: gc.fake_quantize_per_tensor_affine(x, 0.1, 0, 0.0, 255),
            ArgumentTypeError,
            "ints",
        ),
        (
            lambda x: gc.fake_quantize_per_tensor_affine(x, "a", 0, 0, 255),
            ArgumentTypeError,
            "scale",
        ),
        (
            lambda x: gc.fake_quantize_per_tensor_affine(x, 0.1, 0.5, 0, 255),
            ArgumentTypeError,
            "zero_point",
        ),
        (
            lambda x: gc.fake_quantize_per_channel_affine(
                x, gc.ones(3), gc.zeros(2, dtype=gc.int32), 0, 0, 255
            ),
            ShapeError,
            "one entry per channel",
        ),
        (
            lambda x: gc.fake_quantize_per_channel_affine(x, gc.ones(2), gc.zeros(2), 0, 0, 255),
            DTypeError,
            "integer",
        ),
        (
            lambda x: gc.fake_quantize_per_channel_affine(
                x, gc.ones(2), gc.zeros(2, dtype=gc.int32), 5, 0, 255
            ),
            ShapeError,
            "axis 5",
        ),
    ],
)
def test_bad_arguments_name_the_function(call, exc, match):
    with pytest.raises(exc, match=match) as ei:
        call(gc.randn(2, 3))
    assert "fake_quantize_per_" in str(ei.value)


# ----------------------------------------------------------------------------- vs PyTorch
@pytest.mark.parametrize(
    "scale,zp,lo,hi", [(0.1, 3, -128, 127), (0.037, 200, 0, 255), (0.5, 0, -8, 7)]
)
def test_per_tensor_values_and_gradients_equal_pytorch(scale, zp, lo, hi):
    torch = pytest.importorskip("torch")
    a = _data()
    a[0, 0, :4] = [np.nan, np.inf, -np.inf, 0.5]
    g = _data(seed=1)
    x, t = gc.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    y = gc.fake_quantize_per_tensor_affine(x, scale, zp, lo, hi)
    yt = torch.fake_quantize_per_tensor_affine(t, scale, zp, lo, hi)
    y.backward(gc.from_numpy(g))
    yt.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_per_channel_values_and_gradients_equal_pytorch(axis):
    torch = pytest.importorskip("torch")
    a = _data()
    a[0, 0, 0] = np.nan  # (PyTorch's per-channel kernel sends +inf to quant_min: not compared)
    c = a.shape[axis]
    rng = np.random.default_rng(2)
    s = rng.uniform(0.01, 0.2, c).astype(np.float32)
    z = rng.integers(-10, 10, c).astype(np.int32)
    g = _data(seed=3)
    x, t = gc.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    y = gc.fake_quantize_per_channel_affine(x, gc.from_numpy(s), gc.from_numpy(z), axis, -128, 127)
    yt = torch.fake_quantize_per_channel_affine(
        t, torch.from_numpy(s), torch.from_numpy(z), axis, -128, 127
    )
    y.backward(gc.from_numpy(g))
    yt.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize(
    "name",
    ["default_fake_quant", "default_weight_fake_quant", "default_per_channel_weight_fake_quant"],
)
def test_fake_quantize_modules_equal_pytorch(name):
    torch = pytest.importorskip("torch")
    from torch.ao import quantization as tq

    ours, theirs = getattr(q, name)(), getattr(tq, name)()
    a = _data()[1:]
    for i in range(3):
        y = ours(gc.from_numpy(a * (i + 1)))
        yt = theirs(torch.from_numpy(a * (i + 1)))
        np.testing.assert_array_equal(y.numpy(), yt.numpy())
        np.testing.assert_array_equal(ours.scale.numpy(), theirs.scale.numpy())
        np.testing.assert_array_equal(ours.zero_point.numpy(), theirs.zero_point.numpy())


def test_vulkan_inputs_stay_on_the_device_with_gradients(vulkan):
    a = _data()
    x = gc.from_numpy(a).to("vulkan").requires_grad_()
    y = gc.fake_quantize_per_tensor_affine(x, 0.1, 3, -128, 127)
    assert y.is_vulkan
    (y * 2).sum().backward()
    cpu = gc.from_numpy(a).requires_grad_()
    yc = gc.fake_quantize_per_tensor_affine(cpu, 0.1, 3, -128, 127)
    (yc * 2).sum().backward()
    np.testing.assert_array_equal(y.detach().cpu().numpy(), yc.detach().numpy())
    np.testing.assert_array_equal(x.grad.cpu().numpy(), cpu.grad.numpy())
