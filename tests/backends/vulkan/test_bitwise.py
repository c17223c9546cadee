"""The bitwise ops on the Vulkan device (binary.comp for the 8-, 16- and 32-bit integers,
binary64.comp's word pairs for int64 / uint64): and, or, xor, not and the shifts, bit for bit
with the CPU path, numpy and PyTorch, including the shifts PyTorch defines outside [0, bits) (0
to the left, the sign fill to the right) and the edge values of every type. uint16 / uint32 /
uint64 take not and the shifts only through the kernels (the registry refuses them, as PyTorch;
the runtime's graphs reach them), so those are called directly against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import VIEWS, dev_view, ints, ran_on_device, run_exact

import gpucore
from gpucore.backends.vulkan.kernels import KERNELS

TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
BINARY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
          "bitwise_xor": np.bitwise_xor}  # fmt: skip


def amounts(dtype, n: int) -> np.ndarray:
    """Shift amounts in and outside [0, bits): negative ones for the signed types."""
    bits = 8 * np.dtype(dtype).itemsize
    lo = -3 if np.dtype(dtype).kind == "i" else 0
    s = np.arange(n) % (bits + 4 - lo) + lo
    return s.astype(dtype)


LIMITED = (np.uint16, np.uint32, np.uint64)


def run(name: str, *arrays) -> np.ndarray:
    """Op ``name`` on device copies of the arrays: through the registry (checked against the CPU
    path by run_exact), or for the unsigned types PyTorch limits, the Vulkan kernel itself."""
    if arrays[0].dtype.type not in LIMITED or name in BINARY:
        return run_exact(getattr(gpucore, name), *arrays, name=name)
    be = gpucore.dispatch.vulkan_backend(allow_cpu=True)
    dt = gpucore.tensor(arrays[0][:0]).dtype
    ins = [be.upload(np.ascontiguousarray(a), dt) for a in arrays]
    out = be.empty_array(np.broadcast_shapes(*[a.shape for a in arrays]), dt.np)
    KERNELS[name](be, out, *ins)
    return np.array(be.host_view(out))


def torch_shift(name: str, a: np.ndarray, s: np.ndarray) -> np.ndarray:
    """PyTorch's result where it has the dtype (its CPU defines shifts outside [0, bits))."""
    torch = pytest.importorskip("torch")
    fn = getattr(torch, name)
    return fn(torch.from_numpy(a), torch.from_numpy(s)).numpy()


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_and_or_xor_as_numpy(vulkan, name, dtype):
    a, b = ints(dtype, 4099), ints(dtype, 4099)
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, BINARY[name](a, b))
    a, b = ints(dtype, 7, 1, 13), ints(dtype, 5, 1)  # broadcast both ways, odd sizes
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, BINARY[name](a, b))


@pytest.mark.parametrize("dtype", TYPES)
def test_not_as_numpy(vulkan, dtype):
    a = ints(dtype, 3, 1001)
    np.testing.assert_array_equal(run("bitwise_not", a), ~a)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("name", ["bitwise_left_shift", "bitwise_right_shift"])
def test_shifts_in_and_outside_the_width(vulkan, name, dtype):
    a = ints(dtype, 4099)
    s = amounts(dtype, 4099)
    got = run(name, a, s)
    bits = 8 * a.itemsize
    signed = a.dtype.kind == "i"
    inside = (s >= 0) & (s < bits) if signed else s < bits
    want = np.empty_like(a)
    op = np.left_shift if name == "bitwise_left_shift" else np.right_shift
    want[inside] = op(a[inside], s[inside])
    if name == "bitwise_left_shift":
        want[~inside] = 0
    else:  # the sign fill
        want[~inside] = np.where(a[~inside] < 0, -1, 0).astype(a.dtype) if signed else 0
    np.testing.assert_array_equal(got, want)
    if a.dtype.type not in LIMITED:  # PyTorch's shifts take these dtypes
        np.testing.assert_array_equal(got, torch_shift(name, a, s))


def test_shift_edges_of_int64_and_uint64(vulkan):
    a = np.array([-(2**63), 2**63 - 1, -1, 1, -5, 7] * 4, np.int64)
    s = np.array([0, 1, 31, 32, 33, 63] * 2 + [64, 65, -1, -64, 2**40, -(2**40)] * 2, np.int64)
    for name in ("bitwise_left_shift", "bitwise_right_shift"):
        got = run_exact(getattr(gpucore, name), a, s, name=name)
        np.testing.assert_array_equal(got, torch_shift(name, a, s))
    u = np.array([2**64 - 1, 2**63, 1, 2**32 + 5] * 5, np.uint64)
    us = np.array([0, 1, 31, 32, 33, 63, 64, 65, 2**63, 2**64 - 1] * 2, np.uint64)
    for name, op in (
        ("bitwise_left_shift", np.left_shift),
        ("bitwise_right_shift", np.right_shift),
    ):
        got = run(name, u, us)
        inside = us < 64
        want = np.zeros_like(u)
        want[inside] = op(u[inside], us[inside])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_on_strided_views(vulkan, view):
    a, b = ints(np.int16, 40, 90), ints(np.int16, 40, 90)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.bitwise_xor(dev_view(a, VIEWS[view]), dev_view(b, VIEWS[view]))
    ran_on_device(ops, "bitwise_xor")
    np.testing.assert_array_equal(got.cpu().numpy(), VIEWS[view](a) ^ VIEWS[view](b))


def test_operators_and_in_place_forms(vulkan):
    a, b = ints(np.int32, 257), ints(np.int32, 257) % 40
    ta, tb = gpucore.tensor(a).to("vulkan"), gpucore.tensor(b).to("vulkan")
    np.testing.assert_array_equal((ta & tb).numpy(), a & b)
    np.testing.assert_array_equal((~ta).numpy(), ~a)
    np.testing.assert_array_equal((ta >> 3).numpy(), a >> 3)
    ta ^= tb
    assert ta.device.type == "vulkan"
    np.testing.assert_array_equal(ta.numpy(), a ^ b)
