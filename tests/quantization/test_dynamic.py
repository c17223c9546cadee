"""Dynamically quantized Linear (gpucore/quantization/dynamic.py): weights quantized per output
channel once, activations per call, the output against a numpy computation of the same integer
arithmetic and against the float layer, its state dict, copies, devices and bad inputs."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import gpucore as gc
from gpucore import nn
from gpucore.errors import ArgumentTypeError, DTypeError, ShapeError
from gpucore.quantization import dynamic, kernels


def _float_linear(i=24, o=10, bias=True, seed=0):
    gc.manual_seed(seed)
    return nn.Linear(i, o, bias=bias)


def test_from_float_quantizes_the_weight_per_output_channel_symmetrically():
    f = _float_linear()
    q = dynamic.Linear.from_float(f)
    w = q.weight()
    assert w.dtype is gc.qint8 and w.qscheme() is gc.per_channel_affine
    assert w.q_per_channel_axis() == 0 and w.q_per_channel_zero_points().tolist() == [0] * 10
    wf = f.weight.detach().numpy()
    scales = np.maximum(np.abs(wf).max(axis=1), 0) / np.float32(127.5)
    np.testing.assert_allclose(w.q_per_channel_scales().numpy(), scales, rtol=1e-6)
    err = np.abs(w.dequantize().numpy() - wf)
    assert (err <= scales[:, None] / 2 + 1e-7).all()
    np.testing.assert_array_equal(q.bias().numpy(), f.bias.detach().numpy())
    assert repr(q) == (
        "DynamicQuantizedLinear(in_features=24, out_features=10, dtype=gpucore.qint8, "
        "qscheme=gpucore.per_channel_affine)"
    )


@pytest.mark.parametrize("shape", [(5, 24), (2, 3, 24), (24,), (0, 24)])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_is_the_integer_computation(shape, bias):
    f = _float_linear(bias=bias)
    q = dynamic.Linear.from_float(f)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    y = q(gc.from_numpy(x))
    assert y.shape == (*shape[:-1], 10) and y.dtype is gc.float32 and not y.requires_grad
    a = x.reshape(-1, 24)
    if a.size:
        lo, hi = min(a.min(), 0), max(a.max(), 0)
        s = max(np.float32(hi - lo) / np.float32(255), np.finfo(np.float32).eps)
        zp = int(np.clip(-np.rint(np.float32(lo) / np.float32(s)), 0, 255))
        qa, s2, zp2 = kernels.quantize_activation(a)
        assert (np.float32(s2), zp2) == (np.float32(s), zp)
        wi = q.weight().int_repr().numpy().astype(np.int64)
        acc = (qa.astype(np.int64) - zp) @ wi.T
        mult = np.float32(s) * q.weight().q_per_channel_scales().numpy().astype(np.float32)
        want = acc.astype(np.float32) * mult
        if bias:
            want = want + f.bias.detach().numpy()
        np.testing.assert_array_equal(y.numpy().reshape(-1, 10), want)
    ref = f(gc.from_numpy(x)).detach().numpy()
    tol = 0.02 * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    np.testing.assert_allclose(y.numpy(), ref, atol=tol, rtol=0)


def test_state_dict_is_int8_and_loads_into_another_quantized_layer():
    q = dynamic.Linear.from_float(_float_linear(seed=0))
    sd = q.state_dict()
    assert list(sd) == ["weight", "weight_scale", "weight_zero_point", "bias"]
    assert [sd[k].dtype for k in sd] == [gc.int8, gc.float64, gc.int64, gc.float32]
    other = dynamic.Linear.from_float(_float_linear(seed=5))
    x = gc.randn(4, 24)
    before = other(x).numpy().copy()  # packs other's weight
    other.load_state_dict(sd)
    assert not np.array_equal(before, other(x).numpy())  # the packed weight was refreshed
    np.testing.assert_array_equal(other(x).numpy(), q(x).numpy())
    assert list(q.parameters()) == [] and list(q.buffers()) == []


def test_casts_and_moves_leave_the_quantized_state_alone_and_copies_are_independent():
    q = dynamic.Linear.from_float(_float_linear())
    x = gc.randn(3, 24)
    y = q(x).numpy()
    q.half()
    q.float()
    np.testing.assert_array_equal(q(x).numpy(), y)
    c = copy.deepcopy(q)
    np.testing.assert_array_equal(c(x).numpy(), y)
    with gc.no_grad():
        c.state_dict(keep_vars=True)["weight"].fill_(0)
    np.testing.assert_array_equal(q(x).numpy(), y)
    assert np.abs(c(x).numpy() - q.bias().numpy()).max() == 0


def test_float64_and_grad_requiring_inputs():
    q = dynamic.Linear.from_float(_float_linear())
    x = gc.randn(2, 24, requires_grad=True)
    y = q(x)
    assert y.dtype is gc.float32 and not y.requires_grad
    np.testing.assert_array_equal(q(x.detach().double()).numpy(), y.numpy())


def test_vulkan_inputs_give_vulkan_outputs(vulkan):
    q = dynamic.Linear.from_float(_float_linear())
    x = gc.randn(8, 24)
    y = q(x.to("vulkan"))
    assert y.is_vulkan
    np.testing.assert_array_equal(y.cpu().numpy(), q(x).numpy())


@pytest.mark.parametrize(
    "x,exc,match",
    [
        (np.ones((2, 24), np.float32), ArgumentTypeError, "Tensor"),
        (gc.ones(2, 24, dtype=gc.int64), DTypeError, "floating"),
        (gc.ones(2, 23), ShapeError, "in_features=24"),
        (gc.tensor(1.0), ShapeError, "in_features"),
    ],
)
def test_bad_inputs_name_the_layer(x, exc, match):
    q = dynamic.Linear.from_float(_float_linear())
    with pytest.raises(exc, match=match) as ei:
        q(x)
    assert "quantized Linear" in str(ei.value)


def test_bad_construction():
    with pytest.raises(ArgumentTypeError, match="from_float"):
        dynamic.Linear.from_float(nn.ReLU())
    with pytest.raises(DTypeError, match="qint8"):
        dynamic.Linear(3, 4, dtype=gc.quint8)
    with pytest.raises(ValueError, match="in_features"):
        dynamic.Linear(-1, 4)


def test_the_c_kernel_and_the_reference_give_the_same_model_outputs(monkeypatch):
    q = dynamic.Linear.from_float(_float_linear(i=300, o=70))
    x = gc.randn(33, 300)
    fast = q(x).numpy()
    monkeypatch.setattr(kernels, "has_qgemm", lambda: False)
    ref = dynamic.Linear.from_float(_float_linear(i=300, o=70))
    assert ref._packed_weight().native is None
    np.testing.assert_array_equal(ref(x).numpy(), fast)
