"""The likelihood losses, functional and modules: nll_loss, cross_entropy's module and K-dim
targets, binary cross-entropy (probabilities and logits), kl_div and poisson_nll_loss, against
numpy float64 references, with gradcheck, stability and errors. cross_entropy itself is tested in
depth in test_loss_cross_entropy.py; the modules' table and PyTorch in test_loss_modules.py."""

import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, np_log_softmax, rand, to_np
from nn_refs import LOGP, PROB, REDUCTIONS, f64, like, np_bce, np_bce_logits, np_kl, reduce

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


# ============================================================================= nll_loss
def np_nll(lp, t, weight=None, ignore_index=-100, reduction="mean"):
    c = lp.shape[1]
    flat = np.moveaxis(lp, 1, -1).reshape(-1, c)
    tf = t.reshape(-1)
    valid = tf != ignore_index
    safe = np.where(valid, tf, 0)
    w = np.ones(c) if weight is None else weight
    wt = np.where(valid, w[safe], 0.0)
    rows = -flat[np.arange(len(tf)), safe] * wt
    return reduce(rows.reshape(t.shape), reduction, wt.sum())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction):
    t = np.array([1, 0, -100, 3, 3])
    w = rand((4,), 0.5, 2, seed=3)
    check_op(
        lambda x: F.nll_loss(x, gpucore.tensor(t), weight=f64(w), reduction=reduction),
        lambda x: np_nll(x, t, w, reduction=reduction),
        [(5, 4)],
    )
    t2 = np.array([[[0, 2], [1, 1]], [[2, 2], [0, 1]]])  # K-dim: input [2, 3, 2, 2]
    check_op(
        lambda x: F.nll_loss(x, gpucore.tensor(t2), reduction=reduction, ignore_index=1),
        lambda x: np_nll(x, t2, ignore_index=1, reduction=reduction),
        [(2, 3, 2, 2)],
    )


def test_nll_loss_1d_module_and_errors():
    lp = rand((4,))
    out = F.nll_loss(f64(lp), gpucore.tensor(2))
    assert out.shape == () and np.isclose(out.item(), -lp[2])
    assert F.nll_loss(f64(lp), gpucore.tensor(2), reduction="none").shape == ()
    m = nn.NLLLoss(weight=gpucore.tensor([1.0, 2.0, 3.0, 4.0]), ignore_index=0)
    x = rand((3, 4))
    t = np.array([0, 1, 3])
    assert_close(
        m(gpucore.tensor(x, dtype=gpucore.float32), gpucore.tensor(t)),
        np_nll(x, t, np.array([1.0, 2, 3, 4]), 0),
        rtol=1e-5,
    )
    assert "weight" in m.state_dict()
    with pytest.raises(IndexError):
        F.nll_loss(f64(x), gpucore.tensor([0, 4, 1]))
    with pytest.raises(gpucore.DTypeError, match="int64"):
        F.nll_loss(f64(x), gpucore.tensor([0.0, 1.0, 1.0]))
    with pytest.raises(gpucore.ShapeError, match="target"):
        F.nll_loss(f64(x), gpucore.tensor([0, 1]))
    with pytest.raises(gpucore.ShapeError, match="weight"):
        F.nll_loss(f64(x), gpucore.tensor([0, 1, 1]), weight=f64([1.0, 2.0]))
    assert np.isnan(F.nll_loss(f64(x), gpucore.tensor([-100] * 3)).item())


# ============================================================================= cross-entropy
def np_cross_entropy(x, t, weight=None, ignore_index=-100, smoothing=0.0, reduction="mean"):
    c = x.shape[1]
    ls = np.moveaxis(np_log_softmax(x, 1), 1, -1).reshape(-1, c)
    tf = t.reshape(-1)
    valid = tf != ignore_index
    safe = np.where(valid, tf, 0)
    w = np.ones(c) if weight is None else weight
    wt = np.where(valid, w[safe], 0.0)
    rows = (1 - smoothing) * (-ls[np.arange(len(tf)), safe] * wt) + smoothing / c * np.where(
        valid, -(ls * w).sum(1), 0.0
    )
    return reduce(rows.reshape(t.shape), reduction, wt.sum())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_kdim_weight_smoothing_ignore(reduction):
    t = np.array([[[0, 2], [-100, 1]], [[2, 2], [0, -100]]])
    w = rand((3,), 0.5, 2, seed=1)
    check_op(
        lambda x: F.cross_entropy(
            x, gpucore.tensor(t), weight=f64(w), reduction=reduction, label_smoothing=0.2
        ),
        lambda x: np_cross_entropy(x, t, w, smoothing=0.2, reduction=reduction),
        [(2, 3, 2, 2)],
    )


def test_cross_entropy_module():
    m = nn.CrossEntropyLoss(
        weight=gpucore.tensor([1.0, 0.5, 2.0]), ignore_index=1, label_smoothing=0.1, reduction="sum"
    )
    assert repr(m) == "CrossEntropyLoss()"
    x = rand((4, 3))
    t = np.array([0, 1, 2, 2])
    assert_close(
        m(gpucore.tensor(x, dtype=gpucore.float32), gpucore.tensor(t)),
        np_cross_entropy(x, t, np.array([1.0, 0.5, 2.0]), 1, 0.1, "sum"),
        rtol=1e-5,
    )
    m.double()
    assert m.weight.dtype is gpucore.float64  # the class weights are a buffer
    assert list(m.state_dict()) == ["weight"] and list(m.parameters()) == []
    assert nn.CrossEntropyLoss().state_dict() == {}


# ============================================================================= binary cross-entropy
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    x, t, w = rand((3, 4), 0.05, 0.95), rand((3, 4), 0, 1, seed=1), rand((4,), 0.5, 2, seed=2)
    check_op(
        lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
        lambda a, b: reduce(np_bce(a, b), reduction),
        None,
        vals=[x, t],
    )
    check_op(
        lambda a, b: F.binary_cross_entropy(a, b, weight=f64(w).to(a.dtype), reduction=reduction),
        lambda a, b: reduce(np_bce(a, b, w), reduction),
        None,
        vals=[x, t],
    )


def test_binary_cross_entropy_clamps_log():
    x = f64([0.0, 1.0, 0.0, 1.0, 0.5], grad=True)
    t = f64([1.0, 0.0, 0.0, 1.0, 1.0])
    out = F.binary_cross_entropy(x, t, reduction="none")
    assert_close(out, [100.0, 100.0, 0.0, 0.0, np.log(2)])
    out.sum().backward()
    assert np.isfinite(to_np(x.grad)).all()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        F.binary_cross_entropy(f64([1.5]), f64([1.0]))
    with pytest.raises(gpucore.ShapeError, match="same"):
        F.binary_cross_entropy(f64([0.5, 0.5]), f64([1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    x, t = rand((3, 4), -4, 4), rand((3, 4), 0, 1, seed=1)
    w, pw = rand((3, 1), 0.5, 2, seed=2), rand((4,), 0.5, 3, seed=3)
    check_op(
        lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
        lambda a, b: reduce(np_bce_logits(a, b), reduction),
        None,
        vals=[x, t],
        gradgrad=True,
    )
    check_op(
        lambda a, b: F.binary_cross_entropy_with_logits(
            a, b, weight=f64(w).to(a.dtype), pos_weight=f64(pw).to(a.dtype), reduction=reduction
        ),
        lambda a, b: reduce(np_bce_logits(a, b, w, pw), reduction),
        None,
        vals=[x, t],
    )


def test_binary_cross_entropy_with_logits_stability():
    x = f64([100.0, -100.0, 0.0, 30.0], grad=True)
    t = f64([0.0, 1.0, 1.0, 1.0])
    out = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    assert_close(out, [100.0, 100.0, np.log(2), np.log1p(np.exp(-30.0))], rtol=1e-12)
    out.sum().backward()
    assert_close(x.grad, [1.0, -1.0, -0.5, -1 / (1 + np.exp(30.0))], rtol=1e-9, atol=1e-15)
    f32 = F.binary_cross_entropy_with_logits(
        gpucore.tensor([-200.0, 200.0]), gpucore.tensor([1.0, 0.0]), reduction="none"
    )
    assert_close(f32, [200.0, 200.0], rtol=1e-6)
    with pytest.raises(gpucore.ShapeError, match="same"):
        F.binary_cross_entropy_with_logits(f64([0.5, 0.5]), f64([1.0]))


# ========================================================================= kl_div, poisson_nll_loss
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    def red(loss):
        if reduction == "batchmean":
            return loss.sum() / loss.shape[0]
        return reduce(loss, reduction)

    t = rand((4, 5), 0.0, 1.0, seed=7)
    t[0, 1] = 0.0  # xlogy: 0 * log 0 is 0
    if log_target:
        t = np.log(t + 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_op(
            lambda x: F.kl_div(x, like(t, x), reduction=reduction, log_target=log_target),
            lambda x: red(np_kl(x, t, log_target)),
            [(4, 5)],
            noncontig=False,
        )
        check_grad(
            lambda x, tt: F.kl_div(x, tt, reduction=reduction, log_target=log_target),
            rand((4, 5), seed=2),
            t if log_target else t + 0.05,
        )


def test_kl_div_mean_warns_and_errors():
    x, t = gpucore.zeros(2, 3), gpucore.ones(2, 3) / 3
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, t)
    with pytest.raises(ValueError, match="kl_div.*reduction"):
        F.kl_div(x, t, reduction="average")
    with pytest.raises(gpucore.DTypeError, match="kl_div.*target"):
        F.kl_div(x, gpucore.tensor([[1, 2, 3], [1, 2, 3]]), reduction="sum")
    with pytest.raises(TypeError, match="kl_div.*deprecated"):
        F.kl_div(x, t, reduction="batchmean", reduce=True)


def test_kl_div_loss_mean_warns():
    with pytest.warns(UserWarning, match="batchmean"):
        out = nn.KLDivLoss()(f64(LOGP), f64(PROB))
    assert_close(out, np_kl(LOGP, PROB).mean())


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "log_input,full", [(True, False), (False, False), (True, True), (False, True)]
)
def test_poisson_nll_loss(reduction, log_input, full):
    t = np.array([[0.0, 1.0, 2.0, 5.0], [3.0, 0.5, 1.5, 8.0]])

    def np_fn(x):
        loss = np.exp(x) - t * x if log_input else x - t * np.log(x + 1e-8)
        if full:
            with np.errstate(divide="ignore", invalid="ignore"):
                st = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
            loss = loss + np.where(t > 1, st, 0.0)
        return reduce(loss, reduction)

    low, high = (-2, 2) if log_input else (0.1, 3)
    check_op(
        lambda x: F.poisson_nll_loss(x, like(t, x), log_input, full, reduction=reduction),
        np_fn,
        [(2, 4)],
        low=low,
        high=high,
        noncontig=False,
    )


@pytest.mark.parametrize("target", [[-1, 0, 0], [0, 3, 0]])
def test_nll_loss_names_itself_for_a_target_out_of_range(target):
    """Issue 20, item 10: the error came from the gather inside, naming gather()."""
    logp = F.log_softmax(gpucore.tensor(rand((3, 3))), 1)
    with pytest.raises(gpucore.GpucoreIndexError, match=r"nll_loss\(\): index (-1|3) .* 0 <="):
        F.nll_loss(logp, gpucore.tensor(target))
    assert F.nll_loss(logp, gpucore.tensor([-100, 0, 2])).shape == ()  # ignore_index is fine
