"""Tensor.new_zeros / new_ones / new_full / new_empty / new_tensor as PyTorch: self's dtype and
device unless given, sizes as varargs or a tuple, requires_grad, a detached copy of data."""

import numpy as np
import pytest

import gpucore


@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_new_sized(name):
    torch = pytest.importorskip("torch")
    for dt, tdt in ((gpucore.float64, torch.float64), (gpucore.int32, torch.int32)):
        g, t = gpucore.zeros(2, dtype=dt), torch.zeros(2, dtype=tdt)
        for args in ((2, 3), ((2, 3),), ([4],)):
            a, b = getattr(g, name)(*args), getattr(t, name)(*args)
            assert tuple(a.shape) == tuple(b.shape) and a.dtype is dt
            if name != "new_empty":
                np.testing.assert_array_equal(a.numpy(), b.numpy())
    x = gpucore.zeros(2).new_ones(3, dtype=gpucore.int64, requires_grad=False)
    assert x.dtype is gpucore.int64 and x.tolist() == [1, 1, 1]
    y = gpucore.zeros(2).new_zeros((2,), requires_grad=True)
    assert y.requires_grad and y.is_leaf


def test_new_full_and_new_tensor():
    torch = pytest.importorskip("torch")
    g, t = gpucore.zeros(1, dtype=gpucore.float64), torch.zeros(1, dtype=torch.float64)
    a, b = g.new_full((2, 2), 3), t.new_full((2, 2), 3)
    assert a.dtype is gpucore.float64 and a.tolist() == b.tolist()
    a, b = g.new_tensor([1, 2]), t.new_tensor([1, 2])
    assert a.dtype is gpucore.float64 and a.tolist() == b.tolist()
    src = gpucore.ones(2, requires_grad=True)
    c = g.new_tensor(src)
    assert not c.requires_grad and c.dtype is gpucore.float64
    c += 1
    assert src.tolist() == [1.0, 1.0]  # a copy
    assert g.new_tensor([1, 2], dtype=gpucore.int64).dtype is gpucore.int64


def test_new_on_vulkan_keeps_the_device(vulkan):
    x = gpucore.zeros(3, device="vulkan")
    for t in (x.new_zeros(2), x.new_ones(2), x.new_full((2,), 1.0), x.new_tensor([1.0])):
        assert t.device.type == "vulkan"
    assert x.new_zeros(2, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_new_sized_by_keyword(name):
    # size= as PyTorch's keyword (it was swallowed by **_ignored: a 0-d result)
    x = gpucore.zeros(2, dtype=gpucore.float64)
    out = getattr(x, name)(size=(2, 3))
    assert tuple(out.shape) == (2, 3) and out.dtype is gpucore.float64
    with pytest.raises(TypeError, match="not both"):
        getattr(x, name)(2, size=(2,))
    with pytest.raises(TypeError, match="must be a tuple of ints, not int"):
        getattr(x, name)(size=3)  # as PyTorch: the keyword takes a sequence
