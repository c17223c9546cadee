"""The Vulkan int8 GEMM (shaders/qgemm.comp, kernels/qgemm.py) against the C kernel
(``_cpu.qgemm``) bit for bit, both modules (integer dot product and plain int32), on odd shapes,
zero points, per-channel scales, bias / ReLU epilogues, ties and saturation; its activation
quantizer against qtensor.quantize_array; and a dynamically quantized Linear on the device
against the same layer on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import _cpu, nn
from gpucore.backends.vulkan.kernels import qgemm as Q
from gpucore.errors import DeviceError, DTypeError, ShapeError
from gpucore.quantization import dynamic, kernels, quantize_dynamic
from gpucore.quantization.qtensor import quantize_array

pytestmark = pytest.mark.skipif(not kernels.has_qgemm(), reason="no C int8 GEMM in this build")
RNG = np.random.default_rng(15)
# M, N, K: GEMV rows, tiles of 1..32 rows with a remainder, N and K off every multiple of 4 and
# of the subgroup's chunk of words
SHAPES = [(1, 1, 1), (1, 9, 5), (3, 5, 7), (17, 33, 13), (37, 70, 130), (16, 64, 256),
          (65, 259, 37), (4, 6, 0)]  # fmt: skip
OUTS = [np.int32, np.float32, np.uint8, np.int8]


@pytest.fixture(params=["dot", "plain"])
def dot(request, vulkan):
    """Each module: the integer-dot one where the device has the instruction."""
    if request.param == "dot" and not Q.has_integer_dot(vulkan.ctx):
        pytest.skip(f"{vulkan.ctx.info.name} has no shaderIntegerDotProduct")
    return request.param == "dot"


@pytest.fixture(params=["shuffle", "loads"])
def shuffle(request, vulkan):
    """Each form: activation words passed round the subgroup, or loaded by every invocation."""
    if request.param == "shuffle" and not Q.gemm.subgroup_shuffle_size(vulkan.ctx):
        pytest.skip(f"{vulkan.ctx.info.name} has no subgroup shuffles")
    return request.param == "shuffle"


def cpu_qgemm(a, w, odt, *args):
    out = np.empty((a.shape[0], w.shape[0]), odt)
    _cpu.qgemm(a, _cpu.qgemm_pack(w, w.shape[1], w.shape[0], 1), out, a.shape[0], *args)
    return out


def dev_qgemm(be, a, w, odt, *args, dot=None, shuffle=None, a_dev=None, out=None):
    out = be.empty_array((a.shape[0], w.shape[0]), odt) if out is None else out
    a_dev = be.upload(a, None) if a_dev is None else a_dev
    Q.qgemm(be, a_dev, Q.pack_weight(be, w), out, *args, dot=dot, shuffle=shuffle)
    return be.host_view(out).copy()


def assert_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def operands(m, n, k, signed):
    lo, hi = (-128, 127) if signed else (0, 255)
    a = RNG.integers(lo, hi, (m, k), endpoint=True).astype(np.int8 if signed else np.uint8)
    w = RNG.integers(-128, 127, (n, k), endpoint=True).astype(np.int8)
    a.reshape(-1)[:2] = [lo, hi][: a.size]
    w.reshape(-1)[:2] = [-128, 127][: w.size]  # -128: the full range of the weights
    return a, w


def epilogue_args(n, odt, relu):
    """(a_scale, a_zero_point, w_scales, bias, relu, out_scale, out_zero_point)"""
    ws = RNG.uniform(0.002, 0.03, n).astype(np.float32)  # per-channel
    if odt == np.int32:
        return (1.0, 0, None, None, False, 1.0, 0)
    bias = RNG.uniform(-3, 3, n).astype(np.float32)
    ozp = {np.float32: 0, np.uint8: 128, np.int8: -5}[odt]
    return (0.05, 0, ws, bias, relu, 0.07, ozp)


@pytest.mark.parametrize("odt", OUTS)
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_equals_the_c_kernel_bit_for_bit(vulkan, dot, shuffle, m, n, k, signed, odt):
    a, w = operands(m, n, k, signed)
    args = list(epilogue_args(n, odt, relu=odt != np.int32 and m % 2 == 1))
    args[1] = -7 if signed else 131  # the activation's zero point
    want = cpu_qgemm(a, w, odt, *args)
    assert_bits(dev_qgemm(vulkan, a, w, odt, *args, dot=dot, shuffle=shuffle), want)
    if odt == np.int32:  # the sums themselves, against numpy
        ref = (a.astype(np.int64) - args[1]) @ w.astype(np.int64).T
        np.testing.assert_array_equal(want, ref)


@pytest.mark.parametrize("odt", [np.float32, np.uint8, np.int8])
@pytest.mark.parametrize("m,n,k", [(1, 9, 5), (17, 33, 13), (37, 70, 130)])
def test_int32_bias_goes_into_the_sums(vulkan, dot, m, n, k, odt):
    """ONNX's int32 bias (QLinearConv / QGemm): added to the int32 sums (wrapping) before the
    float epilogue, as the C kernel."""
    a, w = operands(m, n, k, False)
    args = list(epilogue_args(n, odt, relu=m % 2 == 1))
    args[1] = 131
    args[3] = RNG.integers(-(2**31), 2**31 - 1, n, endpoint=True).astype(np.int32)
    args[3][:2] = [2**31 - 1, -(2**31)][:n]  # wrapping at both ends
    assert_bits(dev_qgemm(vulkan, a, w, odt, *args, dot=dot), cpu_qgemm(a, w, odt, *args))


@pytest.mark.parametrize("odt", [np.uint8, np.int8])
def test_requantization_ties_and_saturation(vulkan, dot, odt):
    # factor 0.5 (a_scale * w_scale / out_scale) on odd sums: every value a tie at .5, rounded
    # half to even; large sums pass the output range both ways
    m, n, k = 9, 12, 7
    a = RNG.integers(0, 255, (m, k), endpoint=True).astype(np.uint8)
    w = RNG.integers(-128, 127, (n, k), endpoint=True).astype(np.int8)
    a[:, 0] |= 1
    w[:, 0] |= 1
    a[:, 1:] &= 0xFE  # one odd product per sum: odd sums
    ws = np.full(n, 0.5, np.float32)
    for bias, relu, ozp in [
        (None, False, 0),
        (None, False, 5),
        (np.full(n, 0.25, np.float32), True, 3),
    ]:
        args = (1.0, 0, ws, bias, relu, 1.0, ozp if odt == np.uint8 else -ozp)
        want = cpu_qgemm(a, w, odt, *args)
        assert_bits(dev_qgemm(vulkan, a, w, odt, *args, dot=dot), want)
        lo, hi = np.iinfo(odt).min, np.iinfo(odt).max
        assert (want == lo).any() or relu, "no value saturated low"
        assert (want == hi).any(), "no value saturated high"
    small = a[:, :1].astype(np.uint8) & 7  # sums of one product: exact ties x.5
    want = cpu_qgemm(np.ascontiguousarray(small), w[:, :1].copy(), odt, 1.0, 0, ws, None, False,
                     1.0, 0)  # fmt: skip
    t = (small.astype(np.float64) @ w[:, :1].astype(np.float64).T) * 0.5
    np.testing.assert_array_equal(want, np.clip(np.rint(t), np.iinfo(odt).min, np.iinfo(odt).max))
    assert_bits(dev_qgemm(vulkan, np.ascontiguousarray(small), w[:, :1].copy(), odt, 1.0, 0, ws,
                          None, False, 1.0, 0, dot=dot), want)  # fmt: skip


@pytest.mark.parametrize("signed", [False, True])
def test_extreme_sums_at_the_largest_k(vulkan, dot, shuffle, signed):
    # K = 65536 with the largest products: the sums reach ~2.1e9, zero point corrections wrap in
    # uint32, and float32(c) rounds (c far above 2**24)
    k = Q.MAX_K
    a = np.zeros((2, k), np.int8 if signed else np.uint8)
    a[0] = -128 if signed else 0
    a[1] = 127 if signed else 255
    w = np.full((5, k), -128, np.int8)
    w[1] = 127
    w[2, ::2] = 127
    zp = 127 if signed else 255
    for odt in (np.int32, np.float32):
        args = (1.0, zp, np.full(5, 1e-3, np.float32), None, False, 1.0, 0)
        if odt == np.int32:
            args = (1.0, zp, None, None, False, 1.0, 0)
        want = cpu_qgemm(a, w, odt, *args)
        assert_bits(dev_qgemm(vulkan, a, w, odt, *args, dot=dot, shuffle=shuffle), want)
    assert abs(int(want[0, 0] * 1000)) > 2**30


def test_subnormal_products_on_lavapipe(vulkan, dot):
    # products below float32's normal range: the C code keeps them (no flush); lavapipe does too
    # (Vulkan does not promise it: shaderDenormPreserveFloat32 is false there)
    if not vulkan.ctx.is_cpu:
        pytest.skip("denormal handling is the driver's choice on GPUs")
    a = np.arange(1, 7, dtype=np.uint8).reshape(2, 3)
    w = np.ones((4, 3), np.int8)
    args = (1e-10, 0, np.full(4, 1e-30, np.float32), None, False, 1.0, 0)
    want = cpu_qgemm(a, w, np.float32, *args)
    assert (want > 0).all() and (want < np.finfo(np.float32).tiny).all()
    assert_bits(dev_qgemm(vulkan, a, w, np.float32, *args, dot=dot), want)


def test_unaligned_and_strided_operands(vulkan, dot, shuffle):
    # a starting mid-word with rows not a multiple of 4 bytes (padded copy), byte outputs with
    # N % 4 != 0 and a float output that is a column slice (both through a temporary)
    m, n, k = 11, 10, 21
    a, w = operands(m, n, k, False)
    big = np.zeros((m, k + 3), np.uint8)
    big[:, 1 : k + 1] = a
    base = vulkan.upload(big, None)
    for odt in (np.uint8, np.float32):
        args = epilogue_args(n, odt, relu=False)
        want = cpu_qgemm(a, w, odt, *args)
        outer = vulkan.empty_array((m, n + 5), odt)
        got = dev_qgemm(vulkan, a, w, odt, *args, dot=dot, shuffle=shuffle,
                        a_dev=base[:, 1 : k + 1], out=outer[:, 2 : n + 2])  # fmt: skip
        assert_bits(got, want)
    # rows in reverse order (a negative row stride) into a reversed output
    a4, w4 = operands(6, 8, 12, True)
    args = epilogue_args(8, np.int8, relu=True)
    want = cpu_qgemm(np.ascontiguousarray(a4[::-1]), w4, np.int8, *args)
    out = vulkan.empty_array((6, 8), np.int8)
    got = dev_qgemm(vulkan, a4, w4, np.int8, *args, dot=dot, shuffle=shuffle,
                    a_dev=vulkan.upload(a4, None)[::-1], out=out[::-1])  # fmt: skip
    assert_bits(got, want)


def test_quantize_rows_matches_quantize_array(vulkan):
    m, k = 13, 29
    scale, zp = np.float32(0.0625), 37
    x = RNG.uniform(-4, 15, (m, k)).astype(np.float32)
    x[0, :8] = np.float32(scale) * (np.arange(8, dtype=np.float32) + np.float32(0.5))  # ties
    x[1, :2] = [-1e6, 1e6]  # saturation
    inv = np.float32(1) / scale
    got = Q.quantize_rows(vulkan, vulkan.upload(x, None), float(inv), zp)
    got = vulkan.host_view(got).copy()
    np.testing.assert_array_equal(got[:, :k], quantize_array(x, float(scale), zp, gpucore.quint8))
    np.testing.assert_array_equal(got[:, k:], 0)  # pad bytes


def shaders_used(ctx, monkeypatch) -> list:
    """The shader names of the GEMM pipelines (not the quantizer's) asked for from now on."""
    names: list = []
    get = ctx.pipelines.get

    def spy(name, nbindings, spec=(), *args, **kw):
        if not (name == "qgemm" and spec[:1] == (1,)):  # MODE QUANTIZE
            names.append(name)
        return get(name, nbindings, spec, *args, **kw)

    monkeypatch.setattr(ctx.pipelines, "get", spy)
    return names


def test_the_module_follows_the_device_and_can_be_forced(vulkan, monkeypatch):
    ctx = vulkan.ctx
    assert ctx.integer_dot == ctx._integer_dot_feature(ctx.vk, ctx.physical)
    monkeypatch.delenv("GPUCORE_VULKAN_QGEMM", raising=False)
    assert Q.choose_dot(ctx) == Q.has_integer_dot(ctx)
    monkeypatch.setenv("GPUCORE_VULKAN_QGEMM", "plain")
    assert Q.choose_dot(ctx) is False
    a, w = operands(5, 6, 9, False)
    args = epilogue_args(6, np.float32, relu=True)
    names = shaders_used(ctx, monkeypatch)
    assert_bits(dev_qgemm(vulkan, a, w, np.float32, *args), cpu_qgemm(a, w, np.float32, *args))
    assert names == ["copy", "qgemm_sg" if Q.shuffle_size(ctx) else "qgemm"]  # copy: K = 9
    monkeypatch.setattr(ctx, "integer_dot", False)  # a device without the instruction
    monkeypatch.setenv("GPUCORE_VULKAN_QGEMM", "auto")
    assert Q.choose_dot(ctx) is False
    with pytest.raises(DeviceError, match="shaderIntegerDotProduct"):
        Q.choose_dot(ctx, True)
    monkeypatch.setenv("GPUCORE_VULKAN_QGEMM", "fast")
    with pytest.raises(ValueError, match="GPUCORE_VULKAN_QGEMM"):
        Q.choose_dot(ctx)


def test_bad_arguments_raise(vulkan):
    a, w = operands(3, 4, 5, False)
    qw = Q.pack_weight(vulkan, w)
    ad = vulkan.upload(a, None)
    ws = np.ones(4, np.float32)
    with pytest.raises(DTypeError, match="qgemm: a must be"):
        Q.qgemm(vulkan, vulkan.upload(a.astype(np.int32), None), qw,
                vulkan.empty_array((3, 4), np.float32), 1.0, 0, ws)  # fmt: skip
    with pytest.raises(ShapeError, match="do not make out"):
        Q.qgemm(vulkan, ad, qw, vulkan.empty_array((3, 5), np.float32), 1.0, 0, ws)
    with pytest.raises(DTypeError, match="out must be"):
        Q.qgemm(vulkan, ad, qw, vulkan.empty_array((3, 4), np.float64), 1.0, 0, ws)
    with pytest.raises(ValueError, match="a_zero_point"):
        Q.qgemm(vulkan, ad, qw, vulkan.empty_array((3, 4), np.float32), 1.0, 256, ws)
    with pytest.raises(ValueError, match="column 2"):
        Q.qgemm(vulkan, ad, qw, vulkan.empty_array((3, 4), np.float32), 1.0, 0,
                np.array([1, 1, 0, 1], np.float32))  # fmt: skip
    with pytest.raises(ValueError, match="int32 'out' takes no bias"):
        Q.qgemm(vulkan, ad, qw, vulkan.empty_array((3, 4), np.int32), relu=True)
    with pytest.raises(ValueError, match="overlaps"):
        Q.qgemm(vulkan, ad, qw, ad[:, :4].view(np.int8), relu=True)
    with pytest.raises(ShapeError, match="exceeds"):
        Q.pack_weight(vulkan, np.zeros((1, Q.MAX_K + 1), np.int8))


# ----------------------------------------------------------------------------- quantized Linear
def _model():
    gpucore.manual_seed(3)
    return nn.Sequential(nn.Linear(130, 67), nn.ReLU(), nn.Linear(67, 33, bias=False))


@pytest.mark.parametrize("shape", [(50, 130), (4, 7, 130), (1, 130)])
def test_quantize_dynamic_linear_on_vulkan_equals_the_cpu(vulkan, dot, monkeypatch, shape):
    monkeypatch.setenv("GPUCORE_VULKAN_QGEMM", "dot" if dot else "plain")
    q = quantize_dynamic(_model(), {nn.Linear}, dtype=gpucore.qint8)
    assert isinstance(q[0], dynamic.Linear)
    x = gpucore.randn(*shape) * 3
    with gpucore.device_policy("cpu"):
        want = q(x).numpy()
    xd = x.to("vulkan")
    names = shaders_used(vulkan.ctx, monkeypatch)
    with gpucore.dispatch.trace_ops() as ops:
        y = q(xd)
    sg = "_sg" if Q.shuffle_size(vulkan.ctx) else ""
    assert [n for n in names if n.startswith("qgemm")] == [
        ("qgemm_dot" if dot else "qgemm") + sg
    ] * 2
    assert y.is_vulkan and tuple(y.shape) == shape[:-1] + (33,)
    assert [o[:2] for o in ops if o[0] == "quantized_linear"] == [
        ("quantized_linear", "vulkan")
    ] * 2
    assert_bits(y.cpu().numpy(), want)


def test_auto_policy_follows_the_threshold(vulkan):
    # under 'auto' a device input runs where the float Linear of its shapes would: 8 x 24 on the
    # host kernel (under the threshold), 64 x 96 -> 80 on the device
    for rows, k, m, where in [(8, 24, 10, []), (64, 96, 80, ["vulkan"])]:
        lin = dynamic.Linear.from_float(nn.Linear(k, m))
        x = gpucore.randn(rows, k)
        with gpucore.device_policy("cpu"):
            want = lin(x).numpy()
        with gpucore.device_policy("auto"), gpucore.dispatch.trace_ops() as ops:
            y = lin(x.to("vulkan"))
        assert y.is_vulkan and [o[1] for o in ops if o[0] == "quantized_linear"] == where
        assert_bits(y.cpu().numpy(), want)


def test_empty_batches_on_the_device(vulkan):
    lin = dynamic.Linear.from_float(nn.Linear(24, 10))
    y = lin(gpucore.randn(0, 24).to("vulkan"))
    assert y.is_vulkan and tuple(y.shape) == (0, 10)


def test_non_finite_inputs_raise_on_the_device_too(vulkan):
    lin = dynamic.Linear.from_float(nn.Linear(24, 10))
    x = gpucore.randn(8, 24)
    x[1, 2] = float("nan")
    with pytest.raises(ValueError, match="inf or NaN"):
        lin(x.to("vulkan"))
