"""The small-op fast lane (cpu/fastpath.c): a whole elementwise op on small host tensors in one C
call. It must give exactly what the general path gives, decline (None) whatever it does not
handle, and stay closed whenever the dispatch policy, a trace or a profiler needs the general
path."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import op_reference, rand

import gpucore
from gpucore import _cpu, dispatch
from gpucore.backends.cpu.kernels import FAST

F32, F64 = gpucore.float32, gpucore.float64

# The ops the lane runs whole, with their float64 references from the samples declared next to
# each op (tests/helpers.py op_reference): a new op in FAST is tested here without an edit.
BINARY_REF = {n: op_reference(n)[0] for n in sorted(set(_cpu.OPCODES["binary"]) & set(FAST))}
UNARY_REF = {n: op_reference(n)[0] for n in sorted(set(_cpu.OPCODES["unary"]) & set(FAST))}


def _t(a, dt=F32):
    return gpucore.tensor(a, dtype=dt)


@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", BINARY_REF)
def test_binary_ops_give_the_reference_and_a_fresh_owned_tensor(lane_open, name, dt):
    a, b = rand((3, 5), seed=1), rand((3, 5), low=0.5, high=2.0, seed=2)
    fn, code = FAST[name]
    out = fn(code, _t(a, dt), _t(b, dt))
    assert type(out) is gpucore.Tensor and out.dtype is dt and out.shape == (3, 5)
    assert out._data.flags.c_contiguous and out._data.base is not None
    assert type(out._data.base) is _cpu.HostBuffer  # autograd may hand it over without a copy
    assert not out.requires_grad and out.grad_fn is None and out.is_leaf
    tol = 1e-6 if dt is F32 else 1e-14
    with np.errstate(invalid="ignore"):  # pow of a negative base: NaN, as the lane gives
        ref = BINARY_REF[name](a, b)
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", UNARY_REF)
def test_unary_ops_match_the_general_path_bitwise(lane_open, name):
    _, lo, hi = op_reference(name)
    x = rand((7, 3), low=lo, high=hi, seed=3)  # in the op's domain (its samples' range)
    fn, code = FAST[name]
    got = fn(code, _t(x))
    np.testing.assert_allclose(got.numpy(), UNARY_REF[name](x), rtol=2e-6, atol=1e-6)
    with dispatch.trace_ops():  # the lane is closed in here: the general path
        ref = getattr(gpucore, name)(_t(x))
    np.testing.assert_array_equal(got.numpy(), ref.numpy())


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh"])
def test_activation_backward_kernels(lane_open, name):
    g, saved = rand((4, 4), seed=4), rand((4, 4), seed=5)
    fn, code = FAST[name + "_backward"]
    got = fn(code, _t(g), _t(saved)).numpy()
    ref = {
        "relu": g * (saved > 0),
        "sigmoid": g * saved * (1 - saved),
        "tanh": g * (1 - saved * saved),
    }[name]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_declines_what_it_does_not_handle(lane_open):
    fn, add = FAST["add"]
    a = _t(rand((4, 6)))
    declined = {
        "broadcast": (a, _t(rand((6,)))),
        "mixed dtypes": (a, _t(rand((4, 6)), F64)),
        "integers": (gpucore.ones(4, 6, dtype=gpucore.int32),) * 2,
        "strided view": (a.T, a.T),
        "subclass": (gpucore.nn.Parameter(a), a),
        "numpy scalar": (a, np.float32(2.0)),  # (Python numbers: tests/ops/test_scalar_operands)
        "number and an int tensor": (gpucore.ones(4, 6, dtype=gpucore.int32), 2.0),
        "number and a subclass": (gpucore.nn.Parameter(a), 2.0),
        "empty": (gpucore.zeros(0, 3),) * 2,
    }
    for why, (x, y) in declined.items():
        assert fn(add, x, y) is None, why
    # ...and the operators still give the right answers through the general path
    np.testing.assert_allclose((a + 2.0).numpy(), a.numpy() + 2.0)
    np.testing.assert_allclose((a.T + a.T).numpy(), 2 * a.numpy().T)


def test_size_limit_follows_the_threshold_under_auto_with_a_device(lane_open, monkeypatch):
    fake_device = object()
    monkeypatch.setitem(dispatch._vulkan_cache, "auto", fake_device)
    old = dispatch.get_threshold()
    try:
        dispatch.set_device_policy("auto")
        dispatch.set_threshold(100)
        fn, add = FAST["add"]
        small, large = gpucore.ones(99), gpucore.ones(100)
        assert fn(add, small, small) is not None
        assert fn(add, large, large) is None  # may belong on the device: the general path
    finally:
        dispatch.set_threshold(old)
        dispatch.set_device_policy("cpu")


def test_lane_is_closed_inside_policy_trace_and_profiler_blocks(lane_open):
    fn, add = FAST["add"]
    a = gpucore.ones(8)
    assert fn(add, a, a) is not None
    with dispatch.trace_ops() as ops:
        assert fn(add, a, a) is None
        _ = a + a
    assert [op for op, _, _ in ops] == ["add"]  # traced: it took the general path
    with gpucore.device_policy("cpu"):
        assert fn(add, a, a) is None
    with gpucore.profiler():
        assert fn(add, a, a) is None
    assert fn(add, a, a) is not None  # reopened
    dispatch.set_device_policy("auto")
    try:
        auto_limit = dispatch._fast_limit[0]
        vb = dispatch._vulkan_cache.get("auto", dispatch._UNSET)
        if vb is None:  # no device for 'auto': every size stays on the CPU
            assert auto_limit == dispatch._FAST_ALL
        elif vb is not dispatch._UNSET:
            assert auto_limit == dispatch.get_threshold()
    finally:
        dispatch.set_device_policy("cpu")


def test_gradients_through_the_lane(lane_open):
    x = gpucore.tensor(rand((5,), seed=6), requires_grad=True)
    y = gpucore.tensor(rand((5,), seed=7), requires_grad=True)
    z = (x * y + x).relu() - y
    z.sum().backward()
    xn, yn = x.detach().numpy().astype(np.float64), y.detach().numpy().astype(np.float64)
    on = (xn * yn + xn) > 0
    np.testing.assert_allclose(x.grad.numpy(), on * (yn + 1), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), on * xn - 1, rtol=1e-6)
    assert z.grad_fn.name() == "SubBackward"
    with gpucore.no_grad():
        assert (x + y).grad_fn is None


def test_bad_calls_raise():
    a = gpucore.ones(3)
    with pytest.raises(ValueError, match="out of range"):
        _cpu.fast_binary(_cpu.BINARY_EQ, a, a)  # comparisons write bool: not in the lane
    with pytest.raises(ValueError, match="out of range"):
        _cpu.fast_unary(-1, a)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        _cpu.fast_binary(0, a)
    with pytest.raises(ValueError, match="no backward kernel"):
        _cpu.fast_unary_backward(_cpu.UNARY_EXP, a, a)
    with pytest.raises(TypeError, match="slots"):
        _cpu.fast_setup(int, F32, F64, np.dtype("f4"), np.dtype("f8"), np.ndarray)


@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
def test_softmax_lane_equals_the_general_path(lane_open, dt, log):
    from gpucore.ops import nn as nn_ops
    from gpucore.ops.registry import apply_general

    op = nn_ops.LOG_SOFTMAX if log else nn_ops.SOFTMAX
    for shape in [(7,), (4, 16, 64), (3, 5, 2), (1, 1000)]:
        x = _t(rand(shape, low=-3, high=3, seed=len(shape)), dt)
        for dim in range(-len(shape), len(shape)):
            got = _cpu.fast_softmax(x, dim, log)
            assert type(got) is gpucore.Tensor and got.dtype is dt
            want = apply_general(op, (x,), {"dim": dim % len(shape)})
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert _cpu.fast_softmax(_t(2.0), 0, log) is None  # 0-d: the general path
    assert _cpu.fast_softmax(x, 3, log) is None  # out of range: the general path raises
    assert _cpu.fast_softmax(_t(rand((3, 4))).t(), 0, log) is None  # not contiguous
    xg = _t(rand((3, 4), seed=9), F64)
    xg.requires_grad_()
    fn = gpucore.log_softmax if log else gpucore.softmax
    assert fn(xg, -1).grad_fn is not None
    assert gpucore.autograd.gradcheck(lambda x: fn(x, -1), (xg,))
    assert gpucore.autograd.gradgradcheck(lambda x: fn(x, 0), (xg,))
