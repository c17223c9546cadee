"""Tensor.__repr__ of empty tensors (the shape unless 1-D and the dtype unless the default float)
and of bool tensors (as wide as the widest value), as PyTorch prints them; tests/test_tensor.py
has the rest of the repr checks."""

import pytest

import gpucore

CASES = [
    ((0,), "float32", "tensor([])"),
    ((0,), "int64", "tensor([], dtype=gpucore.int64)"),
    ((0,), "bool", "tensor([], dtype=gpucore.bool)"),
    ((0,), "float64", "tensor([], dtype=gpucore.float64)"),
    ((2, 0), "float32", "tensor([], size=(2, 0))"),
    ((2, 0), "int32", "tensor([], size=(2, 0), dtype=gpucore.int32)"),
    ((0, 3, 1), "int64", "tensor([], size=(0, 3, 1), dtype=gpucore.int64)"),
]


@pytest.mark.parametrize("shape,dtype,expected", CASES)
def test_empty_tensor_repr(shape, dtype, expected):
    assert repr(gpucore.zeros(shape, dtype=getattr(gpucore, dtype))) == expected


def test_empty_tensor_repr_matches_torch():
    torch = pytest.importorskip("torch")
    for shape, dtype, _ in CASES:
        ours = repr(gpucore.zeros(shape, dtype=getattr(gpucore, dtype)))
        ref = repr(torch.zeros(shape, dtype=getattr(torch, dtype)))
        assert ours == ref.replace("torch.", "gpucore."), (ours, ref)


def test_non_empty_int64_and_bool_keep_no_dtype():
    assert repr(gpucore.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(gpucore.tensor([True, False])) == "tensor([ True, False])"
    assert repr(gpucore.zeros(0, requires_grad=True)) == "tensor([], requires_grad=True)"


@pytest.mark.parametrize(
    "values,expected",
    [
        ([True], "tensor([True])"),
        ([[True], [True]], "tensor([[True],\n        [True]])"),
        ([False], "tensor([False])"),
        ([True, False], "tensor([ True, False])"),
        (True, "tensor(True)"),
    ],
)
def test_bool_repr_is_as_wide_as_its_widest_value(values, expected):
    assert repr(gpucore.tensor(values)) == expected
    torch = pytest.importorskip("torch")
    assert repr(torch.tensor(values)) == expected
