"""gpucore._cpu against float64 numpy references (cpu/README.md): unary ops and
their backward, binary ops (broadcasting, strided views, NaN and pow semantics, aliasing),
where and copy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cpu_ext import FLOATS, SIZES, C, close, randn, rng
from helpers import op_reference, unary_code_ops


# -------------------------------------------------------------------------------------- unary
def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def np_sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _unary_ref(code: str):
    """(float64 reference, input domain) of a unary code, from its op's samples
    (tests/helpers.py op_reference): log's samples are positive, reciprocal's avoid 0."""
    op, attrs = unary_code_ops()[code]
    ref, lo, _ = op_reference(op, **attrs)
    with np.errstate(all="ignore"):
        at_zero = ref(np.zeros(1))
    domain = "pos" if lo > 0 else (None if np.isfinite(at_zero).all() else "nonzero")
    return ref, domain


UNARY_REF = {code.upper(): _unary_ref(code) for code in unary_code_ops()}


def unary_input(domain, n, dtype, seed=0):
    x = rng(seed).standard_normal(n) * 3.0
    if domain == "pos":
        x = np.abs(x) + 1e-3
    elif domain == "nonzero":
        x = np.where(np.abs(x) < 0.1, 0.5, x)
    if n >= 3:
        x[:3] = [0.0, -0.0, 1.0] if domain is None else x[:3]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(UNARY_REF))
@pytest.mark.parametrize("n", [0] + SIZES)
def test_unary(dtype, name, n):
    f, domain = UNARY_REF[name]
    x = unary_input(domain, n, dtype, seed=n)
    out = np.empty_like(x)
    C.unary(getattr(C, "UNARY_" + name), x, out)
    close(out, f(x.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(UNARY_REF))
def test_unary_in_place(dtype, name):
    f, domain = UNARY_REF[name]
    x = unary_input(domain, 129, dtype, seed=5)
    ref = f(x.astype(np.float64))
    C.unary(getattr(C, "UNARY_" + name), x, x)
    close(x, ref, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(UNARY_REF))
def test_unary_nan_propagates(dtype, name):
    x = np.array([np.nan, 1.0, np.nan], dtype)
    out = np.empty_like(x)
    C.unary(getattr(C, "UNARY_" + name), x, out)
    assert np.isnan(out[0]) and np.isnan(out[2])


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_extremes_are_stable(dtype):
    big = 1e4 if dtype == np.float32 else 1e6
    x = np.array([-big, -1000.0, -89.0, -30.0, 30.0, 89.0, 1000.0, big], dtype)
    out = np.empty_like(x)
    C.unary(C.UNARY_SIGMOID, x, out)
    assert np.isfinite(out).all()
    close(out, np_sigmoid(x.astype(np.float64)), dtype, atol=1e-30)
    for op, ref in ((C.UNARY_GELU, np_gelu), (C.UNARY_GELU_TANH, np_gelu_tanh)):
        C.unary(op, x, out)
        assert np.isfinite(out).all()
        close(out, ref(x.astype(np.float64)), dtype, atol=1e-30)
    # the tails where 1 + erf / 1 + tanh cancel: relative accuracy of the small values
    t = np.linspace(-9.0, -3.0, 13).astype(dtype)
    o = np.empty_like(t)
    C.unary(C.UNARY_GELU, t, o)
    ref = 0.5 * t.astype(np.float64) * np.vectorize(math.erfc)(-t.astype(np.float64) / math.sqrt(2))
    close(o, ref, dtype, atol=0)
    C.unary(C.UNARY_SIGMOID, t * 10, o)
    close(o, np_sigmoid((t * 10).astype(np.float64)), dtype, atol=0)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 17, 31, 67, 515])
def test_gelu_mixes_polynomial_and_erfc_elements(n):
    # float32 gelu (isa/vmath.h) takes a polynomial for -1.25 <= x <= 3 and the erfc form
    # elsewhere, gathering the far elements of a vector holding one or two of them: vectors
    # with 0, 1, 2, 3 and more far elements, in place and not, must give each element the
    # value it gets alone (the same bits) and float64's to 1e-6
    g = rng(n)
    near = g.uniform(-1.25, 3.0, n)
    far = np.where(g.random(n) < 0.5, g.uniform(-12.0, -1.25, n), g.uniform(3.0, 12.0, n))
    block = np.arange(n) // 16  # a different share of far elements per 16 lanes
    x = np.where(g.random(n) < (block % 5) / 4.0, far, near).astype(np.float32)
    x[:: max(n // 3, 1)] = np.float32(-1.25)  # the edges of the polynomial's range
    x[n // 2] = np.float32(3.0)
    out = np.empty_like(x)
    C.unary(C.UNARY_GELU, x, out)
    alone = np.empty(1, np.float32)
    for i in range(n):
        C.unary(C.UNARY_GELU, x[i : i + 1], alone)
        assert out[i].tobytes() == alone[0].tobytes(), (i, x[i], out[i], alone[0])
    xd = x.astype(np.float64)
    ref = 0.5 * xd * np.vectorize(math.erfc)(-xd / math.sqrt(2.0))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=0)
    y = x.copy()
    C.unary(C.UNARY_GELU, y, y)
    assert y.tobytes() == out.tobytes()


def np_gelu_grad(x):
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(
        2 * math.pi
    )


def np_gelu_tanh_grad(x):
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)


BACKWARD = {
    # name: (saved from x, d(forward)/dx as a function of x)
    "RELU": (lambda x: x, lambda x: (x > 0).astype(np.float64)),
    "SIGMOID": (np_sigmoid, lambda x: np_sigmoid(x) * (1 - np_sigmoid(x))),
    "TANH": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "GELU": (lambda x: x, np_gelu_grad),
    "GELU_TANH": (lambda x: x, np_gelu_tanh_grad),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(BACKWARD))
@pytest.mark.parametrize("n", [0, 1, 13, 257])
def test_unary_backward(dtype, name, n):
    save, deriv = BACKWARD[name]
    x = rng(n).standard_normal(n) * 3
    if n:
        x[0] = 0.0
    x = x.astype(dtype)
    g = randn(n, dtype, seed=n + 1)
    saved = save(x.astype(np.float64)).astype(dtype)
    out = np.empty_like(x)
    C.unary_backward(getattr(C, "UNARY_" + name), g, saved, out)
    # the reference uses the same (rounded) saved values the kernel saw
    if name in ("SIGMOID", "TANH"):
        s = saved.astype(np.float64)
        d = s * (1 - s) if name == "SIGMOID" else 1 - s * s
    else:
        d = deriv(x.astype(np.float64))
    close(out, g.astype(np.float64) * d, dtype)


@pytest.mark.parametrize("name,fwd", [("GELU", np_gelu), ("GELU_TANH", np_gelu_tanh)])
def test_gelu_backward_matches_finite_differences(name, fwd):
    x = np.linspace(-6, 6, 97)
    x = x[np.abs(x) > 1e-3]
    out = np.empty_like(x)
    C.unary_backward(getattr(C, "UNARY_" + name), np.ones_like(x), x, out)
    h = 1e-5
    fd = (fwd(x + h) - fwd(x - h)) / (2 * h)
    np.testing.assert_allclose(out, fd, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("n", [1, 7, 9, 17, 67, 300, 515])
def test_gelu_backward_mixes_polynomial_and_erfc_elements(n):
    # float32 gelu' (isa/vmath.h) takes a polynomial for -1.25 <= x <= 2 and the one-exp erfc
    # form elsewhere, the far elements of a vector gathered, in blocks of 256: each element must
    # get the bits it gets alone, in place over g or s too, and float64's to 3e-7 (it crosses
    # zero near -0.75: an absolute bound)
    g = rng(n + 100)
    near = g.uniform(-1.25, 2.0, n)
    far = np.where(g.random(n) < 0.5, g.uniform(-14.0, -1.25, n), g.uniform(2.0, 14.0, n))
    block = np.arange(n) // 16
    x = np.where(g.random(n) < (block % 5) / 4.0, far, near).astype(np.float32)
    x[:: max(n // 3, 1)] = np.float32(-1.25)
    x[n // 2] = np.float32(2.0)
    w = g.uniform(-2, 2, n).astype(np.float32)
    out = np.empty_like(x)
    C.unary_backward(C.UNARY_GELU, w, x, out)
    alone = np.empty(1, np.float32)
    for i in range(n):
        C.unary_backward(C.UNARY_GELU, w[i : i + 1], x[i : i + 1], alone)
        assert out[i].tobytes() == alone[0].tobytes(), (i, x[i], out[i], alone[0])
    ref = w.astype(np.float64) * np_gelu_grad(x.astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=0, atol=3e-7 * 2)
    for target in ("g", "s"):
        gg, ss = w.copy(), x.copy()
        C.unary_backward(C.UNARY_GELU, gg, ss, gg if target == "g" else ss)
        assert (gg if target == "g" else ss).tobytes() == out.tobytes()


@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_tanh_backward_extremes(dtype):
    x = np.array([-1e30, -50, -10.5, 10.5, 50, 1e30], dtype)
    out = np.empty_like(x)
    C.unary_backward(C.UNARY_GELU_TANH, np.ones_like(x), x, out)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, [0, 0, 0, 1, 1, 1], atol=1e-30)
    C.unary_backward(C.UNARY_GELU, np.ones_like(x), x, out)
    assert np.isfinite(out).all()


def test_unary_backward_rejects_ops_without_backward():
    x = np.ones(3)
    with pytest.raises(ValueError, match="no backward kernel"):
        C.unary_backward(C.UNARY_EXP, x, x, np.empty(3))


# ------------------------------------------------------------------------------------- binary
# every binary code of cpu/opcodes.def, with its op's reference (comparisons: numpy's, exact)
BINARY_REF = {code.upper(): op_reference(code)[0] for code in C.OPCODES["binary"]}
COMPARISONS = {"EQ", "NE", "LT", "LE", "GT", "GE"}


def binary_check(name, a, b, dtype):
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    is_cmp = name in COMPARISONS
    out = np.empty(out_shape, np.bool_ if is_cmp else dtype)
    C.binary(getattr(C, "BINARY_" + name), a, b, out)
    with np.errstate(all="ignore"):
        ref = BINARY_REF[name](a.astype(np.float64), b.astype(np.float64))
    if is_cmp:
        ref = BINARY_REF[name](a, b)  # compare the stored values exactly
        np.testing.assert_array_equal(out, ref)
    else:
        close(out, ref, dtype)


def binary_inputs(name, shape_a, shape_b, dtype, seed=0):
    r = rng(seed)
    a = r.standard_normal(shape_a) * 2
    b = r.standard_normal(shape_b) * 2
    if name == "POW":
        a = np.abs(a) + 0.1
    if name == "DIV":
        b = np.where(np.abs(b) < 0.1, 0.7, b)
    if name in COMPARISONS and a.size and b.size:  # some equal values
        b.flat[0] = a.flat[0]
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(BINARY_REF))
@pytest.mark.parametrize("n", [0] + SIZES)
def test_binary_contiguous(dtype, name, n):
    a, b = binary_inputs(name, (n,), (n,), dtype, seed=n)
    binary_check(name, a, b, dtype)


BCAST_SHAPES = [
    ((), (7,)),
    ((7,), ()),
    ((1,), (13,)),
    ((3, 1, 5), (4, 5)),
    ((2, 3, 4), (3, 1)),
    ((4, 1), (1, 65)),
    ((0, 3), (3,)),
    ((2, 0, 3), (1, 1)),
    ((1, 1, 1), (1,)),
    ((2, 1, 2, 1, 2, 1, 2, 1), (1, 2, 1, 2, 1, 2, 1, 3)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", list(BINARY_REF))
@pytest.mark.parametrize("sa,sb", BCAST_SHAPES)
def test_binary_broadcast(dtype, name, sa, sb):
    a, b = binary_inputs(name, sa, sb, dtype, seed=len(sa))
    binary_check(name, a, b, dtype)


def strided_views(dtype, positive, seed=0):
    """(a, b) pairs of non-contiguous views that broadcast together; no values near 0."""
    base = rng(seed).standard_normal((8, 10, 6))
    base = np.where(np.abs(base) < 0.1, 0.5, base)
    base = (np.abs(base) if positive else base).astype(dtype)
    yield base[::2, 1::3, ::-1], base[1, :4, ::-2][:, None, :1]  # (4,4,6) with (4,1,1)
    yield base[::-1, ::-1, ::-1], base[0, 0]  # negative strides, then a row
    yield base.transpose(2, 0, 1), base[:1, :8, 0].T  # transposed, (6,8,10) with (8,1)
    yield np.broadcast_to(base[0, :, :1], (4, 10, 6)), base[::2, :, 2][:, :, None]  # 0-stride
    yield base[:, ::3, ::5][..., None], base[0, 0, :1]  # size-1 dims with odd strides
    yield base[:, 2, :], base[:, 3, :]  # same shape, both strided


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["ADD", "SUB", "DIV", "POW", "MAXIMUM", "LT", "EQ"])
def test_binary_strided_views(dtype, name):
    for a, b in strided_views(dtype, positive=name == "POW"):
        assert not a.flags.c_contiguous or not b.flags.c_contiguous
        binary_check(name, a, b, dtype)
        binary_check(name, b, a, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_nan_and_pow_semantics(dtype):
    nan, inf = np.nan, np.inf
    a = np.array([nan, 1.0, nan, 2.0, -0.0, -2.0, -2.0, 0.0, nan, -inf], dtype)
    b = np.array([1.0, nan, nan, 2.0, 0.0, 3.0, 0.5, -1.0, 0.0, 0.5], dtype)
    out = np.empty_like(a)
    C.binary(C.BINARY_MAXIMUM, a, b, out)
    np.testing.assert_array_equal(np.isnan(out[:3]), True)
    C.binary(C.BINARY_MINIMUM, a, b, out)
    np.testing.assert_array_equal(np.isnan(out[:3]), True)
    C.binary(C.BINARY_POW, a, b, out)
    with np.errstate(all="ignore"):
        ref = np.power(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(out, ref.astype(dtype))
    assert out[4] == 1.0 and out[8] == 1.0  # pow(x, 0) == 1 even for NaN x
    assert out[5] == -8.0 and np.isnan(out[6]) and out[7] == np.inf
    bo = np.empty(a.shape, np.bool_)
    C.binary(C.BINARY_NE, a, b, bo)
    assert bo[0] and bo[1] and bo[2]
    C.binary(C.BINARY_EQ, a, a, bo)
    assert not bo[0] and bo[1]


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_out_aliases_input(dtype):
    a = randn((13, 7), dtype)
    b = randn((7,), dtype, 1)
    ref = a.astype(np.float64) * b
    C.binary(C.BINARY_MUL, a, b, a)  # out is a: same shape, contiguous
    close(a, ref, dtype)
    c = randn((13, 7), dtype, 2)
    ref = b.astype(np.float64) - c
    C.binary(C.BINARY_SUB, b, c, c)
    close(c, ref, dtype)


def test_binary_zero_dim_and_max_dims():
    out = np.empty((), np.float64)
    C.binary(C.BINARY_ADD, np.array(1.5), np.array(2.0), out)
    assert out == 3.5
    shape8 = (2, 1, 2, 1, 2, 1, 2, 3)
    a = randn(shape8, np.float64)
    o8 = np.empty(shape8)
    C.binary(C.BINARY_MUL, a, a[..., :1], o8)
    close(o8, a * a[..., :1], np.float64)
    with pytest.raises(ValueError, match="at most 8"):
        C.binary(C.BINARY_ADD, np.ones(1), np.ones(1), np.empty((1,) * 9))


def test_binary_rejects_partial_alias():
    x = np.arange(20, dtype=np.float64)
    with pytest.raises(ValueError, match="overlaps"):
        C.binary(C.BINARY_ADD, x[:10], x[:10], x[1:11])
    y = np.ones((4, 5))
    with pytest.raises(ValueError, match="overlaps"):
        C.binary(C.BINARY_ADD, y[:1], y, y)  # broadcast input that is part of out


# -------------------------------------------------------------------------------------- where
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int64, np.bool_, np.int16, np.uint8, np.uint32]
)
def test_where(dtype):
    r = rng(4)
    cond = r.random((3, 1, 5)) > 0.5
    a = (r.standard_normal((4, 5)) * 10).astype(dtype)
    b = (r.standard_normal((3, 4, 1)) * 10).astype(dtype)[:, ::-1]
    out = np.empty((3, 4, 5), dtype)
    C.where(cond, a, b, out)
    np.testing.assert_array_equal(out, np.where(cond, a, b))
    c2 = np.broadcast_to(r.random((5,)) > 0.5, (4, 5))
    out2 = np.empty((4, 5), dtype)
    C.where(c2, a, np.array(7, dtype), out2)
    np.testing.assert_array_equal(out2, np.where(c2, a, np.array(7, dtype)))
    e = np.empty((0, 5), dtype)
    C.where(np.ones((0, 1), np.bool_), e, a[0], e)


def test_where_errors():
    with pytest.raises(TypeError, match="cond"):
        C.where(np.ones(3), np.ones(3), np.ones(3), np.empty(3))
    with pytest.raises(TypeError, match="same format"):
        C.where(np.ones(3, np.bool_), np.ones(3), np.ones(3, np.float32), np.empty(3))


# --------------------------------------------------------------------------------------- copy
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int64, np.bool_, np.float16, np.int16, np.uint8]
)
def test_copy_strided(dtype):
    base = (rng(5).standard_normal((6, 8, 10)) * 10).astype(dtype)
    cases = [
        (base, np.empty_like(base)),
        (base[::2, ::-1, 1::3], np.empty((3, 8, 3), dtype)),
        (base.transpose(2, 0, 1), np.empty((10, 6, 8), dtype)),
        (np.broadcast_to(base[0, 0], (4, 10)), np.empty((4, 10), dtype)),
        (base[0, 0, 0], np.empty((), dtype)),
        (base[:, :0], np.empty((6, 0, 10), dtype)),
        # [B, H, S, D] -> [B, S, H, D]: short contiguous rows under two strided dims
        (base.reshape(2, 3, 8, 10).transpose(0, 2, 1, 3), np.empty((2, 8, 3, 10), dtype)),
        (
            base.reshape(2, 3, 8, 10)[:, ::-1, 1:].transpose(2, 0, 1, 3),
            np.empty((7, 2, 3, 10), dtype),
        ),
    ]
    for src, dst in cases:
        C.copy(src, dst)
        np.testing.assert_array_equal(dst, src)
    # strided destination
    dstbase = np.zeros((6, 16, 10), dtype)
    C.copy(base, dstbase[:, ::-2])
    np.testing.assert_array_equal(dstbase[:, ::-2], base)
    np.testing.assert_array_equal(dstbase[:, -2::-2], 0)


def test_copy_overlapping_views():
    x = np.arange(20, dtype=np.float64)
    ref = x.copy()
    ref[1:] = ref[:-1].copy()
    C.copy(x[:-1], x[1:])
    np.testing.assert_array_equal(x, ref)
    y = np.arange(12, dtype=np.int32).reshape(3, 4)
    ref = y[::-1, ::-1].copy()
    C.copy(y[::-1, ::-1], y)
    np.testing.assert_array_equal(y, ref)
    z = np.arange(5.0)
    C.copy(z, z)
    np.testing.assert_array_equal(z, np.arange(5.0))


def test_copy_errors():
    with pytest.raises(TypeError, match="format"):
        C.copy(np.ones(3, np.float32), np.empty(3, np.float64))
    with pytest.raises(ValueError, match="shape"):
        C.copy(np.ones(3), np.empty(4))
    with pytest.raises(ValueError, match="read-only"):
        C.copy(np.ones(3), np.broadcast_to(np.zeros(1), (3,)))
    cplx = np.arange(6, dtype=np.complex64)  # format 'Zf': moved bytewise
    dcplx = np.empty(3, np.complex64)
    C.copy(cplx[::2], dcplx)
    np.testing.assert_array_equal(dcplx, cplx[::2])
    with pytest.raises(TypeError, match="must match"):
        C.copy(cplx, np.empty(6, np.float64))
    objs = np.array([object()] * 3)
    with pytest.raises(TypeError, match="plain"):
        C.copy(objs, np.empty(3, object))
    with pytest.raises(TypeError, match="plain"):
        C.where(np.ones(3, np.bool_), objs, objs, np.empty(3, object))
