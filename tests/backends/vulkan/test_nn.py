"""Softmax / log-softmax (+ backward) and fused cross-entropy (+ backward) Vulkan kernels
(shaders/softmax.comp, cross_entropy.comp via kernels/nn.py) against the CPU path, on both
shader variants (subgroup operations and the shared-memory fallback); and the gradient of a
small MLP's loss, equal on the device and on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore.backends.vulkan.kernels import nn as vk_nn
from gpucore.errors import GpucoreIndexError
from gpucore.ops import nn as nn_ops
from gpucore.ops.registry import apply

RNG = np.random.default_rng(11)


def dev(a: np.ndarray) -> gpucore.Tensor:
    return gpucore.tensor(np.array(a, copy=True)).to("vulkan")  # keeps 0-d arrays 0-d


def check(fn, *arrays, rtol=1e-5, atol=1e-6, op=None, view=None):
    """fn on device tensors equals fn on the CPU (on the same values); ``op`` ran on the device."""
    ts = [dev(a) for a in arrays]
    if view is not None:
        ts = [view(ts[0])] + ts[1:]
    with gpucore.dispatch.trace_ops() as ops:
        out = fn(*ts)
    with gpucore.device_policy("cpu"):
        hs = [gpucore.tensor(a) for a in arrays]
        if view is not None:
            hs = [view(hs[0])] + hs[1:]
        ref = fn(*hs)
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape, (o.shape, r.shape)
        np.testing.assert_allclose(
            o.cpu().numpy().astype(np.float64), r.numpy().astype(np.float64), rtol=rtol, atol=atol
        )
    if op is not None:
        assert any(n == op and b == "vulkan" for n, b, _ in ops), ops
    return outs


# ----------------------------------------------------------------------------- softmax
SHAPES = [
    ((1,), 0),
    ((4095,), 0),
    ((4096,), 0),
    ((4097,), 0),
    ((3, 100003), 1),  # long rows: stats per chunk, then combine
    ((100003, 3), 0),  # long columns: likewise
    ((64, 300), 1),
    ((300, 64), 0),
    ((66000, 64), 1),
    ((8, 16, 33), 1),
    ((8, 16, 33), 0),
    ((8, 16, 33), 2),
]


@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
def test_softmax_forward_and_backward(variant, shape, dim):
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    g = RNG.standard_normal(shape).astype(np.float32)
    check(lambda t: t.softmax(dim), x, op="softmax")
    check(lambda t: t.log_softmax(dim), x, op="log_softmax")
    y = np.exp(x - x.max(dim, keepdims=True))
    y = (y / y.sum(dim, keepdims=True)).astype(np.float32)
    ly = np.log(y).astype(np.float32)
    check(lambda a, b: apply(nn_ops.SOFTMAX_BACKWARD, a, b, dim=dim), g, y, op="softmax_backward")
    check(
        lambda a, b: apply(nn_ops.LOG_SOFTMAX_BACKWARD, a, b, dim=dim),
        g,
        ly,
        op="log_softmax_backward",
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.transpose(0, 1),
        lambda t: t[::2, 3:],
        lambda t: t.t()[::3],
    ],
    ids=["transpose", "slice", "t-slice"],
)
def test_softmax_non_contiguous(variant, view):
    x = RNG.standard_normal((150, 90)).astype(np.float32)
    for dim in (0, 1):
        check(lambda t, d=dim: t.softmax(d), x, view=view, op="softmax")
        check(lambda t, d=dim: t.log_softmax(d), x, view=view, op="log_softmax")


def test_softmax_is_stable(variant):
    rows = np.array(
        [
            [1000, 1000, 1000],
            [1000, -1000, 0],
            [-1000, -1000, -1000],
            [0, -np.inf, 1],
            [88, 89, 90],
        ],
        np.float32,
    )
    sm = dev(rows).softmax(1).cpu().numpy()
    np.testing.assert_allclose(sm[0], [1 / 3] * 3, rtol=1e-6)
    np.testing.assert_array_equal(sm[1], [1, 0, 0])
    np.testing.assert_allclose(sm[2], [1 / 3] * 3, rtol=1e-6)
    assert sm[3, 1] == 0 and np.isfinite(sm).all()
    ls = dev(rows).log_softmax(1).cpu().numpy()
    assert ls[1, 0] == 0 and ls[1, 1] == -2000
    check(lambda t: t.softmax(1), rows)
    check(lambda t: t.log_softmax(1), rows)
    # the same along long rows (chunked path) and columns
    big = np.zeros((2, 20000), np.float32)
    big[0, ::2], big[1, 5] = 1000, 1000
    big[1, 15000] = -np.inf
    check(lambda t: t.softmax(1), big, op="softmax")
    check(lambda t: t.log_softmax(0), big.T.copy(), op="log_softmax")


@pytest.mark.parametrize("n", [5, 20000])
def test_softmax_nan_and_inf_rows_match_cpu(variant, n):
    x = RNG.standard_normal((4, n)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, :] = -np.inf
    x[2, 1] = np.inf
    x[3, n - 1] = -np.inf
    for op in ("softmax", "log_softmax"):
        check(lambda t, op=op: getattr(t, op)(1), x, op=op)
        check(lambda t, op=op: getattr(t, op)(0), x.T.copy(), op=op)


# ----------------------------------------------------------------------------- cross-entropy
@pytest.mark.parametrize("n,c", [(1, 1), (64, 10), (7, 4097), (3, 100003), (4096, 3), (33, 64)])
def test_cross_entropy_forward_and_backward(variant, n, c):
    logits = (RNG.standard_normal((n, c)) * 4).astype(np.float32)
    target = RNG.integers(0, c, n).astype(np.int64)
    target[::5] = -100  # ignored rows
    check(
        lambda a, t: apply(nn_ops.XENT, a, t, ignore_index=-100), logits, target, op="cross_entropy"
    )
    loss, lse = apply(
        nn_ops.XENT, gpucore.tensor(logits), gpucore.tensor(target), ignore_index=-100
    )
    g = RNG.standard_normal(n).astype(np.float32)
    check(
        lambda a, t, s, h: apply(nn_ops.XENT_BACKWARD, a, t, s, h, ignore_index=-100),
        logits,
        target,
        lse.numpy(),
        g,
        op="cross_entropy_backward",
    )


def test_cross_entropy_ignore_index_and_large_logits(variant):
    logits = RNG.standard_normal((50, 300)).astype(np.float32) * 1000
    target = RNG.integers(0, 300, 50).astype(np.int64)
    target[[3, 9]] = 7
    for ign in (7, 299, 2**40):
        check(
            lambda a, t, ign=ign: apply(nn_ops.XENT, a, t, ignore_index=ign),
            logits,
            target,
            op="cross_entropy",
            rtol=1e-5,
            atol=1e-3,
        )
    with gpucore.dispatch.trace_ops() as ops:
        loss = gpucore.nn.functional.cross_entropy(dev(logits), dev(target), ignore_index=7)
    with gpucore.device_policy("cpu"):
        ref = gpucore.nn.functional.cross_entropy(
            gpucore.tensor(logits), gpucore.tensor(target), ignore_index=7
        )
    assert ("cross_entropy", "vulkan") in [o[:2] for o in ops]
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-5)


def test_bad_host_targets_raise_as_on_the_cpu(vulkan):
    logits = dev(RNG.standard_normal((6, 5)).astype(np.float32))
    F = gpucore.nn.functional
    for bad, ign in (
        ([0, 1, 5, 2, 3, 4], -100),
        ([0, -1, -100, 1, 2, 3], -100),
        ([0, -3, 4, 1, 2, 3], -100),
        ([0, -100, 4, 1, 2, 3], -1),
    ):
        with gpucore.dispatch.trace_ops() as ops:
            with pytest.raises(GpucoreIndexError, match="out of range") as e:
                F.cross_entropy(logits, gpucore.tensor(bad), ignore_index=ign)
        assert "cross_entropy" not in [o[0] for o in ops]  # raised before anything ran
        with gpucore.device_policy("cpu"), pytest.raises(GpucoreIndexError) as ref:
            F.cross_entropy(logits.cpu(), gpucore.tensor(bad), ignore_index=ign)
        assert str(e.value).split(": ")[-1] == str(ref.value).split(": ")[-1]
    # ignored targets from the host stay on the device
    for t, ign in (([0, -100, 4, 1, -100, 3], -100), ([0, -1, 4, 1, 2, 3], -1), ([5, 0] * 3, 5)):
        with gpucore.dispatch.trace_ops() as ops:
            loss = F.cross_entropy(logits, gpucore.tensor(t), ignore_index=ign)
        assert ("cross_entropy", "vulkan") in [o[:2] for o in ops]
        with gpucore.device_policy("cpu"):
            ref = F.cross_entropy(logits.cpu(), gpucore.tensor(t), ignore_index=ign)
        np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-5)


def test_a_host_check_from_a_call_that_never_ran_is_inert(vulkan):
    logits = dev(RNG.standard_normal((6, 5)).astype(np.float32))
    bad = gpucore.tensor([0, 9, 1, 2, 3, 4])
    specs = nn_ops.XENT.infer(logits, bad, ignore_index=-100)
    assert vulkan.supports(nn_ops.XENT, (logits, bad), specs)  # leaves a check behind
    good = dev(np.array([0, 1, 2, 3, 4, 0], np.int64))
    loss, _ = vulkan.run(nn_ops.XENT, specs, (logits, good), {"ignore_index": -100})
    assert np.isfinite(vulkan.host_view(loss)).all()  # backends return arrays


def test_device_resident_bad_targets_raise_as_on_the_cpu(variant):
    logits = RNG.standard_normal((40, 300)).astype(np.float32)
    t = RNG.integers(0, 300, 40).astype(np.int64)
    t[[2, 30]] = [300, 10**12]
    t[5] = -100
    target = dev(t)  # on the device: read back (a sync) and checked as the CPU does
    lg = dev(logits).requires_grad_()
    with pytest.raises(GpucoreIndexError, match=r"target\[2\] = 300 is out of range"):
        gpucore.nn.functional.cross_entropy(lg, target, reduction="none")
    with gpucore.device_policy("cpu"), pytest.raises(GpucoreIndexError, match="out of range"):
        gpucore.nn.functional.cross_entropy(lg.cpu(), target.cpu(), reduction="none")
    # ignore_index and in-range targets still run on the device
    t[[2, 30]] = [1, 2]
    with gpucore.dispatch.trace_ops() as ops:
        rows = gpucore.nn.functional.cross_entropy(lg, dev(t), reduction="none")
    assert ("cross_entropy", "vulkan") in [o[:2] for o in ops]
    r = rows.detach().cpu().numpy()
    assert r[5] == 0 and np.isfinite(r).all()
    # the device keeps working
    assert dev(np.ones(10, np.float32)).sum().item() == 10


def test_the_shader_reads_no_memory_for_an_unchecked_bad_target(vulkan):
    """Below the check (the kernel run directly, nothing validated): a bad target indexes no
    memory; its loss row is NaN."""
    logits = dev(RNG.standard_normal((6, 5)).astype(np.float32))
    bad = dev(np.array([0, 9, 1, -7, 3, 4], np.int64))
    specs = nn_ops.XENT.infer(logits, bad, ignore_index=-100)
    vk_nn._host_check.values = None  # no check pending from an earlier supports() call
    loss, _ = vulkan.run(nn_ops.XENT, specs, (logits, bad), {"ignore_index": -100})
    r = vulkan.host_view(loss)
    assert np.isnan(r[[1, 3]]).all() and np.isfinite(np.delete(r, [1, 3])).all()


# ----------------------------------------------------------------------------- training
def _mlp_grads(x, y, params):
    ps = [p.detach().clone().requires_grad_() for p in params]
    w1, b1, w2, b2, w3, b3 = ps
    h = (x @ w1 + b1).relu()
    h = (h @ w2 + b2).relu()
    logits = h @ w3 + b3
    loss = gpucore.nn.functional.cross_entropy(logits, y)
    loss = loss + 1e-3 * logits.log_softmax(1).amax(1).mean() + 1e-3 * h.softmax(0).max(0)[0].sum()
    loss.backward()
    return loss, [p.grad for p in ps]


def test_mlp_loss_gradients_match_cpu(variant):
    sizes = [(96, 128), (128,), (128, 64), (64,), (64, 10), (10,)]
    params = [gpucore.tensor((RNG.standard_normal(s) * 0.2).astype(np.float32)) for s in sizes]
    x = gpucore.tensor(RNG.standard_normal((256, 96)).astype(np.float32))
    y = gpucore.tensor(RNG.integers(0, 10, 256).astype(np.int64))
    with gpucore.dispatch.trace_ops() as ops:
        loss, grads = _mlp_grads(x, y, params)
    with gpucore.device_policy("cpu"):
        ref_loss, ref_grads = _mlp_grads(x, y, params)
    ran = {n for n, b, _ in ops if b == "vulkan"}
    assert {
        "cross_entropy",
        "cross_entropy_backward",
        "sum",
        "mean",
        "log_softmax",
        "softmax",
        "amax",
        "max_dim",
    } <= ran, ran
    np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-4)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g.cpu().numpy(), r.numpy(), rtol=1e-4, atol=1e-6)
