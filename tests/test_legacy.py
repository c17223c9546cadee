"""PyTorch's legacy typed constructors and default-dtype names (gpucore/legacy.py), compared
with torch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc

TYPED = {
    "FloatTensor": gc.float32,
    "DoubleTensor": gc.float64,
    "HalfTensor": gc.float16,
    "BFloat16Tensor": gc.bfloat16,
    "LongTensor": gc.int64,
    "IntTensor": gc.int32,
    "CharTensor": gc.int8,
    "ByteTensor": gc.uint8,
    "BoolTensor": gc.bool,
}


@pytest.mark.parametrize("name", TYPED)
def test_typed_constructors(name):
    cls, dt = getattr(gc, name), TYPED[name]
    assert cls.dtype is dt and repr(cls) == f"gpucore.{name}"
    assert cls(2, 3).shape == (2, 3) and cls(2, 3).dtype is dt  # sizes
    assert cls(gc.Size([4])).shape == (4,)
    assert cls().shape == (0,) and cls().dtype is dt
    data = cls([[1, 0], [1, 1]])
    assert data.dtype is dt and data.shape == (2, 2)
    assert data.to(gc.float32).tolist() == [[1.0, 0.0], [1.0, 1.0]]
    assert cls(np.array([1, 0])).dtype is dt
    assert isinstance(data, cls) and not isinstance(
        data.to(gc.float64 if dt is not gc.float64 else gc.float32), cls
    )
    same = cls(data)
    assert same is not data and same.dtype is dt
    other = gc.int32 if dt is not gc.int32 else gc.int64
    with pytest.raises(gc.DTypeError, match="expected"):
        cls(gc.zeros(2, dtype=other))


def test_typed_constructor_argument_errors():
    with pytest.raises(TypeError):
        gc.FloatTensor(2.5)
    with pytest.raises(TypeError):
        gc.LongTensor("abc")
    assert gc.FloatTensor(2, 3, device="cpu").device == "cpu"


def test_a_shared_tensor_of_the_right_dtype():
    x = gc.ones(3)
    y = gc.FloatTensor(x)
    y.add_(1)
    assert x.tolist() == [2.0, 2.0, 2.0]  # shares storage, as PyTorch


def test_default_dtype():
    # the float32 start; what follows set_default_dtype is in tests/test_default_dtype.py
    assert gc.get_default_dtype() is gc.float32
    gc.set_default_dtype(gc.float32)
    with pytest.raises(TypeError, match="floating"):
        gc.set_default_dtype(gc.int64)
    assert gc.get_default_dtype() is gc.float32


def test_float_tensor_stays_float32_under_another_default():
    gc.set_default_dtype(gc.float64)
    try:
        assert gc.FloatTensor([1.5]).dtype is gc.float32 and gc.FloatTensor(2).dtype is gc.float32
        assert isinstance(gc.zeros(1, dtype=gc.float32), gc.FloatTensor)
        assert not isinstance(gc.zeros(1), gc.FloatTensor)  # float64 now
    finally:
        gc.set_default_dtype(gc.float32)


def test_same_results_as_torch():
    torch = pytest.importorskip("torch")
    for name in TYPED:
        t_cls, g_cls = getattr(torch, name), getattr(gc, name)
        assert str(t_cls(2, 3).dtype).split(".")[1] == str(g_cls(2, 3).dtype).split(".")[1]
        assert t_cls([1, 0, 2]).tolist() == g_cls([1, 0, 2]).tolist(), name
        assert list(t_cls(torch.Size([2, 2])).shape) == list(g_cls(gc.Size([2, 2])).shape)
        assert isinstance(torch.ones(1).to(t_cls.dtype), t_cls)
        assert isinstance(gc.ones(1).to(g_cls.dtype), g_cls)
    assert torch.get_default_dtype() == torch.float32 and gc.get_default_dtype() is gc.float32


def test_tensor_type_takes_and_gives_legacy_names():
    x = gc.ones(2)
    assert x.type() == "gpucore.FloatTensor"
    assert gc.tensor([1]).type() == "gpucore.LongTensor"
    assert x.type(gc.LongTensor).dtype is gc.int64  # the GAN scripts' imgs.type(Tensor)
    assert x.type("torch.DoubleTensor").dtype is gc.float64
    assert x.type(gc.int32).dtype is gc.int32
    with pytest.raises(TypeError, match="CUDA types do not exist"):
        x.type("torch.cuda.FloatTensor")
