"""The linear fast lane (cpu/python/fastpath.c fast_linear, taken by nn.functional.linear), the
matmul lane's ``trans_a`` form (linear's weight gradient g.T @ x without a view) and Parameters
as operands of both (``fast_accept``). Each must give the general path's bits, record the same
graph, decline (None) what it does not handle, and stay closed while a profiler or a trace needs
the general path; the elementwise lanes keep declining Parameters (test_fastpath.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import rand

import gpucore
import gpucore.nn.functional as F
from gpucore import _cpu, dispatch
from gpucore.ops import linalg
from gpucore.ops.registry import apply_general

F32, F64 = gpucore.float32, gpucore.float64


def _t(a, dt=F32, grad=False):
    return gpucore.tensor(a, dtype=dt, requires_grad=grad)


def _matrix(rows, cols, trans, dt, seed, param=False):
    """A [rows, cols] tensor; with trans a transposed view of contiguous [cols, rows] data."""
    if trans:
        t = _t(rand((cols, rows), seed=seed), dt).t()
    else:
        t = _t(rand((rows, cols), seed=seed), dt)
    return gpucore.nn.Parameter(t) if param else t


# (m, k, n): around the micro-kernel tiles and the small-m path, and the MLP's layers
SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (64, 784, 64), (100, 31, 130)]


@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("tx", [0, 1])
@pytest.mark.parametrize("tw", [0, 1])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", SHAPES, ids=str)
def test_linear_lane_equals_general_path_and_float64(lane_open, case, bias, tw, tx, dt):
    m, k, n = case
    x = _matrix(m, k, tx, dt, 1)
    w = _matrix(n, k, tw, dt, 2, param=True)
    b = gpucore.nn.Parameter(_t(rand((n,), seed=3), dt)) if bias else None
    out = _cpu.fast_linear(x, w, b)
    assert type(out) is gpucore.Tensor and out.dtype is dt and out.shape == (m, n)
    assert out._data.flags.c_contiguous and type(out._data.base) is _cpu.HostBuffer
    ins = (x, w) if b is None else (x, w, b)
    want = apply_general(linalg.LINEAR, ins, {})
    np.testing.assert_array_equal(out.numpy(), want.detach().numpy())
    ref = x.numpy().astype(np.float64) @ w.detach().numpy().astype(np.float64).T
    if bias:
        ref = ref + b.detach().numpy()
    tol = 1e-5 if dt is F32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol * k)
    np.testing.assert_array_equal(F.linear(x, w, b).detach().numpy(), out.numpy())


@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("case", SHAPES, ids=str)
def test_matmul_trans_a_equals_general_path(lane_open, case, tb, ta, dt):
    m, k, n = case
    a = _matrix(k, m, ta, dt, 4)  # a.mT is [m, k]
    b = _matrix(k, n, tb, dt, 5, param=True)
    out = _cpu.fast_matmul(a, b, True)
    assert type(out) is gpucore.Tensor and out.shape == (m, n)
    want = apply_general(linalg.MATMUL, (a.mT, b), {})
    np.testing.assert_array_equal(out.numpy(), want.detach().numpy())
    ref = a.numpy().astype(np.float64).T @ b.detach().numpy().astype(np.float64)
    tol = 1e-5 if dt is F32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol * k)
    # batches: each matrix transposed
    a3 = _t(rand((2, k, m), seed=6), dt)
    b3 = _t(rand((2, k, n), seed=7), dt)
    np.testing.assert_array_equal(
        _cpu.fast_matmul(a3, b3, True).numpy(),
        apply_general(linalg.MATMUL, (a3.mT, b3), {}).numpy(),
    )


def test_parameters_reach_the_matmul_lane(lane_open):
    g = _t(rand((4, 6), seed=8))
    w = gpucore.nn.Parameter(_t(rand((6, 3), seed=9)))
    out = _cpu.fast_matmul(g, w)
    assert type(out) is gpucore.Tensor and not out.requires_grad
    want = apply_general(linalg.MATMUL, (g, w), {})
    np.testing.assert_array_equal(out.numpy(), want.detach().numpy())


def test_linear_gradients_through_the_lanes(lane_open):
    """A Linear layer's backward (the lanes: linear forward, g @ w with w a Parameter, g.T @ x
    with trans_a, the bias sum) against float64 numpy; create_graph keeps the general path and
    double backward."""
    x0, w0, b0 = rand((5, 4), seed=10), rand((3, 4), seed=11), rand((3,), seed=12)
    g0 = rand((5, 3), seed=13)
    x = _t(x0, F64, grad=True)
    w = gpucore.nn.Parameter(_t(w0, F64))
    b = gpucore.nn.Parameter(_t(b0, F64))
    y = F.linear(x, w, b)
    assert y.grad_fn is not None
    y.backward(_t(g0, F64))
    np.testing.assert_allclose(x.grad.numpy(), g0 @ w0, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), g0.T @ x0, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), g0.sum(0), rtol=1e-12)
    assert gpucore.autograd.gradcheck(lambda x, w, b: F.linear(x, w, b), (x, w, b))
    assert gpucore.autograd.gradgradcheck(lambda x, w, b: F.linear(x, w, b) ** 2, (x, w, b))
    with gpucore.no_grad():
        assert F.linear(x, w, b).grad_fn is None
    # no bias; the weight alone requiring grad
    x2 = _t(x0, F64)
    y2 = F.linear(x2, w)
    w.grad = None
    y2.backward(_t(g0, F64))
    np.testing.assert_allclose(w.grad.numpy(), g0.T @ x0, rtol=1e-12)


def test_linear_lane_declines_what_it_does_not_handle(lane_open):
    x, w, b = _t(rand((4, 6))), _t(rand((3, 6))), _t(rand((3,)))
    assert _cpu.fast_linear(_t(rand((2, 4, 6))), w, b) is None  # 3-D input: the wrapper reshapes
    assert _cpu.fast_linear(x, _t(rand((3, 5))), b) is None  # in_features mismatch
    assert _cpu.fast_linear(x, w, _t(rand((4,)))) is None  # bias size
    assert _cpu.fast_linear(x, w, _t(rand((6,)))[::2]) is None  # strided bias
    assert _cpu.fast_linear(x, _t(rand((3, 6)), F64), None) is None  # mixed dtypes
    assert _cpu.fast_linear(x, w, _t(rand((3,)), F64)) is None
    assert _cpu.fast_linear(_t(rand((4, 12)))[:, ::2], w, b) is None  # strided input
    assert _cpu.fast_linear(_t(rand((0, 6))), w, b) is None  # empty
    with pytest.raises(TypeError):
        _cpu.fast_linear(x, w)
    # the public function still gives the right answers (and errors) there
    x3 = rand((2, 4, 6), seed=1)
    got = F.linear(_t(x3), w, b).numpy()
    np.testing.assert_allclose(got, x3 @ w.numpy().T + b.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(gpucore.ShapeError):
        F.linear(x, _t(rand((3, 5))), b)


def test_lanes_closed_under_profiler_and_trace(lane_open):
    x, w, b = _t(rand((4, 6))), _t(rand((3, 6))), _t(rand((3,)))
    with gpucore.profiler():
        assert _cpu.fast_linear(x, w, b) is None
        assert _cpu.fast_matmul(x, x, True) is None
    with dispatch.trace_ops() as ops:
        F.linear(x, w, b)
    assert [n for n, _, _ in ops] == ["linear"]
    assert _cpu.fast_linear(x, w, b) is not None


def test_fast_accept_refuses_other_classes():
    with pytest.raises(TypeError):
        _cpu.fast_accept(int)

    class Slotted(gpucore.Tensor):
        __slots__ = ("extra",)

    with pytest.raises(TypeError):
        _cpu.fast_accept(Slotted)


# Every lane in cpu/python/fastpath.c / fastpath_nn.c, each Tensor argument in turn a Tensor
# made by __new__ alone (no _data): each must answer None (the general path then raises), not
# read the missing slot. In a child process: a crash fails this test, not the run.
_NO_DATA_SCRIPT = r"""
import numpy as np
import gpucore as gc
from gpucore import _cpu, dispatch
from gpucore.backends.cpu.kernels.common import FAST

dispatch.set_device_policy("cpu")
e = gc.Tensor.__new__(gc.Tensor)
e._dev = None
e._dtype = gc.float32
p = gc.nn.Parameter.__new__(gc.nn.Parameter)
p._dev = None
p._dtype = gc.float32
m = gc.ones(4, 4)
v = gc.ones(4)
x3 = gc.ones(2, 4, 4)
mean, rstd = gc.zeros(2 * 4), gc.ones(2 * 4)
un, un_code = FAST["exp"]
bwd, bwd_code = FAST["relu_backward"]
add, add_code = FAST["add"]
lanes = {
    "fast_unary": (lambda a: un(un_code, a), [m]),
    "fast_binary": (lambda a, b: add(add_code, a, b), [m, m]),
    "fast_unary_backward": (lambda a, b: bwd(bwd_code, a, b), [m, m]),
    "fast_matmul": (lambda a, b: _cpu.fast_matmul(a, b), [m, m]),
    "fast_matmul trans_a": (lambda a, b: _cpu.fast_matmul(a, b, True), [m, m]),
    "fast_linear": (lambda a, b, c: _cpu.fast_linear(a, b, c), [m, m, v]),
    "fast_softmax": (lambda a: _cpu.fast_softmax(a, -1, False), [m]),
    "fast_softmax_backward": (lambda a, b: _cpu.fast_softmax_backward(a, b, -1, False), [m, m]),
    "fast_norm_rows": (lambda a, b, c: _cpu.fast_norm_rows(a, (4,), b, c, 1e-5, False, False),
                       [m, v, v]),
    "fast_norm_rows_backward": (
        lambda a, b, c, d, f: _cpu.fast_norm_rows_backward(a, b, c, d, f, 4, False,
                                                           (True, True, True)),
        [x3, v, mean, rstd, x3]),
    "fast_group_norm": (lambda a, b, c: _cpu.fast_group_norm(a, 2, b, c, 1e-5, False), [x3, v, v]),
    "fast_batch_norm": (
        lambda a, b, c, d, f: _cpu.fast_batch_norm(a, b, c, d, f, False, 0.1, 1e-5, False),
        [x3, v, v, v, v]),
}
for name, (call, args) in lanes.items():
    assert call(*args) is not None, name + " declines its well-formed arguments"
    for i in range(len(args)):
        for bare in (e, p):
            got = call(*[bare if j == i else a for j, a in enumerate(args)])
            assert got is None, f"{name}, argument {i}: {got!r}"
for call in (lambda: gc.nn.functional.linear(e, m), lambda: gc.nn.functional.linear(m, p)):
    try:
        call()
    except Exception as exc:  # the general path's error, whatever it is: not a crash
        print(type(exc).__name__)
print("ok")
"""


def test_lanes_decline_a_tensor_without_data():
    """A Tensor whose _data slot was never set (``Tensor.__new__`` alone) used to crash
    fast_linear (it read the slot without checking); every lane reads data through one helper
    (gc_fast_buf_flags) and declines it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(gpucore.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-c", _NO_DATA_SCRIPT],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip().endswith("ok"), r.stdout
