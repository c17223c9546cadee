"""The quantized inference kernels of cpu/qconv.c through their bindings: qconv2d bit for bit
against a numpy integer reference written here (padding read as the activation's zero point,
stride, dilation, zero points, every output form); quantize_u8 / dequantize_u8 against
gpucore.quantize_per_tensor / dequantize (PyTorch-equal); max_pool2d_u8 against max pooling of
the dequantized values; bad calls raise."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore import _cpu as C

pytestmark = pytest.mark.skipif(not hasattr(C, "qconv2d"), reason="no int8 kernels")


def _ref_conv(x, w, zp, stride, padding, dilation) -> np.ndarray:
    """int64 sums [n, o, oh, ow] of (x - zp) * w, x padded with zp: direct loops over the
    kernel taps (independent of im2col)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=zp)
    acc = np.zeros((n, o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh : i * dh + sh * oh : sh, j * dw : j * dw + sw * ow : sw]
            patch = patch[:, :, :oh, :ow] - zp
            acc += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    return acc


def _requant(acc, a_scale, w_scales, bias, relu, out_scale, out_zp, mode):
    """qgemm's documented epilogue in float32 numpy (each operation rounded on its own)."""
    f = np.float32
    s = (f(a_scale) * w_scales.astype(f)).reshape(1, -1, 1, 1)
    c = acc.astype(f)
    if mode == "f32":
        v = c * s + (0 if bias is None else bias.reshape(1, -1, 1, 1))
        return np.maximum(v, f(0)) if relu else v.astype(f)
    v = c * (s / f(out_scale))
    if bias is not None:
        v = v + (bias / f(out_scale)).reshape(1, -1, 1, 1)
    lo = f(out_zp) if relu else f(0)
    return np.clip(np.rint(v) + f(out_zp), lo, f(255)).astype(np.uint8)


def _run(x, w, zp, stride, padding, dilation, out, **kw):
    n, c, h, wd = x.shape
    o, _, kh, kwd = w.shape
    geo = (n, c, h, wd, kh, kwd, *stride, *padding, *dilation)
    work = np.empty(C.qconv2d_work_bytes(*geo, o, out.itemsize), np.uint8)
    packed = C.qgemm_pack(np.ascontiguousarray(w.reshape(o, -1)), c * kh * kwd, o, 1)
    C.qconv2d(x, packed, out, work, *geo, kw["a_scale"], zp, kw["w_scales"], kw["bias"],
              kw["relu"], kw["out_scale"], kw["out_zp"])  # fmt: skip
    return out


GEOMETRIES = [
    # n, c, h, w, o, kh, kw, stride, padding, dilation
    (2, 3, 7, 6, 5, 3, 3, (1, 1), (1, 1), (1, 1)),
    (1, 4, 9, 8, 17, 3, 2, (2, 1), (2, 1), (1, 2)),
    (3, 1, 8, 8, 16, 3, 3, (1, 1), (0, 0), (2, 2)),
    (1, 16, 5, 5, 70, 1, 1, (1, 1), (0, 0), (1, 1)),
    (2, 5, 6, 7, 3, 5, 4, (3, 2), (2, 2), (1, 1)),
    # the 4-byte words' flat offset table: the digits CNN's 16 -> 32 layer, a row dilation, and
    # more kernel rows (c * kh = 270) than the table holds (the nested loops)
    (3, 16, 8, 8, 32, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 3, 9, 7, 6, 3, 3, (2, 1), (1, 1), (2, 1)),
    (1, 90, 4, 5, 7, 3, 3, (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("geo", GEOMETRIES)
@pytest.mark.parametrize("zp", [0, 3, 128, 255])
def test_qconv2d_equals_integer_reference(geo, zp):
    n, c, h, wd, o, kh, kw, stride, padding, dilation = geo
    rng = np.random.default_rng(zp + o)
    x = rng.integers(0, 256, (n, c, h, wd), dtype=np.uint8)
    w = rng.integers(-128, 128, (o, c, kh, kw), dtype=np.int8)
    acc = _ref_conv(x, w, zp, stride, padding, dilation)
    oshape = acc.shape
    # int32 out: the exact sums
    got = _run(x, w, zp, stride, padding, dilation, np.empty(oshape, np.int32), a_scale=1.0,
               w_scales=None, bias=None, relu=0, out_scale=1.0, out_zp=0)  # fmt: skip
    np.testing.assert_array_equal(got, acc)
    w_scales = rng.uniform(0.001, 0.02, o).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    for relu in (0, 1):
        args = dict(a_scale=0.05, w_scales=w_scales, bias=bias, relu=relu, out_scale=0.7, out_zp=9)
        got = _run(x, w, zp, stride, padding, dilation, np.empty(oshape, np.uint8), **args)
        np.testing.assert_array_equal(got, _requant(acc, 0.05, w_scales, bias, relu, 0.7, 9, "u8"))
        got = _run(x, w, zp, stride, padding, dilation, np.empty(oshape, np.float32), **args)
        np.testing.assert_array_equal(got, _requant(acc, 0.05, w_scales, bias, relu, 0, 0, "f32"))


@pytest.mark.parametrize("kw", [2, 3, 8])  # word copies of 4 and 8 bytes per kernel row
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_qconv2d_split_across_threads_equals_integer_reference(kw, threads):
    """Big enough that the padding, im2col and transpose run as parallel ranges of pixels,
    planes and channels: every split gives the reference's bytes (a row copied in words never
    spills into the first row of another thread's range)."""
    n, c, h, wd, o, kh = 2, 8, 40, 41, 16, 3
    stride, padding, dilation = (1, 1), (1, 2), (1, 1)
    rng = np.random.default_rng(kw + 10 * threads)
    x = rng.integers(0, 256, (n, c, h, wd), dtype=np.uint8)
    w = rng.integers(-128, 128, (o, c, kh, kw), dtype=np.int8)
    acc = _ref_conv(x, w, 7, stride, padding, dilation)
    before = C.info()["threads"]
    C.set_num_threads(threads)
    try:
        exact = dict(a_scale=1.0, w_scales=None, bias=None, relu=0, out_scale=1.0, out_zp=0)
        got = _run(x, w, 7, stride, padding, dilation, np.empty(acc.shape, np.int32), **exact)
        np.testing.assert_array_equal(got, acc)
        w_scales = rng.uniform(0.001, 0.02, o).astype(np.float32)
        args = dict(a_scale=0.05, w_scales=w_scales, bias=None, relu=0, out_scale=0.7, out_zp=9)
        got = _run(x, w, 7, stride, padding, dilation, np.empty(acc.shape, np.uint8), **args)
        np.testing.assert_array_equal(got, _requant(acc, 0.05, w_scales, None, 0, 0.7, 9, "u8"))
    finally:
        C.set_num_threads(before)


def test_padding_reads_the_zero_point_not_zero():
    """A constant image at the zero point is 0.0 everywhere, the padding too: every output is
    the bias alone (a zero padding would add -zp * w at the borders)."""
    x = np.full((1, 2, 4, 4), 77, np.uint8)
    w = np.ones((3, 2, 3, 3), np.int8)
    out = _run(x, w, 77, (1, 1), (1, 1), (1, 1), np.empty((1, 3, 4, 4), np.int32), a_scale=1.0,
               w_scales=None, bias=None, relu=0, out_scale=1.0, out_zp=0)  # fmt: skip
    assert not out.any()


def test_quantize_dequantize_match_quantize_per_tensor():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(1000) * 3).astype(np.float32)
    x[:4] = [np.nan, np.inf, -np.inf, 0.0]
    for scale, zp in ((0.02, 128), (0.1, 0), (1e-3, 255), (0.037, 17)):
        q = np.empty(x.shape, np.uint8)
        C.quantize_u8(x, q, x.size, scale, zp)
        want = gc.quantize_per_tensor(gc.tensor(x), scale, zp, gc.quint8)
        np.testing.assert_array_equal(q, want.int_repr().numpy())
        d = np.empty(x.shape, np.float32)
        C.dequantize_u8(q, d, q.size, scale, zp)
        np.testing.assert_array_equal(d, want.dequantize().numpy())


def test_quantize_linear_u8_is_onnx_quantize_linear():
    """ONNX's formula (ONNX Runtime's bits): x / scale (a float32 division, not a product with
    the reciprocal), rounded half to even, zero point added, saturated; NaN -> 0. Against
    numpy float64 on the float32 quotient, with exact ties and values next to them."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(2000) * 4).astype(np.float32)
    ties = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, -128.5], np.float32)
    for scale, zp in ((0.02, 128), (0.1, 0), (1e-3, 255), (0.037, 17), (1.0, 3), (0.3, 0)):
        xs = np.concatenate([x, ties * np.float32(scale), np.float32([np.nan, np.inf, -np.inf])])
        xs = np.concatenate([xs, np.nextafter(xs[-11:-3], np.float32(np.inf))])
        q = np.empty(xs.shape, np.uint8)
        C.quantize_linear_u8(xs, q, xs.size, scale, zp)
        y = (xs / np.float32(scale)).astype(np.float64)  # the float32 quotient
        want = np.clip(np.rint(np.nan_to_num(y, nan=-1e9)) + zp, 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(q, want)
    with pytest.raises(ValueError, match="zero_point"):
        C.quantize_linear_u8(x, np.empty(x.shape, np.uint8), x.size, 0.1, 256)


def test_max_pool2d_u8_is_max_pool_of_dequantized():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (2, 3, 7, 6), dtype=np.uint8)
    for k, s, p, d in (((2, 2), (2, 2), (0, 0), (1, 1)), ((3, 3), (2, 1), (1, 1), (1, 1)),
                       ((2, 3), (1, 2), (1, 1), (2, 1))):  # fmt: skip
        xf = gc.tensor((x.astype(np.float32) - 5) * 0.25)
        want = gc.nn.functional.max_pool2d(xf, k, s, p, d).numpy()
        out = np.empty(want.shape, np.uint8)
        C.max_pool2d_u8(x, out, *x.shape, *k, *s, *p, *d)
        np.testing.assert_array_equal((out.astype(np.float32) - 5) * 0.25, want)


def test_bad_calls_raise():
    x = np.zeros((1, 2, 4, 4), np.uint8)
    w = np.zeros((3, 18), np.int8)
    packed = C.qgemm_pack(w, 18, 3, 1)
    geo = (1, 2, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1)
    need = C.qconv2d_work_bytes(*geo, 3, 1)
    out = np.empty((1, 3, 4, 4), np.uint8)
    args = (1.0, 0, np.ones(3, np.float32), None, 0, 1.0, 0)
    with pytest.raises(ValueError, match="work"):
        C.qconv2d(x, packed, out, np.empty(need - 1, np.uint8), *geo, *args)
    with pytest.raises(ValueError, match="c\\*kh\\*kw"):
        C.qconv2d(x, packed, out, np.empty(need, np.uint8), 1, 2, 4, 4, 2, 2, *geo[6:], *args)
    with pytest.raises(ValueError, match="'x'"):
        C.qconv2d(x[:, :1], packed, out, np.empty(need, np.uint8), *geo, *args)
    with pytest.raises(TypeError, match="uint8"):
        C.qconv2d(x.astype(np.int8), packed, out, np.empty(need, np.uint8), *geo, *args)
    with pytest.raises(ValueError, match="zero_point"):
        C.qconv2d(x, packed, out, np.empty(need, np.uint8), *geo, 1.0, 256, *args[2:])
    with pytest.raises(ValueError, match="scale"):
        C.quantize_u8(np.zeros(3, np.float32), np.zeros(3, np.uint8), 3, 0.0, 0)
    with pytest.raises(ValueError, match="'out'"):
        C.dequantize_u8(np.zeros(3, np.uint8), np.zeros(2, np.float32), 3, 1.0, 0)
    with pytest.raises(ValueError, match="padding"):
        C.max_pool2d_u8(x, np.empty((1, 2, 5, 5), np.uint8), 1, 2, 4, 4, 2, 2, 1, 1, 2, 2, 1, 1)


def test_runtime_ops_references_equal_their_kernels():
    """ir/quantized.py: each op's numpy reference (constant folding, fallbacks) gives the bits
    of its lowering to the kernels above."""
    from gpucore import dtypes as D
    from gpucore.runtime.executors.cpu import CompiledExecutor
    from gpucore.runtime.ir.graph import Graph
    from gpucore.runtime.ir.ops import op_info
    from gpucore.runtime.planner.plan import plan

    rng = np.random.default_rng(4)
    x8 = rng.integers(0, 256, (2, 3, 7, 7), dtype=np.uint8)
    w = rng.integers(-127, 128, (5, 3, 3, 3), dtype=np.int8)
    s = rng.uniform(0.001, 0.01, 5).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    conv = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "a_scale": 0.03,
            "a_zero_point": 7, "relu": True, "out_scale": 0.2, "out_zero_point": 3}  # fmt: skip
    lin = {"a_scale": 0.03, "a_zero_point": 7, "relu": False, "out_scale": None}
    pool = {"kernel": (3, 2), "stride": (2, 2), "padding": (1, 1), "dilation": (1, 1)}
    xf = (rng.standard_normal((4, 21)) * 2).astype(np.float32)
    cases = [
        ("qconv2d", [x8, w, s, b], conv, (2, 5, 4, 7), D.uint8),
        ("qconv2d", [x8, w, s], dict(conv, out_scale=None), (2, 5, 4, 7), D.float32),
        ("qlinear", [x8.reshape(6, -1)[:, :21], w.reshape(5, -1)[:, :21], s, b], lin, (6, 5),
         D.float32),
        ("qmax_pool2d", [x8], pool, (2, 3, 4, 4), D.uint8),
        ("quantize_linear", [xf], {"scale": 0.05, "zero_point": 100}, (4, 21), D.uint8),
        ("dequantize_linear", [x8], {"scale": 0.05, "zero_point": 100}, x8.shape, D.float32),
    ]  # fmt: skip
    for op, arrays, attrs, shape, dt in cases:
        g = Graph()
        names = [g.add_input("x", arrays[0].shape, D.from_numpy_dtype(arrays[0].dtype))]
        names += [g.add_constant(np.ascontiguousarray(a)) for a in arrays[1:]]
        node = g.add_node(op, names, shape, dt, attrs)
        g.outputs = [node.output]
        (got,) = CompiledExecutor(plan(g)).run([np.ascontiguousarray(arrays[0])])
        want = op_info(op).evaluate([np.ascontiguousarray(a) for a in arrays], attrs)
        np.testing.assert_array_equal(got, want, err_msg=op)
