"""ONNX dynamic quantization on the device against the C kernels bit for bit: DynamicQuantizeLinear
(shaders/dynamic_quantize.comp, kernels/qdynamic.py) against ``_cpu.dynamic_quantize_u8`` on odd
sizes (one workgroup, several, the most), NaN / inf, subnormal ranges whose scale is subnormal or
0, ties of the rounding; the int8 GEMM with the scale and zero point read on the device
(``qgemm.qgemm_dynamic``) against ``_cpu.qgemm_dynamic``; bad calls raise."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import _cpu
from gpucore.backends.vulkan.kernels import qdynamic as QD
from gpucore.backends.vulkan.kernels import qgemm as Q
from gpucore.errors import DeviceError, DTypeError, ShapeError
from gpucore.runtime.ir.dynamic_quant import dynamic_qparams_ref

pytestmark = pytest.mark.skipif(
    not hasattr(_cpu, "dynamic_quantize_u8"), reason="no int8 kernels in this build"
)
RNG = np.random.default_rng(21)
F32 = np.float32


@pytest.fixture
def f64(vulkan):
    if not vulkan.ctx.float64:
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderFloat64")
    return vulkan


def cpu_dql(x):
    y = np.empty(x.size, np.uint8)
    s, z = np.empty(1, F32), np.empty(1, np.uint8)
    _cpu.dynamic_quantize_u8(np.ascontiguousarray(x).reshape(-1), y, s, z, x.size)
    return y.reshape(x.shape), s, z


def dev_dql(be, x):
    xd = be.upload(np.ascontiguousarray(x), None)
    ws = QD.dynamic_qparams(be, xd)
    y = be.empty_array(x.shape, np.uint8)
    QD.dynamic_quantize_u8(be, y, xd, ws)
    views = (y, QD.scale_of(ws), QD.zero_point_of(ws))
    return [be.host_view(v).copy() for v in views]


def assert_bits(got, want, msg=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, msg
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=msg)


def check_dql(be, x):
    want = cpu_dql(x)
    scale, zp = dynamic_qparams_ref(x)  # the C kernel equals its reference (onnx.reference's)
    assert_bits(want[1], np.array([scale]))
    assert_bits(want[2], np.array([zp]))
    for got, w, name in zip(dev_dql(be, x), want, ("y", "scale", "zero point")):
        assert_bits(got, w, f"{name} of {x.reshape(-1)[:6]} ({x.size} values)")


# sizes: one word, odd tails, one workgroup (<= WG * PER_LANE), several, more than MAX_PARTS
SIZES = [1, 3, 4, 5, 63, 1024, 1025, 4099, 70001, QD.WG * QD.PER_LANE * QD.MAX_PARTS + 7]


@pytest.mark.parametrize("n", SIZES)
def test_random_inputs_every_size(f64, n):
    for scale in (1.0, 1e-3, 300.0):
        check_dql(f64, (RNG.standard_normal(n) * scale).astype(F32))
    check_dql(f64, np.abs(RNG.standard_normal(n)).astype(F32))  # lo = 0: zero point 0
    check_dql(f64, -np.abs(RNG.standard_normal(n)).astype(F32) - 1)  # hi = 0: zero point 255


@pytest.mark.parametrize(
    "x",
    [
        [np.nan, 1.0, 2.0], [1.0, -np.nan, 3.0], [np.inf, 1.0, -1.0], [-np.inf, 1.0],
        [np.inf, -np.inf], [3e38, -3e38, 1.0], [0.0, -0.0, 0.0], [], [-0.0],
        [1e-40, -2e-40, 0.0, 1e-41],  # a subnormal range: the scale is subnormal
        [1.4e-45, 0.0], [-1.4e-45, 2.8e-45],  # the scale rounds to 0: zero point 255
        [2.5, -1.0], [127.5, -127.5], [1.0, -254.0],
    ],
)  # fmt: skip
def test_special_values(f64, x):
    check_dql(f64, np.array(x, F32))
    if len(x):  # the special value among many (the partial ranges merge it)
        many = RNG.standard_normal(50000).astype(F32)
        many[RNG.integers(0, many.size, len(x))] = x
        check_dql(f64, many)


def test_every_exponent_and_rounding_ties(f64):
    """Ranges from the subnormals to 2^127, and values next to the half-way points of x / scale
    (a reciprocal multiply or an inexact division rounds those the other way)."""
    for e in range(-149, 128, 3):
        with np.errstate(over="ignore"):  # (the largest overflow to inf: kept)
            x = (RNG.standard_normal(37) * 2.0**e).astype(F32)
        check_dql(f64, x)
    x = RNG.standard_normal(400).astype(F32)
    scale, zp = dynamic_qparams_ref(x)
    half = ((np.arange(-255, 255, dtype=F32) + F32(0.5)) * scale).astype(F32)
    near = np.concatenate([(half.view(np.int32) + d).view(F32) for d in (-1, 0, 1)])
    lo, hi = x.min(), x.max()
    check_dql(f64, np.concatenate([x, near[(near > lo) & (near < hi)]]))


def test_bad_calls_raise(f64, vulkan):
    x = f64.upload(np.ones(8, F32), None)
    with pytest.raises(DTypeError, match="dynamic_qparams: x must be contiguous float32"):
        QD.dynamic_qparams(f64, f64.upload(np.ones(8, np.float64), None))
    with pytest.raises(DTypeError, match="contiguous float32"):
        QD.dynamic_qparams(f64, x.reshape(2, 4).T)
    ws = QD.dynamic_qparams(f64, x)
    with pytest.raises(ShapeError, match=r"dynamic_quantize_u8: y \[7\] and x \[8\] differ"):
        QD.dynamic_quantize_u8(f64, f64.empty_array((7,), np.uint8), x, ws)
    with pytest.raises(DTypeError, match="ws must be dynamic_qparams's workspace"):
        QD.dynamic_quantize_u8(f64, f64.empty_array((8,), np.uint8), x, ws.ws.view(np.float32))
    with pytest.raises(DTypeError, match="ws must be dynamic_qparams's workspace"):
        QD.dynamic_quantize_u8(f64, f64.empty_array((8,), np.uint8), x, QD.QParams(ws.ws[:4], 0))
    with pytest.raises(DTypeError, match="out must be contiguous uint8"):
        QD.dynamic_quantize_u8(f64, f64.empty_array((8,), np.int8), x, ws)
    vulkan.ctx.float64, had = False, vulkan.ctx.float64
    try:
        with pytest.raises(DeviceError, match="dynamic_qparams: .* has no shaderFloat64"):
            QD.dynamic_qparams(f64, x)
    finally:
        vulkan.ctx.float64 = had


# ------------------------------------------------------------------ qgemm_dynamic
def device_modules(be) -> list:
    """The (dot, shuffle) module pairs the device runs."""
    dots = [False] + ([True] if Q.has_integer_dot(be.ctx) else [])
    shuffles = [False] + ([True] if Q.gemm.subgroup_shuffle_size(be.ctx) else [])
    return [(d, s) for d in dots for s in shuffles]


def _one(be, value, dtype, start: int):
    """A device array of one value starting ``start`` items into a word (any byte for uint8)."""
    host = np.zeros(8, dtype)
    host[start] = value
    return be.upload(host, None)[start : start + 1]


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (17, 33, 13), (65, 70, 130), (4, 6, 0)])
@pytest.mark.parametrize("out", ["int32", "float32", "float32_bias", "float32_relu"])
def test_qgemm_dynamic_equals_the_c_kernel(vulkan, m, n, k, out):
    a = RNG.integers(0, 256, (m, k), dtype=np.uint8)
    w = RNG.integers(-128, 128, (n, k), dtype=np.int8)
    ws = RNG.uniform(0.002, 0.03, n).astype(F32)
    bias = RNG.standard_normal(n).astype(F32) if out == "float32_bias" else None
    relu = out == "float32_relu"
    odt = np.int32 if out == "int32" else F32
    packed = Q.pack_weight(vulkan, w)
    ad = vulkan.upload(a, None)
    ints = odt == np.int32
    for zp, scale in ((0, 0.04), (131, 0.0123), (255, 3.5), (7, np.inf), (9, np.nan), (3, 0.0)):
        want = np.empty((m, n), odt)
        epi = (None, None, False) if ints else (ws, bias, relu)
        sc = None if ints else np.array([scale], F32)
        _cpu.qgemm_dynamic(a, _cpu.qgemm_pack(w, k, n, 1), want, m, sc, np.array([zp], np.uint8),
                           *epi)  # fmt: skip
        # each module (integer dot product, plain; subgroup shuffles or loads) on the device;
        # the zero point at any byte of a word, the scale at two words
        for (dot, shuffle), start in zip(device_modules(vulkan), (0, 3, 1, 2)):
            got = vulkan.empty_array((m, n), odt)
            d_zp = _one(vulkan, zp, np.uint8, start)
            d_sc = None if ints else _one(vulkan, scale, F32, start % 2)
            kw = {} if ints else {"w_scales": ws, "bias": bias, "relu": relu}
            Q.qgemm_dynamic(vulkan, ad, packed, got, d_sc, d_zp, **kw, dot=dot, shuffle=shuffle)
            msg = f"zp {zp} scale {scale} at {start}, dot {dot} shuffle {shuffle}"
            assert_bits(vulkan.host_view(got), want, msg)


def test_qgemm_dynamic_bad_calls_raise(vulkan):
    a = vulkan.upload(RNG.integers(0, 256, (3, 4), dtype=np.uint8), None)
    w = Q.pack_weight(vulkan, RNG.integers(-128, 128, (5, 4), dtype=np.int8))
    zp, sc = _one(vulkan, 3, np.uint8, 0), _one(vulkan, 0.5, F32, 0)
    ws = np.ones(5, F32)
    out = vulkan.empty_array((3, 5), F32)
    with pytest.raises(DTypeError, match="qgemm_dynamic: a_zero_point must be a uint8 device"):
        Q.qgemm_dynamic(vulkan, a, w, out, sc, 3, w_scales=ws)
    with pytest.raises(DTypeError, match="a_scale must be a float32 device array of one value"):
        Q.qgemm_dynamic(vulkan, a, w, out, vulkan.upload(np.ones(2, F32), None), zp, w_scales=ws)
    with pytest.raises(ShapeError, match="w_scales must hold N=5"):
        Q.qgemm_dynamic(vulkan, a, w, out, sc, zp, w_scales=np.ones(4, F32))
    with pytest.raises(ValueError, match="an int32 'out' takes no a_scale"):
        Q.qgemm_dynamic(vulkan, a, w, vulkan.empty_array((3, 5), np.int32), sc, zp)
    with pytest.raises(DTypeError, match="a must be uint8 and out int32 or float32"):
        Q.qgemm_dynamic(vulkan, a, w, vulkan.empty_array((3, 5), np.uint8), sc, zp)
    with pytest.raises(ShapeError, match=r"qgemm_dynamic: a \(3, 4\) and weights"):
        Q.qgemm_dynamic(vulkan, a, w, vulkan.empty_array((3, 6), F32), sc, zp, w_scales=ws)


# ------------------------------------------------ PyTorch's parameters (the TORCH constant)
def cpu_torch(x):
    y = np.empty(x.size, np.uint8)
    s, z = np.empty(1, F32), np.empty(1, np.uint8)
    _cpu.dynamic_quantize_torch_u8(np.ascontiguousarray(x).reshape(-1), y, s, z, x.size)
    return y.reshape(x.shape), s, z


def dev_torch(be, x):
    """(rows [M, 4 * ceil(K / 4)], scale, zero point, 1 / scale) of float32 x [M, K]."""
    xd = be.upload(np.ascontiguousarray(x), None)
    ws = QD.dynamic_qparams(be, xd, torch=True)
    q = QD.torch_quantize_rows(be, xd, ws)
    out = [be.host_view(v).copy() for v in (q, QD.scale_of(ws), QD.zero_point_of(ws))]
    return out + [be.host_view(ws.ws)[2:3].copy().view(F32)]


def _torch_cases():
    x = (RNG.standard_normal((5, 13)) * 2).astype(F32)
    sub = np.full((3, 6), 1e-40, F32)
    sub[:, ::2] = -3e-45
    huge = x.copy()
    huge[0, 0], huge[-1, -1] = 3e37, -1e-30
    ties = ((np.arange(4 * 255, dtype=F32) % 9 - 4) * F32(0.5)).reshape(4, 255)
    big = RNG.standard_normal((3, 3001)).astype(F32)  # several workgroups of the range
    return [x, np.abs(x), -np.abs(x) - 3, np.full((2, 3), 7.25, F32), np.zeros((1, 5), F32),
            x * F32(1e-30), sub, huge, ties, big, big * F32(1e6), np.ones((1, 1), F32)]  # fmt: skip


@pytest.mark.parametrize("case", range(12))
def test_torch_parameters_and_rows_equal_the_c_kernel(f64, case):
    """dynamic_qparams(torch=True) and torch_quantize_rows against
    ``_cpu.dynamic_quantize_torch_u8`` (PyTorch's quantize_dynamic parameters) bit for bit: the
    scale, zero point, 1 / scale (``_cpu.quantize_u8``'s reciprocal) and the rows, whose pad
    bytes are 0."""
    x = _torch_cases()[case]
    q, s, z = cpu_torch(x)
    got_q, got_s, got_z, got_inv = dev_torch(f64, x)
    k = x.shape[1]
    assert_bits(got_s, s, "scale")
    assert_bits(got_z, z, "zero point")
    assert_bits(got_inv, np.array([F32(1) / s[0]]), "1 / scale")
    assert_bits(got_q[:, :k], q, "rows")
    assert got_q.shape[1] == -(-k // 4) * 4 and not got_q[:, k:].any()


@pytest.mark.parametrize(
    "special", [[np.nan], [np.inf], [-np.inf], [3e38, -3e38], [-np.inf, np.nan]]
)
def test_torch_refused_ranges_give_a_nan_scale(f64, special):
    """A range whose width is not finite in float32 (NaN or inf in x, finite extremes 6e38
    apart): scale NaN, zero point 0, as the C kernel (the GEMM's outputs are then all NaN)."""
    x = RNG.standard_normal((3, 7)).astype(F32)
    x.reshape(-1)[: len(special)] = special
    _, s, z = cpu_torch(x)
    _, got_s, got_z, got_inv = dev_torch(f64, x)
    assert np.isnan(s[0]) and z[0] == 0
    assert np.isnan(got_s[0]) and np.isnan(got_inv[0]) and got_z[0] == 0


def test_torch_rows_bad_calls_raise(f64):
    xd = f64.upload(np.ones((2, 3), F32), None)
    ws = QD.dynamic_qparams(f64, xd, torch=True)
    with pytest.raises(ShapeError, match=r"torch_quantize_rows: x must be \[M, K\]"):
        QD.torch_quantize_rows(f64, f64.upload(np.ones(3, F32), None), ws)
    with pytest.raises(DTypeError, match="torch_quantize_rows: ws must be"):
        QD.torch_quantize_rows(f64, xd, f64.upload(np.ones(3, np.uint32), None))
    # the kind of parameters is known on the host: ONNX's workspace has no 1 / scale (word 2
    # never written), PyTorch's is not ONNX's
    with pytest.raises(DTypeError, match=r"torch_quantize_rows: ws holds ONNX's parameters "
                       r"\(dynamic_qparams\(torch=False\)\).*torch=True"):  # fmt: skip
        QD.torch_quantize_rows(f64, xd, QD.dynamic_qparams(f64, xd))
    y = f64.empty_array((2, 3), np.uint8)
    with pytest.raises(DTypeError, match="dynamic_quantize_u8: ws holds PyTorch's parameters"):
        QD.dynamic_quantize_u8(f64, y, xd, ws)
    # the workspace of the right kind still works after the refusals
    got_q = f64.host_view(QD.torch_quantize_rows(f64, xd, ws))
    assert_bits(got_q[:, :3], cpu_torch(np.ones((2, 3), F32))[0], "rows")
    with pytest.raises(DTypeError, match="torch_quantize_rows: x must be contiguous float32"):
        QD.torch_quantize_rows(f64, f64.upload(np.ones((2, 3), np.float64), None), ws)
