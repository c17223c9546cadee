"""flip/fliplr/flipud, roll, rot90, repeat, repeat_interleave, meshgrid, tril/triu and
tril_indices/triu_indices, diagonal (a view) and diag against PyTorch: values, shapes, gradients,
in-place forms, errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (-1,), ()])
def test_flip(dims):
    same_as_torch(lambda m, x: m.flip(x, dims), _rand(2, 3, 4, seed=1))


def test_flip_and_repeat_keywords():
    """PyTorch's documented keyword names: torch.flip(x, dims=...), x.repeat(repeats=...)."""
    x = np.arange(24.0).reshape(2, 3, 4)
    g = gpucore.tensor(x)
    np.testing.assert_array_equal(gpucore.flip(g, dims=[0, 2]).numpy(), x[::-1, :, ::-1])
    np.testing.assert_array_equal(g.flip(dims=(1,)).numpy(), x[:, ::-1])
    np.testing.assert_array_equal(g.repeat(repeats=(1, 2, 1)).numpy(), np.tile(x, (1, 2, 1)))
    with pytest.raises(gpucore.ArgumentTypeError, match=r"flip\(\): got dims both"):
        g.flip(0, dims=(1,))


def test_fliplr_flipud_rot90():
    x = _rand(3, 4, seed=2)
    same_as_torch(lambda m, x: m.fliplr(x), x)
    same_as_torch(lambda m, x: x.flipud(), x)
    for k in (-1, 0, 1, 2, 3, 5):
        same_as_torch(lambda m, x, k=k: m.rot90(x, k, (0, 1)), x)
    same_as_torch(lambda m, x: x.rot90(1, [2, 0]), _rand(2, 3, 4, seed=3))


@pytest.mark.parametrize(
    "shifts,dims", [(1, 0), (-2, 1), (7, 1), ((1, 2), (0, 1)), (3, None), (0, 0), ((1, -1), (1, 1))]
)
def test_roll(shifts, dims):
    same_as_torch(lambda m, x: m.roll(x, shifts, dims), _rand(3, 5, seed=4))


@pytest.mark.parametrize("reps", [(2, 1), (1, 3), (2, 2, 2), (0, 1), (3, 1, 1)])
def test_repeat(reps):
    same_as_torch(lambda m, x: x.repeat(*reps), _rand(2, 3, seed=5))
    same_as_torch(lambda m, x: x.repeat(reps), _rand(2, 3, seed=6))


def test_repeat_0d_and_errors():
    same_as_torch(lambda m, x: x.repeat(3, 2), np.array(1.5))
    with pytest.raises(ValueError, match="repeat.*smaller"):
        gpucore.zeros(2, 3).repeat(2)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave_int(dim):
    same_as_torch(lambda m, x: m.repeat_interleave(x, 2, dim), _rand(2, 3, seed=7))
    same_as_torch(lambda m, x: x.repeat_interleave(3, dim=dim), _rand(2, 3, seed=8))


def test_repeat_interleave_tensor_counts():
    counts = np.array([1, 0, 3])
    same_as_torch(lambda m, x, c: m.repeat_interleave(x, c, 1), _rand(2, 3, seed=9), counts)
    same_as_torch(lambda m, x, c: x.repeat_interleave(c, dim=0), _rand(3, 2, seed=10), counts)
    same_as_torch(lambda m, c: m.repeat_interleave(c), counts, grad=False)
    same_as_torch(
        lambda m, x, c: m.repeat_interleave(x, c, 0, output_size=4), _rand(3, seed=11), counts
    )
    with pytest.raises(ValueError, match="repeat_interleave.*3 counts"):
        gpucore.zeros(4).repeat_interleave(gpucore.tensor([1, 2, 3]), dim=0)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    a, b, c = _rand(3, seed=12), _rand(4, seed=13), _rand(2, seed=14)
    same_as_torch(lambda m, a, b: m.meshgrid(a, b, indexing=indexing), a, b)
    same_as_torch(lambda m, a, b, c: m.meshgrid([a, b, c], indexing=indexing), a, b, c)
    same_as_torch(lambda m, a: m.meshgrid(a, indexing=indexing), a)
    g = gpucore.meshgrid(gpucore.tensor(a), gpucore.tensor(b))
    assert tuple(g[0].shape) == (3, 4)


@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
def test_tril_triu(diagonal):
    x = _rand(2, 4, 5, seed=15)
    same_as_torch(lambda m, x: m.tril(x, diagonal), x)
    same_as_torch(lambda m, x: x.triu(diagonal), x)
    same_as_torch(lambda m, x: x.triu(diagonal=diagonal), _rand(5, 3, seed=16))


def test_tril_triu_int_bool_inplace_and_errors():
    torch = pytest.importorskip("torch")
    a = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(gpucore.tensor(a).tril().numpy(), torch.tensor(a).tril())
    b = a % 3 == 0
    np.testing.assert_array_equal(gpucore.tensor(b).triu(1).numpy(), torch.tensor(b).triu(1))
    g, t = gpucore.tensor(a.astype(float)), torch.tensor(a.astype(float))
    g.tril_(-1)
    t.tril_(-1)
    np.testing.assert_array_equal(g.numpy(), t.numpy())
    with pytest.raises(ValueError, match="tril.*2 dims"):
        gpucore.zeros(3).tril()
    x = gpucore.tensor([[1.0, float("nan")], [2.0, 3.0]])
    assert x.tril().tolist() == [[1.0, 0.0], [2.0, 3.0]]  # masked NaN does not leak


@pytest.mark.parametrize("args", [(3, 3), (4, 3, 1), (3, 5, -1), (0, 3), (2, 4, 10)])
def test_tril_triu_indices(args):
    torch = pytest.importorskip("torch")
    for name in ("tril_indices", "triu_indices"):
        g = getattr(gpucore, name)(*args)
        t = getattr(torch, name)(*args)
        np.testing.assert_array_equal(g.numpy(), t.numpy())
        assert g.dtype is gpucore.int64


def test_on_vulkan(vulkan):
    a = _rand(3, 70, seed=17).astype(np.float32)
    x = gpucore.tensor(a, device="vulkan")
    np.testing.assert_array_equal(x.tril(2).numpy(), np.tril(a, 2))
    np.testing.assert_array_equal(x.flip(1).numpy(), a[:, ::-1])
    np.testing.assert_array_equal(x.roll(5, 1).numpy(), np.roll(a, 5, 1))
    np.testing.assert_array_equal(x.repeat(2, 1).numpy(), np.tile(a, (2, 1)))


@pytest.mark.parametrize("offset", [0, 1, -1, 3, -4, 9])
def test_diagonal(offset):
    same_as_torch(lambda m, x: m.diagonal(x, offset), _rand(3, 4, seed=18))
    same_as_torch(lambda m, x: x.diagonal(offset, 2, 0), _rand(2, 3, 4, seed=19))
    same_as_torch(lambda m, x: x.diagonal(offset=offset, dim1=-1, dim2=1), _rand(2, 3, 4, seed=20))


@pytest.mark.parametrize("offset,dims", [(0, (0, 1)), (1, (0, 1)), (-2, (1, 0)), (1, (2, 0))])
def test_diagonal_is_a_view_as_in_torch(offset, dims):
    """Writes through the diagonal show in its base and the other way round, with torch's
    strides and storage offset; in-place writes through it on a graph are differentiated."""
    torch = pytest.importorskip("torch")
    shape = (3, 4) if dims != (2, 0) else (2, 3, 4)
    a = _rand(*shape, seed=23)
    g, t = gpucore.tensor(a), torch.tensor(a)
    gd, td = g.diagonal(offset, *dims), t.diagonal(offset, *dims)
    assert gd._base is g and td._base is t
    assert gd.stride() == td.stride() and gd.storage_offset() == td.storage_offset()
    gd.mul_(-3.0)
    td.mul_(-3.0)
    np.testing.assert_array_equal(g.numpy(), t.numpy())
    g.add_(1.0)  # the base's writes show in the view
    t.add_(1.0)
    np.testing.assert_array_equal(gd.numpy(), td.numpy())
    gx, tx = gpucore.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    outs = []
    for m, x in ((gpucore, gx), (torch, tx)):
        y = x * 2.0
        y.diagonal(offset, *dims).mul_(y.diagonal(offset, *dims).exp())  # through the view
        (y * m.tensor(np.linspace(-1, 1, y.numel()).reshape(shape))).sum().backward()
        outs.append(y.detach().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-12)
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_diagonal_view_on_vulkan(vulkan):
    x = gpucore.zeros(3, 4, device="vulkan")
    x.diagonal(1).fill_(2.0)
    ref = np.zeros((3, 4))
    np.fill_diagonal(ref[:, 1:], 2.0)
    assert x.device.type == "vulkan" and x.cpu().tolist() == ref.tolist()


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag(k):
    same_as_torch(lambda m, x: m.diag(x, k), _rand(3, seed=21))
    same_as_torch(lambda m, x: x.diag(k), _rand(3, 4, seed=22))
    same_as_torch(lambda m, x: m.diag(x, k), np.zeros(0), grad=False)
    with pytest.raises(ValueError, match="diag.*1-D or 2-D"):
        gpucore.zeros(2, 2, 2).diag()
