"""Losses: functional forms and modules against numpy float64 references, gradcheck for every
loss (weights, ignore_index, label_smoothing, pos_weight included), stability, errors, and
PyTorch with the same inputs where installed."""

import numpy as np
import pytest
from helpers import assert_close, check_op, np_log_softmax, rand, to_np

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F

REDUCTIONS = ["mean", "sum", "none"]


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def reduce(loss, reduction, denom=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (loss.size if denom is None else denom)


# ============================================================================= references
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


def np_smooth_l1(d, beta):
    ad = np.abs(d)
    return np.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta) if beta else ad


def np_huber(d, delta):
    ad = np.abs(d)
    return np.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))


def np_bce(x, t, w=None):
    with np.errstate(divide="ignore"):
        lx, l1x = np.maximum(np.log(x), -100), np.maximum(np.log(1 - x), -100)
    loss = -(t * lx + (1 - t) * l1x)
    return loss if w is None else loss * w


def np_bce_logits(x, t, w=None, pw=None):
    log_sig, log_1msig = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * log_sig + (1 - t) * log_1msig)
    return loss if w is None else loss * w


# ============================================================================= nll_loss
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
    assert_close(m(gpucore.tensor(x, dtype=gpucore.float32), gpucore.tensor(t)),
                 np_nll(x, t, np.array([1.0, 2, 3, 4]), 0), rtol=1e-5)
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
        valid, -(ls * w).sum(1), 0.0)
    return reduce(rows.reshape(t.shape), reduction, wt.sum())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_kdim_weight_smoothing_ignore(reduction):
    t = np.array([[[0, 2], [-100, 1]], [[2, 2], [0, -100]]])
    w = rand((3,), 0.5, 2, seed=1)
    check_op(
        lambda x: F.cross_entropy(x, gpucore.tensor(t), weight=f64(w), reduction=reduction,
                                  label_smoothing=0.2),
        lambda x: np_cross_entropy(x, t, w, smoothing=0.2, reduction=reduction),
        [(2, 3, 2, 2)],
    )


def test_cross_entropy_module():
    m = nn.CrossEntropyLoss(weight=gpucore.tensor([1.0, 0.5, 2.0]), ignore_index=1,
                            label_smoothing=0.1, reduction="sum")
    assert repr(m) == "CrossEntropyLoss()"
    x = rand((4, 3))
    t = np.array([0, 1, 2, 2])
    assert_close(m(gpucore.tensor(x, dtype=gpucore.float32), gpucore.tensor(t)),
                 np_cross_entropy(x, t, np.array([1.0, 0.5, 2.0]), 1, 0.1, "sum"), rtol=1e-5)
    m.double()
    assert m.weight.dtype is gpucore.float64  # the class weights are a buffer
    assert list(m.state_dict()) == ["weight"] and list(m.parameters()) == []
    assert nn.CrossEntropyLoss().state_dict() == {}


# ============================================================================= regression losses
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_l1(reduction):
    check_op(lambda a, b: F.mse_loss(a, b, reduction=reduction),
             lambda a, b: reduce((a - b) ** 2, reduction), [(3, 4), (3, 4)], gradgrad=True)
    check_op(lambda a, b: F.l1_loss(a, b, reduction=reduction),
             lambda a, b: reduce(np.abs(a - b), reduction), [(3, 4), (3, 4)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.4, 0.0])
def test_smooth_l1(reduction, beta):
    check_op(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
             lambda a, b: reduce(np_smooth_l1(a - b, beta), reduction), [(4, 5), (4, 5)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 0.3, 2.5])
def test_huber(reduction, delta):
    check_op(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
             lambda a, b: reduce(np_huber(a - b, delta), reduction), [(4, 5), (4, 5)])


def test_regression_known_values_and_errors():
    a, b = f64([0.0, 1.0, 3.0]), f64([0.5, 1.0, 0.0])
    assert F.mse_loss(a, b).item() == pytest.approx((0.25 + 9) / 3)
    assert F.l1_loss(a, b, reduction="sum").item() == pytest.approx(3.5)
    assert F.smooth_l1_loss(a, b, reduction="none").tolist() == [0.125, 0.0, 2.5]
    assert F.huber_loss(a, b, delta=2.0, reduction="none").tolist() == [0.125, 0.0, 4.0]
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(f64(np.zeros((3, 1))), f64(np.zeros(3)))
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(a, b, reduction="avg")
    with pytest.raises(TypeError, match="deprecated"):
        F.l1_loss(a, b, size_average=False)
    with pytest.raises(ValueError, match="beta"):
        F.smooth_l1_loss(a, b, beta=-1.0)
    with pytest.raises(ValueError, match="delta"):
        F.huber_loss(a, b, delta=0.0)
    # the gradient of the smooth losses is finite where input == target
    x = f64([1.0, 2.0], grad=True)
    (F.smooth_l1_loss(x, f64([1.0, 0.0])) + F.huber_loss(x, f64([1.0, 0.0]))).backward()
    assert to_np(x.grad).tolist() == [0.0, 1.0]


# ============================================================================= binary cross-entropy
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    x, t, w = rand((3, 4), 0.05, 0.95), rand((3, 4), 0, 1, seed=1), rand((4,), 0.5, 2, seed=2)
    check_op(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
             lambda a, b: reduce(np_bce(a, b), reduction), None, vals=[x, t])
    check_op(lambda a, b: F.binary_cross_entropy(a, b, weight=f64(w).to(a.dtype),
                                                 reduction=reduction),
             lambda a, b: reduce(np_bce(a, b, w), reduction), None, vals=[x, t])


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
    check_op(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
             lambda a, b: reduce(np_bce_logits(a, b), reduction), None, vals=[x, t],
             gradgrad=True)
    check_op(
        lambda a, b: F.binary_cross_entropy_with_logits(
            a, b, weight=f64(w).to(a.dtype), pos_weight=f64(pw).to(a.dtype), reduction=reduction),
        lambda a, b: reduce(np_bce_logits(a, b, w, pw), reduction), None, vals=[x, t])


def test_binary_cross_entropy_with_logits_stability():
    x = f64([100.0, -100.0, 0.0, 30.0], grad=True)
    t = f64([0.0, 1.0, 1.0, 1.0])
    out = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    assert_close(out, [100.0, 100.0, np.log(2), np.log1p(np.exp(-30.0))], rtol=1e-12)
    out.sum().backward()
    assert_close(x.grad, [1.0, -1.0, -0.5, -1 / (1 + np.exp(30.0))], rtol=1e-9, atol=1e-15)
    f32 = F.binary_cross_entropy_with_logits(gpucore.tensor([-200.0, 200.0]),
                                             gpucore.tensor([1.0, 0.0]), reduction="none")
    assert_close(f32, [200.0, 200.0], rtol=1e-6)
    with pytest.raises(gpucore.ShapeError, match="same"):
        F.binary_cross_entropy_with_logits(f64([0.5, 0.5]), f64([1.0]))


# ============================================================================= modules
def test_loss_modules_match_functional():
    x, y = rand((3, 4)), rand((3, 4), seed=1)
    p, t = rand((3, 4), 0.1, 0.9, seed=2), rand((3, 4), 0, 1, seed=3)
    w = rand((4,), 0.5, 2, seed=4)
    cases = [
        (nn.MSELoss(reduction="sum"), (x, y), reduce((x - y) ** 2, "sum")),
        (nn.L1Loss(), (x, y), np.abs(x - y).mean()),
        (nn.SmoothL1Loss(beta=0.5, reduction="none"), (x, y), np_smooth_l1(x - y, 0.5)),
        (nn.HuberLoss(delta=0.5), (x, y), np_huber(x - y, 0.5).mean()),
        (nn.BCELoss(weight=f64(w)), (p, t), np_bce(p, t, w).mean()),
        (nn.BCEWithLogitsLoss(pos_weight=f64(w), reduction="sum"), (x, t),
         np_bce_logits(x, t, None, w).sum()),
    ]
    for m, (a, b), ref in cases:
        assert repr(m) == f"{type(m).__name__}()"
        assert_close(m(f64(a), f64(b)), ref, rtol=1e-10)
    bce = nn.BCEWithLogitsLoss(weight=gpucore.ones(4), pos_weight=gpucore.ones(4))
    assert sorted(bce.state_dict()) == ["pos_weight", "weight"]
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(TypeError, match="deprecated"):
        nn.CrossEntropyLoss(size_average=True)


# ============================================================================= PyTorch
def test_losses_match_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x, y = rand((4, 3, 2), -3, 3), rand((4, 3, 2), seed=1)
    p, t = rand((4, 3, 2), 0.02, 0.98, seed=2), rand((4, 3, 2), 0, 1, seed=3)
    cls = np.array([[0, 2], [1, -100], [2, 2], [1, 0]])
    w3 = rand((3,), 0.5, 2, seed=4)
    w2 = rand((2,), 0.5, 2, seed=5)
    cases = [
        ("mse", F.mse_loss, tf.mse_loss, (x, y), {}, {}),
        ("l1", F.l1_loss, tf.l1_loss, (x, y), {}, {}),
        ("smooth_l1", F.smooth_l1_loss, tf.smooth_l1_loss, (x, y), {"beta": 0.7}, {}),
        ("huber", F.huber_loss, tf.huber_loss, (x, y), {"delta": 0.6}, {}),
        ("bce", F.binary_cross_entropy, tf.binary_cross_entropy, (p, t), {}, {"weight": w2}),
        ("bce_logits", F.binary_cross_entropy_with_logits, tf.binary_cross_entropy_with_logits,
         (x, t), {}, {"weight": w2, "pos_weight": w2[::-1].copy()}),
        ("nll", F.nll_loss, tf.nll_loss, (np_log_softmax(x, 1),), {"ignore_index": -100},
         {"weight": w3}),
        ("cross_entropy", F.cross_entropy, tf.cross_entropy, (x,), {"label_smoothing": 0.15},
         {"weight": w3}),
    ]
    for name, ours, theirs, args, kw, tensors in cases:
        for reduction in REDUCTIONS:
            extra = [(cls,)] if len(args) == 1 else [()]
            ga = [f64(a, grad=True) for a in args]
            ta = [torch.tensor(a, requires_grad=True) for a in args]
            gt = [gpucore.tensor(c) for c in extra[0]]
            tt = [torch.tensor(c) for c in extra[0]]
            gk = {k: f64(v) for k, v in tensors.items()}
            tk = {k: torch.tensor(v) for k, v in tensors.items()}
            out = ours(*ga, *gt, reduction=reduction, **kw, **gk)
            ref = theirs(*ta, *tt, reduction=reduction, **kw, **tk)
            assert_close(out, ref.detach().numpy(), rtol=1e-10, atol=1e-12, what=name)
            wout = rand(tuple(ref.shape), seed=9)
            (out * f64(wout)).sum().backward()
            (ref * torch.tensor(wout)).sum().backward()
            for a, b in zip(ga, ta):
                assert_close(a.grad, b.grad.numpy(), rtol=1e-9, atol=1e-12, what=name)
