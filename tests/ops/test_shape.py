"""View ops: reshape/view, permute/transpose/T/mT, expand/broadcast_to, squeeze/unsqueeze, flatten,
movedim; storage sharing, gradients through views, bad input."""

import numpy as np
import pytest
from helpers import assert_close, check_op, rand, to_np

import gpucore

VIEWS = {
    "reshape": (lambda x: x.reshape(6, 4), lambda x: x.reshape(6, 4)),
    "reshape_tuple_neg": (lambda x: x.reshape((-1, 3)), lambda x: x.reshape(-1, 3)),
    "view": (lambda x: x.contiguous().view(4, -1), lambda x: x.reshape(4, -1)),
    "permute": (lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
    "permute_neg": (lambda x: x.permute((-1, 1, 0)), lambda x: x.transpose(2, 1, 0)),
    "transpose": (lambda x: x.transpose(0, 2), lambda x: x.swapaxes(0, 2)),
    "T": (lambda x: x.T, lambda x: x.transpose()),
    "mT": (lambda x: x.mT, lambda x: x.swapaxes(-1, -2)),
    "flatten": (lambda x: x.flatten(), lambda x: x.reshape(-1)),
    "flatten_1": (lambda x: x.flatten(1), lambda x: x.reshape(2, -1)),
    "flatten_0_1": (lambda x: gpucore.flatten(x, 0, 1), lambda x: x.reshape(6, 4)),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda x: x[:, None]),
    "unsqueeze_neg": (lambda x: x.unsqueeze(-1), lambda x: x[..., None]),
    "movedim": (lambda x: x.movedim(0, -1), lambda x: np.moveaxis(x, 0, -1)),
    "expand": (lambda x: x[:, :1].expand(2, 5, 4), lambda x: np.broadcast_to(x[:, :1], (2, 5, 4))),
    "expand_new": (lambda x: x.expand(3, -1, -1, -1), lambda x: np.broadcast_to(x, (3, 2, 3, 4))),
    "broadcast_to": (
        lambda x: gpucore.broadcast_to(x[:1], (4, 3, 4)),
        lambda x: np.broadcast_to(x[:1], (4, 3, 4)),
    ),
    # PyTorch's keyword names for the shape / dims varargs
    "reshape_kw": (lambda x: gpucore.reshape(x, shape=(4, 6)), lambda x: x.reshape(4, 6)),
    "reshape_kw_method": (lambda x: x.reshape(shape=(-1, 2)), lambda x: x.reshape(-1, 2)),
    "view_kw": (lambda x: x.contiguous().view(size=(3, 8)), lambda x: x.reshape(3, 8)),
    "permute_kw": (lambda x: gpucore.permute(x, dims=(2, 0, 1)), lambda x: x.transpose(2, 0, 1)),
    "permute_kw_method": (lambda x: x.permute(dims=[1, 2, 0]), lambda x: x.transpose(1, 2, 0)),
    "expand_kw": (
        lambda x: x[:, :1].expand(size=(2, 5, 4)),
        lambda x: np.broadcast_to(x[:, :1], (2, 5, 4)),
    ),
    "chain": (
        lambda x: x.permute(1, 0, 2).reshape(3, 8)[::2].T,
        lambda x: x.transpose(1, 0, 2).reshape(3, 8)[::2].T,
    ),
}


@pytest.mark.parametrize("name", VIEWS)
def test_view_ops(name):
    fn, np_fn = VIEWS[name]
    check_op(fn, np_fn, [(2, 3, 4)], rtol=0, atol=0)


@pytest.mark.parametrize(
    "fn,np_fn",
    [
        (lambda x: x.squeeze(), lambda x: x.squeeze()),
        (lambda x: x.squeeze(0), lambda x: x.squeeze(0)),
        (lambda x: x.squeeze(1), lambda x: x),  # a non-1 dim is left alone, as PyTorch
        (lambda x: x.squeeze((0, 2)), lambda x: x.squeeze((0, 2))),
        (lambda x: gpucore.squeeze(x, -1), lambda x: x.squeeze(-1)),
    ],
)
def test_squeeze(fn, np_fn):
    check_op(fn, np_fn, [(1, 3, 1)], rtol=0, atol=0)


def test_shape_keywords_errors_and_view_dtype():
    x = gpucore.zeros(2, 3)
    with pytest.raises(gpucore.ArgumentTypeError, match=r"permute\(\): got dims both"):
        x.permute(1, 0, dims=(1, 0))
    with pytest.raises(gpucore.ArgumentTypeError, match=r"reshape\(\): got shape both"):
        x.reshape(6, shape=(6,))
    with pytest.raises(gpucore.ArgumentTypeError, match="view"):
        x.view(6, dtype=gpucore.int32)
    # as PyTorch, the keywords take a sequence, not a bare int
    for call in (
        lambda: x.reshape(shape=6),
        lambda: x.view(size=6),
        lambda: x.permute(dims=0),
        lambda: x.expand(size=6),
        lambda: x.flip(dims=0),
        lambda: x.repeat(repeats=2),
        lambda: gpucore.reshape(x, shape=6),
    ):
        with pytest.raises(TypeError, match="must be a tuple of ints, not int"):
            call()
    # view(dtype=...): the keyword form of the bit reinterpretation
    y = gpucore.tensor([1.0, -2.0]).view(dtype=gpucore.int32)
    assert y.dtype == gpucore.int32
    assert to_np(y).tolist() == np.array([1.0, -2.0], np.float32).view(np.int32).tolist()


def test_odd_shapes():
    check_op(lambda x: x.reshape(()), lambda x: x.reshape(()), [(1, 1, 1)], rtol=0, atol=0)
    check_op(lambda x: x.reshape(1, 1, 1), lambda x: x.reshape(1, 1, 1), [()], rtol=0, atol=0)
    check_op(
        lambda x: x.permute(2, 1, 0).reshape(-1),
        lambda x: x.transpose(2, 1, 0).reshape(-1),
        [(7, 13, 5)],
        rtol=0,
        atol=0,
        grad=False,
    )
    check_op(
        lambda x: x.reshape(3, 0, 2).permute(1, 2, 0),
        lambda x: x.reshape(3, 0, 2).transpose(1, 2, 0),
        [(0, 6)],
        rtol=0,
        atol=0,
        grad=False,
    )
    check_op(lambda x: x.flatten(), lambda x: x.reshape(1), [()], rtol=0, atol=0)
    check_op(lambda x: x.unsqueeze(0), lambda x: x[None], [()], rtol=0, atol=0)


def test_views_share_storage():
    x = gpucore.zeros(2, 3)
    for v in (
        x.reshape(6),
        x.view(3, 2),
        x.T,
        x.permute(1, 0),
        x.unsqueeze(0),
        x[1],
        x[:, ::2],
        x.flatten(),
        x.transpose(0, 1),
    ):
        assert np.shares_memory(to_np(v), to_np(x))
    x.T[2, 1] = 7.0
    assert x[1, 2].item() == 7.0
    assert x.T.is_contiguous() is False and x.T.stride() == (1, 3)


def test_reshape_of_noncontiguous_copies_view_raises():
    x = gpucore.tensor(rand((3, 4)))
    r = x.T.reshape(12)
    assert_close(r, to_np(x).T.reshape(12))
    assert not np.shares_memory(to_np(r), to_np(x))
    with pytest.raises(gpucore.ShapeError, match="reshape"):
        x.T.view(12)


def test_grad_through_view_chain():
    check_op(
        lambda x: (x.T.reshape(4, 6) * x.permute(2, 1, 0).reshape(4, 6)).sum(0),
        lambda x: (x.T.reshape(4, 6) * x.transpose(2, 1, 0).reshape(4, 6)).sum(0),
        [(2, 3, 4)],
    )
    check_op(
        lambda x: x.expand(3, 2, 4) * x.unsqueeze(0).squeeze(0),
        lambda x: np.broadcast_to(x, (3, 2, 4)) * x,
        [(2, 4)],
    )


def test_broadcast_tensors():
    a, b = gpucore.broadcast_tensors(gpucore.zeros(3, 1), gpucore.zeros(4))
    assert a.shape == (3, 4) and b.shape == (3, 4)
    with pytest.raises(gpucore.ShapeError, match=r"\(3, 2\).*\(4,\)"):
        gpucore.broadcast_tensors(gpucore.zeros(3, 2), gpucore.zeros(4))


def test_shape_errors():
    x = gpucore.zeros(2, 3)
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\)"):
        x.reshape(4, 2)
    with pytest.raises(gpucore.ShapeError, match="-1"):
        x.reshape(-1, -1)
    with pytest.raises(gpucore.ShapeError, match="size 3"):
        x.expand(2, 4)
    with pytest.raises(gpucore.ShapeError, match="dims"):
        x.permute(1, 0, 2)
    with pytest.raises(ValueError, match="repeat"):
        x.permute(0, 0)
    with pytest.raises(gpucore.ShapeError, match="<= 2"):
        gpucore.zeros(2, 3, 4).t()
    with pytest.raises(gpucore.ShapeError, match="at most 8"):
        gpucore.zeros(1).reshape((1,) * 9)
    for fn in (
        lambda: x.transpose(0, 2),
        lambda: x.unsqueeze(3),
        lambda: x.squeeze(2),
        lambda: x.flatten(0, 2),
        lambda: x.movedim(0, 2),
        lambda: x.permute(0, 2),
    ):
        with pytest.raises(gpucore.GpucoreIndexError, match="out of range"):
            fn()


def test_expanded_view_is_read_only_for_inplace():
    x = gpucore.zeros(1, 3).expand(2, 3)
    with pytest.raises(gpucore.GpucoreError):
        x.add_(1.0)


def test_t_and_sizes():
    x = gpucore.tensor(rand((3, 4)))
    assert_close(x.t(), to_np(x).T)
    assert gpucore.t(gpucore.zeros(5)).shape == (5,)
    assert x.reshape(2, 6).size() == (2, 6) and x.reshape(2, 6).size(-1) == 6
    assert x.view_as(gpucore.zeros(4, 3)).shape == (4, 3)
    assert x.expand_as(gpucore.zeros(2, 3, 4)).shape == (2, 3, 4)
