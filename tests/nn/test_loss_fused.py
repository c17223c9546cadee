"""cross_entropy's one-node lane (gpucore/nn/functional/loss_fused.py): the plain path's bits
(loss, first and second derivatives), a float64 reference, NaN when every target is ignored,
hooks and retain_grad, and the profiler / trace_ops / non-contiguous inputs that keep the plain
path."""

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn.functional as F
from gpucore import dispatch
from gpucore.nn.functional import loss_fused


@pytest.fixture(autouse=True)
def _cpu_policy():
    """The lane opens where the policy runs ops in the C extension (dispatch.cpu_fast)."""
    old = dispatch.get_device_policy()
    dispatch.set_device_policy("cpu")
    yield
    dispatch.set_device_policy(old)


def _case(dtype, n=37, c=11, ignore=-100, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 4).astype(dtype.np)
    t = rng.integers(0, c, n)
    if ignore >= 0:
        t[::5] = ignore
    elif n > 3:
        t[3] = ignore
    return x, t


def _run(x, t, reduction, ignore, fused, create_graph=False):
    """(loss, d loss / d x, the loss' grad_fn name[, the second derivative's leaf grad])."""
    prev = loss_fused.ENABLED[0]
    loss_fused.ENABLED[0] = fused
    try:
        xt = gc.tensor(x, requires_grad=True)
        loss = F.cross_entropy(xt, gc.tensor(t), reduction=reduction, ignore_index=ignore)
        name = loss.grad_fn.name()
        if not create_graph:
            loss.backward()
            return loss.detach().numpy().copy(), xt.grad.numpy().copy(), name
        (g,) = gc.autograd.grad(loss, xt, create_graph=True)
        w = gc.tensor(np.linspace(-1, 1, x.size).reshape(x.shape).astype(x.dtype))
        (g * w).sum().backward()
        return loss.detach().numpy().copy(), g.detach().numpy().copy(), name, xt.grad.numpy()
    finally:
        loss_fused.ENABLED[0] = prev


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore", [-100, 2])
@pytest.mark.parametrize("n", [1, 37, 300])
def test_same_bits_as_the_plain_path(dtype, reduction, ignore, n):
    x, t = _case(dtype, n=n, ignore=ignore)
    fused, plain = _run(x, t, reduction, ignore, True), _run(x, t, reduction, ignore, False)
    assert fused[2] == "Cross_entropyBackward"  # one node
    assert plain[2] == ("DivBackward" if reduction == "mean" else "SumBackward")
    assert _bits(fused[0]) == _bits(plain[0])
    assert _bits(fused[1]) == _bits(plain[1])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_float64_reference(reduction):
    x, t = _case(gc.float64, ignore=4)
    loss, grad, _ = _run(x, t, reduction, 4, True)
    m = x.max(1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
    valid = t != 4
    rows = np.where(valid, lse - x[np.arange(len(t)), np.where(valid, t, 0)], 0.0)
    denom = valid.sum() if reduction == "mean" else 1
    np.testing.assert_allclose(loss, rows.sum() / denom, rtol=1e-12)
    p = np.exp(x - lse[:, None])
    onehot = np.arange(x.shape[1])[None, :] == t[:, None]
    ref = np.where(valid[:, None], (p - onehot) / denom, 0.0)
    np.testing.assert_allclose(grad, ref, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64])
def test_every_target_ignored_is_nan(dtype):
    x, t = _case(dtype, n=6)
    t[:] = 1
    fused, plain = _run(x, t, "mean", 1, True), _run(x, t, "mean", 1, False)
    assert np.isnan(fused[0]) and _bits(fused[0]) == _bits(plain[0])
    assert _bits(fused[1]) == _bits(plain[1])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_double_backward_matches_the_plain_path(reduction):
    x, t = _case(gc.float64, n=9, c=5, ignore=1)
    fused = _run(x, t, reduction, 1, True, create_graph=True)
    plain = _run(x, t, reduction, 1, False, create_graph=True)
    assert fused[2] == "Cross_entropyBackward"
    for a, b in zip(fused[:2] + fused[3:], plain[:2] + plain[3:]):
        assert _bits(a) == _bits(b)


def test_hooks_and_retain_grad():
    x, t = _case(gc.float32, n=8, c=4)
    seen = []
    xt = gc.tensor(x, requires_grad=True)
    h = xt * 1.0
    h.register_hook(lambda g: seen.append(("logits", g.numpy().copy())))
    loss = F.cross_entropy(h, gc.tensor(t))
    assert loss.grad_fn.name() == "Cross_entropyBackward"
    loss.retain_grad()
    loss.register_hook(lambda g: g * 2)  # doubles what flows on
    loss.backward()
    assert float(loss.grad) == 2.0  # retain_grad sees the hooks' result (PyTorch's order)
    _, plain, _ = _run(x, t, "mean", -100, False)
    np.testing.assert_array_equal(seen[0][1], plain * 2)
    np.testing.assert_array_equal(xt.grad.numpy(), plain * 2)


def test_backward_twice_needs_retain_graph():
    x, t = _case(gc.float32, n=5, c=3)
    xt = gc.tensor(x, requires_grad=True)
    loss = F.cross_entropy(xt, gc.tensor(t))
    loss.backward(retain_graph=True)
    loss.backward()
    _, plain, _ = _run(x, t, "mean", -100, False)
    np.testing.assert_array_equal(xt.grad.numpy(), plain * 2)
    loss = F.cross_entropy(xt, gc.tensor(t))
    loss.backward()
    with pytest.raises(gc.errors.AutogradError, match="second time"):
        loss.backward()


def test_plain_path_where_the_lane_is_closed():
    x, t = _case(gc.float32, n=8, c=4)
    xt, tt = gc.tensor(x, requires_grad=True), gc.tensor(t)
    with gc.profiler() as p:
        F.cross_entropy(xt, tt).backward()
    names = [e[0] for e in p.events]
    assert names[:3] == ["cross_entropy", "sum", "div"]
    with dispatch.trace_ops() as ops:
        loss = F.cross_entropy(xt, tt)
    assert [o[0] for o in ops] == ["cross_entropy", "sum", "div"]
    assert loss.grad_fn.name() == "DivBackward"
    strided = gc.tensor(np.ascontiguousarray(x.T)).T  # a transposed view: not contiguous
    assert F.cross_entropy(strided, tt).item() == pytest.approx(F.cross_entropy(xt, tt).item())


def test_no_grad_and_bad_targets():
    x, t = _case(gc.float32, n=8, c=4)
    with gc.no_grad():
        loss = F.cross_entropy(gc.tensor(x, requires_grad=True), gc.tensor(t))
    assert loss.grad_fn is None and not loss.requires_grad
    t[2] = 9
    with pytest.raises(IndexError):
        F.cross_entropy(gc.tensor(x), gc.tensor(t))
