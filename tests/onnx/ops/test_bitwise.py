"""gpucore.onnx.ops.bitwise: BitwiseAnd/Or/Xor/Not and BitShift, and ONNX arithmetic on the
uint16 / uint32 / uint64 tensors gpucore computes through int64 (the top-bit flip for order;
uint64 Div and Mod on the exact integer kernels), against numpy's exact integer results, values
near each type's top included."""

import numpy as np
import pytest
from onnx_cases import helper, model, run_gpucore

UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]


def _values(dt, n=40, seed=0):
    rng = np.random.default_rng(seed)
    top = np.iinfo(dt).max
    a = rng.integers(0, top, n, dtype=dt, endpoint=True)
    a[:4] = [top, top - 1, 0, 1]
    return a


def _run(op, inputs: list, out_dtype, attrs=None, opset=18, device="cpu"):
    names = [f"in{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **(attrs or {}))
    m = model([node], dict(zip(names, inputs)), {"out": out_dtype}, opset=opset)
    return run_gpucore(m, dict(zip(names, inputs)), device=device)[0]


@pytest.mark.parametrize("dt", UNSIGNED + [np.int8, np.int16, np.int32, np.int64])
def test_bitwise_ops(dt):
    a, b = _values(dt, seed=1) if dt in UNSIGNED else None, None
    if a is None:
        info = np.iinfo(dt)
        rng = np.random.default_rng(1)
        a = rng.integers(info.min, info.max, 40, dtype=dt, endpoint=True)
    b = np.roll(a, 3)
    for op, ref in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                    ("BitwiseXor", np.bitwise_xor)):  # fmt: skip
        np.testing.assert_array_equal(_run(op, [a, b], dt), ref(a, b))
    np.testing.assert_array_equal(_run("BitwiseNot", [a], dt), np.invert(a))


@pytest.mark.parametrize("dt", UNSIGNED)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(dt, direction):
    a = _values(dt, seed=2)
    bits = 8 * np.dtype(dt).itemsize
    s = (np.arange(a.size) % bits).astype(dt)
    got = _run("BitShift", [a, s], dt, {"direction": direction})
    ref = np.left_shift(a, s) if direction == "LEFT" else np.right_shift(a, s)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dt", [np.uint16, np.uint32, np.uint64, np.int16])
def test_arithmetic_and_order_of_the_new_integer_types(dt):
    if dt is np.int16:
        rng = np.random.default_rng(3)
        a = rng.integers(-32768, 32767, 40, dtype=dt, endpoint=True)
    else:
        a = _values(dt, seed=3)
    b = np.roll(a, 5)
    b[b == 0] = 3
    with np.errstate(all="ignore"):
        for op, ref in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                        ("Max", np.maximum), ("Min", np.minimum)):  # fmt: skip
            np.testing.assert_array_equal(_run(op, [a, b], dt), ref(a, b), err_msg=op)
        for op, ref in (("Less", np.less), ("Greater", np.greater), ("Equal", np.equal)):
            np.testing.assert_array_equal(_run(op, [a, b], np.bool_), ref(a, b), err_msg=op)
        if dt is not np.int16:  # unsigned: C's division and remainder
            np.testing.assert_array_equal(_run("Div", [a, b], dt), a // b)
            np.testing.assert_array_equal(_run("Mod", [a, b], dt), a % b)


@pytest.mark.parametrize("device", ["cpu", "vulkan"])
def test_uint64_div_and_mod_are_exact_over_the_whole_range(request, device):
    if device == "vulkan":
        request.getfixturevalue("vulkan")
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2**64, 2000, dtype=np.uint64, endpoint=False)
    b = rng.integers(1, 2**64, 2000, dtype=np.uint64) >> rng.integers(0, 64, 2000).astype(np.uint64)
    b[b == 0] = 1
    a[:6] = 2**64 - 1
    b[:6] = [1, 2**64 - 1, 2**63, 2**63 + 1, 3, 2**32]
    np.testing.assert_array_equal(_run("Div", [a, b], np.uint64, device=device), a // b)
    np.testing.assert_array_equal(_run("Mod", [a, b], np.uint64, device=device), a % b)
