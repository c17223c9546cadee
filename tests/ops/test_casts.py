"""Casts and copies (to/float/double/..., clone, contiguous)."""

import numpy as np
import pytest
from helpers import assert_close, check_op, rand, to_np

import gpucore


def test_clone_contiguous():
    check_op(lambda x: x.clone(), lambda x: x.copy(), [(3, 4)], rtol=0, atol=0)
    check_op(lambda x: gpucore.clone(x.T), lambda x: x.T, [(3, 4)], rtol=0, atol=0)
    check_op(lambda x: x.T.contiguous(), lambda x: x.T, [(3, 4)], rtol=0, atol=0)
    x = gpucore.tensor(rand((3, 4)))
    assert x.contiguous() is x
    c = x.T.contiguous()
    assert c.is_contiguous() and not np.shares_memory(to_np(c), to_np(x))
    y = x.clone()
    y[0, 0] = 100.0
    assert x[0, 0].item() != 100.0


@pytest.mark.parametrize(
    "src", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]
)
@pytest.mark.parametrize(
    "dst", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "bool"]
)
def test_casts(src, dst):
    v = np.array([0.0, 1.0, 2.0, 3.0, 100.0, 7.0])
    x = gpucore.tensor(v, dtype=getattr(gpucore, src))
    out = x[::2].to(getattr(gpucore, dst))
    assert out.dtype is getattr(gpucore, dst)
    ref = v[::2].astype(np.bool_ if src == "bool" else np.float64)
    ref = ref.astype(np.bool_) if dst == "bool" else ref
    assert_close(
        out.float() if dst == "bfloat16" else out,
        ref.astype(out.dtype.np) if dst != "bfloat16" else ref,
    )


def test_cast_methods_and_rounding():
    x = gpucore.tensor([1.7, -1.7, 0.0])
    assert x.long().tolist() == [1, -1, 0]  # truncation toward zero, as PyTorch
    assert x.int().dtype is gpucore.int32 and x.bool().tolist() == [True, True, False]
    assert x.double().dtype is gpucore.float64 and x.half().dtype is gpucore.float16
    assert x.bfloat16().float().tolist() == pytest.approx([1.703125, -1.703125, 0.0])
    assert gpucore.tensor([1.0 + 2**-9]).bfloat16().float().item() == 1.0  # round to nearest even
    assert gpucore.tensor([70000.0]).half().float().item() == float("inf")


def test_to_another_tensor_takes_its_dtype_and_device():
    x = gpucore.tensor([1.5, 2.5])
    y = x.to(gpucore.zeros(1, dtype=gpucore.float64))
    assert y.dtype is gpucore.float64 and y.device == "cpu" and y.tolist() == [1.5, 2.5]
    assert x.to(x) is x


def test_cast_gradients():
    # through float32 and back: finite differences need a step far above float32's rounding
    x64 = gpucore.tensor(rand((2, 3)), dtype=gpucore.float64, requires_grad=True)
    assert gpucore.autograd.gradcheck(lambda t: t.float().double() * t, [x64], eps=1e-2, atol=1e-3)
    x = gpucore.tensor([1.5, -2.0], requires_grad=True)
    y = x.double() * 3
    y.sum().backward()
    assert x.grad.dtype is gpucore.float32 and x.grad.tolist() == [3.0, 3.0]
    x.grad = None
    (x.to(gpucore.float16) * 2).float().sum().backward()
    assert x.grad.dtype is gpucore.float32 and x.grad.tolist() == [2.0, 2.0]
