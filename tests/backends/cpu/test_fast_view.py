"""The view lane (cpu/python/fastpath_view.c): Tensor._make_view in one C call, and split /
chunk / unbind / narrow's pieces built through it. A view built there must record what one built
in Python records (storage, dtype, version counter, device, base, view chain, no grad), share
its base's storage and version counter, replay on the base after an in-place write, and carry
autograd through the pieces; a Tensor without data raises one clear error naming the op."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import _cpu
from gpucore.ops.indexing import GETITEM
from gpucore.ops.shape import PERMUTE
from gpucore.tensor import Tensor

X = np.arange(4 * 6 * 5, dtype=np.float64).reshape(4, 6, 5) / 7.0


def _python_view(src, arr, op, attrs):
    """Tensor._make_view's Python body (the reference the C lane must equal)."""
    t = Tensor._wrap(arr, src._dtype, src._vbox, src._dev)
    t._base = src if src._base is None else src._base
    t._view_ops = (src._view_ops or ()) + ((op, attrs),)
    return t


def _slots(t):
    return {n: getattr(t, n) for n in Tensor.__slots__ if n != "__weakref__"}


@pytest.mark.parametrize("chain", [0, 1, 2])
def test_fast_view_records_what_the_python_construction_records(chain):
    src = gpucore.tensor(X)
    for _ in range(chain):  # a view of a view: the base is the root, the chain grows
        src = src.transpose(0, 2)
    arr = src._data[1:3]
    attrs = {"key": (slice(1, 3),), "src": src._data.shape}
    got = _cpu.fast_view(src, arr, GETITEM, attrs)
    want = _python_view(src, arr, GETITEM, attrs)
    assert type(got) is Tensor
    gs, ws = _slots(got), _slots(want)
    assert gs.keys() == ws.keys()
    for name in gs:
        if name == "_vbox":
            assert gs[name] is ws[name] is src._vbox  # the same counter, not a copy
        else:
            assert gs[name] is ws[name] or gs[name] == ws[name], name
    assert got._data is arr and got._base is (src if chain == 0 else src._base)
    assert len(got._view_ops) == chain + 1 and got._view_ops[-1] == (GETITEM, attrs)
    assert got.requires_grad is False and got._grad_fn is None and got._retain is False


def test_fast_view_declines_odd_cases_and_make_view_still_checks():
    src = gpucore.tensor(X)
    assert _cpu.fast_view(Tensor.__new__(Tensor), src._data, GETITEM, {}) is None  # no slots
    assert _cpu.fast_view(X, src._data, GETITEM, {}) is None  # not a Tensor
    deep = np.zeros((1,) * 9)
    assert _cpu.fast_view(src, deep, GETITEM, {}) is None  # over MAX_DIMS
    with pytest.raises(gpucore.errors.ShapeError, match="at most 8 dims"):
        Tensor._make_view(src, deep, GETITEM, {})
    with pytest.raises(TypeError, match="takes 4 arguments"):
        _cpu.fast_view(src, src._data)


@pytest.mark.parametrize(
    "pieces",
    [
        lambda x: x.split(2, 1),
        lambda x: x.split([1, 4, 1], 1),
        lambda x: x.chunk(3, -1),
        lambda x: x.unbind(0),
        lambda x: gpucore.tensor_split(x, 4, 1),
        lambda x: (x.narrow(2, 1, 3),),
        lambda x: x.transpose(0, 1).split(3, 0),  # pieces of a view: their base is the root
    ],
    ids=["split", "sections", "chunk", "unbind", "tensor_split", "narrow", "of_a_view"],
)
def test_pieces_share_storage_and_version_counter(pieces):
    with gpucore.no_grad():
        x = gpucore.tensor(X)
        ps = pieces(x)
        for p in ps:
            assert np.shares_memory(p._data, x._data)
            assert p._vbox is x._vbox and p._base is x
            assert p.dtype is x.dtype and not p.requires_grad
        v0 = x._vbox[0]
        ps[0].add_(1.0)  # an in-place write through a piece: visible in x, counted once for all
        assert x._vbox[0] == v0 + 1 and all(p._vbox[0] == x._vbox[0] for p in ps)
        idx = np.nonzero(x.numpy() != X)
        assert len(idx[0]) == ps[0].numel()


def test_split_pieces_values_as_numpy():
    x = gpucore.tensor(X)
    for size in (1, 2, 4, 6, 7):
        got = x.split(size, 1)
        want = np.split(X, list(range(size, 6, size)), 1)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    e = gpucore.tensor(np.zeros((2, 0)))
    assert [tuple(p.shape) for p in e.split(3, 1)] == [(2, 0)]  # as PyTorch: one empty piece
    assert [tuple(p.shape) for p in x.split(2, -2)] == [(4, 2, 5)] * 3


def test_autograd_through_split_pieces():
    """Each piece's gradient lands in its slice of the input (hand formula), including pieces
    of a view and a piece written in place after the split (its history replays on the base)."""
    x = gpucore.tensor(X, requires_grad=True)
    q, k, v = x.transpose(0, 1).split(2, 0)  # pieces of a view, [2, 4, 5] each
    ((q * 2.0).sum() + (k * k).sum() + v.sum()).backward()
    want = np.empty_like(X)
    want[:, 0:2] = 2.0
    want[:, 2:4] = 2 * X[:, 2:4]
    want[:, 4:6] = 1.0
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=0, atol=0)

    x.grad = None
    y = x * 1.0
    a, b = y.unbind(2)[:2]
    a.mul_(3.0)
    (a.sum() + b.sum()).backward()
    want = np.zeros_like(X)
    want[:, :, 0] = 3.0
    want[:, :, 1] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_permute_view_through_the_lane_keeps_its_chain():
    x = gpucore.tensor(X)
    t = x.permute(2, 0, 1).transpose(0, 1)
    assert t._base is x and [op for op, _ in t._view_ops] == [PERMUTE, PERMUTE]
    np.testing.assert_array_equal(t.numpy(), X.transpose(2, 0, 1).transpose(1, 0, 2))


# ----------------------------------------------------------------- a Tensor without data
@pytest.mark.parametrize(
    "name, call",
    [
        ("linear", lambda t, w: F.linear(t, w)),
        ("linear", lambda t, w: F.linear(w, t)),
        ("exp", lambda t, w: t.exp()),
        ("add", lambda t, w: t + w),
        ("matmul", lambda t, w: t @ w),
        ("softmax", lambda t, w: F.softmax(t, -1)),
        ("split", lambda t, w: t.split(1)),
        ("transpose", lambda t, w: t.transpose(0, 1)),
        ("layer_norm", lambda t, w: F.layer_norm(t, (4,))),
        ("sum", lambda t, w: t.sum()),
    ],
)
def test_a_tensor_without_data_raises_attribute_error_not_a_crash(name, call):
    """A Tensor made by __new__ alone has no data slot: every lane and general path raises
    AttributeError (the C lanes read buffers through gc_fast_buf_flags, never an unset slot).
    No __getattr__ turns it into a named error: defining one stops CPython 3.11 specialising
    every attribute read on Tensor (transpose +14 %, np.asarray(t) 1.0 -> 3.6 us)."""
    t = Tensor.__new__(Tensor)
    w = gpucore.ones(3, 4)
    with pytest.raises(AttributeError):
        call(t, w)
    assert not hasattr(t, "_data") and getattr(t, "_dtype", None) is None
    assert "__getattr__" not in vars(Tensor)


# ----------------------------------------------------------------- reshape's copy lane
# numpy views of a [2, 3, 4, 5] array (transposes, steps, offsets, a negative step, size-1
# dims) and shapes to reshape them to: some numpy can view, most it must copy
STRIDED = [
    (lambda a: a.transpose(1, 0, 2, 3), [(6, 20), (3, 40), (120,), (3, 2, 20), (6, 4, 5)]),
    (lambda a: a[:, :, ::2], [(2, 3, 10), (6, 10), (60,), (6, 2, 5)]),
    (lambda a: a[:, 1:], [(2, 40), (4, 20), (2, 2, 4, 5), (80,)]),
    (lambda a: a[:, :, :, ::-1], [(2, 3, 20), (120,), (24, 5)]),
    (lambda a: a[:, :1], [(2, 20), (40,), (2, 1, 4, 5, 1)]),
    (lambda a: a.transpose(0, 1, 3, 2), [(6, 20), (6, 5, 4), (2, 3, 5, 4)]),
]


@pytest.mark.parametrize("dt", [gpucore.float32, gpucore.float64], ids=["f32", "f64"])
def test_reshape_copy_lane_copies_exactly_where_numpy_must(dt):
    """fast_reshape_copy answers exactly when numpy's reshape has to copy (None when numpy
    gives a view), with numpy's values in fresh storage; Tensor.reshape agrees either way."""
    a = np.arange(2 * 3 * 4 * 5, dtype=dt.np).reshape(2, 3, 4, 5) * 0.5
    for view, shapes in STRIDED:
        root = gpucore.tensor(a)
        key = {"key": (), "src": a.shape}
        x = Tensor._make_view(root, view(root._data), GETITEM, key)
        for shape in shapes:
            want = view(a).reshape(shape)
            is_view = np.shares_memory(want, a)
            got = _cpu.fast_reshape_copy(x, shape)
            assert (got is None) == is_view, (x._data.strides, shape)
            r = x.reshape(shape)
            np.testing.assert_array_equal(r.numpy(), want)
            if got is None:
                assert r._base is root and np.shares_memory(r._data, root._data)
                continue
            assert type(got) is Tensor and got.dtype is dt and tuple(got.shape) == shape
            np.testing.assert_array_equal(got.numpy(), want)
            assert got._data.flags.c_contiguous and not np.shares_memory(got._data, a)
            assert got._vbox is not root._vbox and got._base is None and not got.requires_grad
            assert r._base is None and not np.shares_memory(r._data, root._data)


def test_reshape_copy_lane_declines():
    x = gpucore.tensor(X)
    assert _cpu.fast_reshape_copy(x, (120,)) is None  # contiguous: a view
    xi = gpucore.tensor(np.arange(12).reshape(3, 4)).t()
    assert _cpu.fast_reshape_copy(xi, (12,)) is None  # int64: numpy's copy
    np.testing.assert_array_equal(xi.reshape(12).numpy(), np.arange(12).reshape(3, 4).T.ravel())
    e = gpucore.zeros(0, 3).t()
    assert _cpu.fast_reshape_copy(e, (0,)) is None and tuple(e.reshape(0).shape) == (0,)
    with pytest.raises(TypeError, match="takes a Tensor and a tuple"):
        _cpu.fast_reshape_copy(x, [120])
    xt = gpucore.tensor(X, requires_grad=True).transpose(0, 1)
    r = xt.reshape(6, 20)  # a graph: the general path
    assert r.grad_fn is not None
    r.sum().backward()
