"""split / chunk / tensor_split / unbind (gpucore/ops/joining.py) and hsplit / vsplit / dsplit
(gpucore/ops/stacking.py): values and every output's gradient against PyTorch, finite
differences, and their backward as one cat of the outputs' gradients (the SPLIT node)."""

import numpy as np
import pytest
from helpers import POLICIES, check_grad, on_policy
from torch_compare import same_as_torch

import gpucore
from gpucore.autograd.graph import OutputSlot

X = np.random.default_rng(0).uniform(-2, 2, (4, 6, 3))


def _weighted(m, pieces):
    """One output from every piece, each with its own weight: every piece's gradient counts."""
    return m.stack([(p * p * (i + 1)).sum() for i, p in enumerate(pieces)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: _weighted(m, x.split(2, 1)),
        lambda m, x: _weighted(m, m.split(x, [1, 0, 5], dim=-2)),
        lambda m, x: _weighted(m, x.split(4, 1)),  # a shorter last piece
        lambda m, x: _weighted(m, x.chunk(3, 0)),  # 4 rows in 3 chunks: 2, 2
        lambda m, x: _weighted(m, m.chunk(x, 4, 2)),  # more chunks than entries
        lambda m, x: _weighted(m, x.unbind(1)),
        lambda m, x: _weighted(m, m.unbind(x, -1)),
        lambda m, x: _weighted(m, m.tensor_split(x, 4, 1)),  # 6 into 4: 2, 2, 1, 1
        lambda m, x: _weighted(m, x.tensor_split([1, -2], 1)),
        lambda m, x: _weighted(m, m.tensor_split(x, [4, 2, 9], 1)),  # overlapping pieces
        lambda m, x: _weighted(m, m.tensor_split(x, m.tensor([2, 5]), 1)),
        lambda m, x: _weighted(m, m.tensor_split(x, m.tensor(3), 1)),
        lambda m, x: _weighted(m, m.hsplit(x, 3)),
        lambda m, x: _weighted(m, x.vsplit([1])),
        lambda m, x: _weighted(m, m.dsplit(x, [2])),
    ],
)
def test_pieces_and_gradients_as_torch(fn):
    same_as_torch(fn, X)


def test_unused_pieces_get_zero_gradients_as_torch():
    same_as_torch(lambda m, x: x.split(2, 1)[1] * 3, X)
    same_as_torch(lambda m, x: x.unbind(2)[0].exp(), X)
    same_as_torch(lambda m, x: (lambda a, b, c: a * c)(*x.chunk(3, 1)), X)


def test_the_pieces_share_one_node_and_backward_is_one_cat():
    x = gpucore.tensor(X, requires_grad=True)
    y = x * 1.0
    q, k, v = y.split(2, 1)
    assert type(q.grad_fn) is OutputSlot and q.grad_fn.name() == "SplitBackward"
    assert q.grad_fn.next[0] is k.grad_fn.next[0] is v.grad_fn.next[0]
    assert q._base is y and q.shape == (4, 2, 3)  # still views of the input
    loss = (q * 2).sum() + (v * 5).sum()
    with gpucore.dispatch.trace_ops() as ops:
        loss.backward()
    names = [r[0] for r in ops]
    assert names.count("cat") == 1 and "index_backward" not in names
    want = np.zeros(X.shape)
    want[:, :2], want[:, 4:] = 2, 5
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_second_order_gradients():
    def f(x):
        a, b, c = x.unbind(0)
        p, q = (a * b).split([1, 2], 0)
        return (p * p * c[:1]).sum() + (q.exp() * c[1:]).sum()

    check_grad(f, np.random.default_rng(1).uniform(-1, 1, (3, 3)), gradgrad=True)


def test_retain_graph_and_a_freed_graph():
    x = gpucore.tensor(X, requires_grad=True)
    a, b = x.chunk(2, 2)
    loss = (a * 3).sum() + b.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert float(x.grad.sum()) == 2 * (3 * 4 * 6 * 2 + 4 * 6 * 1)
    with pytest.raises(gpucore.AutogradError, match="second time"):
        loss.backward()


def test_each_piece_backpropagates_on_its_own_without_retain_graph():
    """As PyTorch: the pieces' shared node saves nothing, so one backward per piece (a loop over
    unbind's rows, or grad of one piece then backward of another) needs no retain_graph."""
    w = gpucore.ones(3, 2, requires_grad=True)
    for row in w.unbind(0):
        (row * 2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 2), 2.0, np.float32))
    x = gpucore.ones(4, requires_grad=True)
    a, b = x.split(2)
    (ga,) = gpucore.autograd.grad(a.sum(), x)
    b.sum().backward()
    np.testing.assert_array_equal(ga.numpy(), [1, 1, 0, 0])
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 1, 1])


def test_hooks_on_pieces_and_grad_of_a_piece():
    x = gpucore.tensor(X, requires_grad=True)
    y = x * 2.0
    a, b = y.split(3, 1)
    seen = []
    a.register_hook(lambda g: seen.append(tuple(g.shape)) or g * 10)
    b.retain_grad()
    (a.sum() + (b * b).sum()).backward()
    assert seen == [(4, 3, 3)]
    np.testing.assert_allclose(b.grad.numpy(), 2 * b.detach().numpy())
    want = np.concatenate([np.full((4, 3, 3), 20.0), 8 * X[:, 3:]], 1)
    np.testing.assert_allclose(x.grad.numpy(), want)
    a, b = (x * 2.0).split(3, 1)
    (ga,) = gpucore.autograd.grad((a * b).sum(), [a])  # a piece as the input: its own gradient
    np.testing.assert_allclose(ga.numpy(), b.detach().numpy())


def test_a_piece_modified_in_place_rebuilds_its_history():
    x = gpucore.tensor(X, requires_grad=True)
    y = x * 1.0
    a, b = y.split(3, 1)
    a.mul_(4.0)  # through y's storage: a's history is rebuilt from y
    (a.sum() + b.sum() + y.sum()).backward()
    want = np.concatenate([np.full((4, 3, 3), 8.0), np.full((4, 3, 3), 2.0)], 1)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_without_grad_the_pieces_are_plain_views():
    x = gpucore.tensor(X)
    a, b = x.split(3, 1)
    assert a.grad_fn is None and not a.requires_grad and a._base is x
    with gpucore.no_grad():
        p = gpucore.tensor(X, requires_grad=True).unbind(0)[0]
    assert p.grad_fn is None and not p.requires_grad


@pytest.mark.parametrize("policy", POLICIES)
def test_float32_gradients_on_each_backend(policy):
    with on_policy(policy):
        x = gpucore.tensor(X.astype(np.float32), requires_grad=True)
        a, b, c = x.split(2, 1)
        ((a * 2).sum() + (c * c).sum()).backward()
        got = x.grad.numpy()
    want = np.zeros(X.shape, np.float32)
    want[:, :2] = 2
    want[:, 4:] = 2 * X[:, 4:].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_errors():
    x = gpucore.tensor(X)
    with pytest.raises(ValueError, match="tensor_split.*positive"):
        x.tensor_split(0)
    with pytest.raises(TypeError, match="tensor_split"):
        x.tensor_split(2.5)
    with pytest.raises(gpucore.ShapeError, match="tensor_split"):
        x.tensor_split(gpucore.tensor([1.0]))
    with pytest.raises(gpucore.ShapeError, match="tensor_split.*int64"):  # as PyTorch
        x.tensor_split(gpucore.tensor([1], dtype=gpucore.int32))
    with pytest.raises(TypeError, match="tensor_split"):  # float indices, as PyTorch
        x.tensor_split([1, 2.0])
    with pytest.raises(gpucore.ShapeError, match="hsplit.*equal sections"):
        gpucore.hsplit(x, 4)
    with pytest.raises(gpucore.ShapeError, match="dsplit.*3 dims"):
        gpucore.dsplit(gpucore.tensor(X[0]), 1)
    with pytest.raises(gpucore.ShapeError, match="vsplit.*2 dims"):
        gpucore.vsplit(gpucore.tensor(X[0, 0]), 1)
