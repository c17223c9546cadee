"""Python numbers as operands of the binary ops: every op, every tensor dtype, int / float / bool
on either side, the result dtype and values as PyTorch gives them. Float32 / float64 tensors take
the fast lane with the number as an immediate (cpu/python/fastpath.c fast_binary): the same bits
as the general path's 0-d tensor, and gradients through it."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from helpers import rand

import gpucore
from gpucore import _cpu, dispatch
from gpucore.backends.cpu.kernels import FAST
from gpucore.ops import elementwise as E
from gpucore.ops.common import scalar_tensor
from gpucore.ops.registry import apply_general

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SCALARS = [3, -2, 0.375, 2.5, True, False]
# name: (gpucore function, torch function)
OPS = {
    "add": (operator.add, operator.add),
    "sub": (operator.sub, operator.sub),
    "mul": (operator.mul, operator.mul),
    "div": (operator.truediv, operator.truediv),
    "pow": (operator.pow, operator.pow),
    "maximum": (gpucore.maximum, None),
    "minimum": (gpucore.minimum, None),
    "eq": (operator.eq, operator.eq),
    "lt": (operator.lt, operator.lt),
    "ge": (operator.ge, operator.ge),
}


def _torch_ref(name, t, s, scalar_first):
    if name in ("maximum", "minimum"):  # torch takes tensors only: the scalar's promoted form
        dt = torch.result_type(t, s)
        other = torch.full_like(t, s, dtype=dt)
        a, b = (other, t.to(dt)) if scalar_first else (t.to(dt), other)
        return getattr(torch, name)(a, b)
    fn = OPS[name][1]
    return fn(s, t) if scalar_first else fn(t, s)


def _values(dtype):
    x = np.array([[0.5, 1.0, 2.0, 3.0], [4.0, 1.5, 7.0, 0.25]])
    if dtype == "bool":
        return x > 1.2
    if dtype in ("uint8", "int8", "int32", "int64"):
        return np.round(x * 2).astype(dtype)  # no zero: int division by zero differs
    return x


@pytest.mark.parametrize("scalar_first", [False, True], ids=["t_op_s", "s_op_t"])
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_and_values_as_torch(dtype, name, scalar_first):
    x = _values(dtype)
    g = gpucore.tensor(x, dtype=getattr(gpucore, dtype))
    t = torch.tensor(x, dtype=getattr(torch, dtype))
    fn = OPS[name][0]
    for s in SCALARS:
        try:
            want = _torch_ref(name, t, s, scalar_first)
        except (RuntimeError, NotImplementedError):  # torch refuses it (bool - bool, ...)
            continue
        got = fn(s, g) if scalar_first else fn(g, s)
        assert str(got.dtype) == str(want.dtype).replace("torch.", "gpucore."), (s, got.dtype)
        w = want.float().numpy() if want.dtype in (torch.bfloat16, torch.float16) else want.numpy()
        gv = got.float().numpy() if got.dtype in (gpucore.bfloat16, gpucore.float16) else got
        gv = gv if isinstance(gv, np.ndarray) else gv.numpy()
        tol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-6
        np.testing.assert_allclose(gv.astype(np.float64), w.astype(np.float64), rtol=tol)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_ints_out_of_the_dtypes_range_wrap_as_in_torch(dtype):
    """A number operand is stored as the tensor's dtype stores it (two's complement wrap:
    uint8 - 2 gives 255) unless the op computes in float (uint8 / -2 is -0.5); fill values are
    checked (uint8 takes -1 as 255, refuses 300)."""
    x = np.array([0, 1, 5, 100, 127])
    g = gpucore.tensor(x, dtype=getattr(gpucore, dtype))
    t = torch.tensor(x, dtype=getattr(torch, dtype))
    ops = [operator.add, operator.sub, operator.mul, operator.truediv, operator.eq, operator.lt]
    for s in (-2, -200, 255, 256, 300, 2**31 + 5, -(2**40), 2**63 - 1, 2**63, -(2**63)):
        for op in ops:
            for ours, theirs in ((op(g, s), op(t, s)), (op(s, g), op(s, t))):
                assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
                np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=f"{op} {s}")
        np.testing.assert_array_equal(g.add(g, alpha=-1).numpy(), t.add(t, alpha=-1).numpy())
        ga, ta = g.clone(), t.clone()
        ga -= s
        ta -= s
        assert ga.tolist() == ta.tolist()
    for v in (-1, -100, 2**7 - 1):  # in range for torch's checked fills on every dtype here
        assert g.clone().fill_(v).tolist() == t.clone().fill_(v).tolist()
        assert g.masked_fill(g > 1, v).tolist() == t.masked_fill(t > 1, v).tolist()
        got = gpucore.full((2,), v, dtype=g.dtype).tolist()
        assert got == torch.full((2,), v, dtype=t.dtype).tolist()
    top = int(torch.iinfo(t.dtype).max)
    for bad in (top + 1, -(2**64)):  # torch: "value cannot be converted ... without overflow"
        with pytest.raises((RuntimeError, OverflowError)):
            t.clone().fill_(bad)
        with pytest.raises(OverflowError, match="cannot be converted|too big"):
            g.clone().fill_(bad)
        with pytest.raises(gpucore.DTypeError, match="full"):
            gpucore.full((1,), bad, dtype=g.dtype)
    with pytest.raises(OverflowError):
        g + 2**64  # beyond 64 bits: refused by both
    with pytest.raises((OverflowError, RuntimeError)):
        t + 2**64


@pytest.fixture
def lane_open():
    old = dispatch.get_device_policy()
    dispatch.set_device_policy("cpu")
    yield
    dispatch.set_device_policy(old)


ARITH = [n for n in _cpu.OPCODES["binary"] if n in FAST]


@pytest.mark.parametrize("dt", [gpucore.float32, gpucore.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ARITH)
def test_lane_takes_numbers_with_the_general_paths_bits(lane_open, name, dt):
    x = gpucore.tensor(rand((5, 7), low=0.5, high=2.0, seed=1), dtype=dt)
    fn, code = FAST[name]
    for s in (0.1, 3, True, -7, 2.0**60):
        for first in (False, True):
            got = fn(code, s, x) if first else fn(code, x, s)
            assert type(got) is gpucore.Tensor and got.dtype is dt and got.shape == (5, 7)
            st = scalar_tensor(s, dt)
            op = E.__dict__[name.upper()] if name.upper() in E.__dict__ else None
            if op is None:
                continue
            want = apply_general(op, (st, x) if first else (x, st), {})
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    # declined: huge ints, numpy scalars (the general path takes them), comparisons
    assert fn(code, x, 2**60) is None
    assert fn(code, x, np.float32(2.0)) is None
    with pytest.raises(ValueError):
        _cpu.fast_binary(_cpu.BINARY_EQ, x, 1.0)


def test_gradients_with_a_number_operand(lane_open):
    x0 = rand((3, 4), low=0.5, high=2.0, seed=2)
    x = gpucore.tensor(x0, dtype=gpucore.float64, requires_grad=True)
    y = (x * 0.5 + 2) / 3.0 - 1 + (2.0 / x) + x**2
    y.sum().backward()
    want = 0.5 / 3.0 - 2.0 / x0**2 + 2 * x0
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
    assert gpucore.autograd.gradcheck(lambda x: (3 - x) * 0.25 / (1.5 + x), (x,))
    with gpucore.no_grad():
        assert (x * 2.0).grad_fn is None
