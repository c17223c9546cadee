"""gpucore.nn.utils: clip_grad_norm_ (2, 1, inf and any p; returned norm; no clipping under the
limit; non-finite handling), its two halves get_total_norm / clip_grads_with_norm_,
clip_grad_value_, parameters_to_vector / vector_to_parameters."""

import math

import numpy as np
import pytest
from helpers import assert_close, rand, to_np

import gpucore
import gpucore.nn as nn
from gpucore.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)


def _params(grads, dtype=gpucore.float64):
    ps = []
    for g in grads:
        p = nn.Parameter(gpucore.zeros(*(g.shape if g is not None else (2,)), dtype=dtype))
        p.grad = gpucore.tensor(g, dtype=dtype) if g is not None else None
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2, 1, math.inf, 3.0])
def test_clip_grad_norm(norm_type):
    grads = [rand((3, 4)), rand((5,), seed=1), rand((2, 2, 2), seed=2)]
    flat = np.concatenate([g.reshape(-1) for g in grads])
    total = (
        np.abs(flat).max()
        if norm_type == math.inf
        else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    )
    ps = _params(grads)
    out = clip_grad_norm_(ps, 0.5, norm_type=norm_type)
    assert isinstance(out, gpucore.Tensor) and out.shape == ()
    assert out.item() == pytest.approx(total, rel=1e-12)
    coef = 0.5 / (total + 1e-6)
    for p, g in zip(ps, grads):
        assert_close(p.grad, g * coef, rtol=1e-12)
    new = np.concatenate([to_np(p.grad).reshape(-1) for p in ps])
    new_norm = (
        np.abs(new).max()
        if norm_type == math.inf
        else (np.abs(new) ** norm_type).sum() ** (1 / norm_type)
    )
    assert new_norm == pytest.approx(0.5, rel=1e-5)


def test_clip_grad_norm_no_clip_and_edge_cases():
    grads = [np.array([0.3, -0.4])]
    ps = _params(grads + [None])  # parameters without a gradient are skipped
    out = clip_grad_norm_(ps, 1.0)
    assert out.item() == pytest.approx(0.5)
    assert_close(ps[0].grad, grads[0])  # under the limit: unchanged
    assert ps[1].grad is None
    single = _params([np.array([3.0, 4.0])])[0]  # a single tensor is accepted
    assert clip_grad_norm_(single, 1.0).item() == pytest.approx(5.0)
    assert_close(single.grad, [0.6, 0.8], rtol=1e-6)
    assert clip_grad_norm_([], 1.0).item() == 0.0
    p32 = _params([np.array([3.0, 4.0])], gpucore.float32)[0]
    clip_grad_norm_(p32, 1.0)
    assert p32.grad.dtype is gpucore.float32
    with pytest.raises(ValueError, match="norm_type"):
        clip_grad_norm_(p32, 1.0, norm_type=-1)


def test_clip_grad_norm_zero_and_minus_inf_orders():
    """As PyTorch: the order-0 / -inf norm of the per-tensor norms (0: how many tensors have a
    non-zero entry; -inf: the smallest absolute entry, 0 here)."""
    grads = [np.array([0.0, 1.0, -2.0]), np.zeros((2, 2)), np.array([0.5, -0.25])]
    ps = _params(grads)
    assert clip_grad_norm_(ps, 1.0, norm_type=0).item() == 2.0  # tensors 0 and 2
    assert_close(ps[0].grad, grads[0] * (1.0 / (2.0 + 1e-6)))
    ps = _params(grads)
    assert clip_grad_norm_(ps, 1.0, norm_type=-math.inf).item() == 0.0
    assert_close(ps[2].grad, grads[2])  # a norm of 0 clips nothing


def test_clip_grad_norm_nonfinite():
    ps = _params([np.array([np.inf, 1.0])])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    out = clip_grad_norm_(ps, 1.0)
    assert math.isinf(out.item())


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_get_total_norm_then_clip_grads_with_norm(norm_type):
    """The two halves of clip_grad_norm_, as PyTorch 2.6+ splits it (a norm taken once, logged,
    then applied): the norm of the concatenated tensors, then the min(1, max / (norm + 1e-6))
    scale."""
    grads = [rand((3, 4), -5, 5), rand((6,), seed=1)]
    flat = np.concatenate([g.ravel() for g in grads])
    want = np.abs(flat).max() if norm_type == math.inf else np.linalg.norm(flat, norm_type)
    ps = _params(grads)
    total = get_total_norm([p.grad for p in ps], norm_type)
    assert total.item() == pytest.approx(want, rel=1e-12)
    assert clip_grads_with_norm_(ps, 2.0, total) is None
    for p, g in zip(ps, grads):
        assert_close(p.grad, g * min(1.0, 2.0 / (want + 1e-6)), rtol=1e-12)
    assert get_total_norm([]).item() == 0.0
    assert get_total_norm(gpucore.tensor([3.0, 4.0])).item() == pytest.approx(5.0)
    with pytest.raises(RuntimeError, match=r"get_total_norm\(\): .*non-finite"):
        get_total_norm([gpucore.tensor([math.nan])], error_if_nonfinite=True)
    with pytest.raises(ValueError, match=r"get_total_norm\(\): norm_type"):
        get_total_norm([gpucore.tensor([1.0])], norm_type=-1)


def test_clip_grad_value():
    g = rand((4, 5), -3, 3)
    ps = _params([g, None])
    assert clip_grad_value_(ps, 1.5) is None
    assert_close(ps[0].grad, np.clip(g, -1.5, 1.5))


def test_parameters_to_vector_round_trip():
    m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    v = parameters_to_vector(m.parameters())
    assert v.shape == (3 * 2 + 2 + 2 + 1,)
    vector_to_parameters(v * 2, m.parameters())
    assert_close(parameters_to_vector(m.parameters()), to_np(v) * 2, rtol=1e-6)
    with pytest.raises(gpucore.ShapeError):
        vector_to_parameters(v[:3], m.parameters())


def test_clip_matches_torch():
    torch = pytest.importorskip("torch")
    grads = [rand((3, 4), -5, 5), rand((6,), seed=1)]
    for norm_type in (2.0, 1.0, math.inf):
        ps = _params(grads)
        tps = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
        for tp, g in zip(tps, grads):
            tp.grad = torch.tensor(g)
        out = clip_grad_norm_(ps, 2.0, norm_type)
        ref = torch.nn.utils.clip_grad_norm_(tps, 2.0, norm_type)
        assert out.item() == pytest.approx(ref.item(), rel=1e-12)
        for p, tp in zip(ps, tps):
            assert_close(p.grad, tp.grad.numpy(), rtol=1e-12)
    assert gpucore.nn.utils.clip_grad_norm_ is clip_grad_norm_
