"""The Vulkan byte-tensor kernels of the quantized runtime ops (shaders/qtensor.comp,
kernels/qtensor.py) against the C kernels bit for bit: inputs starting at every byte of a word,
odd sizes, the zero-point padding of the convolution rows, the NCHW transpose, ONNX's
QuantizeLinear rounding; quantize_rows writing into a given array; bad calls raise."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import _cpu
from gpucore.backends.vulkan.kernels import qgemm as Q
from gpucore.backends.vulkan.kernels import qtensor as T
from gpucore.errors import DeviceError, DTypeError, ShapeError
from gpucore.runtime.ir.quantized import _conv_sums, quantize_ref

pytestmark = pytest.mark.skipif(not hasattr(_cpu, "qconv2d"), reason="no int8 kernels")
RNG = np.random.default_rng(16)


def _at(be, host: np.ndarray, start: int) -> np.ndarray:
    """A device copy of ``host`` starting ``start`` bytes into a word."""
    flat = np.zeros(host.size + start + 4, host.dtype)
    flat[start : start + host.size] = host.reshape(-1)
    return be.upload(flat, None)[start : start + host.size].reshape(host.shape)


@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_dequantize_u8_any_byte_offset(vulkan, start):
    q = RNG.integers(0, 256, 37, dtype=np.uint8)
    out = vulkan.empty_array(q.shape, np.float32)
    T.dequantize_u8(vulkan, out, _at(vulkan, q, start), np.float32(0.037), 129)
    want = np.empty(q.shape, np.float32)
    _cpu.dequantize_u8(q, want, q.size, 0.037, 129)
    np.testing.assert_array_equal(vulkan.host_view(out).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("start", [0, 3])
def test_max_pool2d_u8(vulkan, start):
    x = RNG.integers(0, 256, (2, 3, 7, 9), dtype=np.uint8)
    geo = ((3, 2), (2, 1), (1, 1), (1, 2))
    oh, ow = (7 + 2 - 3) // 2 + 1, (9 + 2 - 3) // 1 + 1
    out = vulkan.empty_array((2, 3, oh, ow), np.uint8)
    T.max_pool2d_u8(vulkan, out, _at(vulkan, x, start), *geo)
    want = np.empty((2, 3, oh, ow), np.uint8)
    _cpu.max_pool2d_u8(x, want, 2, 3, 7, 9, 3, 2, 2, 1, 1, 1, 1, 2)
    np.testing.assert_array_equal(vulkan.host_view(out), want)


@pytest.mark.parametrize("start", [0, 1])
def test_im2col_rows_pad_with_the_zero_point(vulkan, start):
    """Rows times an identity-like weight give the integer reference's sums: the padding reads
    as the zero point (adds nothing), bytes past K are 0."""
    x = RNG.integers(0, 256, (2, 3, 5, 6), dtype=np.uint8)
    w = RNG.integers(-127, 128, (4, 3, 3, 2), dtype=np.int8)
    attrs = {"stride": (2, 1), "padding": (1, 1), "dilation": (1, 2), "a_zero_point": 201}
    rows, oh, ow = T.im2col_rows(vulkan, _at(vulkan, x, start), (3, 2), attrs["stride"],
                                 attrs["padding"], attrs["dilation"], 201)  # fmt: skip
    host = vulkan.host_view(rows).copy()
    k = 3 * 3 * 2
    assert host.shape == (2 * oh * ow, 20) and not host[:, k:].any()
    sums = (host[:, :k].astype(np.int64) - 201) @ w.reshape(4, -1).T.astype(np.int64)
    want = _conv_sums(x, w, attrs).reshape(-1, 4)
    np.testing.assert_array_equal(sums, want)


def test_rows_to_nchw(vulkan):
    n, o, pix = 3, 5, 7
    rows = RNG.integers(0, 256, (n * pix, 8), dtype=np.uint8)
    out = vulkan.empty_array((n, o, pix, 1), np.uint8)
    T.rows_to_nchw(vulkan, out, vulkan.upload(rows, None))
    want = rows[:, :o].reshape(n, pix, o).transpose(0, 2, 1).reshape(n, o, pix, 1)
    np.testing.assert_array_equal(vulkan.host_view(out), want)


def test_quantize_rows_into_a_given_array(vulkan):
    x = (RNG.standard_normal((1, 23)) * 9).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    out = vulkan.empty_array((1, 23), np.uint8)
    got = Q.quantize_rows(vulkan, vulkan.upload(x, None), float(np.float32(1) / np.float32(0.1)),
                          17, out)  # fmt: skip
    assert got is out
    np.testing.assert_array_equal(vulkan.host_view(out), quantize_ref(x, 0.1, 17))


@pytest.mark.parametrize("start", [0, 5])
def test_quantize_onnx_u8_is_quantize_linear_u8(vulkan, start):
    """The correctly rounded division: the quotients next to every half-way point of the range
    (where x * (1 / scale) or an inexact division rounds the other way), special values."""
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    s = np.float32(0.0123)
    half = ((np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)) * s).view(np.int32)
    x = np.concatenate(
        [(half + d).view(np.float32) for d in range(-3, 4)]
        + [np.array([np.nan, np.inf, -np.inf, -0.0, 1e38, 1e-40], np.float32)]
    )
    dev = vulkan.upload(np.concatenate([np.zeros(start, np.float32), x]), None)[start:]
    for zp in (0, 77, 255):
        out = vulkan.empty_array(x.shape, np.uint8)
        T.quantize_onnx_u8(vulkan, out, dev, float(s), zp)
        want = np.empty(x.shape, np.uint8)
        _cpu.quantize_linear_u8(x, want, x.size, float(s), zp)
        np.testing.assert_array_equal(vulkan.host_view(out), want)
    vulkan.ctx.float64, had = False, vulkan.ctx.float64
    try:
        with pytest.raises(DeviceError, match="shaderFloat64"):
            T.quantize_onnx_u8(vulkan, out, dev, float(s), 0)
    finally:
        vulkan.ctx.float64 = had


def test_bad_calls_raise(vulkan):
    q = vulkan.upload(np.zeros(9, np.uint8), None)
    odd = vulkan.upload(np.zeros(12, np.uint8), None)[1:10].reshape(1, 1, 3, 3)
    with pytest.raises(ShapeError, match="start on a 32-bit word"):
        T.max_pool2d_u8(vulkan, odd, q.reshape(1, 1, 3, 3), (1, 1), (1, 1), (0, 0), (1, 1))
    with pytest.raises(DTypeError, match="dequantize_u8: out must be contiguous float32"):
        T.dequantize_u8(vulkan, vulkan.empty_array((9,), np.int32), q, 1.0, 0)
    with pytest.raises(DTypeError, match="x must be contiguous uint8"):
        T.dequantize_u8(vulkan, vulkan.empty_array((9,), np.float32), q.view(np.int8), 1.0, 0)
    with pytest.raises(ShapeError, match="exceeds the padded input"):
        T.im2col_rows(vulkan, q.reshape(1, 1, 3, 3), (5, 5), (1, 1), (0, 0), (1, 1), 0)
    x = vulkan.upload(np.zeros((3, 6), np.float32), None)
    with pytest.raises(ShapeError, match="quantize_rows: out must be"):
        Q.quantize_rows(vulkan, x, 1.0, 0, vulkan.empty_array((3, 6), np.uint8))
