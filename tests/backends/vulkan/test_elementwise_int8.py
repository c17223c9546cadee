"""int8 / uint8 on the Vulkan device (binary.comp's byte types, four elements to a 32-bit word):
add, sub and mul wrapping to 8 bits, maximum/minimum, comparisons, logical_not, and casts to and
from float32 / int32 / bool / each other, and where over bytes (where.comp's byte mode, bool
too), against numpy and the CPU path, bit for bit, on broadcast and strided operands."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, dev, dev_view, ints, ran_on_device, run_exact

import gpucore

OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
       "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
       "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}  # fmt: skip
TYPES = [np.int8, np.uint8]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_binary_wraps_and_compares_as_numpy(vulkan, name, dtype):
    a, b = ints(dtype, 5003), ints(dtype, 5003)
    b[::4] = a[::4]
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, OPS[name](a, b))
    a, b = ints(dtype, 7, 1, 13), ints(dtype, 5, 1)  # broadcast both ways, odd sizes
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, OPS[name](a, b))


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_binary_on_strided_views(vulkan, view):
    a, b = ints(np.int8, 40, 90), ints(np.int8, 40, 90)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.add(dev_view(a, VIEWS[view]), dev_view(b, VIEWS[view])).cpu().numpy()
    ran_on_device(ops, "add")
    np.testing.assert_array_equal(got, VIEWS[view](a) + VIEWS[view](b))


@pytest.mark.parametrize(
    "src, dst",
    [
        (s, d)
        for s in TYPES
        for d in ("float32", "int32", "bool", "int8", "uint8")
        if np.dtype(s).name != d
    ],
)
def test_casts_from_bytes(vulkan, src, dst):
    a = ints(src, 4101)
    got = run_exact(lambda t: t.to(getattr(gpucore, dst)), a, name="to_dtype")
    np.testing.assert_array_equal(got, a.astype(np.bool_ if dst == "bool" else dst))


@pytest.mark.parametrize("dst", TYPES)
def test_int32_and_bool_to_bytes_wrap(vulkan, dst):
    i = RNG.integers(-(2**31), 2**31, 4101).astype(np.int32)
    got = run_exact(lambda t: t.to(gpucore.tensor(np.zeros(1, dst)).dtype), i, name="to_dtype")
    np.testing.assert_array_equal(got, i.astype(dst))
    m = RNG.random(4101) > 0.5
    got = run_exact(lambda t: t.to(gpucore.tensor(np.zeros(1, dst)).dtype), m, name="to_dtype")
    np.testing.assert_array_equal(got, m.astype(dst))


@pytest.mark.parametrize("dst", TYPES)
def test_float32_to_bytes_keeps_the_low_byte_of_the_int32_truncation(vulkan, dst):
    f = (RNG.standard_normal(4101) * 300).astype(np.float32)
    f[:10] = [np.nan, np.inf, -np.inf, 300.7, -300.7, 255.9, -128.9, 3e9, -(2.0**31), 65541.5]
    got = run_exact(lambda t: t.to(gpucore.tensor(np.zeros(1, dst)).dtype), f, name="to_dtype")
    with np.errstate(invalid="ignore"):
        i32 = f.astype(np.int32)  # x86: INT_MIN for NaN / out of range, whose low byte is 0
    i32[~np.isfinite(f) | (np.abs(f) >= 2.0**31)] = np.iinfo(np.int32).min
    np.testing.assert_array_equal(got, i32.astype(dst))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("shapes", [((4101,), (4101,)), ((33, 1), (1, 131)), ((), (4101,))])
def test_where_of_bytes(vulkan, dtype, shapes):
    c = RNG.random((33, 131) if shapes[0] == (33, 1) else (4101,)) > 0.5
    if dtype == np.bool_:
        a, b = RNG.random(shapes[0]) > 0.5, RNG.random(shapes[1]) > 0.5
    else:
        a, b = ints(dtype, *shapes[0]), ints(dtype, *shapes[1])
    got = run_exact(gpucore.where, c, a, b, name="where")
    np.testing.assert_array_equal(got, np.where(c, a, b))
    # strided operands: a flipped condition and a transposed input
    c2, a2 = c.reshape(-1)[::-1], np.asarray(a).reshape(-1)
    if a2.size == c2.size:
        with gpucore.dispatch.trace_ops() as ops:
            t = gpucore.where(dev_view(c2, lambda v: v), dev_view(a2, lambda v: v[::-1]), dev(b))
        ran_on_device(ops, "where")
        np.testing.assert_array_equal(t.cpu().numpy(), np.where(c2, a2[::-1], b))


@pytest.mark.parametrize("dtype", TYPES)
def test_logical_not(vulkan, dtype):
    a = ints(dtype, 4101)
    a[::3] = 0
    got = run_exact(lambda t: t.logical_not(), a, name="logical_not")
    np.testing.assert_array_equal(got, a == 0)
