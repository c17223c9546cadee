"""Integer division on the Vulkan device (binary.comp's DIV / POW on int32, int8 and uint8,
binary64.comp's on int64, by MODE): div(rounding_mode='trunc' / 'floor'), remainder, fmod and
pow, against numpy and the CPU path bit for bit, at the edges (INT_MIN / -1, negative operands on
either side, where floor and trunc differ); division by zero: a host divisor raises the CPU's
ZeroDivisionError, a device one gives numpy's 0 (the CPU arithmetic without its check). Also
amax / amin / any / all of bool and 8-bit data (reduce.comp through float32)."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, dev, dev_view, on_cpu, ran_on_device, run_exact

import gpucore

TYPES = [np.int8, np.uint8, np.int32, np.int64]


def _trunc(a, b):
    """The quotient rounded toward zero, exactly (Python ints), wrapped to a's dtype."""
    bits = 8 * a.dtype.itemsize
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        q = abs(x) // abs(y) * (-1 if (x < 0) != (y < 0) else 1)
        if a.dtype.kind == "i":  # INT_MIN / -1 wraps
            q = (q + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
        out.append(q)
    return np.array(out).astype(a.dtype)


NUMPY = {
    "trunc": _trunc,
    "floor": np.floor_divide,
    "remainder": np.remainder,
    "fmod": np.fmod,
}
FNS = {
    "trunc": lambda a, b: gpucore.div(a, b, rounding_mode="trunc"),
    "floor": lambda a, b: gpucore.div(a, b, rounding_mode="floor"),
    "remainder": gpucore.remainder,
    "fmod": gpucore.fmod,
}
OP_NAME = {"trunc": "div_rounded", "floor": "div_rounded", "remainder": "remainder", "fmod": "fmod"}


def operands(dtype, n: int = 4099):
    """(a, b) with b != 0: full-range values, small ones of both signs, and every pair of the
    type's edges (min, max, +-1, +-2, 0 as a dividend)."""
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    b = RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    a[1::3] = RNG.integers(max(info.min, -50), 50, a[1::3].size)
    b[1::3] = RNG.integers(max(info.min, -7), 8, b[1::3].size)
    edges = np.array([info.min, info.max, 0, 1, 2, 7, info.max - 1, info.min + 1], np.int64)
    if info.min < 0:
        edges = np.concatenate([edges, [-1, -2, -7]])
    e = edges.astype(dtype)
    pa, pb = np.repeat(e, e.size), np.tile(e, e.size)
    a[: pa.size], b[: pb.size] = pa, pb
    b[b == 0] = 3
    return a, b


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("mode", sorted(FNS))
def test_integer_division_matches_cpu_bit_for_bit(vulkan, mode, dtype):
    a, b = operands(dtype)
    got = run_exact(FNS[mode], a, b, name=OP_NAME[mode])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, NUMPY[mode](a, b))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_int_min_divided_by_minus_one_wraps(vulkan, dtype):
    info = np.iinfo(dtype)
    a, b = np.array([info.min, info.min, info.max], dtype), np.array([-1, 1, -1], dtype)
    for mode in FNS:
        got = run_exact(FNS[mode], a, b, name=OP_NAME[mode])
        if mode in ("trunc", "floor"):
            np.testing.assert_array_equal(got, [info.min, info.min, -info.max])
        else:
            np.testing.assert_array_equal(got, [0, 0, 0])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_integer_division_of_strided_operands(vulkan, view, dtype):
    a, b = (x.reshape(40, 60) for x in operands(dtype, 2400))
    fn = VIEWS[view]
    for mode in ("floor", "remainder"):
        got = FNS[mode](dev_view(a, fn), dev_view(b, fn)).cpu().numpy()
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got, NUMPY[mode](fn(a), fn(b)))


@pytest.mark.parametrize("dtype", TYPES)
def test_device_divisor_zero_gives_numpys_zero(vulkan, dtype):
    a = np.array([5, 0, 7, 1], dtype)
    zero = dev(np.zeros(4, dtype))
    for mode in FNS:
        got = FNS[mode](dev(a), zero).cpu().numpy()
        with np.errstate(all="ignore"):
            want = NUMPY["floor"](a, np.zeros(4, dtype))  # numpy's value: 0
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, 0)


@pytest.mark.parametrize("mode", sorted(FNS))
def test_host_divisor_zero_raises_as_the_cpu(vulkan, mode):
    a = dev(np.array([5, 6, 7], np.int32))
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        on_cpu(FNS[mode], gpucore.tensor(np.array([5, 6, 7], np.int32)), 0)
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        FNS[mode](a, 0).cpu()
    got = FNS[mode](a, 2).cpu().numpy()  # a nonzero host divisor runs on the device
    np.testing.assert_array_equal(got, NUMPY[mode](np.array([5, 6, 7]), np.full(3, 2)))


@pytest.mark.parametrize("dtype", TYPES)
def test_integer_pow_wraps_as_numpy(vulkan, dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(max(info.min, -1000), min(info.max, 1000), 3001, dtype=dtype)
    e = RNG.integers(0, 70, 3001).astype(dtype)
    a[:6] = np.array([0, 0, 1, info.max, info.min, 2], np.int64).astype(dtype)
    e[:6] = [0, 5, 63, 2, 3, 63 if dtype == np.int64 else 31]
    got = run_exact(gpucore.pow, a, e, name="pow")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.power(a, e))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_negative_exponent(vulkan, dtype):
    """A tensor exponent below 0 gives PyTorch's 1, -1 or 0 (trunc(1 / x^-e)) on the device, with
    the exponent on the device or on the host, as the CPU kernel does."""
    a = np.array([1, -1, -1, 2, -3, 0, 5], dtype)
    e = np.array([-3, -3, -2, -1, -5, -1, -2], dtype)
    want = [1, -1, 1, 0, 0, 0, 0]
    np.testing.assert_array_equal(gpucore.pow(dev(a), dev(e)).cpu().numpy(), want)
    np.testing.assert_array_equal(gpucore.pow(dev(a), gpucore.tensor(e)).cpu().numpy(), want)
    with gpucore.device_policy("cpu"):
        np.testing.assert_array_equal(
            gpucore.pow(gpucore.tensor(a), gpucore.tensor(e)).numpy(), want
        )


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8])
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_extremes_of_bool_and_bytes(vulkan, name, dtype):
    if dtype == np.bool_:
        x = RNG.random((37, 5, 11)) < 0.1
    else:
        info = np.iinfo(dtype)
        x = RNG.integers(info.min, info.max, (37, 5, 11), dtype=dtype, endpoint=True)
    for dims in ((1,), (0, 2), (0, 1, 2)):
        got = run_exact(lambda t, d=dims: getattr(t, name)(dim=d), x, name=name)
        np.testing.assert_array_equal(got, getattr(np, name)(x, axis=dims))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float32])
@pytest.mark.parametrize("name", ["any", "all"])
def test_truth_reductions(vulkan, name, dtype):
    x = (RNG.random((9, 33, 4)) < 0.9).astype(dtype)
    if dtype == np.float32:
        x[0, :, 0] = np.nan  # true, as on the CPU
        x[1, :, 1] = 0.0
    with gpucore.dispatch.trace_ops() as ops:
        got = [getattr(dev(x), name)(dim=d).cpu().numpy() for d in (0, 1, 2)]
        whole = getattr(dev(x), name)().cpu().numpy()
    ran_on_device(ops, name)
    for d, g in zip((0, 1, 2), got):
        np.testing.assert_array_equal(g, getattr(np, name)(x, axis=d))
    assert whole == getattr(np, name)(x)
