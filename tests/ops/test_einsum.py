"""einsum against PyTorch: products, contractions, batch dims, diagonals, traces, implicit
output, ellipsis broadcasting, three operands, the sublist form, gradients and errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _r(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).uniform(-2, 2, shape)


CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...i,...i->...", [(2, 1, 4), (3, 4)]),
    ("b...,b->...", [(2, 3, 4), (2,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("iij->j", [(3, 3, 2)]),
    ("ijk,ikj->i", [(2, 3, 4), (2, 4, 3)]),
    ("i,jk->", [(2,), (3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_torch(eq, shapes):
    arrays = [_r(*s, seed=i) for i, s in enumerate(shapes)]
    same_as_torch(lambda m, *xs: m.einsum(eq, *xs), *arrays)


def test_operand_list_spaces_and_sublist_form():
    a, b = _r(3, 4), _r(4, 5, seed=1)
    same_as_torch(lambda m, a, b: m.einsum("ij , jk -> ik", [a, b]), a, b)
    same_as_torch(lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), a, b)
    same_as_torch(lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2]), a, b)


def test_errors_name_einsum():
    a = gpucore.zeros(3, 4)
    with pytest.raises(ValueError, match="einsum.*2 operands"):
        gpucore.einsum("ij,jk->ik", a)
    with pytest.raises(ValueError, match="einsum.*subscripts"):
        gpucore.einsum("ijk->i", a)
    with pytest.raises(ValueError, match="einsum.*sizes 4 and 5"):
        gpucore.einsum("ij,jk->ik", a, gpucore.zeros(5, 2))
    with pytest.raises(ValueError, match="einsum.*output subscript"):
        gpucore.einsum("ij->iz", a)
    with pytest.raises(TypeError, match="einsum.*one dtype"):
        gpucore.einsum("ij,jk", a, gpucore.zeros(4, 2, dtype=gpucore.float64))


def test_einsum_on_vulkan(vulkan):
    a = _r(2, 64, 32).astype(np.float32)
    b = _r(2, 32, 48, seed=1).astype(np.float32)
    x, y = gpucore.tensor(a, device="vulkan"), gpucore.tensor(b, device="vulkan")
    out = gpucore.einsum("bij,bjk->bik", x, y)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)
