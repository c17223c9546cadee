"""Views and indexing at the Tensor level: which results share storage with their base (writes
show both ways) and which copy; values against numpy's indexing of the same data."""

import numpy as np
import pytest

import gpucore


def base(shape=(3, 4), dtype=np.float32):
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return gpucore.tensor(a), a


def shares(a, b) -> bool:
    return np.shares_memory(a.detach().numpy(force=True), b.detach().numpy(force=True))


# Each case: (name, shape, view fn, numpy equivalent).
VIEWS = [
    ("reshape", (3, 4), lambda x: x.reshape(4, 3), lambda a: a.reshape(4, 3)),
    ("reshape-1", (3, 4), lambda x: x.reshape(-1), lambda a: a.reshape(-1)),
    ("view", (3, 4), lambda x: x.view(2, 6), lambda a: a.reshape(2, 6)),
    ("view_tuple", (3, 4), lambda x: x.view((6, -1)), lambda a: a.reshape(6, 2)),
    ("transpose", (2, 3, 4), lambda x: x.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),
    ("swapaxes", (2, 3, 4), lambda x: x.swapaxes(-1, 1), lambda a: a.swapaxes(-1, 1)),
    ("permute", (2, 3, 4), lambda x: x.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0)),
    ("permute_tuple", (2, 3, 4), lambda x: x.permute((2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    ("T", (3, 4), lambda x: x.T, lambda a: a.T),
    ("T3d", (2, 3, 4), lambda x: x.T, lambda a: a.transpose(2, 1, 0)),
    ("t", (3, 4), lambda x: x.t(), lambda a: a.T),
    ("mT", (2, 3, 4), lambda x: x.mT, lambda a: a.swapaxes(-1, -2)),
    ("int", (3, 4), lambda x: x[1], lambda a: a[1]),
    ("neg_int", (3, 4), lambda x: x[-1], lambda a: a[-1]),
    ("int_int", (3, 4), lambda x: x[1, 2:3], lambda a: a[1, 2:3]),
    ("slice", (5, 4), lambda x: x[1:4], lambda a: a[1:4]),
    ("slice_step", (10,), lambda x: x[1:9:3], lambda a: a[1:9:3]),
    ("slice_neg_bounds", (10,), lambda x: x[-7:-1:2], lambda a: a[-7:-1:2]),
    ("slice_2d", (5, 6), lambda x: x[::2, 1::2], lambda a: a[::2, 1::2]),
    ("none", (3, 4), lambda x: x[None], lambda a: a[None]),
    ("none_mid", (3, 4), lambda x: x[:, None, 1:], lambda a: a[:, None, 1:]),
    ("ellipsis", (2, 3, 4), lambda x: x[..., 1], lambda a: a[..., 1]),
    ("ellipsis_mid", (2, 3, 4), lambda x: x[0, ..., ::2], lambda a: a[0, ..., ::2]),
    ("ellipsis_none", (2, 3), lambda x: x[..., None], lambda a: a[..., None]),
    ("narrow", (5, 4), lambda x: x.narrow(0, 1, 3), lambda a: a[1:4]),
    ("squeeze", (3, 1, 4), lambda x: x.squeeze(), lambda a: a.squeeze()),
    ("squeeze_dim", (1, 3, 1), lambda x: x.squeeze(0), lambda a: a.squeeze(0)),
    ("unsqueeze", (3, 4), lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("unsqueeze_neg", (3, 4), lambda x: x.unsqueeze(-1), lambda a: a[..., None]),
    ("flatten", (2, 3, 4), lambda x: x.flatten(), lambda a: a.reshape(-1)),
    ("flatten_part", (2, 3, 4), lambda x: x.flatten(1), lambda a: a.reshape(2, 12)),
    ("movedim", (2, 3, 4), lambda x: x.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    ("unbind", (3, 4), lambda x: x.unbind(1)[2], lambda a: a[:, 2]),
    ("split", (6, 2), lambda x: x.split(4)[1], lambda a: a[4:]),
    ("chunk", (6, 2), lambda x: x.chunk(3)[1], lambda a: a[2:4]),
    (
        "chained",
        (4, 6),
        lambda x: x.T[1:5].reshape(2, 2, 4)[:, 1],
        lambda a: a.T[1:5].reshape(2, 2, 4)[:, 1],
    ),
    ("detach", (3, 4), lambda x: x.detach(), lambda a: a),
]


@pytest.mark.parametrize("name,shape,fn,np_fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_share_storage(name, shape, fn, np_fn):
    x, a = base(shape)
    v = fn(x)
    ref = np_fn(a.copy())
    assert tuple(v.shape) == ref.shape
    np.testing.assert_array_equal(v.numpy(), ref)
    assert shares(v, x)
    assert v._vbox is x._vbox
    # write through the view: shows in the base
    flat_idx = (0,) * v.ndim
    v[flat_idx] = -100.0
    ref_after = a.copy()
    np_fn(ref_after)[flat_idx] = -100.0
    np.testing.assert_array_equal(x.numpy(), ref_after)
    # write through the base: shows in the view
    x.fill_(5.0)
    assert (v.numpy() == 5.0).all()


def test_write_row_through_view_and_back():
    x = gpucore.zeros(3, 4)
    v = x.view(4, 3)
    v[0] = gpucore.tensor([1.0, 2.0, 3.0])
    assert x[0, :3].tolist() == [1.0, 2.0, 3.0]
    x[2] = 7.0
    assert v[2:].tolist() == [[0.0, 0.0, 7.0], [7.0, 7.0, 7.0]]


def test_view_of_transposed_writes():
    x = gpucore.zeros(3, 4)
    x.T[1] = 5.0
    assert x[:, 1].tolist() == [5.0, 5.0, 5.0] and x.sum().item() == 15.0
    y = gpucore.zeros(2, 3, 4)
    p = y.permute(2, 0, 1)
    p[0] = 7.0
    y[1, 2, 0] = 9.0
    assert p[0].tolist() == [[7.0, 7.0, 7.0], [7.0, 7.0, 9.0]]
    assert y[:, :, 1:].sum().item() == 0.0


def test_inplace_ops_through_views():
    x = gpucore.zeros(3, 4)
    x[1].add_(2.0)
    x[:, 0].fill_(7.0)
    x.T[3].mul_(0.0)
    x[2].zero_()
    ref = np.zeros((3, 4), np.float32)
    ref[1] += 2.0
    ref[:, 0] = 7.0
    ref[:, 3] *= 0.0
    ref[2] = 0.0
    np.testing.assert_array_equal(x.numpy(), ref)
    v = x[0:2]
    v += 1.0
    ref[0:2] += 1.0
    np.testing.assert_array_equal(x.numpy(), ref)


def test_setitem_forms():
    x = gpucore.zeros(3, 4)
    a = np.zeros((3, 4), np.float32)
    for key, val in [
        ((1, slice(1, 3)), [1.0, 2.0]),
        (0, 5.0),
        ((slice(None), 3), [7.0, 8.0, 9.0]),
        ((Ellipsis, 0), -1.0),
        ((slice(None, None, 2), slice(1, None, 2)), 4.0),
        ((None, 2), [[1.0, 1.0, 1.0, 1.0]]),
    ]:
        x[key] = gpucore.tensor(val) if isinstance(val, list) else val
        a[key] = val
    np.testing.assert_array_equal(x.numpy(), a)
    x[1] = gpucore.tensor([1, 2, 3, 4])  # int values converted to the tensor's dtype
    assert x.dtype is gpucore.float32 and x[1].tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(gpucore.ShapeError, match=r"\(5,\)"):
        x[0] = gpucore.ones(5)


def test_contiguous():
    x, a = base((3, 4))
    assert x.contiguous() is x
    t = x.T
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous() and c.stride() == (3, 1)
    np.testing.assert_array_equal(c.numpy(), a.T)
    assert not shares(c, x)
    c[0, 0] = 99.0
    assert x[0, 0].item() == 0.0
    s = x[:, ::2].contiguous()
    assert s.is_contiguous() and s.tolist() == a[:, ::2].tolist()


def test_view_on_noncontiguous_raises_and_reshape_copies():
    x, a = base((3, 4))
    t = x.T
    with pytest.raises(gpucore.ShapeError, match="reshape"):
        t.view(12)
    with pytest.raises(ValueError, match="reshape"):
        x[:, :3].view(-1)
    # x[:, ::2] has one uniform stride (2) when flattened, so it can be viewed
    assert x[:, ::2].view(-1).tolist() == a[:, ::2].reshape(-1).tolist()
    r = t.reshape(12)
    np.testing.assert_array_equal(r.numpy(), a.T.reshape(12))
    assert not shares(r, x)
    r[0] = -1.0
    assert x[0, 0].item() == 0.0
    # a view is still possible when the strides allow it
    v = x[1:].view(8)
    assert shares(v, x) and v.tolist() == a[1:].reshape(8).tolist()
    u = t.view(4, 3)  # same shape: no change needed
    assert shares(u, x)


def test_view_shape_errors():
    x = gpucore.arange(6)
    assert x.view(-1, 2).shape == (3, 2)
    with pytest.raises(gpucore.ShapeError, match=r"\(4, 2\)"):
        x.view(4, 2)
    with pytest.raises(gpucore.ShapeError, match="-1"):
        x.view(-1, -1)
    with pytest.raises(gpucore.ShapeError):
        x.reshape(5)


def test_view_dtype_reinterprets_bits_as_pytorch():
    # view(dtype) is a bit reinterpretation sharing storage, not a value conversion.
    x = gpucore.tensor([1.0, -2.0, 0.5])
    v = x.view(gpucore.int32)
    assert v.dtype is gpucore.int32 and shares(v, x)
    assert v.tolist() == np.array([1.0, -2.0, 0.5], np.float32).view(np.int32).tolist()
    v[0] = 0  # writes show through, and bump the shared version counter
    assert x[0].item() == 0.0 and x._vbox is v._vbox
    h = gpucore.tensor([1.5], dtype=gpucore.float16)
    b = h.view(gpucore.bfloat16)
    assert b._host().tobytes() == np.array([1.5], np.float16).tobytes()
    assert b.view(gpucore.float16).tolist() == [1.5]
    assert shares(x.view(gpucore.float32), x)
    with pytest.raises(gpucore.DTypeError, match=r"\.to\(dtype\)"):
        x.view(gpucore.float64)  # element sizes differ
    with pytest.raises(gpucore.DTypeError, match="requires grad"):
        gpucore.ones(2, requires_grad=True).view(gpucore.int32)


def test_expand_shares_and_is_read_only():
    x = gpucore.tensor([[1.0], [2.0], [3.0]])
    e = x.expand(3, 4)
    assert e.shape == (3, 4) and e.stride() == (1, 0) and shares(e, x)
    assert x.expand(2, 3, -1).shape == (2, 3, 1)
    assert gpucore.arange(3).expand(2, 3).tolist() == [[0, 1, 2], [0, 1, 2]]
    assert gpucore.arange(3).broadcast_to((2, 3)).stride() == (0, 1)
    with pytest.raises(gpucore.ShapeError, match="negative"):
        x.expand(3, -2)
    x[1, 0] = 20.0
    assert e[1].tolist() == [20.0] * 4
    with pytest.raises(gpucore.GpucoreError, match="clone"):
        e[0, 0] = 5.0
    with pytest.raises(gpucore.ShapeError):
        x.expand(3, 4, 2)
    with pytest.raises(gpucore.ShapeError):
        x.expand(4)


def test_squeeze_unsqueeze_values():
    x = gpucore.zeros(1, 2, 1, 3)
    assert x.squeeze().shape == (2, 3)
    assert x.squeeze(1).shape == (1, 2, 1, 3)  # size 2: unchanged
    assert x.squeeze((0, 2)).shape == (2, 3)
    assert x.squeeze(-2).shape == (1, 2, 3)
    assert gpucore.zeros(2).unsqueeze(0).shape == (1, 2)
    assert gpucore.tensor(3.0).unsqueeze(0).shape == (1,)
    with pytest.raises(IndexError):
        gpucore.zeros(2).unsqueeze(3)


def test_basic_indexing_matches_numpy():
    x, a = base((4, 5, 6))
    keys = [
        (1, 2, 3),
        (-1,),
        (slice(1, 3), 2),
        (Ellipsis, slice(None, None, 2)),
        (None, 0, None),
        (slice(None), None, 1, slice(2, 5)),
        (slice(10, 20),),
        (slice(2, 2),),
        (0, Ellipsis, -1),
        (slice(-3, None), slice(None, -2), slice(1, None, 4)),
    ]
    for k in keys:
        v = x[k]
        assert tuple(v.shape) == a[k].shape, k
        np.testing.assert_array_equal(v.numpy(), a[k])
    assert x[2, 3, 4].shape == () and x[2, 3, 4].item() == a[2, 3, 4]
    assert gpucore.tensor(5.0)[()].item() == 5.0 and gpucore.tensor(5.0)[None].shape == (1,)


def test_negative_step_slices_follow_numpy():
    x, a = base((6,))
    np.testing.assert_array_equal(x[::-1].numpy(), a[::-1])
    np.testing.assert_array_equal(x[4:0:-2].numpy(), a[4:0:-2])


# ----------------------------------------------------------------------------- advanced indexing
ADVANCED = [
    ("int_tensor", lambda t: t[gpucore.tensor([2, 0, 2])], lambda a: a[[2, 0, 2]]),
    ("int_tensor_dim1", lambda t: t[:, gpucore.tensor([1, 3])], lambda a: a[:, [1, 3]]),
    (
        "pairs",
        lambda t: t[gpucore.tensor([0, 2]), gpucore.tensor([1, 3])],
        lambda a: a[[0, 2], [1, 3]],
    ),
    ("2d_index", lambda t: t[gpucore.tensor([[0, 1], [2, 2]])], lambda a: a[[[0, 1], [2, 2]]]),
    ("list", lambda t: t[[0, 0]], lambda a: a[[0, 0]]),
    ("neg_index", lambda t: t[gpucore.tensor([-1])], lambda a: a[[-1]]),
    (
        "mask_rows",
        lambda t: t[gpucore.tensor([True, False, True])],
        lambda a: a[[True, False, True]],
    ),
    ("mask_full", lambda t: t[t > 4.0], lambda a: a[a > 4.0]),
    (
        "mask_and_slice",
        lambda t: t[gpucore.tensor([False, True, True]), 1:3],
        lambda a: a[[False, True, True], 1:3],
    ),
    ("index_select", lambda t: t.index_select(1, gpucore.tensor([3, 0])), lambda a: a[:, [3, 0]]),
]


@pytest.mark.parametrize("name,fn,np_fn", ADVANCED, ids=[c[0] for c in ADVANCED])
def test_advanced_indexing_copies(name, fn, np_fn):
    x, a = base((3, 4))
    r = fn(x)
    ref = np_fn(a)
    assert tuple(r.shape) == ref.shape
    np.testing.assert_array_equal(r.numpy(), ref)
    assert not shares(r, x)
    before = x.numpy().copy()
    if r.numel():
        r.fill_(-5.0)  # writes to the copy do not reach the base
    np.testing.assert_array_equal(x.numpy(), before)
    x.fill_(1.0)  # and writes to the base do not reach the copy
    if r.numel():
        assert (r.numpy() == -5.0).all()


def test_advanced_setitem_writes_base():
    x = gpucore.zeros(5)
    x[gpucore.tensor([0, 2])] = 3.0
    x[x > 2] = 5.0
    x[gpucore.tensor([True, False, False, False, True])] += 1.0
    assert x.tolist() == [6.0, 0.0, 5.0, 0.0, 1.0]
    y = gpucore.zeros(3, 3)
    y[gpucore.tensor([0, 2]), gpucore.tensor([1, 0])] = gpucore.tensor([4.0, 8.0])
    assert y.tolist() == [[0, 4, 0], [0, 0, 0], [8, 0, 0]]


def test_index_errors_name_the_shape():
    x = gpucore.ones(2, 3)
    for key in (5, (0, 7), (0, 0, 0), (gpucore.tensor([0, 9]),), -3):
        with pytest.raises(IndexError, match=r"\(2, 3\)"):
            x[key]
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        x[4] = 1.0
    with pytest.raises(IndexError):
        x[1.0]
    with pytest.raises(IndexError):
        x["a"]


def test_views_track_base_and_version():
    x = gpucore.arange(6.0)
    v = x.view(2, 3)
    w = v[1]
    w[0] = 100.0
    assert x.tolist() == [0.0, 1.0, 2.0, 100.0, 4.0, 5.0]
    assert w._base is x and v._base is x
    assert w._vbox is x._vbox
    version = x._vbox[0]
    v.add_(1.0)
    assert x._vbox[0] > version


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.reshape(6, 4),
        lambda t: t.transpose(0, 2),
        lambda t: t.permute(2, 0, 1),
        lambda t: t.split(2, -1)[1],
        lambda t: t[1, :, 1:3],
        lambda t: t[..., None][0],
    ],
    ids=["reshape", "transpose", "permute", "split", "getitem", "getitem-none"],
)
def test_views_of_views_keep_the_root_base_and_chain(make):
    """A view of a view (made by the ops' own fast lanes) has the root as its base, shares
    its version counter, records its whole view chain and carries gradients back to the root."""
    data = np.arange(24.0).reshape(2, 3, 4)
    root = gpucore.tensor(data, requires_grad=True)
    with gpucore.no_grad():
        v = make(root.reshape(2, 3, 4))
    assert v._base is root and v._vbox is root._vbox
    alone = make(gpucore.tensor(data))
    assert v._view_ops[1:] == alone._view_ops and not v.requires_grad
    np.testing.assert_array_equal(v.numpy(), alone.numpy())
    (make(root.reshape(2, 3, 4)) * 2.0).sum().backward()
    ref = gpucore.tensor(np.zeros((2, 3, 4)))
    make(ref).add_(2.0)  # the gradient of sum(2 * view) lands where the view reads
    np.testing.assert_array_equal(root.grad.numpy(), ref.numpy())


def test_reshape_that_must_copy_gives_a_fresh_tensor():
    """reshape of strides no view can express copies once (as torch's reshape: the result shares
    nothing with the input and is contiguous); with a graph to record, the gradient flows back."""
    data = np.arange(24.0).reshape(2, 3, 4)
    x = gpucore.tensor(data)
    y = x.transpose(0, 1).reshape(3, 8)
    np.testing.assert_array_equal(y.numpy(), data.transpose(1, 0, 2).reshape(3, 8))
    assert y.is_contiguous() and y._base is None
    y.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), data)  # the input is untouched
    w = gpucore.tensor(data, requires_grad=True)
    (
        w.transpose(0, 1).reshape(3, 8) * gpucore.tensor(np.arange(24.0).reshape(3, 8))
    ).sum().backward()
    np.testing.assert_array_equal(
        w.grad.numpy(), np.arange(24.0).reshape(3, 2, 4).transpose(1, 0, 2)
    )
