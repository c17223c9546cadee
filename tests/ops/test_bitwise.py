"""gpucore.ops.bitwise: bitwise_and / or / xor / not and the shifts against PyTorch, on every
integer dtype (shift amounts outside [0, bits) included), bool operands (the logical ops), float
operands refused, the operators and their in-place forms."""

import numpy as np
import pytest

import gpucore

torch = pytest.importorskip("torch")

from helpers import same_as_torch as same  # noqa: E402


def g(name):
    return getattr(gpucore, name)


def t(name):
    return getattr(torch, name)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
@pytest.mark.parametrize(
    "op",
    [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x,
     lambda x, y: x & 5, lambda x, y: 6 | x, lambda x, y: x.bitwise_xor(y)],
)  # fmt: skip
def test_bitwise_ops_as_torch(name, op):
    info = np.iinfo(np.dtype(name))
    rng = np.random.default_rng(0)
    a = rng.integers(info.min, info.max, 30, dtype=np.dtype(name), endpoint=True)
    b = np.roll(a, 7)
    same(
        op(gpucore.from_numpy(a), gpucore.from_numpy(b)),
        op(torch.from_numpy(a), torch.from_numpy(b)),
    )


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_shifts_as_torch_including_out_of_range_amounts(name):
    vals = [-5, 5, -128, 127, 1, 100, -1, 0] if name != "uint8" else [5, 128, 255, 1, 100, 0]
    x, tx = gpucore.tensor(vals, dtype=g(name)), torch.tensor(vals, dtype=t(name))
    for s in (0, 1, 3, 7, 8, 15, 16, 31, 32, 63, 64, 100):
        same(x << s, tx << s)
        same(x >> s, tx >> s)
    amounts = [0, 1, 2, 9, 17, 33, 70, 3, 4, 5, 6, 7][: len(vals)]
    same(x << gpucore.tensor(amounts, dtype=g(name)), tx << torch.tensor(amounts, dtype=t(name)))
    same(x >> gpucore.tensor(amounts, dtype=g(name)), tx >> torch.tensor(amounts, dtype=t(name)))
    same(1 << x.abs().clamp(max=6), 1 << tx.abs().clamp(max=6))


def test_bitwise_on_bool_and_refused_on_floats():
    a, b = gpucore.tensor([True, False, True]), gpucore.tensor([True, True, False])
    ta, tb = torch.tensor([True, False, True]), torch.tensor([True, True, False])
    for op in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x):
        same(op(a, b), op(ta, tb))
    same(gpucore.tensor([True]) & 3, torch.tensor([True]) & 3)
    same(gpucore.tensor([True]) << 1, torch.tensor([True]) << 1)
    for bad in (lambda: gpucore.ones(2) & gpucore.ones(2), lambda: ~gpucore.ones(2),
                lambda: gpucore.tensor([True]) << gpucore.tensor([True])):  # fmt: skip
        with pytest.raises(gpucore.DTypeError):
            bad()
    x = gpucore.tensor([6, 5], dtype=gpucore.int16)
    x &= 3
    x <<= 2
    assert x.tolist() == [8, 4] and x.dtype is gpucore.int16
    assert gpucore.bitwise_xor(x, 12).tolist() == [4, 8]
