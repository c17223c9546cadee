"""sort, argsort, msort, topk, searchsorted, bucketize against PyTorch (stable order, NaN the
greatest, descending, dims, int64 indices, gradients) and their errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


def _ties(*shape, seed=0):
    return np.round(np.random.default_rng(seed).uniform(-2, 2, shape))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_torch(dim, descending):
    same_as_torch(lambda m, x: m.sort(x, dim=dim, descending=descending), _rand(4, 6, seed=1))
    same_as_torch(lambda m, x: x.sort(dim, descending), _rand(3, 5, 2, seed=2))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_ties(descending):
    x = _ties(3, 40, seed=3)
    same_as_torch(lambda m, x: m.sort(x, descending=descending, stable=True), x, grad=False)
    same_as_torch(lambda m, x: m.argsort(x, descending=descending, stable=True), x, grad=False)


@pytest.mark.parametrize("descending", [False, True])
def test_nan_is_the_greatest(descending):
    x = _rand(2, 9, seed=4)
    x[0, [1, 5]] = np.nan
    x[1, 0] = np.nan
    x[1, 3] = np.inf
    same_as_torch(lambda m, x: m.sort(x, dim=1, descending=descending, stable=True), x, grad=False)
    same_as_torch(lambda m, x: m.topk(x, 3, 1, largest=not descending), x, grad=False)


def test_sort_int_and_bool_tensors():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(5).integers(-5, 5, (4, 7))
    v, i = gpucore.tensor(a).sort(dim=1, descending=True, stable=True)
    tv, ti = torch.tensor(a).sort(dim=1, descending=True, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert v.dtype is gpucore.int64 and i.dtype is gpucore.int64
    b = a > 0
    np.testing.assert_array_equal(
        gpucore.tensor(b).sort(stable=True).indices.numpy(),
        torch.tensor(b).sort(stable=True).indices.numpy(),
    )


def test_sort_0d_and_empty():
    same_as_torch(lambda m, x: m.sort(x), np.array(1.5))
    same_as_torch(lambda m, x: m.sort(x, 0), np.zeros((0, 3)), grad=False)
    same_as_torch(lambda m, x: m.msort(x), _rand(5, 3, seed=6))


@pytest.mark.parametrize("k,dim,largest", [(1, 1, True), (3, 1, False), (4, 0, True), (0, 1, True)])
def test_topk_matches_torch(k, dim, largest):
    same_as_torch(lambda m, x: m.topk(x, k, dim, largest), _rand(4, 7, seed=7))


def test_topk_large_rows_take_the_partition_path():
    x = _rand(3, 5000, seed=8)
    same_as_torch(lambda m, x: x.topk(5), x, check_fd=False)
    same_as_torch(lambda m, x: x.topk(5, largest=False), x, check_fd=False)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_at_the_kth_value_take_the_lowest_indices(largest):
    # the partition path (4k < n) keeps the full stable sort's tie rule (ONNX's TopK requires it)
    x = _ties(4, 3000, seed=9)
    x[1, ::5] = np.nan
    x[2, :] = 0.0
    x[2, 7::3] = -0.0
    from gpucore.ops.sorting import _np_topk

    for k in (1, 6, 40):
        v, i = gpucore.topk(gpucore.tensor(x), k, 1, largest)
        want_v, want_i = _np_topk(x, k, 1, largest)
        np.testing.assert_array_equal(i.numpy(), want_i)
        np.testing.assert_array_equal(v.numpy(), want_v)


def test_topk_errors_name_the_op():
    x = gpucore.zeros(3, 4)
    with pytest.raises(IndexError, match="topk.*k 5"):
        x.topk(5)
    with pytest.raises(IndexError, match="topk"):
        x.topk(1, dim=2)
    with pytest.raises(IndexError, match="sort"):
        x.sort(dim=3)


def test_sort_and_topk_results_are_named_tuples():
    x = gpucore.tensor([[3.0, 1.0, 2.0]])
    v, i = x.sort()
    assert x.sort().values.tolist() == v.tolist() == [[1.0, 2.0, 3.0]]
    assert x.topk(1).indices.tolist() == [[0]]


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_matches_torch(right):
    torch = pytest.importorskip("torch")
    seq = np.array([0.0, 0.5, 0.5, 1.0, 2.0])
    vals = np.array([[0.5, -1.0, 3.0], [1.0, 0.7, 0.0]])
    for args in ((seq, vals), (np.sort(_rand(2, 6, seed=9), 1), vals)):
        g = gpucore.searchsorted(gpucore.tensor(args[0]), gpucore.tensor(args[1]), right=right)
        t = torch.searchsorted(torch.tensor(args[0]), torch.tensor(args[1]), right=right)
        np.testing.assert_array_equal(g.numpy(), t.numpy())
        assert g.dtype is gpucore.int64
    g = gpucore.searchsorted(gpucore.tensor(seq), 0.5, side="right", out_int32=True)
    assert g.shape == () and g.item() == 3 and g.dtype is gpucore.int32
    s = torch.tensor([3.0, 1.0, 2.0])
    order = s.argsort()
    g = gpucore.searchsorted(
        gpucore.tensor(s.numpy()), gpucore.tensor([2.5]), sorter=gpucore.tensor(order.numpy())
    )
    assert g.tolist() == torch.searchsorted(s, torch.tensor([2.5]), sorter=order).tolist()


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_matches_torch(right):
    torch = pytest.importorskip("torch")
    b = np.array([1.0, 3.0, 5.0, 7.0])
    x = np.array([[1.0, 3.0, 9.0], [6.0, 0.0, 5.0]])
    g = gpucore.bucketize(gpucore.tensor(x), gpucore.tensor(b), right=right)
    t = torch.bucketize(torch.tensor(x), torch.tensor(b), right=right)
    np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_searchsorted_errors():
    with pytest.raises(ValueError, match="searchsorted.*shapes"):
        gpucore.searchsorted(gpucore.zeros(2, 3), gpucore.zeros(3, 3))
    with pytest.raises(TypeError, match="searchsorted"):
        gpucore.searchsorted(gpucore.zeros(3), "a")


def test_sort_on_vulkan(vulkan):
    x = gpucore.tensor(_rand(4, 6, seed=10), dtype=gpucore.float32, device="vulkan")
    v, i = x.sort(1, descending=True)
    ref = np.sort(x.numpy(), 1)[:, ::-1]
    np.testing.assert_array_equal(v.numpy(), ref)
    tv, ti = x.topk(2)
    np.testing.assert_array_equal(tv.numpy(), ref[:, :2])


def test_strided_inputs_and_second_derivatives():
    a = _rand(5, 4, seed=11)
    same_as_torch(lambda m, x: x.t().sort(1, descending=True), a)
    same_as_torch(lambda m, x: x[:, ::2].topk(2, 0), a)
    t = gpucore.tensor(a, requires_grad=True)
    assert gpucore.autograd.gradgradcheck(lambda t: t.sort(0).values ** 2, (t,))
    assert gpucore.autograd.gradgradcheck(lambda t: t.topk(2).values ** 2, (t,))


@pytest.mark.parametrize("k,dim,keepdim", [(1, 1, False), (3, 1, True), (2, 0, False)])
def test_kthvalue_matches_torch(k, dim, keepdim):
    same_as_torch(lambda m, x: m.kthvalue(x, k, dim, keepdim), _rand(4, 5, seed=12))
    with pytest.raises(IndexError, match="kthvalue.*k 6"):
        gpucore.zeros(2, 5).kthvalue(6)


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_and_nanmedian_match_torch(name):
    for n in (5, 6):  # odd and even counts: the lower median
        same_as_torch(lambda m, x: getattr(x, name)(1), _rand(3, n, seed=13))
        same_as_torch(lambda m, x: getattr(m, name)(x, 0, keepdim=True), _rand(n, 2, seed=14))
        same_as_torch(lambda m, x: getattr(m, name)(x), _rand(3, n, seed=15))
    x = _rand(4, 6, seed=16)
    x[0, [1, 4]] = np.nan
    x[2, 1:] = np.nan
    same_as_torch(lambda m, x: getattr(m, name)(x, 1), x, grad=False)
    x[2, :] = np.nan  # an all-NaN row: NaN (which NaN's index PyTorch gives is unspecified)
    assert np.isnan(getattr(gpucore.tensor(x), name)(1).values[2].item())
    same_as_torch(lambda m, x: getattr(x, name)(), x, grad=False)
    same_as_torch(lambda m, x: getattr(m, name)(x), np.arange(7), grad=False)
