"""The joining and reshaping compositions (gpucore/ops/stacking.py) and the products
(gpucore/ops/products.py) against PyTorch: values, shapes, gradients, errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


A, B, V = _rand(2, 3, seed=1), _rand(2, 3, seed=2), _rand(3, seed=3)


def test_stacks_as_torch():
    same_as_torch(lambda m, a, b: m.vstack([a, b]), A, V)
    same_as_torch(lambda m, a, b: m.row_stack((a, b)), A, B)
    same_as_torch(lambda m, a, b: m.hstack([a, b]), A, B)
    same_as_torch(lambda m, a, b: m.hstack([a, b]), V, V)
    same_as_torch(lambda m, a, b: m.column_stack([a, b]), V, A.T)
    same_as_torch(lambda m, a, b: m.dstack([a, b]), A, B)
    for f in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for x in (np.array(2.0), V, A):
            same_as_torch(lambda m, x, f=f: getattr(m, f)(x), x)
        g = getattr(gpucore, f)(gpucore.tensor(V), gpucore.tensor(A))
        assert isinstance(g, tuple) and len(g) == 2


def test_tile_split_unflatten_type_as_as_torch():
    same_as_torch(lambda m, a: m.tile(a, (2,)), A)
    same_as_torch(lambda m, a: a.tile((2, 1, 3)), A)
    same_as_torch(lambda m, a: m.split_with_sizes(a, [1, 2], 1), A)
    same_as_torch(lambda m, a: a.unflatten(1, (3, 1)), A)
    same_as_torch(lambda m, a: m.unflatten(a, -1, (-1, 1)), A)
    same_as_torch(lambda m, a: a.type_as(a.float()), A, grad=False)
    with pytest.raises(ValueError, match="split"):
        gpucore.split_with_sizes(gpucore.tensor(A), [1, 1], 1)
    with pytest.raises(ValueError, match="unflatten"):
        gpucore.tensor(A).unflatten(1, (2, 2))


def test_block_diag_diag_embed_diagflat_as_torch():
    same_as_torch(lambda m, a, v, s: m.block_diag(a, v, s), A, V, np.array(5.0))
    for off in (-2, 0, 1):
        same_as_torch(lambda m, a, o=off: m.diag_embed(a, o), A)
        same_as_torch(lambda m, a, o=off: m.diagflat(a, o), A)
    same_as_torch(lambda m, a: m.diag_embed(a, 1, 0, 2), A)
    same_as_torch(lambda m, a: a.diag_embed(-1, 2, 0), A)
    x = np.array([np.nan, np.inf, 1.0])  # no NaN spills off the diagonal
    same_as_torch(lambda m, a: m.diag_embed(a), x, grad=False)


def test_cartesian_prod_combinations_as_torch():
    same_as_torch(lambda m, a, b: m.cartesian_prod(a, b), V, V[:2])
    same_as_torch(lambda m, a: m.cartesian_prod(a), V)
    for r in (1, 2, 3, 4):
        for rep in (False, True):
            same_as_torch(lambda m, a, r=r, rep=rep: m.combinations(a, r, rep), V)


def test_products_as_torch():
    x, y = _rand(4, 3, seed=4), _rand(4, 3, seed=5)
    same_as_torch(lambda m, a, b: m.cross(a, b, dim=1), x, y)
    same_as_torch(lambda m, a, b: m.kron(a, b), A, x)
    same_as_torch(lambda m, a, b: m.kron(a, b), V, A)
    same_as_torch(lambda m, a, b: m.tensordot(a, b, 1), A, x.T)
    same_as_torch(lambda m, a, b: m.tensordot(a, b, ([0, 1], [0, 1])), A, B)
    same_as_torch(lambda m, a, b: m.tensordot(a, b, dims=([1], [1])), A, x)
    same_as_torch(lambda m, a, b: m.dot(a, b), V, V[::-1].copy())
    same_as_torch(lambda m, a, b: a.mv(b), A, V)
    np.testing.assert_allclose(gpucore.kron(gpucore.tensor(A), gpucore.tensor(x)), np.kron(A, x))
    np.testing.assert_allclose(
        gpucore.cross(gpucore.tensor(x), gpucore.tensor(y), dim=1).numpy(), np.cross(x, y)
    )
    with pytest.raises(ValueError, match="dot"):
        gpucore.dot(gpucore.tensor(V), gpucore.tensor(V[:2]))
    with pytest.raises(TypeError, match="dot"):
        gpucore.dot(gpucore.tensor(V), gpucore.tensor(V).float())
