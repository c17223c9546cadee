"""Dropout, functional and modules: dropout (statistics, 1 / (1 - p) scale, gradient, seed) and
dropout2d (whole channels, in place, warnings), errors, and PyTorch's semantics where
installed."""

import math

import numpy as np
import pytest
from helpers import assert_close, rand, to_np
from nn_checks import check_error, error_ids
from nn_refs import T4

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


# ============================================================================= dropout
def test_dropout_statistics_and_scale():
    gpucore.manual_seed(0)
    x = gpucore.ones(200, 100)
    for p in (0.2, 0.5, 0.9):
        y = to_np(F.dropout(x, p))
        kept = y != 0
        frac = 1 - kept.mean()
        assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / y.size)
        np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert to_np(F.dropout(x, 1.0)).max() == 0
    with pytest.raises(ValueError, match="p"):
        F.dropout(x, 1.5)


def test_dropout_gradient_seed_and_module():
    xv = rand((6, 7))
    gpucore.manual_seed(3)
    x = gpucore.tensor(xv, dtype=gpucore.float32, requires_grad=True)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    mask = to_np(y) != 0
    np.testing.assert_allclose(to_np(x.grad), mask / 0.6, rtol=1e-6)
    np.testing.assert_allclose(to_np(y)[mask], xv[mask] / 0.6, rtol=1e-6)
    gpucore.manual_seed(3)
    assert (to_np(F.dropout(f32(xv), 0.4)) == to_np(y)).all()  # Philox: reproducible
    m = nn.Dropout(0.25)
    assert repr(m) == "Dropout(p=0.25, inplace=False)"
    t = f32(xv)
    assert m.eval()(t) is t
    assert (to_np(m.train()(t)) == 0).any()
    t2 = f32(xv)
    assert nn.Dropout(0.5, inplace=True)(t2) is t2
    with pytest.raises(ValueError):
        nn.Dropout(-0.1)


# ============================================================================= dropout2d
def test_dropout2d_drops_whole_channels():
    gpucore.manual_seed(0)
    x = gpucore.ones(8, 16, 3, 4)
    y = to_np(F.dropout2d(x, 0.5))
    per_channel = y.reshape(8, 16, -1)
    assert ((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1)).all()
    frac = (per_channel[..., 0] == 0).mean()
    assert 0.3 < frac < 0.7
    gpucore.manual_seed(0)
    assert (to_np(F.dropout2d(x, 0.5)) == y).all()  # the seed fixes the mask
    assert F.dropout2d(x, 0.5, training=False) is x
    assert F.dropout2d(x, 0.0) is x
    assert (to_np(F.dropout2d(x, 1.0)) == 0).all()


def test_dropout2d_grad_and_inplace():
    a = rand((2, 3, 2, 2))
    gpucore.manual_seed(3)
    x = f64(a, grad=True)
    y = F.dropout2d(x, 0.4)
    y.sum().backward()
    scale = to_np(y) / a
    assert_close(x.grad, scale, rtol=1e-9)
    gpucore.manual_seed(3)
    z = gpucore.tensor(a, dtype=gpucore.float64)
    out = F.dropout2d(z, 0.4, inplace=True)
    assert out is z and np.allclose(to_np(z), to_np(y))


def test_dropout2d_errors_and_warnings():
    with pytest.raises(ValueError, match="dropout2d.*probability"):
        F.dropout2d(gpucore.zeros(1, 2, 3, 3), 1.5)
    with pytest.raises(gpucore.ShapeError, match="dropout2d"):
        F.dropout2d(gpucore.zeros(4), 0.5)
    with pytest.warns(UserWarning, match="3D input"):
        y = F.dropout2d(gpucore.ones(2, 5, 3), 0.5)
    per = to_np(y)
    assert ((per == 0).all(-1) | (per == 2).all(-1)).all()


def test_dropout2d_matches_torch_statistics():
    # Not the same random stream as PyTorch, but the same semantics: whole channels, 1/(1-p).
    torch = pytest.importorskip("torch")
    x = np.ones((4, 6, 2, 2))
    ours = to_np(F.dropout2d(gpucore.tensor(x), 0.25))
    theirs = torch.nn.functional.dropout2d(torch.tensor(x), 0.25).numpy()
    for y in (ours, theirs):
        vals = set(np.unique(y).round(6).tolist())
        assert vals <= {0.0, round(1 / 0.75, 6)}
        per = y.reshape(4, 6, -1)
        assert (per.min(-1) == per.max(-1)).all()


def test_dropout2d_module():
    m = nn.Dropout2d(p=0.25)
    assert (m.p, m.inplace) == (0.25, False) and list(m.state_dict()) == []
    x = gpucore.ones(8, 16, 3, 2)
    gpucore.manual_seed(0)
    y = to_np(m(x))
    per_channel = y.reshape(8, 16, -1)
    # whole channels are zeroed, the rest scaled by 1 / (1 - p)
    assert (per_channel.min(-1) == per_channel.max(-1)).all()
    assert set(np.unique(per_channel).tolist()) == {0.0, float(np.float32(1 / 0.75))}
    assert 0.1 < (per_channel[..., 0] == 0).mean() < 0.4
    assert to_np(x).min() == 1.0  # not in place
    gpucore.manual_seed(0)
    assert (to_np(m(x)) == y).all()  # the seed fixes the mask
    gpucore.manual_seed(0)
    inplace = nn.Dropout2d(p=0.25, inplace=True)
    assert inplace(x) is x and (to_np(x) == y).all()
    m.eval()
    z = f32(T4)
    assert_close(m(z), T4, rtol=0, atol=0)  # eval: the identity
    # the gradient flows through the kept channels, scaled
    gpucore.manual_seed(1)
    m.train()
    a = f64(rand((2, 4, 2, 2), seed=34), grad=True)
    out = m(a)
    out.sum().backward()
    kept = to_np(out) != 0
    assert_close(a.grad, np.where(kept, 1 / 0.75, 0.0), rtol=1e-12)


def test_dropout2d_module_matches_torch():
    # not the same random stream as PyTorch: the same semantics (whole channels, 1 / (1 - p))
    # and the same identity in eval mode
    torch = pytest.importorskip("torch")
    x = np.ones((4, 6, 2, 2))
    gpucore.manual_seed(0)
    torch.manual_seed(0)
    for y in (to_np(nn.Dropout2d(0.25)(f64(x))), torch.nn.Dropout2d(0.25)(torch.tensor(x)).numpy()):
        per_channel = y.reshape(4, 6, -1)
        assert (per_channel.min(-1) == per_channel.max(-1)).all()
        assert set(np.unique(y).round(6).tolist()) <= {0.0, round(1 / 0.75, 6)}
    m, tm = nn.Dropout2d(0.25).eval(), torch.nn.Dropout2d(0.25).eval()
    assert repr(m) == repr(tm)
    assert_close(m(f64(T4)), tm(torch.tensor(T4)).numpy(), rtol=0, atol=0)


# ============================================================================= modules
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # Dropout2d
        (lambda: nn.Dropout2d(1.5), ValueError, "probability"),
        (lambda: nn.Dropout2d()(z(4)), gpucore.ShapeError, "dropout2d"),
    ]


MODULE_ERRORS = _module_errors()


@pytest.mark.parametrize("fn,exc,match", MODULE_ERRORS, ids=error_ids(MODULE_ERRORS))
def test_module_errors(fn, exc, match):
    check_error(fn, exc, match)
