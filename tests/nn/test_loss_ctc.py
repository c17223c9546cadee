"""F.ctc_loss and nn.CTCLoss: values and gradients against PyTorch (padded and concatenated
targets, every reduction, zero_infinity, unbatched input, blank not 0), against a brute-force
float64 sum over every alignment (gpucore/ops/ctc.py's reference), a gradcheck through
log_softmax, Vulkan against the CPU, and errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck
from gpucore.ops.ctc import np_ctc_nll


def _t(a, dtype=gpucore.float64, grad=False, device="cpu"):
    return gpucore.tensor(np.asarray(a), dtype=dtype, device=device, requires_grad=grad)


def _problem(T=12, N=3, C=5, S=4, blank=0, seed=0, concat=False):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((T, N, C))
    labels = [c for c in range(C) if c != blank]
    tl = rng.integers(1, S + 1, N)
    il = np.minimum(np.maximum(rng.integers(T // 2, T + 1, N), 2 * tl + 1), T)
    il[0] = T
    padded = rng.choice(labels, (N, S))
    targets = np.concatenate([padded[b, : tl[b]] for b in range(N)]) if concat else padded
    return logits, targets, il, tl


def _log_softmax(a):
    return a - np.log(np.exp(a).sum(-1, keepdims=True))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("blank", [0, 4])
def test_ctc_loss_matches_torch(reduction, concat, blank):
    torch = pytest.importorskip("torch")
    logits, targets, il, tl = _problem(blank=blank, concat=concat, seed=blank + concat)
    for dtype, tdtype, tol in ((gpucore.float64, torch.float64, 1e-10),
                               (gpucore.float32, torch.float32, 1e-4)):  # fmt: skip
        x = _t(logits, dtype, True)
        loss = F.ctc_loss(
            F.log_softmax(x, 2),
            _t(targets, gpucore.int64),
            _t(il, gpucore.int64),
            tuple(tl.tolist()),
            blank=blank,
            reduction=reduction,
        )
        w = np.random.default_rng(2).standard_normal(loss.shape)
        (loss * _t(w, dtype)).sum().backward()
        tx = torch.tensor(logits, dtype=tdtype, requires_grad=True)
        tloss = torch.nn.functional.ctc_loss(
            tx.log_softmax(2),
            torch.tensor(targets),
            torch.tensor(il),
            torch.tensor(tl),
            blank=blank,
            reduction=reduction,
        )
        (tloss * torch.tensor(w, dtype=tdtype)).sum().backward()
        np.testing.assert_allclose(
            loss.detach().numpy(), tloss.detach().numpy(), rtol=tol, atol=tol
        )
        np.testing.assert_allclose(
            x.grad.detach().numpy(), tx.grad.detach().numpy(), rtol=tol, atol=tol
        )


def test_ctc_gradient_of_log_probs_matches_torch():
    """The gradient with respect to log_probs themselves (PyTorch's exp(lp) term included)."""
    torch = pytest.importorskip("torch")
    logits, targets, il, tl = _problem(seed=4)
    lp = _log_softmax(logits)
    a = _t(lp, grad=True)
    F.ctc_loss(a, _t(targets, gpucore.int64), tuple(il.tolist()), tuple(tl.tolist())).backward()
    ta = torch.tensor(lp, requires_grad=True)
    torch.nn.functional.ctc_loss(
        ta, torch.tensor(targets), tuple(il.tolist()), tuple(tl.tolist())
    ).backward()
    np.testing.assert_allclose(
        a.grad.detach().numpy(), ta.grad.detach().numpy(), rtol=1e-10, atol=1e-12
    )


def test_zero_infinity_and_impossible_alignments():
    torch = pytest.importorskip("torch")
    logits, targets, il, tl = _problem(T=6, seed=5)
    il = il.copy()
    tl = tl.copy()
    il[1], tl[1] = 2, 4  # four labels cannot fit in two steps: infinite loss
    for zero_inf in (False, True):
        x = _t(logits, grad=True)
        loss = F.ctc_loss(
            F.log_softmax(x, 2),
            _t(targets, gpucore.int64),
            tuple(il.tolist()),
            tuple(tl.tolist()),
            reduction="sum",
            zero_infinity=zero_inf,
        )
        loss.backward()
        tx = torch.tensor(logits, requires_grad=True)
        tloss = torch.nn.functional.ctc_loss(
            tx.log_softmax(2),
            torch.tensor(targets),
            tuple(il.tolist()),
            tuple(tl.tolist()),
            reduction="sum",
            zero_infinity=zero_inf,
        )
        tloss.backward()
        np.testing.assert_allclose(loss.detach().numpy(), tloss.detach().numpy(), rtol=1e-10)
        np.testing.assert_allclose(
            x.grad.detach().numpy(),
            tx.grad.detach().numpy(),
            rtol=1e-10,
            atol=1e-12,
            equal_nan=True,
        )
    assert np.isinf(loss.detach().numpy()) == False  # noqa: E712 - the zeroed loss is finite


def test_ctc_matches_brute_force_and_gradcheck():
    rng = np.random.default_rng(6)
    T, N, C = 5, 2, 3
    lp = _log_softmax(rng.standard_normal((T, N, C)))
    targets = np.array([1, 2, 2], np.int64)  # concatenated: [1, 2] and [2]
    il, tl = np.array([5, 4]), np.array([2, 1])
    want = np_ctc_nll(lp, targets, np.array([0, 2]), il, tl, blank=0)
    got = F.ctc_loss(
        _t(lp), _t(targets, gpucore.int64), tuple(il.tolist()), tuple(tl.tolist()), reduction="none"
    )
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12)
    logits = _t(rng.standard_normal((T, N, C)), grad=True)
    gradcheck(
        lambda z: F.ctc_loss(F.log_softmax(z, 2), _t(targets, gpucore.int64), tuple(il.tolist()),
                             tuple(tl.tolist())),
        (logits,),
    )  # fmt: skip


def test_unbatched_and_module():
    torch = pytest.importorskip("torch")
    logits, targets, il, tl = _problem(N=1, seed=7)
    lp = _log_softmax(logits[:, 0])
    one = targets[0, : tl[0]]
    got = F.ctc_loss(_t(lp), _t(one, gpucore.int64), _t(il[0], gpucore.int64),
                     _t(tl[0], gpucore.int64))  # fmt: skip
    want = torch.nn.functional.ctc_loss(
        torch.tensor(lp), torch.tensor(one), torch.tensor(il[0]), torch.tensor(tl[0])
    )
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert (m.blank, m.reduction, m.zero_infinity) == (0, "sum", True)
    out = m(_t(lp[:, None]), _t(targets, gpucore.int64), tuple(il.tolist()), tuple(tl.tolist()))
    tm = torch.nn.CTCLoss(reduction="sum", zero_infinity=True)
    tout = tm(
        torch.tensor(lp[:, None]), torch.tensor(targets), tuple(il.tolist()), tuple(tl.tolist())
    )
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10)


def test_double_backward_raises():
    logits, targets, il, tl = _problem(seed=8)
    x = _t(_log_softmax(logits), grad=True)
    loss = F.ctc_loss(x, _t(targets, gpucore.int64), tuple(il.tolist()), tuple(tl.tolist()))
    (g,) = gpucore.autograd.grad(loss, [x], create_graph=True)
    with pytest.raises(NotImplementedError, match="double backward"):
        g.sum().backward()


@pytest.mark.parametrize(
    "change,exc,match",
    [
        (dict(il=(13, 6, 6)), ValueError, "at most 12"),
        (dict(il=(-1, 6, 6)), ValueError, "at least 0"),
        (dict(tl=(5, 1, 1)), gpucore.ShapeError, "size at least 5"),
        (dict(tl=(-1, 1, 1)), ValueError, "at least 0"),
        (dict(il=(12, 6)), gpucore.ShapeError, "batch_size"),
        (dict(blank=5), ValueError, "blank"),
        (dict(blank=-1), ValueError, "blank"),
        (dict(reduction="avg"), ValueError, "reduction"),
        (dict(targets=np.full((3, 4), 9)), IndexError, "classes"),
        (dict(targets=np.ones(2)), gpucore.ShapeError, "sum\\(target_lengths\\)"),
        (dict(lp=np.zeros((2, 3, 4, 5))), gpucore.ShapeError, "T, N, C"),
        (dict(il=(12.0, 6, 6)), TypeError, "sequence of ints"),
    ],
)
def test_errors(change, exc, match):
    logits, targets, il, tl = _problem(seed=9)
    args = dict(lp=_log_softmax(logits), targets=targets, il=tuple(il.tolist()), tl=(1, 1, 1),
                blank=0, reduction="mean")  # fmt: skip
    args.update(change)
    with pytest.raises(exc, match=match):
        F.ctc_loss(
            _t(args["lp"]),
            _t(args["targets"], gpucore.int64),
            args["il"],
            args["tl"],
            blank=args["blank"],
            reduction=args["reduction"],
        )
    with pytest.raises(gpucore.DTypeError):
        F.ctc_loss(
            _t(logits).to(gpucore.int64), _t(targets, gpucore.int64), tuple(il.tolist()), (1, 1, 1)
        )


def test_ctc_loss_on_vulkan_matches_cpu(vulkan):
    logits, targets, il, tl = _problem(seed=10)
    got, want = [], []
    for device, into in (("vulkan", got), ("cpu", want)):
        with gpucore.device_policy(device):
            x = _t(logits, gpucore.float32, True, device)
            loss = F.ctc_loss(F.log_softmax(x, 2), _t(targets, gpucore.int64, device=device),
                              tuple(il.tolist()), tuple(tl.tolist()))  # fmt: skip
            assert loss.device.type == device
            loss.backward()
            into += [loss.detach().numpy(), x.grad.detach().numpy()]
    for u, v in zip(got, want):
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-5)
