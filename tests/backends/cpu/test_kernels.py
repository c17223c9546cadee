"""Tests of the C extension gpucore._cpu against float64 numpy references (cpu/README.md)."""

from __future__ import annotations

import glob
import importlib.util
import itertools
import math
import os
import threading

import numpy as np
import pytest


def _load_cpu():
    """gpucore._cpu; if the package itself fails to import, load the built .so directly."""
    try:
        from gpucore import _cpu

        return _cpu
    except Exception:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        paths = sorted(glob.glob(os.path.join(root, "gpucore", "_cpu*.so")))
        paths += sorted(glob.glob(os.path.join(root, "gpucore", "_cpu*.pyd")))
        if not paths:
            raise
        spec = importlib.util.spec_from_file_location("gpucore._cpu", paths[0])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


C = _load_cpu()

FLOATS = [np.float32, np.float64]
SIZES = [1, 7, 13, 65, 129, 257]
RTOL_ELEM = {np.float32: 1e-5, np.float64: 1e-12}
ATOL_ELEM = {np.float32: 1e-6, np.float64: 1e-14}
RTOL_ACC = {np.float32: 1e-4, np.float64: 1e-12}  # gemm and reductions


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(shape, dtype, seed=0):
    return rng(seed).standard_normal(shape).astype(dtype)


def close(got, ref, dtype, rtol=None, atol=None):
    rtol = RTOL_ELEM[dtype] if rtol is None else rtol
    atol = ATOL_ELEM[dtype] if atol is None else atol
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol, atol=atol)


# --------------------------------------------------------------------------------- constants
def test_op_constants_are_distinct_ints():
    for prefix, count in (("UNARY_", 14), ("BINARY_", 13), ("REDUCE_", 6)):
        names = [n for n in dir(C) if n.startswith(prefix)]
        assert len(names) == count
        assert sorted(getattr(C, n) for n in names) == list(range(count))
    assert C.MAX_DIMS == 8


# --------------------------------------------------------------------------------------- gemm
def gemm_check(dtype, m, n, k, ta, tb, alpha, beta, seed=0):
    r = rng(seed)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c0 = r.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    C.gemm(a, b, c, 1, m, n, k, ta, tb, alpha, beta, 0, 0, 0)
    oa = a.astype(np.float64).T if ta else a.astype(np.float64)
    ob = b.astype(np.float64).T if tb else b.astype(np.float64)
    ref = alpha * (oa @ ob) + (beta * c0.astype(np.float64) if beta != 0 else 0.0)
    bound = abs(alpha) * (np.abs(oa) @ np.abs(ob)) + abs(beta) * np.abs(c0.astype(np.float64))
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= RTOL_ACC[dtype] * bound + 1e-30), float(
        (err - RTOL_ACC[dtype] * bound).max()
    )


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize(
    "m,n,k",
    [
        (1, 1, 1),
        (7, 13, 1),
        (13, 7, 129),
        (65, 257, 7),
        (129, 1, 65),
        (1, 257, 13),
        (6, 9, 2),
        (257, 65, 300),
    ],
)
def test_gemm_shapes_and_transposes(dtype, ta, tb, m, n, k):
    gemm_check(dtype, m, n, k, ta, tb, 1.0, 0.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize("alpha,beta", [(0.5, 2.0), (-1.5, 1.0), (2.0, -0.25), (0.0, 3.0)])
def test_gemm_alpha_beta(dtype, ta, tb, alpha, beta):
    gemm_check(dtype, 13, 7, 65, ta, tb, alpha, beta, seed=1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (5, 0, 3), (0, 0, 0), (5, 3, 0)])
def test_gemm_empty(dtype, m, n, k):
    a = np.ones((m, k), dtype)
    b = np.ones((k, n), dtype)
    c = np.full((m, n), 3.0, dtype)
    C.gemm(a, b, c, 1, m, n, k, 0, 0, 1.0, 0.5, 0, 0, 0)
    np.testing.assert_array_equal(c, np.full((m, n), 1.5, dtype))  # k == 0: C = beta * C
    c[...] = np.nan
    C.gemm(a, b, c, 1, m, n, k, 0, 0, 1.0, 0.0, 0, 0, 0)
    np.testing.assert_array_equal(c, np.zeros((m, n), dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
def test_gemm_beta_zero_ignores_nan_in_c(dtype, ta, tb):
    a = randn((7, 13), dtype)
    b = randn((13, 5), dtype, 1)
    oa, ob = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    c = np.full((7, 5), np.nan, dtype)
    C.gemm(oa, ob, c, 1, 7, 5, 13, ta, tb, 1.0, 0.0, 0, 0, 0)
    assert np.isfinite(c).all()
    close(c, a.astype(np.float64) @ b, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta,tb", list(itertools.product([0, 1], [0, 1])))
def test_gemm_batch_strides(dtype, ta, tb):
    batch, m, n, k = 3, 7, 5, 13
    r = rng(3)
    a_shape = (k, m) if ta else (m, k)
    b_shape = (n, k) if tb else (k, n)
    a = r.standard_normal((batch,) + a_shape).astype(dtype)
    bsh = r.standard_normal(b_shape).astype(dtype)  # broadcast over the batch: stride 0
    # C with a gap of 4 elements between batch items
    sc = m * n + 4
    cbuf = np.full(batch * sc, 7.0, dtype)
    C.gemm(a, bsh, cbuf, batch, m, n, k, ta, tb, 1.0, 0.0, m * k, 0, sc)
    for i in range(batch):
        oa = a[i].astype(np.float64).T if ta else a[i].astype(np.float64)
        ob = bsh.astype(np.float64).T if tb else bsh.astype(np.float64)
        got = cbuf[i * sc : i * sc + m * n].reshape(m, n)
        close(got, oa @ ob, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)
        np.testing.assert_array_equal(cbuf[i * sc + m * n : (i + 1) * sc], 7.0)
    # A broadcast instead of B
    b = r.standard_normal((batch,) + b_shape).astype(dtype)
    a1 = a[0].copy()
    c = np.empty((batch, m, n), dtype)
    C.gemm(a1, b, c, batch, m, n, k, ta, tb, 1.0, 0.0, 0, n * k, m * n)
    for i in range(batch):
        oa = a1.astype(np.float64).T if ta else a1.astype(np.float64)
        ob = b[i].astype(np.float64).T if tb else b[i].astype(np.float64)
        close(c[i], oa @ ob, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gemm_output_stride_zero_accumulates_in_order(dtype):
    batch, m, n, k = 4, 3, 5, 7
    a = randn((batch, m, k), dtype)
    b = randn((batch, k, n), dtype, 1)
    c = np.zeros((m, n), dtype)
    C.gemm(a, b, c, batch, m, n, k, 0, 0, 1.0, 1.0, m * k, k * n, 0)
    ref = np.einsum("bmk,bkn->mn", a.astype(np.float64), b.astype(np.float64))
    close(c, ref, dtype, rtol=RTOL_ACC[dtype], atol=1e-5)


def test_gemm_accepts_memoryview_and_releases_it():
    ba = bytearray(4 * 6)
    mv = memoryview(ba).cast("f")
    a = np.arange(6, dtype=np.float32)
    b = np.ones(6, np.float32)
    C.gemm(a, b, mv, 1, 2, 3, 1, 0, 0, 1.0, 0.0, 0, 0, 0)  # [2,1] @ [1,3]
    assert list(mv[:6]) == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    mv.release()  # raises BufferError if the extension leaked an export
    ba.extend(b"x")


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


UNARY_REF = {
    "NEG": (np.negative, None),
    "ABS": (np.abs, None),
    "EXP": (np.exp, None),
    "LOG": (np.log, "pos"),
    "SQRT": (np.sqrt, "pos"),
    "RELU": (lambda x: np.maximum(x, 0.0), None),
    "SIGMOID": (np_sigmoid, None),
    "TANH": (np.tanh, None),
    "GELU": (np_gelu, None),
    "GELU_TANH": (np_gelu_tanh, None),
    "SIGN": (np.sign, None),
    "SIN": (np.sin, None),
    "COS": (np.cos, None),
    "RECIPROCAL": (np.reciprocal, "nonzero"),
}


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
BINARY_REF = {
    "ADD": np.add,
    "SUB": np.subtract,
    "MUL": np.multiply,
    "DIV": np.divide,
    "POW": np.power,
    "MAXIMUM": np.maximum,
    "MINIMUM": np.minimum,
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
}
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


# ------------------------------------------------------------------------------------- reduce
def reduce_ref(name, x3):
    x = x3.astype(np.float64)
    with np.errstate(all="ignore"):
        return {
            "SUM": lambda: x.sum(1),
            "MEAN": lambda: x.mean(1),
            "MAX": lambda: x.max(1),
            "MIN": lambda: x.min(1),
            "ARGMAX": lambda: np.argmax(x, 1),
            "ARGMIN": lambda: np.argmin(x, 1),
        }[name]()


REDUCE_SHAPES = [
    (1, 1, 1),
    (1, 7, 1),
    (2, 257, 1),
    (3, 13, 5),
    (4, 129, 3),
    (2, 65, 300),
    (0, 5, 3),
    (3, 5, 0),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["SUM", "MEAN", "MAX", "MIN", "ARGMAX", "ARGMIN"])
@pytest.mark.parametrize("shape", REDUCE_SHAPES)
def test_reduce(dtype, name, shape):
    outer, n, inner = shape
    x = randn(shape, dtype, seed=n)
    if name in ("MAX", "MIN", "ARGMAX", "ARGMIN") and x.size:
        x[:, n // 2] = x[:, 0]  # ties: the first extreme wins
    is_arg = name.startswith("ARG")
    out = np.empty((outer, inner), np.int64 if is_arg else dtype)
    C.reduce(getattr(C, "REDUCE_" + name), x, out, outer, n, inner)
    ref = reduce_ref(name, x)
    if is_arg:
        np.testing.assert_array_equal(out, ref)
    else:
        close(out, ref, dtype, rtol=RTOL_ACC[dtype], atol=RTOL_ACC[dtype] * math.sqrt(n))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("inner", [1, 4])
def test_reduce_nan(dtype, inner):
    x = np.arange(2 * 6 * inner, dtype=dtype).reshape(2, 6, inner)
    x[0, 2] = np.nan
    x[0, 4] = np.nan
    x[1, 0] = np.nan
    out = np.empty((2, inner), dtype)
    iout = np.empty((2, inner), np.int64)
    for op in (C.REDUCE_MAX, C.REDUCE_MIN, C.REDUCE_SUM, C.REDUCE_MEAN):
        C.reduce(op, x, out, 2, 6, inner)
        assert np.isnan(out).all()
    for op in (C.REDUCE_ARGMAX, C.REDUCE_ARGMIN):
        C.reduce(op, x, iout, 2, 6, inner)
        np.testing.assert_array_equal(iout, [[2] * inner, [0] * inner])


@pytest.mark.parametrize("dtype", FLOATS)
def test_reduce_empty_axis(dtype):
    x = np.empty((3, 0, 2), dtype)
    out = np.empty((3, 2), dtype)
    C.reduce(C.REDUCE_SUM, x, out, 3, 0, 2)
    np.testing.assert_array_equal(out, 0)
    C.reduce(C.REDUCE_MEAN, x, out, 3, 0, 2)
    assert np.isnan(out).all()
    for op in (C.REDUCE_MAX, C.REDUCE_MIN, C.REDUCE_ARGMAX):
        o = np.empty((3, 2), np.int64) if op == C.REDUCE_ARGMAX else out
        with pytest.raises(ValueError, match="n == 0"):
            C.reduce(op, x, o, 3, 0, 2)


def test_reduce_float32_sum_is_accurate():
    x = (rng(9).random(1_000_000) + 0.5).astype(np.float32)
    out = np.empty(1, np.float32)
    C.reduce(C.REDUCE_SUM, x, out, 1, x.size, 1)
    ref = x.astype(np.float64).sum()
    assert abs(out[0] - ref) / ref < 1e-5
    xi = x.reshape(1000, 1000)
    out2 = np.empty(1000, np.float32)
    C.reduce(C.REDUCE_SUM, xi, out2, 1, 1000, 1000)
    np.testing.assert_allclose(out2, xi.astype(np.float64).sum(0), rtol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1_000_003, 1), (3, 70_001, 1), (1, 100_003, 5), (2, 33, 7)])
def test_reduce_float32_sum_error_is_bounded_by_the_magnitudes(shape):
    # double accumulators: the error stays within the final rounding, however long the row and
    # even when the values cancel (the Vulkan tests use the CPU sums as their reference)
    outer, n, inner = shape
    x = (rng(3).standard_normal(shape) * 10.0 ** rng(4).integers(-3, 4, shape)).astype(np.float32)
    out = np.empty((outer, inner), np.float32)
    C.reduce(C.REDUCE_SUM, x, out, outer, n, inner)
    x64 = x.astype(np.float64)
    err = np.abs(out - x64.sum(1))
    assert (err <= 1e-7 * np.abs(x64).sum(1) + 1e-30).all(), err.max()


def test_reduce_arg_accepts_longlong():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    out = np.empty(1, np.longlong)
    C.reduce(C.REDUCE_ARGMAX, x, out, 1, 4, 1)
    assert out[0] == 1


# ------------------------------------------------------------------------------------ softmax
def np_softmax(x, axis, log):
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis, keepdims=True)
    return (x - m) - np.log(s) if log else e / s


SOFTMAX_SHAPES = [
    (1, 1, 1),
    (1, 7, 1),
    (3, 13, 1),
    (2, 257, 1),
    (2, 13, 5),
    (1, 65, 129),
    (0, 3, 2),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax(dtype, log, shape):
    x = randn(shape, dtype, seed=shape[1]) * 5
    out = np.empty_like(x)
    C.softmax(x, out, *shape, log)
    close(out, np_softmax(x, 1, log), dtype, atol=1e-6 if dtype == np.float32 else 1e-14)
    C.softmax(x, x, *shape, log)  # in place
    np.testing.assert_array_equal(x, out)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("inner", [1, 3])
def test_softmax_stability(dtype, log, inner):
    rows = np.array([[1000.0, 1000.0, 1000.0], [1000.0, -1000.0, 0.0]])
    x = np.repeat(rows[:, :, None], inner, axis=2).astype(dtype)
    out = np.empty_like(x)
    C.softmax(x, out, 2, 3, inner, log)
    assert np.isfinite(out).all()
    ref = np_softmax(x, 1, log)
    close(out, ref, dtype, atol=1e-6 if dtype == np.float32 else 1e-14)


def softmax_backward_ref(g, y, log):
    g = g.astype(np.float64)
    y = y.astype(np.float64)
    if log:
        return g - np.exp(y) * g.sum(1, keepdims=True)
    return y * (g - (g * y).sum(1, keepdims=True))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax_backward(dtype, log, shape):
    x = randn(shape, dtype, seed=1)
    y = np.empty_like(x)
    C.softmax(x, y, *shape, log)
    g = randn(shape, dtype, seed=2)
    out = np.empty_like(x)
    C.softmax_backward(g, y, out, *shape, log)
    close(out, softmax_backward_ref(g, y, log), dtype, atol=1e-6 if dtype == np.float32 else 1e-14)
    g2 = g.copy()
    C.softmax_backward(g2, y, g2, *shape, log)  # out is grad
    np.testing.assert_array_equal(g2, out)


@pytest.mark.parametrize("log", [0, 1])
def test_softmax_backward_is_the_vjp(log):
    shape = (2, 5, 3)
    x = randn(shape, np.float64, seed=3)
    g = randn(shape, np.float64, seed=4)
    y = np.empty_like(x)
    C.softmax(x, y, *shape, log)
    out = np.empty_like(x)
    C.softmax_backward(g, y, out, *shape, log)
    h = 1e-6
    fd = np.empty_like(x)
    for idx in np.ndindex(shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        fd[idx] = ((np_softmax(xp, 1, log) - np_softmax(xm, 1, log)) * g).sum() / (2 * h)
    np.testing.assert_allclose(out, fd, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------------------ cross entropy
def ce_ref(logits, target, ignore):
    x = logits.astype(np.float64)
    m = x.max(1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(1))
    safe = np.where(target == ignore, 0, target)
    loss = np.where(target == ignore, 0.0, lse - x[np.arange(len(x)), safe])
    return loss, lse


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n,c", [(1, 1), (7, 13), (13, 257), (65, 7), (0, 5)])
def test_cross_entropy_forward(dtype, n, c):
    logits = randn((n, c), dtype, seed=c) * 4
    target = rng(n).integers(0, c, n).astype(np.int64)
    if n > 2:
        target[1] = -100
        logits[2, 0] = 1000.0  # stability
    loss = np.empty(n, dtype)
    lse = np.empty(n, dtype)
    C.cross_entropy_forward(logits, target, loss, lse, n, c, -100)
    rl, rs = ce_ref(logits, target, -100)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(loss, rl, **tol)
    np.testing.assert_allclose(lse, rs, **tol)
    if n > 2:
        assert loss[1] == 0.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_backward(dtype):
    n, c, ign = 13, 7, 3
    logits = randn((n, c), dtype, seed=7) * 3
    target = rng(1).integers(0, c, n).astype(np.int64)
    target[[0, 5]] = ign  # ignore_index may be a valid class id
    loss = np.empty(n, dtype)
    lse = np.empty(n, dtype)
    C.cross_entropy_forward(logits, target, loss, lse, n, c, ign)
    gl = randn(n, dtype, seed=8)
    out = np.empty_like(logits)
    C.cross_entropy_backward(logits, target, lse, gl, out, n, c, ign)
    x = logits.astype(np.float64)
    p = np.exp(x - lse.astype(np.float64)[:, None])
    onehot = np.eye(c)[np.where(target == ign, 0, target)]
    ref = gl.astype(np.float64)[:, None] * (p - onehot)
    ref[target == ign] = 0.0
    close(out, ref, dtype, atol=1e-6 if dtype == np.float32 else 1e-14)
    assert (out[[0, 5]] == 0).all()
    lg2 = logits.copy()
    C.cross_entropy_backward(lg2, target, lse, gl, lg2, n, c, ign)  # out is logits
    np.testing.assert_array_equal(lg2, out)


def test_cross_entropy_backward_matches_finite_differences():
    n, c = 5, 6
    logits = randn((n, c), np.float64, seed=11)
    target = np.array([0, 5, -1, 2, 3], np.int64)
    gl = randn(n, np.float64, seed=12)

    def f(lg):
        loss, lse = np.empty(n), np.empty(n)
        C.cross_entropy_forward(lg, target, loss, lse, n, c, -1)
        return (loss * gl).sum()

    loss, lse = np.empty(n), np.empty(n)
    C.cross_entropy_forward(logits, target, loss, lse, n, c, -1)
    out = np.empty_like(logits)
    C.cross_entropy_backward(logits, target, lse, gl, out, n, c, -1)
    h = 1e-6
    fd = np.empty_like(logits)
    for idx in np.ndindex(logits.shape):
        lp, lm = logits.copy(), logits.copy()
        lp[idx] += h
        lm[idx] -= h
        fd[idx] = (f(lp) - f(lm)) / (2 * h)
    np.testing.assert_allclose(out, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad", [7, -1, 100])
def test_cross_entropy_target_out_of_range(bad):
    n, c = 4, 7
    logits = np.zeros((n, c), np.float32)
    target = np.array([0, 1, bad, 2], np.int64)
    loss = np.empty(n, np.float32)
    lse = np.empty(n, np.float32)
    with pytest.raises(IndexError, match=rf"target\[2\] = {bad} is out of range for c = 7"):
        C.cross_entropy_forward(logits, target, loss, lse, n, c, -100)
    with pytest.raises(IndexError, match="out of range"):
        C.cross_entropy_backward(logits, target, lse, loss, np.empty_like(logits), n, c, -100)


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


# ------------------------------------------------------------------------------ im2col/col2im
def im2col_ref(x, kh, kw, sh, sw, ph, pw, dh, dw):
    n, c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), x.dtype)
    xp[:, :, ph : ph + h, pw : pw + w] = x
    col = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for ki in range(kh):
        for kj in range(kw):
            ys = ki * dh
            xs = kj * dw
            col[:, :, ki, kj] = xp[
                :, :, ys : ys + sh * (oh - 1) + 1 : sh, xs : xs + sw * (ow - 1) + 1 : sw
            ]
    return col.reshape(n, c * kh * kw, oh * ow), oh, ow


CONV_GEOMS = [
    # n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw
    (1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1),
    (2, 3, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1),
    (1, 2, 13, 9, 3, 2, 2, 3, 1, 0, 1, 1),
    (2, 1, 9, 13, 3, 3, 2, 2, 2, 3, 2, 2),
    (1, 3, 5, 6, 5, 6, 1, 1, 0, 0, 1, 1),
    (1, 1, 4, 4, 2, 2, 3, 3, 4, 4, 1, 1),  # padding wider than the kernel: zero rows/cols
    (2, 2, 8, 5, 1, 1, 2, 1, 0, 0, 1, 1),
    (0, 2, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("geom", CONV_GEOMS)
def test_im2col_and_adjoint(dtype, geom):
    n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw = geom
    x = randn((n, c, h, w), dtype, seed=h)
    ref, oh, ow = im2col_ref(x, kh, kw, sh, sw, ph, pw, dh, dw)
    col = np.full((n, c * kh * kw, oh * ow), np.nan, dtype)
    C.im2col(x, col, *geom)
    np.testing.assert_array_equal(col, ref)
    y = randn(col.shape, dtype, seed=w)
    xb = np.full(x.shape, np.nan, dtype)
    C.col2im(y, xb, *geom)
    lhs = float((ref.astype(np.float64) * y).sum())
    rhs = float((x.astype(np.float64) * xb).sum())
    assert lhs == pytest.approx(rhs, rel=1e-5 if dtype == np.float32 else 1e-12, abs=1e-9)
    # col2im against an explicit scatter-add
    xr = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    y6 = y.astype(np.float64).reshape(n, c, kh, kw, oh, ow)
    for ki in range(kh):
        for kj in range(kw):
            ys, xs = ki * dh, kj * dw
            xr[:, :, ys : ys + sh * (oh - 1) + 1 : sh, xs : xs + sw * (ow - 1) + 1 : sw] += y6[
                :, :, ki, kj
            ]
    close(xb, xr[:, :, ph : ph + h, pw : pw + w], dtype)


def test_im2col_kernel_too_large():
    x = np.zeros((1, 1, 3, 3), np.float32)
    with pytest.raises(ValueError, match="larger than the padded input"):
        C.im2col(x, np.zeros(100, np.float32), 1, 1, 3, 3, 5, 1, 1, 1, 0, 0, 1, 1)
    with pytest.raises(ValueError, match=">= 1"):
        C.im2col(x, np.zeros(100, np.float32), 1, 1, 3, 3, 1, 1, 0, 1, 0, 0, 1, 1)


def test_im2col_buffer_too_small():
    x = np.zeros((1, 1, 5, 5), np.float32)
    col = np.zeros(9 * 9 - 1, np.float32)  # needs 9 rows x 9 columns
    with pytest.raises(ValueError, match=r"'col' holds 80 elements but 81 are needed"):
        C.im2col(x, col, 1, 1, 5, 5, 3, 3, 1, 1, 0, 0, 1, 1)


# ------------------------------------------------------------------------------------- philox
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_known_answers(ctr, key, expected):
    assert C.philox_block(*ctr, *key) == expected


def stream_ref(seed, offset, nwords):
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    words = []
    for i in range(nwords):
        ctr = (offset + i // 4) % 2**64
        words.append(C.philox_block(ctr & 0xFFFFFFFF, ctr >> 32, 0, 0, k0, k1)[i % 4])
    return np.array(words, np.uint32)


@pytest.mark.parametrize("seed", [0, 1234, 0xDEADBEEF_CAFEF00D, 2**64 - 1])
@pytest.mark.parametrize("offset", [0, 5, 2**32 - 1, 2**64 - 2])
@pytest.mark.parametrize("n", [0, 1, 7, 13])
def test_philox_stream_layout(seed, offset, n):
    out = np.empty(n, np.uint32)
    C.philox(seed, offset, out)
    np.testing.assert_array_equal(out, stream_ref(seed, offset, n))


def test_philox_stream_is_consistent_across_offsets():
    a = np.empty(40, np.uint32)
    C.philox(7, 3, a)
    b = np.empty(20, np.uint32)
    C.philox(7, 8, b)  # starts 5 blocks (20 words) later
    np.testing.assert_array_equal(a[20:], b)


@pytest.mark.parametrize("n", [1, 7, 13, 257])
def test_uniform(n):
    out = np.empty(n, np.float32)
    C.uniform(42, 9, out, -2.0, 3.0)
    u = (stream_ref(42, 9, n) >> 8).astype(np.float32) * np.float32(2.0**-24)
    ref = np.float32(-2.0) + np.float32(5.0) * u
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    assert (out >= -2.0).all() and (out < 3.0).all()


@pytest.mark.parametrize("n", [1, 2, 7, 13, 258])
def test_normal(n):
    out = np.empty(n, np.float32)
    C.normal(42, 9, out, 1.5, 2.0)
    w = stream_ref(42, 9, 2 * ((n + 1) // 2)).astype(np.float64)
    u1 = (np.floor(w[0::2] / 256) + 1) * 2.0**-24
    u2 = np.floor(w[1::2] / 256) * 2.0**-24
    r = np.sqrt(-2 * np.log(u1))
    z = np.empty(2 * len(u1))
    z[0::2] = r * np.cos(2 * np.pi * u2)
    z[1::2] = r * np.sin(2 * np.pi * u2)
    np.testing.assert_allclose(out, 1.5 + 2.0 * z[:n], rtol=1e-5, atol=2e-5)
    longer = np.empty(n + 3, np.float32)
    C.normal(42, 9, longer, 1.5, 2.0)
    np.testing.assert_array_equal(longer[:n], out)  # element i depends only on its block


def test_normal_moments():
    out = np.empty(200_001, np.float32)
    C.normal(1, 0, out, 0.0, 1.0)
    assert np.isfinite(out).all()
    assert abs(out.mean()) < 0.01 and abs(out.std() - 1) < 0.01


def test_rng_argument_errors():
    out = np.empty(4, np.uint32)
    with pytest.raises(ValueError, match="seed"):
        C.philox(-1, 0, out)
    with pytest.raises(ValueError, match="offset"):
        C.philox(0, 2**64, out)
    with pytest.raises(TypeError, match="uint32"):
        C.philox(0, 0, np.empty(4, np.int32))
    with pytest.raises(TypeError, match="float32"):
        C.uniform(0, 0, np.empty(4), 0.0, 1.0)
    with pytest.raises(ValueError, match="c0"):
        C.philox_block(2**32, 0, 0, 0, 0, 0)


# ----------------------------------------------------------------------------- bad arguments
def test_wrong_format_raises_type_error():
    with pytest.raises(TypeError, match=r"unary: 'x' must be float32 .* got format 'i'"):
        C.unary(C.UNARY_EXP, np.ones(3, np.int32), np.empty(3, np.float32))
    with pytest.raises(TypeError, match=r"gemm: 'b' must be float32"):
        C.gemm(
            np.ones(4, np.float32),
            np.ones(4),
            np.empty(4, np.float32),
            1,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            0,
        )
    with pytest.raises(TypeError, match=r"binary: 'out' must be bool"):
        C.binary(C.BINARY_LT, np.ones(3), np.ones(3), np.empty(3))
    with pytest.raises(TypeError, match=r"reduce: 'out' must be int64"):
        C.reduce(C.REDUCE_ARGMAX, np.ones(3), np.empty(1, np.int32), 1, 3, 1)
    with pytest.raises(TypeError, match=r"'target' must be int64"):
        C.cross_entropy_forward(
            np.ones((2, 3)), np.zeros(2, np.int32), np.empty(2), np.empty(2), 2, 3, -1
        )
    with pytest.raises(TypeError, match="buffer protocol"):
        C.unary(C.UNARY_EXP, [1.0, 2.0], np.empty(2))
    with pytest.raises(TypeError, match="non-native|got format"):
        C.unary(C.UNARY_EXP, np.ones(3, ">f8"), np.empty(3))


def test_too_small_buffer_raises_value_error():
    a = np.ones(6, np.float32)
    with pytest.raises(ValueError, match=r"gemm: 'a' holds 6 elements but 8 are needed .*m=2.*k=4"):
        C.gemm(
            a, np.ones(8, np.float32), np.empty(4, np.float32), 1, 2, 2, 4, 0, 0, 1.0, 0.0, 0, 0, 0
        )
    with pytest.raises(ValueError, match=r"'c' holds 4 elements but 12 are needed"):
        C.gemm(
            np.ones(8, np.float32),
            np.ones(8, np.float32),
            np.empty(4, np.float32),
            3,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            4,
        )
    with pytest.raises(ValueError, match=r"'b' holds 8 elements but 9 are needed"):
        C.gemm(np.ones(4), np.ones(8), np.empty(4), 2, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 5, 4)
    with pytest.raises(ValueError, match=r"reduce: 'x' holds 10 elements but 12 are needed"):
        C.reduce(C.REDUCE_SUM, np.ones(10), np.empty(4), 2, 3, 2)
    with pytest.raises(ValueError, match=r"softmax: 'out' holds"):
        C.softmax(np.ones(12), np.empty(11), 2, 3, 2, 0)
    with pytest.raises(ValueError, match="x has 3 elements but out has 4"):
        C.unary(C.UNARY_EXP, np.ones(3), np.empty(4))
    with pytest.raises(ValueError, match="cannot broadcast 'b' of shape \\(3,\\)"):
        C.binary(C.BINARY_ADD, np.ones((2, 4)), np.ones(3), np.empty((2, 4)))
    with pytest.raises(ValueError, match="more dims than out"):
        C.binary(C.BINARY_ADD, np.ones((1, 4)), np.ones(4), np.empty(4))


def test_read_only_output_raises_value_error():
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="unary: output 'out' is read-only"):
        C.unary(C.UNARY_EXP, np.ones(4), ro)
    with pytest.raises(ValueError, match="gemm: output 'c' is read-only"):
        C.gemm(np.ones(4), np.ones(4), ro, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="read-only"):
        C.unary(C.UNARY_EXP, np.ones(1), bytes(8))


def test_non_contiguous_raises_value_error():
    x = np.ones(8)
    with pytest.raises(ValueError, match=r"unary: 'x' \(shape \(4,\)\) must be C-contiguous"):
        C.unary(C.UNARY_EXP, x[::2], np.empty(4))
    with pytest.raises(ValueError, match="'a' .* must be C-contiguous"):
        C.gemm(np.ones((4, 4)).T, np.ones(16), np.empty(16), 1, 4, 4, 4, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="'out' .* must be C-contiguous"):
        C.binary(C.BINARY_ADD, x, x, np.empty(16)[::2])
    with pytest.raises(ValueError, match="must be C-contiguous"):
        C.reduce(C.REDUCE_SUM, np.ones((3, 4))[:, :2], np.empty(3), 3, 2, 1)


def test_bad_scalars():
    x = np.ones(4)
    with pytest.raises(ValueError, match="unknown op 99"):
        C.unary(99, x, np.empty(4))
    with pytest.raises(ValueError, match="unknown op -1"):
        C.binary(-1, x, x, np.empty(4))
    with pytest.raises(ValueError, match="'m' must be >= 0, got -1"):
        C.gemm(x, x, np.empty(4), 1, -1, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="'trans_a' must be 0 or 1"):
        C.gemm(x, x, np.empty(4), 1, 2, 2, 1, 2, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="'n' must be an int, got float"):
        C.reduce(C.REDUCE_SUM, x, np.empty(1), 1, 4.0, 1)
    with pytest.raises(TypeError, match="'alpha' must be a real number"):
        C.gemm(x, x, np.empty(4), 1, 2, 2, 1, 0, 0, "1", 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="takes exactly 3 positional arguments"):
        C.unary(C.UNARY_EXP, x)
    with pytest.raises(ValueError, match="overflow"):
        C.gemm(x, x, np.empty(4), 1, 2**62, 2**62, 1, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="overflow"):
        C.gemm(x, x, np.empty(4), 2**40, 2, 2, 1, 0, 0, 1.0, 0.0, 2**40, 0, 0)
    with pytest.raises(ValueError, match="overflow"):
        C.reduce(C.REDUCE_SUM, x, np.empty(1), 2**40, 2**40, 2**40)
    # numpy integers are accepted as ints
    C.reduce(np.int64(C.REDUCE_SUM), x, np.empty(1), np.int64(1), np.int32(4), 1)


def test_unaligned_buffer_rejected():
    raw = bytearray(8 * 5)
    x = np.frombuffer(raw, np.float64, count=4, offset=1)
    with pytest.raises(ValueError, match="aligned"):
        C.unary(C.UNARY_EXP, x, np.empty(4))


def test_overlap_rejected():
    buf = np.zeros(40)
    with pytest.raises(ValueError, match="'c' overlaps 'a'"):
        C.gemm(buf[:16], np.ones(16), buf[8:24], 1, 4, 4, 4, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="overlaps"):
        C.unary(C.UNARY_EXP, buf[:10], buf[1:11])
    with pytest.raises(ValueError, match="overlaps"):
        C.reduce(C.REDUCE_SUM, buf[:12], buf[:3], 3, 4, 1)
    with pytest.raises(ValueError, match="overlaps"):
        C.im2col(buf[:9], buf[:9], 1, 1, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1)


def test_buffers_released_on_error_paths():
    ba = bytearray(8 * 4)
    mv = memoryview(ba).cast("d")
    with pytest.raises(ValueError):
        C.unary(C.UNARY_EXP, mv, np.empty(5))
    with pytest.raises(TypeError):
        C.unary(C.UNARY_EXP, np.ones(4, np.float32), mv)
    with pytest.raises(ValueError):
        C.gemm(np.ones(4), mv, np.empty(1), 1, 3, 3, 3, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(IndexError):
        C.cross_entropy_forward(np.ones((4, 2)), np.full(4, 9, np.int64), mv, np.empty(4), 4, 2, -1)
    C.unary(C.UNARY_NEG, mv, mv)
    mv.release()  # BufferError if an export leaked
    ba.extend(b"\0")


def test_kernels_run_concurrently_in_threads():
    a = randn((64, 64), np.float64)
    b = randn((64, 64), np.float64, 1)
    ref = a @ b
    errors = []

    def work():
        try:
            for _ in range(20):
                c = np.empty((64, 64))
                C.gemm(a, b, c, 1, 64, 64, 64, 0, 0, 1.0, 0.0, 0, 0, 0)
                np.testing.assert_allclose(c, ref, rtol=1e-12, atol=1e-12)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("n", [5, 129, 20000])
def test_softmax_row_with_positive_infinity_is_all_nan(n):
    # exp(inf - inf) is NaN, so the row's sum and every output are NaN (PyTorch, numpy's formula)
    x = np.zeros((1, n), np.float32)
    x[0, 1] = np.inf
    for log in (0, 1):
        out = np.empty_like(x)
        C.softmax(x, out, 1, n, 1, log)
        assert np.isnan(out).all(), (n, log)
