"""The loss modules (gpucore/nn/modules/loss.py): their repr, state_dict and results against the
functional, the losses of the module table (nn_cases.LOSS_CASES: forward, input gradients,
errors, PyTorch's module), and, where torch is installed, the functional losses against PyTorch's,
values and gradients."""

import numpy as np
import pytest
from helpers import assert_close, np_log_softmax, rand
from nn_cases import LOSS_CASES
from nn_checks import module_tests
from nn_refs import REDUCTIONS, f64, np_bce, np_bce_logits, np_huber, np_smooth_l1, reduce

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


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
        (
            nn.BCEWithLogitsLoss(pos_weight=f64(w), reduction="sum"),
            (x, t),
            np_bce_logits(x, t, None, w).sum(),
        ),
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


# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # losses: mismatched shapes
        (
            lambda: nn.KLDivLoss(reduction="sum")(z(2, 3), z(2, 4)),
            gpucore.ShapeError,
            "broadcastable",
        ),
        (lambda: nn.PoissonNLLLoss()(z(2, 3), z(2, 4)), gpucore.ShapeError, "broadcastable"),
        (
            lambda: nn.CosineEmbeddingLoss()(z(3, 4), z(3, 5), z(3)),
            gpucore.ShapeError,
            "cosine_embedding_loss",
        ),
        (lambda: nn.CosineEmbeddingLoss()(z(3, 4), z(3, 4), z(2)), gpucore.ShapeError, "target"),
        (lambda: nn.MarginRankingLoss()(z(3), z(4), z(3)), gpucore.ShapeError, "broadcastable"),
        (lambda: nn.MarginRankingLoss()(z(3), z(3, 1), z(3)), gpucore.ShapeError, "dims"),
        (lambda: nn.HingeEmbeddingLoss()(z(3), z(4)), gpucore.ShapeError, "broadcastable"),
        (
            lambda: nn.TripletMarginLoss()(z(3, 4), z(3, 5), z(3, 4)),
            gpucore.ShapeError,
            "broadcastable",
        ),
        (lambda: nn.TripletMarginLoss()(z(3, 4), z(4), z(3, 4)), gpucore.ShapeError, "dimensions"),
        (lambda: nn.SoftMarginLoss()(z(3), z(4)), gpucore.ShapeError, "same shape"),
        (lambda: nn.MultiLabelSoftMarginLoss()(z(2, 3), z(2, 4)), gpucore.ShapeError, "same shape"),
        # PyTorch broadcasts a [3] target against a [2, 3] input here; gpucore asks for the
        # same shape
        (lambda: nn.SoftMarginLoss()(z(2, 3), z(3)), gpucore.ShapeError, "same shape"),
        (lambda: nn.MultiLabelSoftMarginLoss()(z(2, 3), z(3)), gpucore.ShapeError, "same shape"),
        (
            lambda: nn.MultiLabelSoftMarginLoss(weight=gpucore.ones(4))(z(2, 3), z(2, 3)),
            gpucore.ShapeError,
            "broadcastable",
        ),
        # losses: bad arguments
        (lambda: nn.TripletMarginLoss(margin=0), ValueError, "margin"),
        (lambda: nn.KLDivLoss(reduction="avg"), ValueError, "reduction"),  # PyTorch: in forward
        (lambda: nn.SoftMarginLoss(reduction="avg"), ValueError, "reduction"),
        # PyTorch: still accepted, with a deprecation warning
        (lambda: nn.HingeEmbeddingLoss(size_average=True), TypeError, "deprecated"),
    ]


MODULE_ERRORS = _module_errors()


(
    test_module_forward,
    test_module_input_gradients,
    test_module_errors,
    test_module_match_torch,
) = module_tests(LOSS_CASES, MODULE_ERRORS)


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
        (
            "bce_logits",
            F.binary_cross_entropy_with_logits,
            tf.binary_cross_entropy_with_logits,
            (x, t),
            {},
            {"weight": w2, "pos_weight": w2[::-1].copy()},
        ),
        (
            "nll",
            F.nll_loss,
            tf.nll_loss,
            (np_log_softmax(x, 1),),
            {"ignore_index": -100},
            {"weight": w3},
        ),
        (
            "cross_entropy",
            F.cross_entropy,
            tf.cross_entropy,
            (x,),
            {"label_smoothing": 0.15},
            {"weight": w3},
        ),
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
