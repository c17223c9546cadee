"""The thin PyTorch forms of gpucore/ops/shorthands.py, the new aliases (swapdims, moveaxis,
concatenate, not_equal), the constants and set_float32_matmul_precision, and gpucore.linalg's
matmul / diagonal / vecdot / matrix_power: against PyTorch (values, shapes, dtypes), float64
numpy where PyTorch is missing, gradients, and bad arguments."""

import numpy as np
import pytest
from helpers import check_grad
from torch_compare import same_as_torch

import gpucore as gc
from gpucore.errors import ArgumentTypeError, DTypeError, GpucoreIndexError, ShapeError

torch = pytest.importorskip("torch")

_A = np.arange(24.0).reshape(2, 3, 4) / 7 - 1.5
_CASES = {
    "ravel": lambda m, t: m.ravel(t.permute(2, 0, 1)),
    "select": lambda m, t: m.select(t, 1, -1),
    "select_method": lambda m, t: t.select(2, 0),
    "take": lambda m, t: m.take(t, m.tensor([[0, -1], [5, 23]])),
    "positive": lambda m, t: m.positive(t),
    "isposinf": lambda m, t: m.isposinf(m.tensor([1.0, float("inf"), -float("inf")])),
    "isneginf": lambda m, t: m.isneginf(m.tensor([1.0, float("inf"), -float("inf")])),
    "isposinf_int": lambda m, t: m.isposinf(m.tensor([1, 2])),
    "inner": lambda m, t: m.inner(t, t[0]),
    "inner_scalar": lambda m, t: m.inner(t, m.tensor(2.0, dtype=t.dtype)),
    "vdot": lambda m, t: m.vdot(t[0, 0], t[1, 1]),
    "addmv": lambda m, t: m.addmv(t[0, :, 0], t[0], t[0, 0], beta=2, alpha=0.5),
    "addr": lambda m, t: m.addr(t[0], t[0, :, 0], t[0, 0], beta=0, alpha=3),
    "rsub": lambda m, t: m.rsub(t, 2, alpha=3),
    "tensor_split": lambda m, t: m.tensor_split(t, 3, dim=2),
    "tensor_split_idx": lambda m, t: m.tensor_split(t, [1, 5, 2], dim=2),
    "tensor_split_method": lambda m, t: t.tensor_split(2, 1),
    "matrix_power": lambda m, t: m.matrix_power(t[:, :3, :3], 3),
    "matrix_power_neg": lambda m, t: m.matrix_power(t[:, :3, :3] + m.eye(3) * 5, -2),
    "matrix_power_0": lambda m, t: t[0, :3, :3].matrix_power(0),
    "unfold": lambda m, t: t.unfold(2, 2, 1),
    "unfold_step": lambda m, t: t.unfold(1, 2, 2),
    "unfold_0d": lambda m, t: m.tensor(3.0).unfold(0, 1, 1),
    "swapdims": lambda m, t: m.swapdims(t, 0, 2),
    "moveaxis": lambda m, t: t.moveaxis(0, -1),
    "concatenate": lambda m, t: m.concatenate([t, t], 1),
    "not_equal": lambda m, t: m.not_equal(t, t[0, 0, 0]),
    "detach": lambda m, t: m.detach(t),
    "linalg_matmul": lambda m, t: m.linalg.matmul(t, t.mT),
    "linalg_diagonal": lambda m, t: m.linalg.diagonal(t, offset=1),
    "linalg_vecdot": lambda m, t: m.linalg.vecdot(t, t[0], dim=1),
    "linalg_matrix_power": lambda m, t: m.linalg.matrix_power(t[:, :3, :3], 2),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_against_torch(case):
    fn = _CASES[case]
    ours, theirs = fn(gc, gc.tensor(_A)), fn(torch, torch.tensor(_A))
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_tensor_predicates():
    t, tt = gc.tensor(_A), torch.tensor(_A)
    assert t.ndimension() == tt.ndimension() == 3
    for dt in ("uint8", "int8", "int32", "float32", "bool"):
        assert (
            gc.zeros(1, dtype=getattr(gc, dt)).is_signed()
            == torch.zeros(1, dtype=getattr(torch, dt)).is_signed()
        )
    assert t.is_same_size(gc.zeros(2, 3, 4)) and not t.is_same_size(gc.zeros(3))
    assert t.is_inference() is False
    for lib in (gc, torch):
        leaf = lib.ones(2, requires_grad=True)
        y, z = leaf * 2, leaf * 3
        y.retain_grad()
        assert (leaf.retains_grad, y.retains_grad, z.retains_grad) == (False, True, False)


def test_gradients():
    check_grad(lambda x: gc.take(x, gc.tensor([3, -1, 0, 3])), _A)
    check_grad(lambda x: x.unfold(2, 3, 1), _A)
    check_grad(lambda x: gc.matrix_power(x[:, :3, :3], 3), _A)
    check_grad(lambda x, v: gc.addmv(v, x[0, :, :3], v, beta=0.5, alpha=2), _A, np.ones(3) / 3)
    check_grad(lambda x: gc.select(x, 2, 1) * 2, _A)


def test_constants_and_precision_switch():
    assert gc.pi == torch.pi and gc.e == torch.e and gc.inf == torch.inf
    assert gc.nan != gc.nan and gc.newaxis is None
    assert gc.get_float32_matmul_precision() == "highest"
    gc.set_float32_matmul_precision("high")
    try:
        assert gc.get_float32_matmul_precision() == "high"
    finally:
        gc.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match="precision"):
        gc.set_float32_matmul_precision("fast")
    assert gc.GradScaler is gc.amp.GradScaler


def test_bad_arguments():
    t = gc.tensor(_A)
    with pytest.raises(GpucoreIndexError, match="select"):
        gc.select(t, 0, 2)
    with pytest.raises(GpucoreIndexError, match="take"):
        gc.take(t, gc.tensor([24]))
    with pytest.raises(DTypeError, match="take"):
        gc.take(t, gc.tensor([1.0]))
    with pytest.raises(DTypeError, match="positive"):
        gc.positive(gc.tensor([True]))
    with pytest.raises(ShapeError, match="unfold"):
        t.unfold(2, 5, 1)
    with pytest.raises(ShapeError, match="unfold"):
        t.unfold(2, 2, 0)
    with pytest.raises(ShapeError, match="matrix_power"):
        gc.matrix_power(t, 2)
    with pytest.raises(ArgumentTypeError, match="matrix_power"):
        gc.matrix_power(t[0, :3, :3], 1.5)
    with pytest.raises(ValueError, match="sections"):
        gc.tensor_split(t, 0)
    with pytest.raises(ShapeError, match="inner"):
        gc.inner(t, gc.zeros(3))


def test_index_put_unique_consecutive_trapezoid_against_torch():
    from helpers import same_as_torch

    z = np.zeros((4, 3))
    mask = np.ones((4, 3), bool)
    mask[1] = False

    def f64(m, v):
        return m.tensor(v, dtype=m.float64)

    cases = [
        lambda m: m.index_put(m.tensor(z), (m.tensor([0, 2, 0, -1]),), f64(m, [1, 2, 3]), True),
        lambda m: m.index_put(m.tensor(z), (m.tensor([1, 3]),), f64(m, [9])),
        lambda m: m.tensor(z).index_put_(
            (m.tensor([0, 1, 0]), m.tensor([2, 2, 2])), f64(m, 5), accumulate=True
        ),
        lambda m: m.index_put(m.tensor(z), (m.tensor(mask),), f64(m, 7), accumulate=True),
    ]
    for c in cases:
        same_as_torch(c(gc), c(torch))
    a = np.array([[1, 1, 2, 2, 3, 1, 1, 2], [1, 1, 2, 2, 3, 1, 1, 2]])
    kws = [{}, {"return_inverse": True, "return_counts": True}]
    kws += [{"dim": 1, "return_counts": True}, {"dim": 0, "return_inverse": True}]
    for kw in kws:
        ours, theirs = (
            gc.unique_consecutive(gc.tensor(a), **kw),
            torch.unique_consecutive(torch.tensor(a), **kw),
        )
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        for x, y in zip(ours, theirs, strict=True):
            same_as_torch(x, y)
    y = np.random.default_rng(0).normal(size=(3, 5))
    x = np.sort(np.random.default_rng(1).normal(size=5))
    for name in ("trapezoid", "trapz", "cumulative_trapezoid"):
        f, g = getattr(gc, name), getattr(torch, name)
        for args, kw in (((), {}), ((), {"dx": 0.5}), ((), {"dim": 0}), ((x,), {}), ((y * 2,), {})):
            ours = f(gc.tensor(y), *(gc.tensor(v) for v in args), **kw)
            theirs = g(torch.tensor(y), *(torch.tensor(v) for v in args), **kw)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    check_grad(lambda t: gc.trapezoid(t, dx=0.3), y)
    check_grad(lambda t, v: gc.index_put(t, (gc.tensor([0, 2, 0]),), v, True), z, np.ones((3, 3)))
    with pytest.raises(DTypeError, match="index_put"):
        gc.index_put(gc.tensor(z), (gc.tensor([0]),), gc.tensor([1.0]), accumulate=True)


def test_absolute_and_adjoint_as_torch():
    x = np.random.default_rng(21).uniform(-2, 2, (2, 3, 4))
    same_as_torch(lambda m, a: m.absolute(a), x)
    same_as_torch(lambda m, a: a.absolute(), x)
    same_as_torch(lambda m, a: m.adjoint(a), x)
    same_as_torch(lambda m, a: a.adjoint(), x[0])
    y = gc.tensor(x)
    assert y.absolute_() is y
    np.testing.assert_array_equal(y.numpy(), np.abs(x))
    v = gc.tensor(x)
    v.adjoint()[0, 0, 0] = 9.0  # a view: the write lands in v
    assert v.numpy()[0, 0, 0] == 9.0
    with pytest.raises(ShapeError, match="adjoint"):
        gc.adjoint(gc.zeros(3))


def test_real_tensor_forms_unsafe_splits_and_nonzero_static_as_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(22).uniform(-2, 2, (3, 4))
    same_as_torch(lambda m, a: m.unsafe_chunk(a, 2, 1), x)
    same_as_torch(lambda m, a: a.unsafe_split(2), x)
    same_as_torch(lambda m, a: m.unsafe_split_with_sizes(a, [1, 3], 1), x)
    same_as_torch(lambda m, a: m.isreal(a), x, grad=False)
    g, t = gc.tensor(x), torch.tensor(x)
    assert g.resolve_conj() is g and gc.resolve_neg(g) is g
    assert gc.is_conj(g) is t.is_conj() is False and g.is_neg() is t.is_neg() is False
    assert gc.typename(gc.tensor(x).float()) == torch.typename(t.float()).replace(
        "torch", "gpucore"
    )
    assert gc.typename(3) == torch.typename(3) == "int"
    assert gc.typename(gc.nn.Linear) == "gpucore.nn.modules.linear.Linear"
    z = np.array([[0, 1, 0], [2, 0, 3]])
    for size, fill in ((0, -1), (2, -1), (5, -7)):
        same_as_torch(
            lambda m, a, s=size, f=fill: m.nonzero_static(a, size=s, fill_value=f), z, grad=False
        )
    with pytest.raises(ValueError, match="size"):
        gc.nonzero_static(gc.tensor(z), size=-1)


def test_addmm_in_place_as_torch():
    rng = np.random.default_rng(23)
    c, a, b = rng.uniform(-1, 1, (2, 4)), rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 4))

    def f(m, c, a, b):
        y = c * 1.0  # a non-leaf, modified in place
        r = y.addmm_(a, b, beta=0.5, alpha=2.0)
        assert r is y
        return y

    same_as_torch(f, c, a, b)
