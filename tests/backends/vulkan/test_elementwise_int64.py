"""int64 on the Vulkan device (shaders/binary64.comp: int64 as pairs of 32-bit words, no
shaderInt64): add, sub and mul wrapping modulo 2^64, maximum/minimum, comparisons, logical_not,
casts between int64 and float32 / int32 / bool (float32 specials, rounding ties of int64 ->
float32), where over int64 (where.comp's two-word items) and clone of bool (copy.comp's byte
mode), and comparisons of bool (binary.comp), against numpy and the CPU path, bit for bit, on
broadcast and strided operands."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, dev, dev_view, ran_on_device, run_exact

import gpucore

I64 = np.iinfo(np.int64)
EDGES = np.array(
    [0, 1, -1, 2, -2, 2**31 - 1, -(2**31), 2**31, 2**32 - 1, 2**32, -(2**32), 2**53 + 1,
     I64.max, I64.min, I64.max - 1, I64.min + 1, 3037000499, -3037000500, 2**24 + 1],
    np.int64,
)  # fmt: skip


def ints(*shape) -> np.ndarray:
    """Full-range int64 values, small ones and EDGES (every pair of EDGES meets somewhere)."""
    a = RNG.integers(I64.min, I64.max, shape, dtype=np.int64, endpoint=True)
    flat = a.reshape(-1)
    flat[1::3] = RNG.integers(-100, 100, flat[1::3].size)
    k = min(flat.size, EDGES.size)
    flat[:k] = EDGES[:k]
    return a


ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
         "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
         "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ARITH))
def test_binary_int64_wraps_and_compares_as_numpy(vulkan, name):
    a, b = ints(5003), ints(5003)
    b[::4] = a[::4]  # ties for the comparisons
    a2, b2 = np.repeat(EDGES, EDGES.size), np.tile(EDGES, EDGES.size)  # every pair of edges
    fn = getattr(gpucore, name)
    for x, y in ((a, b), (a2, b2)):
        got = run_exact(fn, x, y, name=name)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got, ARITH[name](x, y))


@pytest.mark.parametrize("name", ["add", "mul", "lt", "maximum"])
@pytest.mark.parametrize("shapes", [((7, 1, 13), (5, 1)), ((), (4099,)), ((64, 70), (70,))])
def test_binary_int64_broadcasts(vulkan, name, shapes):
    a, b = ints(*shapes[0]), ints(*shapes[1])
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, ARITH[name](a, b))


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_binary_int64_on_strided_views(vulkan, view):
    a, b = ints(40, 90), ints(40, 90)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.sub(dev_view(a, VIEWS[view]), dev_view(b, VIEWS[view])).cpu()
    ran_on_device(ops, "sub")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got.numpy(), VIEWS[view](a) - VIEWS[view](b))


def test_empty_int64(vulkan):
    e = np.zeros((0, 3), np.int64)
    assert gpucore.add(dev(e), dev(e)).cpu().numpy().shape == (0, 3)
    assert dev(e).to(gpucore.float32).cpu().numpy().shape == (0, 3)


# ----------------------------------------------------------------------------- casts
def float_specials(n: int) -> np.ndarray:
    f = (RNG.standard_normal(n) * RNG.choice([1.0, 1e3, 1e9, 1e18, 1e19], n)).astype(np.float32)
    edge = [np.nan, np.inf, -np.inf, -0.0, 0.5, -0.5, -1.5, 2.0**63, -(2.0**63), 2.0**62,
            -(2.0**62), 3e9, -3e9, 2.0**32, -(2.0**32), 2.0**31, -(2.0**31), 1e-30]  # fmt: skip
    f[: len(edge)] = edge
    return f


def test_float32_to_int64_truncates_like_the_cpu(vulkan):
    f = float_specials(5000)
    with np.errstate(invalid="ignore"):
        got = run_exact(lambda t: t.to(gpucore.int64), f, name="to_dtype")
    fin = np.abs(f) < 2.0**63
    np.testing.assert_array_equal(got[fin], np.trunc(f[fin]).astype(np.int64))
    assert (got[~fin] == I64.min).all()  # NaN and out of range: x86's cvttss2si


def test_int64_to_float32_rounds_to_nearest_even(vulkan):
    ties = [2**40 + 2**16, 2**40 + 2**16 + 1, 2**40 + 3 * 2**16, 2**24 + 1, 2**24 + 3,
            2**62 + 2**38, 2**62 + 2**38 + 1, 2**63 - 1, 2**32 + 2**8]  # fmt: skip
    a = ints(4999)
    a[-2 * len(ties) :] = ties + [-t for t in ties]
    got = run_exact(lambda t: t.to(gpucore.float32), a, name="to_dtype")
    np.testing.assert_array_equal(got, a.astype(np.float32))


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_int64_to_int32_and_bool(vulkan, dtype):
    a = ints(4100)
    a[5::7] = 0
    got = run_exact(lambda t: t.to(getattr(gpucore, dtype)), a, name="to_dtype")
    np.testing.assert_array_equal(got, a.astype(np.int32 if dtype == "int32" else np.bool_))


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_int32_and_bool_to_int64(vulkan, dtype):
    src = RNG.integers(-(2**31), 2**31, 4100).astype(np.int32)
    src[:3] = [-(2**31), 2**31 - 1, -1]
    src = src if dtype == np.int32 else src > 0
    got = run_exact(lambda t: t.to(gpucore.int64), src, name="to_dtype")
    np.testing.assert_array_equal(got, src.astype(np.int64))


def test_logical_not_of_int64(vulkan):
    a = ints(4100)
    a[::3] = 0
    a[1] = 2**32  # low word zero, not zero
    got = run_exact(lambda t: t.logical_not(), a, name="logical_not")
    np.testing.assert_array_equal(got, a == 0)


# ----------------------------------------------------------------------------- where, clone
@pytest.mark.parametrize("shapes", [((4100,), (4100,)), ((33, 1), (1, 130)), ((), (4100,))])
def test_where_int64(vulkan, shapes):
    c = RNG.random((33, 130) if shapes[0] == (33, 1) else (4100,)) > 0.5
    a, b = ints(*shapes[0]), ints(*shapes[1])
    got = run_exact(gpucore.where, c, a, b, name="where")
    np.testing.assert_array_equal(got, np.where(c, a, b))


def test_clone_of_bool_stays_on_the_device(vulkan):
    m = RNG.random((67, 61)) > 0.5
    got = run_exact(lambda t: t.clone(), m, name="clone")
    np.testing.assert_array_equal(got, m)
    t = dev_view(m, VIEWS["negative"])
    np.testing.assert_array_equal(t.clone().cpu().numpy(), VIEWS["negative"](m))


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_of_bool(vulkan, name):
    # binary.comp compares bool bytes as integers (False < True, as numpy and PyTorch)
    a, b = RNG.random(4103) > 0.5, RNG.random(4103) > 0.5
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, ARITH[name](a, b))
    got = run_exact(getattr(gpucore, name), a[:7].reshape(7, 1), b[:9], name=name)
    np.testing.assert_array_equal(got, ARITH[name](a[:7].reshape(7, 1), b[:9]))
