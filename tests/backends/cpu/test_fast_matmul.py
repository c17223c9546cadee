"""The matmul fast lane (cpu/python/fastpath.c fast_matmul, taken by gpucore.matmul / ``a @ b``):
host matrices or equal batches of them, row-major or transposed views, one GEMM call. It must
give the general path's bits, record the same graph, decline (None) every other layout, and stay
closed while a profiler, a trace or graph capture needs the general path."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import rand

import gpucore
from gpucore import _cpu, dispatch
from gpucore.ops import linalg
from gpucore.ops.registry import apply_general

F32, F64 = gpucore.float32, gpucore.float64


def _t(a, dt=F32, grad=False):
    return gpucore.tensor(a, dtype=dt, requires_grad=grad)


def _operand(shape, trans, dt, seed):
    """A tensor of ``shape``; with trans a transpose(-2, -1) view of contiguous data."""
    if not trans:
        return _t(rand(shape, seed=seed), dt)
    st = shape[:-2] + (shape[-1], shape[-2])
    return _t(rand(st, seed=seed), dt).transpose(-2, -1)


# (batch dims, m, k, n): sizes around the micro-kernel tiles and the small-m path
SHAPES = [
    ((), 1, 1, 1),
    ((), 3, 5, 7),
    ((), 17, 33, 9),
    ((), 64, 64, 64),
    ((), 100, 31, 130),
    ((4,), 16, 64, 16),
    ((2, 3), 5, 8, 13),
    ((2,), 65, 17, 40),
]


@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("case", SHAPES, ids=str)
def test_lane_equals_general_path_and_float64(lane_open, case, ta, tb, dt):
    bd, m, k, n = case
    a = _operand(bd + (m, k), ta, dt, 1)
    b = _operand(bd + (k, n), tb, dt, 2)
    out = _cpu.fast_matmul(a, b)
    assert type(out) is gpucore.Tensor and out.dtype is dt and out.shape == bd + (m, n)
    assert out._data.flags.c_contiguous and type(out._data.base) is _cpu.HostBuffer
    want = apply_general(linalg.MATMUL, (a, b), {})
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    ref = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    tol = 1e-5 if dt is F32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol * k)
    np.testing.assert_array_equal((a @ b).numpy(), out.numpy())


def test_gradients_through_the_lane(lane_open):
    a0, b0 = rand((2, 6, 5), seed=3), rand((2, 5, 4), seed=4)
    a, b = _t(a0, F64, grad=True), _t(b0, F64, grad=True)
    y = a @ b
    assert y.grad_fn is not None
    g = rand((2, 6, 4), seed=5)
    y.backward(_t(g, F64))
    np.testing.assert_allclose(a.grad.numpy(), g @ b0.transpose(0, 2, 1), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), a0.transpose(0, 2, 1) @ g, rtol=1e-12)
    x = _t(rand((3, 4), seed=6), F64, grad=True)
    w = _t(rand((5, 4), seed=7), F64, grad=True)
    assert gpucore.autograd.gradcheck(lambda x, w: x @ w.t(), (x, w))
    with gpucore.no_grad():
        assert (x @ w.t()).grad_fn is None


def test_declines_what_it_does_not_handle(lane_open):
    a = _t(rand((4, 6)))
    assert _cpu.fast_matmul(a, _t(rand((5, 3)))) is None  # k mismatch: the general path raises
    assert _cpu.fast_matmul(a, _t(rand((6, 3)), F64)) is None  # mixed dtypes
    assert _cpu.fast_matmul(_t(rand((2, 4, 6))), _t(rand((6, 3)))) is None  # broadcast batch
    assert _cpu.fast_matmul(_t(rand((2, 4, 6))), _t(rand((3, 6, 3)))) is None
    assert _cpu.fast_matmul(_t(rand((4, 12)))[:, ::2], _t(rand((6, 3)))) is None  # strided
    assert _cpu.fast_matmul(_t(rand((6,))), _t(rand((6, 3)))) is None  # 1-D
    assert _cpu.fast_matmul(a, _t(rand((6, 0)))) is None  # empty
    ints = gpucore.tensor(np.ones((4, 6), np.int64))
    assert _cpu.fast_matmul(ints, ints.t()) is None
    with pytest.raises(TypeError):
        _cpu.fast_matmul(a)
    # the public function still gives the right answers (and errors) there
    s = _t(rand((4, 12)))[:, ::2]
    np.testing.assert_allclose((s @ _t(rand((6, 3)))).numpy(), s.numpy() @ rand((6, 3)), 1e-5)
    with pytest.raises(gpucore.ShapeError):
        a @ _t(rand((5, 3)))


def test_closed_under_profiler_and_trace(lane_open):
    a, b = _t(rand((4, 6))), _t(rand((6, 3)))
    with gpucore.profiler():
        assert _cpu.fast_matmul(a, b) is None
    with dispatch.trace_ops() as ops:
        a @ b
    assert [n for n, _, _ in ops] == ["matmul"]
    assert _cpu.fast_matmul(a, b) is not None
