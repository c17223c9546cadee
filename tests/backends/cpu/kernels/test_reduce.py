"""gpucore._cpu against float64 numpy references (cpu/README.md): reductions over
[outer, n, inner] (sum, mean, max, min, argmax, argmin), NaN, empty axes, float32 accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cpu_ext import FLOATS, RTOL_ACC, C, close, randn, rng


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
