"""Quantized tensors (gpucore/quantization/qtensor.py): quantize/dequantize against numpy's
float64 formulas (half to even, saturation, per-channel axes), PyTorch's accessors and printing,
bit-for-bit agreement with torch.quantize_per_tensor / quantize_per_channel, bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore.errors import ArgumentTypeError, DTypeError, GpucoreIndexError, ShapeError
from gpucore.quantization import qtensor

pytestmark = [  # torch's deprecation notices for its quantized tensors and torch.ao
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

QDTYPES = [(gc.qint8, -128, 127, np.int8), (gc.quint8, 0, 255, np.uint8)]
QDTYPES_ALL = QDTYPES + [(gc.qint32, -(2**31), 2**31 - 1, np.int32)]


def _away_from_ties(shape, scale, seed=0):
    """Random values whose x / scale sit at least 0.01 from a rounding tie (so float32 and
    float64 formulas agree)."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-200, 200, size=shape)
    frac = rng.uniform(-0.49, 0.49, size=shape)
    return ((k + frac) * scale).astype(np.float32)


@pytest.mark.parametrize("dtype,lo,hi,npd", QDTYPES_ALL)
@pytest.mark.parametrize("scale,zp", [(0.1, 0), (0.037, 5), (1.3, -3)])
def test_quantize_per_tensor_matches_the_float64_formula(dtype, lo, hi, npd, scale, zp):
    if dtype is gc.quint8:
        zp = abs(zp) + 100
    x = _away_from_ties((7, 9), scale)
    q = gc.quantize_per_tensor(gc.from_numpy(x), scale, zp, dtype)
    want = np.clip(np.round(x.astype(np.float64) / scale) + zp, lo, hi).astype(npd)
    assert q.int_repr().dtype is qtensor.STORAGE[dtype]
    np.testing.assert_array_equal(q.int_repr().numpy(), want)
    deq = ((want.astype(np.float64) - zp) * np.float32(scale)).astype(np.float32)
    np.testing.assert_array_equal(q.dequantize().numpy(), deq)
    assert q.dequantize().dtype is gc.float32


@pytest.mark.parametrize("dtype,lo,hi,npd", QDTYPES)
def test_ties_round_half_to_even_and_out_of_range_values_saturate(dtype, lo, hi, npd):
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 1e9, -1e9, np.inf, -np.inf], np.float32)
    zp = 0 if dtype is gc.qint8 else 10
    q = gc.quantize_per_tensor(gc.from_numpy(x), 1.0, zp, dtype).int_repr().numpy()
    even = np.array([0, 2, 2, 4, 0, -2, -2], np.int64) + zp
    np.testing.assert_array_equal(q[:7], np.clip(even, lo, hi).astype(npd))
    np.testing.assert_array_equal(q[7:], np.array([hi, lo, hi, lo], npd))
    # a power-of-two scale keeps the ties exact: x = 2.5 * 0.25
    q = gc.quantize_per_tensor(gc.tensor([0.625, 0.875]), 0.25, zp, dtype).int_repr().numpy()
    np.testing.assert_array_equal(q, np.array([2 + zp, 4 + zp], npd))


def test_nan_goes_to_qmax_as_pytorch_int8_kernels():
    x = gc.tensor([float("nan"), 1.0])
    assert gc.quantize_per_tensor(x, 0.5, 0, gc.qint8).int_repr().tolist() == [127, 2]
    assert gc.quantize_per_tensor(x, 0.5, 3, gc.quint8).int_repr().tolist() == [255, 5]


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype,lo,hi,npd", QDTYPES)
def test_quantize_per_channel_uses_each_channels_parameters(axis, dtype, lo, hi, npd):
    shape = (3, 4, 5)
    c = shape[axis]
    rng = np.random.default_rng(abs(axis))
    scales = rng.uniform(0.01, 0.2, c)
    zps = rng.integers(-5, 6, c) + (0 if dtype is gc.qint8 else 120)
    x = _away_from_ties(shape, 0.01, seed=3)  # ties checked below with a scale of 0.01 * k
    bshape = [1, 1, 1]
    bshape[axis] = c
    s, z = scales.reshape(bshape), zps.reshape(bshape)
    q = gc.quantize_per_channel(
        gc.from_numpy(x), gc.from_numpy(scales), gc.from_numpy(zps), axis, dtype
    )
    ir = q.int_repr().numpy()
    want = np.clip(np.round(x.astype(np.float64) / s) + z, lo, hi)
    near_tie = np.abs(np.abs(x / s - np.trunc(x / s)) - 0.5) < 1e-3
    np.testing.assert_array_equal(ir[~near_tie], want[~near_tie].astype(npd))
    deq = ((ir.astype(np.float64) - z) * s).astype(np.float32)
    np.testing.assert_array_equal(q.dequantize().numpy(), deq)
    assert q.q_per_channel_axis() == axis % 3
    assert q.qscheme() is gc.per_channel_affine
    assert q.q_per_channel_scales().dtype is gc.float64
    assert q.q_per_channel_zero_points().dtype is gc.int64
    np.testing.assert_array_equal(q.q_per_channel_scales().numpy(), scales)
    np.testing.assert_array_equal(q.q_per_channel_zero_points().numpy(), zps)


def test_accessors_metadata_and_copies():
    x = gc.randn(2, 3)
    q = gc.quantize_per_tensor(x, 0.05, 4, gc.quint8)
    assert q.is_quantized and not x.is_quantized
    assert (q.q_scale(), q.q_zero_point(), q.qscheme()) == (0.05, 4, gc.per_tensor_affine)
    assert q.shape == x.shape and q.size() == x.size() and q.size(1) == 3
    assert (q.dim(), q.ndim, q.numel(), len(q), q.element_size()) == (2, 2, 6, 2, 1)
    assert q.dtype is gc.quint8 and q.device == gc.device("cpu") and q.stride() == (3, 1)
    ir = q.int_repr()
    ir[0, 0] = 0  # a copy: the quantized tensor keeps its values
    assert (
        q.int_repr()[0, 0].item()
        == gc.quantize_per_tensor(x, 0.05, 4, gc.quint8).int_repr()[0, 0].item()
    )
    c = q.clone()
    assert c is not q and np.array_equal(c.int_repr().numpy(), q.int_repr().numpy())
    assert gc.dequantize(q).shape == (2, 3) and gc.dequantize(x) is x
    assert q.to("cpu") is q and q.cpu() is q and q.detach() is q
    with pytest.raises(ValueError, match="CPU only"):
        q.to("vulkan")
    assert str(gc.qint8) == "gpucore.qint8" and repr(gc.per_channel_affine) == (
        "gpucore.per_channel_affine"
    )


def test_per_tensor_and_per_channel_accessors_refuse_the_other_scheme():
    q = gc.quantize_per_tensor(gc.randn(3), 0.1, 0, gc.qint8)
    with pytest.raises(ValueError, match="q_per_channel_scales.*q_scale"):
        q.q_per_channel_scales()
    p = gc.quantize_per_channel(
        gc.randn(2, 3), gc.ones(2), gc.zeros(2, dtype=gc.int64), 0, gc.qint8
    )
    with pytest.raises(ValueError, match="q_scale.*per_channel"):
        p.q_scale()
    with pytest.raises(ValueError, match="q_zero_point"):
        p.q_zero_point()


def test_float64_and_half_inputs_are_converted_to_float32():
    x = gc.tensor([0.26, -1.1, 3.0], dtype=gc.float64)
    a = gc.quantize_per_tensor(x, 0.1, 0, gc.qint8).int_repr().tolist()
    assert a == [3, -11, 30]
    assert gc.quantize_per_tensor(x.half(), 0.1, 0, gc.qint8).int_repr().tolist() == a


def test_quantized_tensor_is_not_a_tensor_for_the_ops():
    q = gc.quantize_per_tensor(gc.randn(3), 0.1, 0, gc.qint8)
    assert not gc.is_tensor(q)
    with pytest.raises(TypeError):
        gc.exp(q)
    with pytest.raises(TypeError):
        q + 1  # noqa: B018


# ----------------------------------------------------------------------------- vs PyTorch
def _torch_dtype(torch, dt):
    return {gc.qint8: torch.qint8, gc.quint8: torch.quint8, gc.qint32: torch.qint32}[dt]


@pytest.mark.parametrize("dtype,lo,hi,npd", QDTYPES_ALL)
@pytest.mark.parametrize("scale,zp", [(0.0123, 37), (0.1, -5), (0.037, 100), (0.25, 3)])
def test_per_tensor_is_bit_for_bit_pytorch(dtype, lo, hi, npd, scale, zp):
    torch = pytest.importorskip("torch")
    if dtype is gc.quint8:
        zp = abs(zp) + 100
    x = (np.random.default_rng(0).standard_normal(20011) * 3).astype(np.float32)
    q = gc.quantize_per_tensor(gc.from_numpy(x), scale, zp, dtype)
    t = torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, _torch_dtype(torch, dtype))
    np.testing.assert_array_equal(q.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(q.dequantize().numpy(), t.dequantize().numpy())
    assert (q.q_scale(), q.q_zero_point()) == (t.q_scale(), t.q_zero_point())


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", [gc.qint8, gc.quint8])
def test_per_channel_is_bit_for_bit_pytorch(axis, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(axis)
    x = (rng.standard_normal((6, 301, 5)) * 3).astype(np.float32)
    c = x.shape[axis]
    scales = rng.uniform(0.005, 0.2, c)
    zps = rng.integers(-20, 20, c) + (0 if dtype is gc.qint8 else 128)
    q = gc.quantize_per_channel(
        gc.from_numpy(x), gc.from_numpy(scales), gc.from_numpy(zps), axis, dtype
    )
    t = torch.quantize_per_channel(
        torch.from_numpy(x),
        torch.from_numpy(scales),
        torch.from_numpy(zps),
        axis,
        _torch_dtype(torch, dtype),
    )
    np.testing.assert_array_equal(q.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(q.dequantize().numpy(), t.dequantize().numpy())


@pytest.mark.parametrize(
    "values",
    [[[-1.0, 0.25, 2.0], [0.5, 1.5, 300.0]], [1.0, 2.0], [], 1.5, [[[0.3, -1.3], [2.0, 0.0]]] * 2],
)
def test_printing_matches_pytorch(values):
    torch = pytest.importorskip("torch")
    x = np.array(values, np.float32)
    for dt, zp in [(gc.quint8, 10), (gc.qint8, 0)]:
        q = gc.quantize_per_tensor(gc.from_numpy(x), 0.1, zp, dt)
        t = torch.quantize_per_tensor(torch.from_numpy(x), 0.1, zp, _torch_dtype(torch, dt))
        # the same text but for the module name (whose length moves the line breaks)
        assert repr(q).replace("gpucore.", "torch.").split() == repr(t).split()
    x = np.array([[-1.0, 0.25, 2.0], [0.5, 1.5, 300.0]], np.float32)
    q = gc.quantize_per_channel(
        gc.from_numpy(x), gc.tensor([0.1, 0.2]), gc.tensor([0, 1]), 0, gc.qint8
    )
    t = torch.quantize_per_channel(
        torch.from_numpy(x), torch.tensor([0.1, 0.2], dtype=torch.float64), torch.tensor([0, 1]), 0,
        torch.qint8,
    )  # fmt: skip
    assert repr(q).replace("gpucore.", "torch.") == repr(t)


# ----------------------------------------------------------------------------- bad arguments
X = gc.tensor([1.0, 2.0])


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: gc.quantize_per_tensor([1.0], 0.1, 0, gc.qint8), ArgumentTypeError, "input"),
        (lambda: gc.quantize_per_tensor(gc.tensor([1, 2]), 0.1, 0, gc.qint8), DTypeError, "float"),
        (lambda: gc.quantize_per_tensor(X, 0.1, 0, gc.int8), DTypeError, "gpucore.qint8"),
        (lambda: gc.quantize_per_tensor(X, 0.1, 0, "qint8"), DTypeError, "dtype"),
        (lambda: gc.quantize_per_tensor(X, 0.0, 0, gc.qint8), ValueError, "positive"),
        (lambda: gc.quantize_per_tensor(X, -1.0, 0, gc.qint8), ValueError, "positive"),
        (lambda: gc.quantize_per_tensor(X, float("nan"), 0, gc.qint8), ValueError, "finite"),
        (lambda: gc.quantize_per_tensor(X, float("inf"), 0, gc.qint8), ValueError, "finite"),
        (lambda: gc.quantize_per_tensor(X, 1e-60, 0, gc.qint8), ValueError, "as float32"),
        (lambda: gc.quantize_per_tensor(X, 1e300, 0, gc.qint8), ValueError, "as float32"),
        (lambda: gc.quantize_per_tensor(X, "0.1", 0, gc.qint8), ArgumentTypeError, "scale"),
        (lambda: gc.quantize_per_tensor(X, 0.1, 128, gc.qint8), ValueError, r"\[-128, 127\]"),
        (lambda: gc.quantize_per_tensor(X, 0.1, -1, gc.quint8), ValueError, r"\[0, 255\]"),
        (lambda: gc.quantize_per_tensor(X, 0.1, 0.5, gc.qint8), ArgumentTypeError, "int"),
        (lambda: gc.quantize_per_tensor(X, gc.ones(2), 0, gc.qint8), ShapeError, "one number"),
        (
            lambda: gc.quantize_per_channel(
                X, gc.ones(3), gc.zeros(3, dtype=gc.int64), 0, gc.qint8
            ),
            ShapeError,
            "one entry per channel",
        ),
        (
            lambda: gc.quantize_per_channel(
                X, gc.ones(2), gc.zeros(2, dtype=gc.int64), 1, gc.qint8
            ),
            GpucoreIndexError,
            "axis 1",
        ),
        (
            lambda: gc.quantize_per_channel(X, gc.ones(2), gc.zeros(2), 0, gc.qint8),
            DTypeError,
            "zero_points must be an integer",
        ),
        (
            lambda: gc.quantize_per_channel(X, gc.ones(2), [0, 0], 0, gc.qint8),
            ArgumentTypeError,
            "zero_points",
        ),
        (
            lambda: gc.quantize_per_channel(
                X, gc.tensor([1.0, 0.0]), gc.zeros(2, dtype=gc.int64), 0, gc.qint8
            ),
            ValueError,
            r"scales\[1\]",
        ),
        (
            lambda: gc.quantize_per_channel(
                gc.tensor(1.0), gc.ones(1), gc.zeros(1, dtype=gc.int64), 0, gc.qint8
            ),
            ShapeError,
            "at least one dim",
        ),
        (lambda: gc.dequantize(gc.tensor([1, 2])), ArgumentTypeError, "quantized"),
        (lambda: gc.zeros(2, dtype=gc.qint8), DTypeError, "quantize_per_tensor"),
        (lambda: X.to(gc.quint8), DTypeError, "quantized"),
    ],
)
def test_bad_arguments_raise_errors_naming_the_function(call, exc, match):
    with pytest.raises(exc, match=match) as ei:
        call()
    names = ("quantize_per_tensor(", "quantize_per_channel(", "dequantize(", "quantized tensors")
    assert any(n in str(ei.value) for n in names)


def test_make_per_tensor_wraps_existing_integers():
    ir = gc.tensor([1, -2, 3], dtype=gc.int8)
    q = qtensor.make_per_tensor(ir, 0.5, 1)
    assert q.dtype is gc.qint8 and q.dequantize().tolist() == [0.0, -1.5, 1.0]
    with pytest.raises(DTypeError, match="make_per_tensor"):
        qtensor.make_per_tensor(gc.tensor([1.0]), 0.5, 1)
