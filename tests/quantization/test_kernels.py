"""The INT8 linear kernel interface (gpucore/quantization/kernels.py): the numpy reference
against a direct integer computation, the C kernel (``_cpu.qgemm``, when built) bit for bit
equal to the reference on odd shapes, zero points, ReLU and bias, and the dynamic activation
quantization."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import dtypes as D
from gpucore.quantization import kernels

SHAPES = [(1, 1, 1), (3, 17, 5), (64, 300, 129), (17, 1023, 33), (0, 8, 4), (5, 0, 3), (2, 4, 0)]


def _operands(n, k, m, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (n, k)).astype(np.uint8)
    w = rng.integers(-128, 128, (m, k)).astype(np.int8)
    ws = (rng.random(m) * 0.01 + 1e-4).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    return a, w, ws, bias


@pytest.mark.parametrize("n,k,m", SHAPES)
@pytest.mark.parametrize("zp", [0, 7, 255])
def test_reference_equals_the_integer_formula(n, k, m, zp):
    a, w, ws, bias = _operands(n, k, m)
    ref = kernels.pack_weight(w, native=False)
    assert ref.native is None
    out = kernels.linear_int8(a, 0.0123, zp, ref, ws, bias)
    acc = (a.astype(np.int64) - zp) @ w.astype(np.int64).T
    mult = np.float32(0.0123) * ws
    want = (acc.astype(np.float32) * mult + bias).astype(np.float32)
    assert out.dtype == np.float32 and out.shape == (n, m)
    np.testing.assert_array_equal(out, want)
    relu = kernels.linear_int8(a, 0.0123, zp, ref, ws, None, relu=True)
    np.testing.assert_array_equal(relu, np.maximum(acc.astype(np.float32) * mult, 0))


@pytest.mark.skipif(not kernels.has_qgemm(), reason="this build has no _cpu.qgemm")
@pytest.mark.parametrize("n,k,m", SHAPES + [(128, 768, 768), (1, 4099, 7)])
@pytest.mark.parametrize("zp", [0, 131, 255])
@pytest.mark.parametrize("relu", [False, True])
def test_c_kernel_equals_the_reference_bit_for_bit(n, k, m, zp, relu):
    a, w, ws, bias = _operands(n, k, m, seed=n + k)
    packed, ref = kernels.pack_weight(w), kernels.pack_weight(w, native=False)
    assert packed.native is not None
    for b in (None, bias):
        fast = kernels.linear_int8(a, 0.0071, zp, packed, ws, b, relu)
        slow = kernels.linear_int8(a, 0.0071, zp, ref, ws, b, relu)
        np.testing.assert_array_equal(fast, slow)


def test_the_reference_runs_without_the_c_kernel(monkeypatch):
    a, w, ws, bias = _operands(4, 9, 3)
    want = kernels.linear_int8(a, 0.02, 3, kernels.pack_weight(w), ws, bias)
    monkeypatch.setattr(kernels, "has_qgemm", lambda: False)
    packed = kernels.pack_weight(w)
    assert packed.native is None and np.array_equal(packed.w, w)
    np.testing.assert_array_equal(kernels.linear_int8(a, 0.02, 3, packed, ws, bias), want)


def test_quantize_activation_uses_the_inputs_range_and_includes_zero():
    x = np.array([[0.5, 2.0], [1.0, 1.5]], np.float32)  # all positive: the range is [0, 2]
    q, scale, zp = kernels.quantize_activation(x)
    assert zp == 0 and scale == np.float32(2.0) / np.float32(255)
    assert q.dtype == np.uint8 and q.max() == 255
    x = np.array([-1.0, 3.0], np.float32)
    q, scale, zp = kernels.quantize_activation(x)
    assert zp == 64 and q.tolist() == [0, 255]  # round(1 / (4 / 255)) = round(63.75)
    q, scale, zp = kernels.quantize_activation(np.zeros((2, 0), np.float32))
    assert q.shape == (2, 0) and scale > 0


def test_quantize_activation_is_quantize_array_bit_for_bit():
    """The C pass (quantize_u8) gives quantize_array's bits: halves, both ends, large inputs."""
    from gpucore.quantization.qtensor import quantize_array  # noqa: PLC0415

    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((33, 70)).astype(np.float32) * 4,
          np.arange(-255, 256, dtype=np.float32) / 2,  # ties at scale 2 / 255 * ...
          np.abs(rng.standard_normal(1000)).astype(np.float32)]  # fmt: skip
    for x in xs:
        q, scale, zp = kernels.quantize_activation(x)
        np.testing.assert_array_equal(q, quantize_array(x, scale, zp, D.quint8))


def test_non_finite_activations_are_refused():
    with pytest.raises(ValueError, match="inf or NaN"):
        kernels.quantize_activation(np.array([1.0, np.nan], np.float32))


def test_reductions_longer_than_the_c_kernels_limit_use_the_reference():
    w = np.ones((2, kernels.MAX_K + 1), np.int8)
    packed = kernels.pack_weight(w)
    assert packed.native is None
    a = np.full((1, kernels.MAX_K + 1), 3, np.uint8)
    out = kernels.linear_int8(a, 0.5, 1, packed, np.ones(2, np.float32))
    assert out.tolist() == [[0.5 * 2 * (kernels.MAX_K + 1)] * 2]
