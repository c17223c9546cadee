"""Indexing and joining: basic (views) and advanced (copies) indexing with gradients, setitem,
gather/scatter_add, index_select, masked_fill, cat/stack/split/chunk/narrow/unbind, one_hot."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np

import gpucore
from gpucore.ops.indexing import one_hot

BASIC = [
    1,
    -1,
    (1, 2),
    (slice(None), 2),
    slice(1, None),
    (slice(None, None, 2), slice(1, 4, 2)),
    (slice(None, None, -1),),
    (Ellipsis, 1),
    (None, 0, Ellipsis, None),
    (slice(-2, None), None, slice(None, 1)),
    (1, 2, 3),
    (slice(5, 9),),  # empty slice
]


@pytest.mark.parametrize("key", BASIC, ids=str)
def test_basic_indexing(key):
    check_op(lambda x: x[key], lambda x: x[key], [(3, 4, 5)], rtol=0, atol=0)


def test_basic_indexing_is_a_view():
    x = gpucore.zeros(3, 4)
    v = x[1:, ::2]
    assert np.shares_memory(to_np(v), to_np(x))
    s = x[1, 2]
    assert s.shape == () and np.shares_memory(to_np(s), to_np(x))


ADVANCED = [
    [0, 2, 2],  # repeats: the gradient accumulates
    (slice(None), [3, 0]),
    ([0, 2], [1, 1]),
    ([[0, 1], [2, 2]],),
    (1, [0, 3, 3]),
    (Ellipsis, [1, -1]),
    ([True, False, True],),
]


@pytest.mark.parametrize("key", ADVANCED, ids=str)
def test_advanced_indexing(key):
    check_op(lambda x: x[key], lambda x: x[key], [(3, 4, 5)], rtol=0, atol=0)


def test_advanced_indexing_with_tensors():
    x = rand((4, 5))
    idx = np.array([3, 0, 3])
    mask = x > 0
    check_op(lambda t: t[gpucore.tensor(idx)], lambda t: t[idx], [(4, 5)], vals=[x])
    check_op(lambda t: t[gpucore.tensor(mask)], lambda t: t[mask], [(4, 5)], vals=[x])
    check_op(lambda t: t[:, gpucore.tensor(idx).int()], lambda t: t[:, idx], [(4, 5)], vals=[x])
    check_op(lambda t: t[gpucore.tensor(mask[:, 0])], lambda t: t[mask[:, 0]], [(4, 5)], vals=[x])
    t = gpucore.tensor(x)
    assert not np.shares_memory(to_np(t[gpucore.tensor(idx)]), x)
    assert t[gpucore.tensor(2)].shape == (5,)  # 0-d integer tensor acts as an int


def test_index_gradgrad():
    check_grad(lambda x: x[[0, 0, 2]] ** 2, rand((3, 2)), gradgrad=True)
    check_grad(lambda x: x[1:, ::-1] ** 2, rand((3, 2)), gradgrad=True)


def test_setitem():
    x = rand((3, 4))
    t = gpucore.tensor(x)
    t[0] = 5.0
    t[1:, ::2] = gpucore.tensor([[1.0, 2.0]])
    t[gpucore.tensor([2, 2]), gpucore.tensor([1, 3])] = -1.0
    t[t > 4] = 0.5
    e = x.copy()
    e[0] = 5.0
    e[1:, ::2] = [[1.0, 2.0]]
    e[[2, 2], [1, 3]] = -1.0
    e[e > 4] = 0.5
    assert_close(t, e)
    with pytest.raises(gpucore.ShapeError, match="broadcast"):
        t[0] = gpucore.zeros(3)


def test_setitem_grad():
    x = gpucore.tensor(rand((3, 4)), dtype=gpucore.float64, requires_grad=True)
    v = gpucore.tensor(rand((4,), seed=1), dtype=gpucore.float64, requires_grad=True)
    y = x * 2
    y[1] = v * 3
    y.sum().backward()
    assert_close(x.grad, np.array([[2.0] * 4, [0.0] * 4, [2.0] * 4]))
    assert_close(v.grad, np.full(4, 3.0))


def test_index_errors():
    x = gpucore.zeros(3, 4)
    for key in (3, (0, 4), (0, 0, 0), [0, 3], (slice(None), [4]), -4):
        with pytest.raises(gpucore.GpucoreIndexError, match="out of range") as e:
            x[key]
        assert isinstance(e.value, IndexError)
    with pytest.raises(IndexError, match="long, int or bool"):
        x[gpucore.tensor([0.0])]
    with pytest.raises(IndexError):
        x[gpucore.tensor([True, False])]  # mask shape mismatch
    with pytest.raises(IndexError, match="unsupported index"):
        x["a"]


# ----------------------------------------------------------------------------- gather / scatter
def test_gather():
    idx = np.array([[0, 2, 2], [1, 0, 1]])
    check_op(
        lambda x: x.gather(1, gpucore.tensor(idx)),
        lambda x: np.take_along_axis(x, idx, 1),
        [(2, 4)],
    )
    idx0 = np.array([[1, 0, 1, 1]])
    check_op(
        lambda x: gpucore.gather(x, 0, gpucore.tensor(idx0)),
        lambda x: np.take_along_axis(x, idx0, 0),
        [(3, 4)],
    )
    # index smaller than input in the other dims, negative dim
    idx2 = np.array([[2], [0]])
    check_op(
        lambda x: x.gather(-1, gpucore.tensor(idx2)),
        lambda x: np.take_along_axis(x[:2], idx2, 1),
        [(3, 4)],
    )


def test_scatter_add():
    idx = np.array([[0, 2, 2], [1, 0, 1]])

    def np_fn(x, s):
        out = x.copy()
        for i in range(idx.shape[0]):
            for j in range(idx.shape[1]):
                out[i, idx[i, j]] += s[i, j]
        return out

    check_op(lambda x, s: x.scatter_add(1, gpucore.tensor(idx), s), np_fn, [(2, 4), (2, 3)])
    check_grad(
        lambda x, s: x.scatter_add(1, gpucore.tensor(idx), s) ** 2,
        rand((2, 4)),
        rand((2, 3)),
        gradgrad=True,
    )
    x = gpucore.zeros(3)
    assert gpucore.scatter_add(x, 0, gpucore.tensor([0, 0, 2]), gpucore.ones(3)).tolist() == [
        2.0,
        0.0,
        1.0,
    ]


def test_gather_scatter_errors():
    x = gpucore.zeros(2, 3)
    with pytest.raises(gpucore.GpucoreIndexError, match=r"\[0, 3\)"):
        x.gather(1, gpucore.tensor([[0, 3]]))
    with pytest.raises(gpucore.GpucoreIndexError, match=r"\[0, 3\)"):
        x.gather(1, gpucore.tensor([[-1, 0]]))
    with pytest.raises(gpucore.DTypeError, match="int64"):
        x.gather(1, gpucore.tensor([[0, 1]]).int())
    with pytest.raises(gpucore.ShapeError, match="dims"):
        x.gather(1, gpucore.tensor([0, 1]))
    with pytest.raises(gpucore.GpucoreIndexError, match="out of range"):
        x.gather(2, gpucore.tensor([[0]]))
    with pytest.raises(gpucore.GpucoreIndexError, match=r"\[0, 2\)"):
        x.scatter_add(0, gpucore.tensor([[2]]), gpucore.ones(1, 1))


def test_index_select_masked_fill():
    idx = np.array([2, 0, 2])
    check_op(lambda x: x.index_select(1, gpucore.tensor(idx)), lambda x: x[:, idx], [(2, 3)])
    check_op(
        lambda x: gpucore.index_select(x, 0, gpucore.tensor(idx[:2])),
        lambda x: x[idx[:2]],
        [(3, 2)],
    )
    mask = rand((3, 4), seed=3) > 0
    check_op(
        lambda x: x.masked_fill(gpucore.tensor(mask), -1.5),
        lambda x: np.where(mask, -1.5, x),
        [(3, 4)],
    )
    check_op(
        lambda x: gpucore.masked_fill(x, gpucore.tensor(mask[0]), 0.0),
        lambda x: np.where(mask[0], 0.0, x),
        [(3, 4)],
    )


def test_masked_fill_keeps_the_input_dtype():
    # As PyTorch: the value is cast to the input's dtype (no promotion to float).
    a = gpucore.arange(4)
    m = gpucore.tensor([False, True, False, True])
    out = a.masked_fill(m, 1.5)
    assert out.dtype is gpucore.int64 and out.tolist() == [0, 1, 2, 1]
    a.masked_fill_(m, 7.9)  # used to fail: float result into an int tensor
    assert a.tolist() == [0, 7, 2, 7]
    x = gpucore.ones(4)
    y = x.masked_fill(m, gpucore.tensor(2.0, dtype=gpucore.float64))
    assert y.dtype is gpucore.float32 and y.tolist() == [1.0, 2.0, 1.0, 2.0]
    h = gpucore.ones(2, dtype=gpucore.float16).masked_fill(gpucore.tensor([True, False]), 3)
    assert h.dtype is gpucore.float16 and h.tolist() == [3.0, 1.0]


# ----------------------------------------------------------------------------- joining
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    shapes[1] = tuple(1 if i == dim % 3 else s for i, s in enumerate(shapes[1]))
    check_op(lambda *xs: gpucore.cat(xs, dim), lambda *xs: np.concatenate(xs, dim), shapes)


def test_cat_variants():
    check_op(
        lambda a, b: gpucore.concat([a, b]), lambda a, b: np.concatenate([a, b]), [(0, 3), (2, 3)]
    )
    check_op(lambda a: gpucore.cat([a]), lambda a: a, [(2, 3)])
    a = gpucore.tensor([1, 2])
    assert gpucore.cat([a, gpucore.tensor([0.5])]).tolist() == [1.0, 2.0, 0.5]  # promoted
    assert gpucore.cat([gpucore.zeros(0), gpucore.ones(2, 2)]).shape == (2, 2)  # legacy empty
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\), \(2, 2\)"):
        gpucore.cat([gpucore.zeros(2, 3), gpucore.zeros(2, 2)])
    with pytest.raises(gpucore.ShapeError):
        gpucore.cat([gpucore.zeros(2, 3), gpucore.zeros(3)])
    with pytest.raises(gpucore.GpucoreIndexError, match="out of range"):
        gpucore.cat([gpucore.zeros(2, 3)], 2)
    with pytest.raises(ValueError, match="non-empty"):
        gpucore.cat([])


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim):
    check_op(
        lambda a, b: gpucore.stack([a, b], dim),
        lambda a, b: np.stack([a, b], dim),
        [(2, 3), (2, 3)],
    )


def test_stack_errors():
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\), \(3, 2\)"):
        gpucore.stack([gpucore.zeros(2, 3), gpucore.zeros(3, 2)])
    with pytest.raises(gpucore.GpucoreIndexError):
        gpucore.stack([gpucore.zeros(2)], 2)


def test_split_chunk_narrow_unbind():
    check_op(lambda x: x.split(2), lambda x: tuple(np.split(x, [2, 4])), [(5, 3)])
    check_op(lambda x: x.split([1, 2], 1), lambda x: tuple(np.split(x, [1], 1)), [(2, 3)])
    check_op(lambda x: gpucore.split(x, 4, -1), lambda x: (x,), [(2, 3)])
    check_op(lambda x: x.chunk(3), lambda x: tuple(np.split(x, [2, 4])), [(5, 2)])
    check_op(lambda x: gpucore.chunk(x, 2, 1), lambda x: tuple(np.split(x, [2], 1)), [(2, 4)])
    check_op(lambda x: x.narrow(1, 1, 2), lambda x: x[:, 1:3], [(2, 4)])
    check_op(lambda x: x.narrow(0, -2, 2), lambda x: x[-2:], [(3, 2)])
    check_op(lambda x: x.unbind(1), lambda x: tuple(x[:, i] for i in range(3)), [(2, 3)])
    # gradients from only some of the pieces
    check_grad(lambda x: x.split(2)[1] * 3, rand((5, 2)))
    with pytest.raises(gpucore.ShapeError, match="sum to 4"):
        gpucore.zeros(5).split([2, 2])
    with pytest.raises(gpucore.GpucoreIndexError, match="exceeds"):
        gpucore.zeros(5).narrow(0, 3, 3)


def test_zero_dim_inputs_raise():
    s = gpucore.tensor(1.0)
    with pytest.raises(gpucore.ShapeError, match="zero-dimensional"):
        gpucore.cat([s, s])
    assert gpucore.stack([s, s]).tolist() == [1.0, 1.0]
    for fn in (
        lambda: s.split(1),
        lambda: s.chunk(1),
        lambda: s.unbind(),
        lambda: s.narrow(0, 0, 1),
        lambda: s.gather(0, gpucore.tensor(0)),
        lambda: s.index_select(0, gpucore.tensor([0])),
    ):
        with pytest.raises(gpucore.GpucoreIndexError, match="0-d"):
            fn()


def test_one_hot():
    t = gpucore.tensor([[0, 2], [1, 1]])
    out = one_hot(t, 3)
    assert out.dtype is gpucore.int64
    assert_close(out, np.eye(3, dtype=np.int64)[[[0, 2], [1, 1]]])
    assert one_hot(gpucore.tensor([3])).shape == (1, 4)
    with pytest.raises(gpucore.GpucoreIndexError, match=r"\[0, 3\)"):
        one_hot(gpucore.tensor([3]), 3)
    with pytest.raises(gpucore.DTypeError, match="int64"):
        one_hot(gpucore.tensor([1.0]), 3)


# ----------------------------------------------------------------------------- negative indices
# Issue 20, item 10: the index-taking ops refuse negative indices, as PyTorch (IndexError naming
# the op, the bad index and the valid range); only indexing itself, x[idx], counts from the end.
@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda w: gpucore.index_select(w, 1, gpucore.tensor([-1])), "index -1"),
        (lambda w: gpucore.index_select(w, 0, gpucore.tensor([0, 4])), "index 4"),
        (lambda w: w.index_select(-1, gpucore.tensor([3])), "index 3"),
        (lambda w: gpucore.gather(w, 1, gpucore.tensor([[-1]] * 4)), "[-1, -1]"),
        (lambda w: gpucore.scatter_add(w, 1, gpucore.tensor([[-1]] * 4), w[:, :1]), "[-1, -1]"),
        (lambda w: one_hot(gpucore.tensor([-1]), 3), "[-1, -1]"),
    ],
)
def test_index_taking_ops_refuse_negative_and_too_large_indices(call, fragment):
    w = gpucore.tensor(rand((4, 3)))
    with pytest.raises(gpucore.GpucoreIndexError) as e:
        call(w)
    msg = str(e.value)
    assert fragment in msg and ("[0, " in msg or "0 <= index <" in msg), msg


def test_index_select_names_the_range_and_the_dim():
    with pytest.raises(IndexError, match=r"index_select\(\): index -1 .*dim 1 of size 3"):
        gpucore.index_select(gpucore.tensor(rand((4, 3))), 1, gpucore.tensor([-1]))


def test_index_select_wants_an_integer_index():
    with pytest.raises(gpucore.DTypeError, match="index_select"):
        gpucore.index_select(gpucore.tensor(rand((4, 3))), 0, gpucore.tensor([0.0]))
    assert to_np(
        gpucore.index_select(
            gpucore.tensor(rand((4, 3))), 0, gpucore.tensor([2], dtype=gpucore.int32)
        )
    ).shape == (
        1,
        3,
    )


def test_advanced_indexing_keeps_negative_indices():
    w = gpucore.tensor(rand((4, 3)))
    assert_close(w[gpucore.tensor([-1, 0])], to_np(w)[[-1, 0]])
    assert_close(w[:, gpucore.tensor([-1])], to_np(w)[:, [-1]])
