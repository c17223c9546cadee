"""Reduction Vulkan kernels (shaders/reduce.comp via kernels/reduce.py) against the CPU path.

sum, mean, amax, amin, max/min along a dim (values + int64 indices), argmax/argmin: random
inputs of sizes around the 4096 threshold, rows longer than a workgroup (split into chunks and
reduced again), every dims combination, keepdim, strided inputs, NaN and tie semantics. Each
test runs on both shader variants: subgroup operations (where the device has them) and the
shared-memory fallback.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpucore

RNG = np.random.default_rng(7)
SIZES = [1, 4095, 4096, 4097, 100003]


def dev(a: np.ndarray) -> gpucore.Tensor:
    return gpucore.tensor(np.array(a, copy=True)).to("vulkan")  # keeps 0-d arrays 0-d


def check(fn, *arrays, rtol=1e-5, atol=1e-6, op=None, view=None):
    """fn on device tensors (optionally a view of them) equals fn on the CPU; ``op`` (the
    registry name) must have run on the device."""
    ts = [dev(a) for a in arrays]
    if view is not None:
        ts = [view(t) for t in ts]
    with gpucore.dispatch.trace_ops() as ops:
        out = fn(*ts)
    with gpucore.device_policy("cpu"):
        ref = fn(*[view(gpucore.tensor(a)) if view else gpucore.tensor(a) for a in arrays])
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        a, b = o.cpu().numpy(), r.numpy()
        if a.dtype == np.int64:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(
                a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol
            )
    if op is not None:
        assert any(n == op and b == "vulkan" for n, b, _ in ops), ops
    return outs


# ----------------------------------------------------------------------------- full reductions
@pytest.mark.parametrize("n", SIZES)
def test_full_reductions_match_cpu(variant, n):
    x = RNG.standard_normal(n).astype(np.float32)
    check(lambda t: t.sum(), x, op="sum", atol=1e-4)
    check(lambda t: t.mean(), x, op="mean")
    check(lambda t: t.amax(), x, op="amax", rtol=0, atol=0)
    check(lambda t: t.amin(), x, op="amin", rtol=0, atol=0)
    check(lambda t: t.argmax(), x, op="argmax")
    check(lambda t: t.argmin(), x, op="argmin")
    check(lambda t: tuple(t.max(0)), x, op="max_dim", rtol=0, atol=0)
    check(lambda t: tuple(t.min(0, keepdim=True)), x, op="min_dim", rtol=0, atol=0)


def test_sum_of_a_million_is_accurate_to_float64(variant):
    for x in (RNG.uniform(0, 1, 1_000_000), RNG.standard_normal(1_000_000) + 0.5):
        x = x.astype(np.float32)
        exact = x.astype(np.float64).sum()
        got = dev(x).sum().item()
        assert abs(got - exact) <= 1e-5 * abs(exact), (got, exact)
        got_mean = dev(x).mean().item()
        assert abs(got_mean - exact / x.size) <= 1e-5 * abs(exact / x.size)
        # one long row among few, and the same reduced along dim 0 (column layout, split)
        rows = dev(x.reshape(4, -1)).sum(1).cpu().numpy()
        np.testing.assert_allclose(rows, x.reshape(4, -1).astype(np.float64).sum(1), rtol=1e-5)
        cols = dev(x.reshape(-1, 4)).sum(0).cpu().numpy()
        np.testing.assert_allclose(cols, x.reshape(-1, 4).astype(np.float64).sum(0), rtol=1e-5)


def test_long_sums_are_compensated(variant):
    # 0.1f added 2**17 times: a plain float32 running sum per invocation is off by ~1e-4
    x = np.full((32, 2**17), 0.1, np.float32)
    exact = x[0].astype(np.float64).sum()
    np.testing.assert_allclose(dev(x).sum(1).cpu().numpy(), exact, rtol=1e-6)
    np.testing.assert_allclose(dev(x.T).sum(0).cpu().numpy(), exact, rtol=1e-6)
    np.testing.assert_allclose(dev(x).mean(1).cpu().numpy(), exact / x.shape[1], rtol=1e-6)


def test_sum_infinities_are_not_nan(variant):
    x = np.ones(5000, np.float32)
    x[10] = np.inf
    assert dev(x).sum().item() == np.inf
    x[4000] = -np.inf
    assert np.isnan(dev(x).sum().item())


# ----------------------------------------------------------------------------- along dims
SHAPE = (6, 5, 7, 4)
DIMS = [d for k in range(1, 5) for d in itertools.combinations(range(4), k)]


@pytest.mark.parametrize("dims", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_dims_combinations(variant, dims, keepdim):
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    check(lambda t: t.sum(dims, keepdim=keepdim), x, op="sum")
    check(lambda t: t.mean(dims, keepdim=keepdim), x, op="mean")
    check(lambda t: t.amax(dims, keepdim=keepdim), x, op="amax", rtol=0, atol=0)
    check(lambda t: t.amin(dims, keepdim=keepdim), x, op="amin", rtol=0, atol=0)


@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_values_and_indices_along_a_dim(variant, dim, keepdim):
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    check(lambda t: tuple(t.max(dim, keepdim=keepdim)), x, op="max_dim", rtol=0, atol=0)
    check(lambda t: tuple(t.min(dim, keepdim=keepdim)), x, op="min_dim", rtol=0, atol=0)
    check(lambda t: t.argmax(dim, keepdim=keepdim), x, op="argmax")
    check(lambda t: t.argmin(dim, keepdim=keepdim), x, op="argmin")


@pytest.mark.parametrize(
    "shape,dim",
    [
        ((3, 100003), 1),  # few long rows: split into chunks, partials reduced again
        ((100003, 3), 0),  # long columns: split too
        ((2, 50001, 3), 1),
        ((300, 4097), 1),  # many rows: one workgroup each
        ((4097, 300), 0),
        ((1, 1, 4097), 2),
        ((66000, 64), 1),  # more workgroups than one grid row holds (65535): a 2-D grid
        ((64, 66000), 0),
    ],
)
def test_long_rows_and_columns(variant, shape, dim):
    x = RNG.standard_normal(shape).astype(np.float32)
    check(lambda t: t.sum(dim), x, op="sum", atol=1e-4)
    check(lambda t: t.mean(dim, keepdim=True), x, op="mean")
    check(lambda t: tuple(t.max(dim)), x, op="max_dim", rtol=0, atol=0)
    check(lambda t: t.argmin(dim), x, op="argmin")


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.transpose(0, 1),
        lambda t: t[::2, 1:],
        lambda t: t.unsqueeze(1).expand(-1, 3, -1),
        lambda t: t.t()[:, ::3],
    ],
    ids=["transpose", "slice", "expand", "t-slice"],
)
def test_non_contiguous_inputs(variant, view):
    x = RNG.standard_normal((130, 70)).astype(np.float32)
    check(lambda t: t.sum(0), x, view=view, op="sum")
    check(lambda t: t.sum(), x, view=view, op="sum", atol=1e-4)
    check(lambda t: t.mean(-1, keepdim=True), x, view=view, op="mean")
    check(lambda t: t.amax(0), x, view=view, op="amax", rtol=0, atol=0)
    check(lambda t: tuple(t.min(-1)), x, view=view, op="min_dim", rtol=0, atol=0)
    check(lambda t: t.argmax(), x, view=view, op="argmax")


def test_zero_dim_and_empty(vulkan):
    s = dev(np.float32(3.5))
    assert s.shape == ()
    check(lambda t: t.sum(), np.float32(3.5), op="sum")
    check(lambda t: tuple(t.max(0)), np.float32(3.5), op="max_dim")
    check(lambda t: t.argmax(), np.float32(3.5), op="argmax")
    assert s.amax().item() == 3.5
    e = np.zeros((4, 0, 3), np.float32)
    check(lambda t: t.sum(1), e, op="sum")
    check(lambda t: t.mean(1), e, op="mean")  # NaN, as the CPU
    check(lambda t: t.sum(0), e)  # empty output
    assert np.isnan(dev(e).mean().item())


# ----------------------------------------------------------------------------- NaN, ties
def _nan_cases():
    n = 5000
    base = RNG.standard_normal(n).astype(np.float32)
    cases = {}
    for pos in ([0], [n - 1], [17, 4000], [2500, 2501, 9]):
        x = base.copy()
        x[pos] = np.nan
        cases[f"nan@{pos}"] = x
    x = np.full(n, -np.inf, np.float32)
    cases["all-inf"] = x
    x = np.full(n, 2.0, np.float32)
    cases["all-equal"] = x
    x = base.copy()
    x[[100, 3000, 4999]] = 50.0
    x[[7, 2000]] = -50.0
    cases["ties"] = x
    return cases


@pytest.mark.parametrize("name", list(_nan_cases()))
@pytest.mark.parametrize("shape", [(5000,), (2, 2500), (2500, 2), (50, 100)])
def test_nan_and_tie_semantics(variant, name, shape):
    x = _nan_cases()[name].reshape(shape)
    for dim in range(len(shape)):
        check(lambda t, dim=dim: tuple(t.max(dim)), x, op="max_dim", rtol=0, atol=0)
        check(lambda t, dim=dim: tuple(t.min(dim)), x, op="min_dim", rtol=0, atol=0)
        check(lambda t, dim=dim: t.argmax(dim), x, op="argmax")
        check(lambda t, dim=dim: t.argmin(dim), x, op="argmin")
        check(lambda t, dim=dim: t.amax(dim), x, op="amax", rtol=0, atol=0)
        check(lambda t, dim=dim: t.sum(dim), x, op="sum", atol=1e-3)
    check(lambda t: t.argmax(), x, op="argmax")
    check(lambda t: t.amin(), x, op="amin", rtol=0, atol=0)


def test_argmax_returns_the_first_nan(variant):
    x = np.zeros(9000, np.float32)
    x[[6000, 8000, 7000]] = np.nan
    x[10] = np.inf
    assert dev(x).argmax().item() == 6000
    assert dev(x).argmin().item() == 6000
    assert np.isnan(dev(x).amax().item())
    v, i = dev(x).max(0)
    assert np.isnan(v.item()) and i.item() == 6000


# ----------------------------------------------------------------------------- routing, syncs
def test_integer_inputs_go_to_the_cpu(vulkan):
    x = gpucore.tensor(np.arange(5000, dtype=np.int64))
    with gpucore.dispatch.trace_ops() as ops:
        s = x.sum()
    assert s.item() == 5000 * 4999 // 2
    assert ops[-1][:2] == ("sum", "cpu")


def test_multi_pass_reductions_never_wait_for_the_device(vulkan):
    x = dev(RNG.standard_normal((3, 100003)).astype(np.float32))
    gpucore.vulkan.synchronize()
    before = gpucore.vulkan.stats()
    s = x.sum(1)
    v, i = x.max(1)
    a = x.argmin()
    after = gpucore.vulkan.stats()
    assert after["submits"] == before["submits"]
    assert after["dispatches"] - before["dispatches"] >= 6  # two passes each
    assert after["bytes_downloaded"] == before["bytes_downloaded"]
    xs = x.cpu().numpy()
    np.testing.assert_allclose(s.cpu().numpy(), xs.astype(np.float64).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(i.cpu().numpy(), xs.argmax(1))
    np.testing.assert_array_equal(v.cpu().numpy(), xs.max(1))
    assert a.item() == xs.argmin()
