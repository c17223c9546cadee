"""The node-kind cases of tests/backends/cpu/test_program.py: ``CASES[kind](arena, dtype)`` gives
a list of ``(binding, args)`` nodes of that kind over views into one ``Arena`` array (strided and
overlapping) and constant arrays outside it. A new Program node kind (cpu/python/nodes.h) needs
its ``case_<kind>`` here."""

from __future__ import annotations

import numpy as np

from gpucore import _cpu as C

DTYPES = [np.float32, np.float64]


class Arena:
    """One uint8 array cut into 64-byte aligned typed views, each with a fill rule (refill()
    draws new values for every view, as a new run's data)."""

    def __init__(self, seed=0, nbytes=1 << 20):
        self.buf = np.zeros(nbytes, np.uint8)
        self.off = 0
        self.fills = []
        self.rng = np.random.default_rng(seed)

    def alloc(self, shape, dtype, fill="normal"):
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        self.off = -(-self.off // 64) * 64
        v = self.buf[self.off : self.off + n].view(dtype).reshape(shape)
        self.off += n
        assert self.off <= self.buf.size
        self.fills.append((v, fill))
        self._fill(v, fill)
        return v

    def _fill(self, v, fill):
        if fill == "normal":
            v[...] = self.rng.standard_normal(v.shape)
        elif fill == "bool":
            v[...] = self.rng.random(v.shape) < 0.5
        elif fill is not None:
            v[...] = fill(self.rng, v.shape)

    def refill(self):
        for v, fill in self.fills:
            self._fill(v, fill)

    def const(self, shape, dtype):
        """A weight outside the arena."""
        return self.rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------------------------
# One case per node kind: a list of (name, args) over an arena.

CONV = (2, 3, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1)  # n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw
OH, OW = 6, 5
POOL = (
    6,
    6,
    5,
    2,
    2,
    2,
    2,
    0,
    0,
    1,
    1,
    3,
    2,
)  # planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow


def case_gemm(ar, dt):
    a = ar.alloc((7, 5), dt)  # stored k x m: trans_a
    b = ar.const((6, 7), dt)  # stored n x k: trans_b
    c = ar.alloc((5, 6), dt)
    big_a, big_b, big_c = ar.alloc((64, 96), dt), ar.const((96, 80), dt), ar.alloc((64, 80), dt)
    return [
        ("gemm", (a, b, c, 1, 5, 6, 7, 1, 1, 0.5, 2.0, 0, 0, 0)),
        ("gemm", (big_a, big_b, big_c, 1, 64, 80, 96, 0, 0, 1.0, 0.0, 0, 0, 0)),
    ]


def case_gemm_ex(ar, dt):
    a, b, c = ar.alloc((2, 5, 7), dt), ar.const((7, 6), dt), ar.alloc((2, 5, 6), dt)
    bias = ar.const((6,), dt)
    # pre-packed constants (gemm_pack): a Linear weight in both layouts, an A shared by a batch
    x, w, y = ar.alloc((35, 40), dt), ar.const((30, 40), dt), ar.alloc((35, 30), dt)
    bias30 = ar.const((30,), dt)
    pw0, pw1 = C.gemm_pack(w, "b", 40, 30, 1, 0), C.gemm_pack(w, "b", 40, 30, 1, 1)
    wa, xb, yb = ar.const((26, 9), dt), ar.alloc((3, 9, 20), dt), ar.alloc((3, 26, 20), dt)
    pa = C.gemm_pack(wa, "a", 26, 9, 0, 1)
    return [
        ("gemm_ex", (a, b, c, 2, 5, 6, 7, 0, 0, 1.5, 0.5, 35, 0, 30, bias, C.UNARY_GELU)),
        ("gemm_ex", (a, b, c, 2, 5, 6, 7, 0, 0, 1.0, 0.0, 35, 0, 30, None, -1)),
        ("gemm_ex", (x, pw0, y, 1, 35, 30, 40, 0, 1, 1.0, 0.0, 0, 0, 0, bias30, C.UNARY_RELU)),
        ("gemm_ex", (x, pw1, y, 1, 35, 30, 40, 0, 1, 1.0, 1.0, 0, 0, 0, None, -1)),
        ("gemm_ex", (pa, xb, yb, 3, 26, 20, 9, 0, 0, 0.5, 0.0, 0, 180, 520, None, -1)),
    ]


def case_unary(ar, dt):
    x, y = ar.alloc((40,), dt), ar.alloc((8, 5), dt)
    return [("unary", (C.UNARY_EXP, x, y)), ("unary", (C.UNARY_TANH, y, y))]


def case_unary_backward(ar, dt):
    g, s, out = ar.alloc((33,), dt), ar.alloc((33,), dt), ar.alloc((33,), dt)
    return [("unary_backward", (C.UNARY_GELU, g, s, out))]


def case_binary(ar, dt):
    a = ar.alloc((6, 10), dt)[::-1, ::2]  # strided, negative strides
    b = ar.alloc((5,), dt)  # broadcast
    out, cmp = ar.alloc((6, 5), dt), ar.alloc((6, 5), np.bool_, None)
    return [
        ("binary", (C.BINARY_MUL, a, b, out)),
        ("binary", (C.BINARY_LT, a, out, cmp)),
        ("binary", (C.BINARY_ADD, out, b, out)),  # in place
    ]


def case_where(ar, dt):
    cond = ar.alloc((4, 1), np.bool_, "bool")
    a, b = ar.alloc((4, 12), dt)[:, ::3], ar.const((4,), dt)
    out = ar.alloc((4, 4), dt)
    return [("where", (cond, a, b, out))]


def case_reduce(ar, dt):
    x = ar.alloc((3, 5, 4), dt)
    s, i = ar.alloc((3, 4), dt), ar.alloc((3, 4), np.int64, None)
    return [("reduce", (C.REDUCE_SUM, x, s, 3, 5, 4)), ("reduce", (C.REDUCE_ARGMAX, x, i, 3, 5, 4))]


def case_softmax(ar, dt):
    x, y, z = ar.alloc((2, 7, 3), dt), ar.alloc((2, 7, 3), dt), ar.alloc((2, 7, 3), dt)
    return [("softmax", (x, y, 2, 7, 3, 0)), ("softmax", (x, z, 2, 7, 3, 1))]


def case_softmax_backward(ar, dt):
    g, y, out = ar.alloc((5, 9), dt), ar.alloc((5, 9), dt), ar.alloc((5, 9), dt)
    return [
        ("softmax_backward", (g, y, out, 5, 9, 1, 0)),
        ("softmax_backward", (g, y, g, 5, 9, 1, 1)),
    ]


def case_copy(ar, dt):
    src = ar.alloc((6, 8), dt)[1::2, ::-3]
    dst = ar.alloc((3, 3), dt)
    region = ar.alloc((64,), dt)
    return [
        ("copy", (src, dst)),
        ("copy", (region[:60], region[4:])),  # overlapping views: through a temporary
        ("copy", (dst.T, ar.alloc((6, 8), dt)[::2, ::3])),  # strided to strided
    ]


def _wide(rng, shape):
    """Values that leave every integer type's range, with NaN and infinities among them."""
    v = rng.standard_normal(shape) * 10.0 ** rng.integers(0, 20, shape)
    return np.where(rng.random(shape) < 0.1, [np.nan, np.inf, -np.inf][rng.integers(0, 3)], v)


def case_cast(ar, dt):
    src = ar.alloc((6, 8), dt, _wide)
    ints = ar.alloc((5, 4), np.int64, lambda rng, shape: rng.integers(-(2**62), 2**62, shape))
    return [
        ("cast", (src, ar.alloc((6, 8), np.uint8, None))),
        ("cast", (src[1::2, ::-3], ar.alloc((3, 3), np.int32, None))),  # strided source
        ("cast", (src.T, ar.alloc((8, 6), np.int64, None))),
        ("cast", (src, ar.alloc((6, 8), np.bool_, None))),
        ("cast", (ints, ar.alloc((4, 5), np.float32, None).T)),  # strided destination
        ("cast", (ints, ar.alloc((5, 4), np.int8, None))),
        ("cast", (src, ar.alloc((6, 8), np.float32 if dt == np.float64 else np.float64, None))),
    ]


def case_gather(ar, dt):
    x = ar.alloc((5, 7), dt)
    idx = ar.alloc((4, 6), np.int64, fill=lambda rng, shape: rng.integers(0, 5, shape))
    rows = ar.alloc((3,), np.int64, fill=lambda rng, shape: rng.integers(0, 7, shape))
    return [
        ("gather", (x, idx, ar.alloc((4, 6), dt), 0)),  # index smaller than x off the dim
        ("gather", (x[:, ::-2], idx[:, :4] % 4, ar.alloc((4, 4), dt), 1)),  # strided x
        # an embedding's index: one row of ids expanded along the columns (stride 0)
        ("gather", (x.T, np.broadcast_to(rows[:, None], (3, 5)), ar.alloc((3, 5), dt), 0)),
    ]


def case_im2col(ar, dt):
    n, c, h, w, kh, kw = CONV[:6]
    x, col = ar.alloc((n, c, h, w), dt), ar.alloc((n, c * kh * kw, OH * OW), dt)
    return [("im2col", (x, col, *CONV))]


def case_col2im(ar, dt):
    n, c, h, w, kh, kw = CONV[:6]
    col, x = ar.alloc((n, c * kh * kw, OH * OW), dt), ar.alloc((n, c, h, w), dt)
    return [("col2im", (col, x, *CONV))]


def case_conv2d_forward(ar, dt):
    n, c, h, w, kh, kw = CONV[:6]
    o = 4
    x, wt, bias = ar.alloc((n, c, h, w), dt), ar.const((o, c, kh, kw), dt), ar.const((o,), dt)
    out, out2 = ar.alloc((n, o, OH, OW), dt), ar.alloc((n, o, OH, OW), dt)
    w30 = ar.const((30, c, kh, kw), dt)  # a pre-packed weight (gemm_pack), both layouts
    out3 = ar.alloc((n, 30, OH, OW), dt)
    pw = [C.gemm_pack(w30, "a", 30, c * kh * kw, 0, s) for s in (0, 1)]
    return [
        ("conv2d_forward", (x, wt, bias, out, *CONV, o)),
        ("conv2d_forward", (x, wt, None, out2, *CONV, o)),
        ("conv2d_forward", (x, pw[0], None, out3, *CONV, 30)),
        ("conv2d_forward", (x, pw[1], None, out3, *CONV, 30)),
    ]


def case_conv2d_backward(ar, dt):
    n, c, h, w, kh, kw = CONV[:6]
    o = 4
    x, wt, g = (
        ar.alloc((n, c, h, w), dt),
        ar.const((o, c, kh, kw), dt),
        ar.alloc((n, o, OH, OW), dt),
    )
    gx, gw, gb = ar.alloc((n, c, h, w), dt), ar.alloc((o, c, kh, kw), dt), ar.alloc((o,), dt)
    return [
        ("conv2d_backward", (x, wt, g, gx, gw, gb, *CONV, o)),
        ("conv2d_backward", (x, wt, g, None, gw, None, *CONV, o)),
    ]


def case_max_pool2d(ar, dt):
    planes, h, w = POOL[:3]
    oh, ow = POOL[-2:]
    x = ar.alloc((planes, h, w), dt)
    vals, idx = ar.alloc((planes, oh, ow), dt), ar.alloc((planes, oh, ow), np.int64, None)
    return [("max_pool2d", (x, vals, idx, *POOL))]


def case_max_pool2d_backward(ar, dt):
    planes, h, w = POOL[:3]
    oh, ow = POOL[-2:]
    g = ar.alloc((planes, oh, ow), dt)
    idx = ar.alloc((planes, oh, ow), np.int64, lambda rng, shape: rng.integers(0, h * w, shape))
    gx = ar.alloc((planes, h, w), dt)
    return [("max_pool2d_backward", (g, idx, gx, *POOL))]


def case_layer_norm(ar, dt):
    x, out = ar.alloc((6, 40), dt), ar.alloc((6, 40), dt)
    w, b = ar.const((40,), dt), ar.const((40,), dt)
    return [
        ("layer_norm", (x, w, b, out, 6, 40, 1e-5)),
        ("layer_norm", (out, None, b, out, 6, 40, 0.1)),  # in place
    ]


def case_attention(ar, dt):
    # q, k, v: [B, S, H, D] buffers permuted to [B, H, S, D]; out likewise
    q = ar.alloc((2, 7, 3, 8), dt).transpose(0, 2, 1, 3)
    k, v = ar.alloc((2, 9, 3, 8), dt).transpose(0, 2, 1, 3), ar.const((2, 3, 9, 5), dt)
    out, out2 = ar.alloc((2, 7, 3, 5), dt).transpose(0, 2, 1, 3), ar.alloc((2, 3, 7, 5), dt)
    mask = ar.alloc((7, 9), np.bool_, "bool")
    fmask = ar.alloc((1, 3, 1, 9), dt)
    return [
        ("attention", (q, k, v, mask, out, 0.35, 0, 1)),
        ("attention", (q, k, v, fmask, out2, 0.35, 1, 2)),
    ]


def _u8(rng, shape):
    return rng.integers(0, 256, shape)


def case_qgemm(ar, dt):
    # int8 kinds: the same nodes for both float dtypes (dt unused)
    a = ar.alloc((5, 40), np.uint8, _u8)
    w = ar.rng.integers(-128, 128, (7, 40)).astype(np.int8)
    pw = C.qgemm_pack(w, 40, 7, 1)
    s, b = np.full(7, 0.01, np.float32), ar.const((7,), np.float32)
    o8, o32 = ar.alloc((5, 7), np.uint8, None), ar.alloc((5, 7), np.float32, None)
    return [
        ("qgemm", (a, pw, o8, 5, 0.05, 3, s, b, 1, 0.5, 7)),
        ("qgemm", (a, pw, o32, 5, 0.05, 3, s, None, 0, 1.0, 0)),
    ]


def case_qconv2d(ar, dt):
    n, c, h, w, kh, kw = CONV[:6]
    x = ar.alloc((n, c, h, w), np.uint8, _u8)
    wt = ar.rng.integers(-128, 128, (4, c * kh * kw)).astype(np.int8)
    pw = C.qgemm_pack(wt, c * kh * kw, 4, 1)
    s, b = np.full(4, 0.02, np.float32), ar.const((4,), np.float32)
    out = ar.alloc((n, 4, OH, OW), np.uint8, None)
    work = ar.alloc((C.qconv2d_work_bytes(*CONV, 4, 1),), np.uint8, None)
    return [("qconv2d", (x, pw, out, work, *CONV, 0.05, 11, s, b, 1, 0.3, 5))]


def case_quantize_u8(ar, dt):
    x, q = ar.alloc((50,), np.float32), ar.alloc((50,), np.uint8, None)
    return [("quantize_u8", (x, q, 50, 0.02, 128))]


def case_quantize_linear_u8(ar, dt):
    x, q = ar.alloc((50,), np.float32), ar.alloc((50,), np.uint8, None)
    return [("quantize_linear_u8", (x, q, 50, 0.02, 128))]


def case_dequantize_u8(ar, dt):
    q, x = ar.alloc((50,), np.uint8, _u8), ar.alloc((50,), np.float32, None)
    return [("dequantize_u8", (q, x, 50, 0.02, 128))]


def case_max_pool2d_u8(ar, dt):
    x = ar.alloc((2, 3, 6, 5), np.uint8, _u8)
    out = ar.alloc((2, 3, 4, 3), np.uint8, None)
    return [("max_pool2d_u8", (x, out, 2, 3, 6, 5, 2, 2, 2, 2, 1, 1, 1, 1))]


def case_dynamic_quantize_u8(ar, dt):
    # the three nodes of a DynamicQuantizeLinear: each writes one output
    x = ar.alloc((50,), np.float32)
    q, s = ar.alloc((50,), np.uint8, None), ar.alloc((1,), np.float32, None)
    z = ar.alloc((1,), np.uint8, None)
    return [
        ("dynamic_quantize_u8", (x, q, None, None, 50)),
        ("dynamic_quantize_u8", (x, None, s, None, 50)),
        ("dynamic_quantize_u8", (x, None, None, z, 50)),
    ]


def case_dynamic_quantize_torch_u8(ar, dt):
    # the fused float-input qlinear_dynamic's first call: all three outputs at once
    x = ar.alloc((50,), np.float32)
    q, s = ar.alloc((50,), np.uint8, None), ar.alloc((1,), np.float32, None)
    z = ar.alloc((1,), np.uint8, None)
    return [
        ("dynamic_quantize_torch_u8", (x, q, s, z, 50)),
        ("dynamic_quantize_torch_u8", (x, None, s, None, 50)),
    ]


def case_qgemm_dynamic(ar, dt):
    # the zero point and scale are arena values (a run's refill changes them)
    a = ar.alloc((5, 40), np.uint8, _u8)
    w = ar.rng.integers(-127, 128, (7, 40)).astype(np.int8)
    pw = C.qgemm_pack(w, 40, 7, 1)
    zp, sc = ar.alloc((1,), np.uint8, _u8), ar.alloc((1,), np.float32)
    s, b = np.full(7, 0.01, np.float32), ar.const((7,), np.float32)
    o32, i32 = ar.alloc((5, 7), np.float32, None), ar.alloc((5, 7), np.int32, None)
    relu = ar.alloc((5, 7), np.float32, None)
    return [
        ("qgemm_dynamic", (a, pw, o32, 5, sc, zp, s, b, 0)),
        ("qgemm_dynamic", (a, pw, relu, 5, sc, zp, s, b, 1)),
        ("qgemm_dynamic", (a, pw, i32, 5, None, zp, None, None, 0)),
    ]


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
