"""Distances, functional and modules: cosine_similarity and pairwise_distance (p-norms,
keepdim, broadcasting) against numpy float64, errors, and PyTorch's modules where installed."""

import numpy as np
import pytest
from helpers import check_op
from nn_cases import DISTANCE_CASES
from nn_checks import module_tests
from nn_refs import np_norm

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def np_cos(a, b, axis, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(axis, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(axis, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(axis)


def test_cosine_similarity():
    check_op(F.cosine_similarity, lambda a, b: np_cos(a, b, 1), [(4, 6), (4, 6)])
    check_op(
        lambda a, b: F.cosine_similarity(a, b, dim=-1),
        lambda a, b: np_cos(a, b, -1),
        [(3, 2, 5), (2, 5)],
    )  # broadcast
    check_op(
        lambda a, b: F.cosine_similarity(a, b, dim=0), lambda a, b: np_cos(a, b, 0), [(5,), (5,)]
    )
    with pytest.raises(gpucore.ShapeError, match="cosine_similarity"):
        F.cosine_similarity(gpucore.zeros(2, 3), gpucore.zeros(2, 4))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance(p, keepdim):
    check_op(
        lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
        lambda a, b: np_norm(a - b + 1e-6, p, -1, keepdim),
        [(4, 5), (4, 5)],
    )
    check_op(
        lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
        lambda a, b: np_norm(a - b + 1e-6, p, -1, keepdim),
        [(4, 5), (5,)],
    )
    with pytest.raises(gpucore.ShapeError, match="pairwise_distance"):
        F.pairwise_distance(gpucore.zeros(2, 3), gpucore.zeros(2, 4))


# ============================================================================= modules
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # distances
        (lambda: nn.CosineSimilarity()(z(2, 3), z(2, 4)), gpucore.ShapeError, "broadcastable"),
        (lambda: nn.PairwiseDistance()(z(2, 3), z(2, 4)), gpucore.ShapeError, "broadcastable"),
    ]


MODULE_ERRORS = _module_errors()


(
    test_module_forward,
    test_module_input_gradients,
    test_module_errors,
    test_module_match_torch,
) = module_tests(DISTANCE_CASES, MODULE_ERRORS)
