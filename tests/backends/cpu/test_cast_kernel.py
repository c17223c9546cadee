"""gpucore._cpu.cast (cpu/cast.c): Tensor.to(dtype) in compiled programs and deployed models.

Specification: bit for bit numpy's ``astype`` (``casting="unsafe"``, the eager kernel) for every
pair of bool, uint8, int8, int16, int32, int64, float32 and float64, any strides. Values C leaves
undefined (a float outside the integer range, NaN, inf) give numpy's x86-64 results, the type's
minimum wrapped to narrower integers; on other machines numpy itself differs there, so those
values are compared on x86-64 only.
"""

from __future__ import annotations

import platform
import warnings

import numpy as np
import pytest

from gpucore import _cpu as C

TYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64]
X86 = platform.machine() in ("x86_64", "AMD64")

IN_RANGE = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.49, 127.9, -128.9, 200.7, -200.7, 65543.9, 1e-30]
OUT_OF_RANGE = [300.0, 3e9, -3e9, 2.0**31, -(2.0**31) - 1, 2.0**63, -(2.0**63), 1e19, 4.4e18,
                np.nan, np.inf, -np.inf]  # fmt: skip
INTS = [0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1,
        2**62 + 3, -(2**63), 2**63 - 1]  # fmt: skip


def _sources():
    floats = IN_RANGE + (OUT_OF_RANGE if X86 else [])
    for t in TYPES:
        if np.dtype(t).kind == "f":
            yield np.array(floats, t)
        elif t is np.bool_:
            yield np.array([True, False, True, True])
        else:
            info = np.iinfo(t)
            yield np.array([v for v in INTS if info.min <= v <= info.max], t)
            yield np.array(INTS, np.int64).astype(t)  # wrapped into t's range


def _want(a, t):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return a.astype(t)


@pytest.mark.parametrize("dst", TYPES, ids=lambda t: np.dtype(t).name)
def test_every_pair_equals_numpy_bitwise(dst):
    for src in _sources():
        for a in (src, src[::-1][::2]):  # contiguous and strided
            out = np.empty(a.shape, dst)
            C.cast(a, out)
            want = _want(a, dst)
            assert out.tobytes() == want.tobytes(), (a.dtype, dst, a, out, want)


def test_strided_n_d_and_edge_shapes():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 6, 5)) * 100).astype(np.float32)
    out = np.zeros((5, 6, 4), np.int32)
    C.cast(x.transpose(2, 1, 0), out)
    np.testing.assert_array_equal(out, _want(x.transpose(2, 1, 0), np.int32))
    big = np.zeros((6, 10), np.int8)
    C.cast(x[1, :, ::-1], big[:, ::2])  # strided destination: the other elements stay
    np.testing.assert_array_equal(big[:, ::2], _want(x[1, :, ::-1], np.int8))
    assert not big[:, 1::2].any()
    zero_d = np.zeros((), np.uint8)
    C.cast(np.array(7.9, np.float64), zero_d)
    assert zero_d == 7
    C.cast(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int64))  # nothing to do


def test_bad_arguments_raise():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"cast: src shape \(2, 3\) differs from dst shape"):
        C.cast(x, np.zeros((3, 2), np.int32))
    with pytest.raises(ValueError, match="cast: src and dst overlap"):
        C.cast(x, x.view(np.int32))
    with pytest.raises(TypeError, match="cast: 'dst' has format 'e'"):
        C.cast(x, np.zeros((2, 3), np.float16))
    with pytest.raises(TypeError, match="cast: 'src' has format"):
        C.cast(np.zeros((2, 3), np.uint16), x.copy())
    with pytest.raises(ValueError):  # read-only destination
        ro = np.zeros((2, 3), np.int32)
        ro.flags.writeable = False
        C.cast(x, ro)
