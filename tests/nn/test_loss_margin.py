"""The embedding, ranking and margin losses: cosine_embedding_loss, margin_ranking_loss,
hinge_embedding_loss, triplet_margin_loss, soft_margin_loss and multilabel_soft_margin_loss against
numpy float64 references with gradcheck, and their errors on bad shapes and reductions. Their
modules are in test_loss_modules.py."""

import numpy as np
import pytest
from helpers import assert_close, check_op, rand
from nn_refs import REDUCTIONS, f64, like, np_norm, reduce

import gpucore
import gpucore.nn.functional as F


# ============================================================= embedding, ranking and margin losses
def np_cos_embed(a, b, y, margin):
    cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    return np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(cos - margin, 0), 0.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding_loss(reduction, margin):
    y = np.array([1.0, -1.0, -1.0, 1.0, -1.0])
    check_op(
        lambda a, b: F.cosine_embedding_loss(a, b, like(y, a), margin, reduction=reduction),
        lambda a, b: reduce(np_cos_embed(a, b, y, margin), reduction),
        [(5, 3), (5, 3)],
        noncontig=False,
    )
    yi = gpucore.tensor([1, -1])  # int targets
    out = F.cosine_embedding_loss(
        f64(rand((2, 3))), f64(rand((2, 3), seed=1)), yi, margin, reduction=reduction
    )
    assert_close(
        out,
        reduce(
            np_cos_embed(rand((2, 3)), rand((2, 3), seed=1), np.array([1, -1]), margin), reduction
        ),
    )
    check_op(
        lambda a, b: F.cosine_embedding_loss(a, b, like(-1.0, a), reduction=reduction),
        lambda a, b: reduce(np_cos_embed(a, b, np.array(-1.0), 0.0), reduction),
        [(4,), (4,)],
        noncontig=False,
    )


def test_cosine_embedding_loss_errors():
    a = gpucore.zeros(3, 4)
    with pytest.raises(gpucore.ShapeError, match="0D or 1D target"):
        F.cosine_embedding_loss(a, a, gpucore.ones(3, 1))
    with pytest.raises(gpucore.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(a, gpucore.zeros(3, 5), gpucore.ones(3))
    with pytest.raises(gpucore.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(a, a, gpucore.ones(2))
    with pytest.raises(gpucore.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(gpucore.zeros(4), gpucore.zeros(4), gpucore.ones(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_loss(reduction):
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    check_op(
        lambda a, b: F.margin_ranking_loss(a, b, like(y, a), 0.5, reduction=reduction),
        lambda a, b: reduce(np.maximum(-y * (a - b) + 0.5, 0), reduction),
        [(6,), (6,)],
    )
    with pytest.raises(gpucore.ShapeError, match="margin_ranking_loss.*same number of dims"):
        F.margin_ranking_loss(gpucore.zeros(3), gpucore.zeros(3, 1), gpucore.ones(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_hinge_embedding_loss(reduction):
    y = np.array([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])
    check_op(
        lambda x: F.hinge_embedding_loss(x, like(y, x), 1.5, reduction=reduction),
        lambda x: reduce(np.where(y == 1, x, np.maximum(1.5 - x, 0)), reduction),
        [(2, 3)],
    )
    with pytest.raises(gpucore.ShapeError, match="hinge_embedding_loss"):
        F.hinge_embedding_loss(gpucore.zeros(3), gpucore.ones(4))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2.0, False), (1.0, False), (2.0, True), (3.0, True)])
def test_triplet_margin_loss(reduction, p, swap):
    def np_fn(a, pos, neg):
        dp = np_norm(a - pos + 1e-6, p, -1)
        dn = np_norm(a - neg + 1e-6, p, -1)
        if swap:
            dn = np.minimum(dn, np_norm(pos - neg + 1e-6, p, -1))
        return reduce(np.maximum(0.8 + dp - dn, 0), reduction)

    check_op(
        lambda a, pos, neg: F.triplet_margin_loss(
            a, pos, neg, 0.8, p, swap=swap, reduction=reduction
        ),
        np_fn,
        [(5, 4), (5, 4), (5, 4)],
    )


def test_triplet_margin_loss_errors():
    with pytest.raises(gpucore.ShapeError, match="same number of dimensions.*anchor 2D"):
        F.triplet_margin_loss(gpucore.zeros(3, 4), gpucore.zeros(4), gpucore.zeros(3, 4))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_loss(
            gpucore.zeros(3, 4), gpucore.zeros(3, 4), gpucore.zeros(3, 4), margin=0.0
        )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss(reduction):
    y = np.array([[1.0, -1.0, 1.0, 1.0], [-1.0, -1.0, 1.0, -1.0]])
    check_op(
        lambda x: F.soft_margin_loss(x, like(y, x), reduction=reduction),
        lambda x: reduce(np.logaddexp(0, -y * x), reduction),
        [(2, 4)],
        low=-5,
        high=5,
    )
    big = F.soft_margin_loss(gpucore.tensor([-100.0]), gpucore.tensor([1.0]))
    assert_close(big, 100.0)
    with pytest.raises(gpucore.ShapeError, match="soft_margin_loss"):
        F.soft_margin_loss(gpucore.zeros(3), gpucore.ones(4))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin_loss(reduction, weighted):
    y = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    w = np.array([0.5, 1.0, 2.0])

    def np_fn(x):
        loss = -(y * -np.logaddexp(0, -x) + (1 - y) * -np.logaddexp(0, x))
        if weighted:
            loss = loss * w
        return reduce(loss.mean(-1), reduction)

    def gc_fn(x):
        return F.multilabel_soft_margin_loss(
            x, like(y, x), like(w, x) if weighted else None, reduction=reduction
        )

    check_op(gc_fn, np_fn, [(4, 3)])


def test_loss_reduction_errors():
    x = gpucore.zeros(2, 3)
    for fn, args in (
        (F.soft_margin_loss, (x, x)),
        (F.hinge_embedding_loss, (x, x)),
        (F.multilabel_soft_margin_loss, (x, x)),
        (F.poisson_nll_loss, (x, x)),
        (F.margin_ranking_loss, (x, x, x)),
        (F.triplet_margin_loss, (x, x, x)),
    ):
        with pytest.raises(ValueError, match=f"{fn.__name__}.*reduction"):
            fn(*args, reduction="avg")
        with pytest.raises(TypeError, match=f"{fn.__name__}.*deprecated"):
            fn(*args, size_average=True)
