"""The in-place comparisons and logical ops, the in-place view ops, resize_, Tensor.new, the
top-level in-place functions and the *_copy functions (gpucore/ops/inplace_forms.py) against
PyTorch."""

import numpy as np
import pytest

import gpucore as gc

RNG = np.random.default_rng(0)
X = np.round(RNG.uniform(-2, 2, (3, 4)))
Y = np.round(RNG.uniform(-2, 2, (4,)))


@pytest.mark.parametrize(
    "name",
    [
        "eq_",
        "ne_",
        "lt_",
        "le_",
        "gt_",
        "ge_",
        "greater_",
        "less_equal_",
        "logical_and_",
        "logical_or_",
        "logical_xor_",
    ],
)  # noqa: E501
@pytest.mark.parametrize("dt", ["float32", "int64", "bool"])
def test_binary_inplace_as_torch(name, dt):
    torch = pytest.importorskip("torch")
    g, t = gc.tensor(X.astype(dt)), torch.tensor(X.astype(dt))
    rg = getattr(g, name)(gc.tensor(Y.astype(dt)))
    rt = getattr(t, name)(torch.tensor(Y.astype(dt)))
    assert rg is g and g.dtype is getattr(gc, dt if dt != "bool" else "bool")
    np.testing.assert_array_equal(g.numpy(), rt.numpy())


def test_unary_inplace_as_torch():
    torch = pytest.importorskip("torch")
    for name in ("logical_not_", "log1p_", "rsqrt_", "square_"):
        a = np.abs(X) + 0.5
        g, t = gc.tensor(a), torch.tensor(a)
        getattr(g, name)()
        getattr(t, name)()
        np.testing.assert_allclose(g.numpy(), t.numpy())


def test_view_ops_in_place_as_torch():
    torch = pytest.importorskip("torch")
    cases = (("squeeze_", ()), ("squeeze_", (1,)), ("unsqueeze_", (0,)), ("t_", ()))
    cases += (("transpose_", (0, 1)), ("swapaxes_", (1, 0)), ("swapdims_", (0, 1)))
    for op, args in cases:
        a = RNG.uniform(-1, 1, (3, 1) if op == "squeeze_" else (3, 4))
        ga, ta = gc.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        gb, tb = ga * 2, ta * 2
        assert getattr(gb, op)(*args) is gb
        getattr(tb, op)(*args)
        assert tuple(gb.shape) == tuple(tb.shape)
        np.testing.assert_allclose(gb.detach().numpy(), tb.detach().numpy())
        w = RNG.uniform(-1, 1, tuple(tb.shape))
        (gb * gc.tensor(w)).sum().backward()
        (tb * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy())
    leaf = gc.rand(3, 1, requires_grad=True)
    with pytest.raises(gc.AutogradError, match="squeeze_"):
        leaf.squeeze_()
    base = gc.arange(6.0)
    v = base[1:5]
    v.unsqueeze_(0)
    v.mul_(10)  # still a view: writes reach the base
    assert base.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 5.0]


@pytest.mark.parametrize(
    "op,args",
    [("t_", ()), ("transpose_", (0, 1)), ("swapdims_", (1, 0)), ("unsqueeze_", (1,))],
)
def test_view_ops_in_place_keep_earlier_views_and_bump_version(op, args):
    # views taken before self changes layout keep their steps relative to the old layout
    torch = pytest.importorskip("torch")
    a = RNG.uniform(-1, 1, (2, 3))
    ga, ta = gc.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    gy, ty = ga * 1, ta * 1
    gv, tv = gy[0], ty[0]
    gver, tver = gy._vbox[0], ty._version
    getattr(gy, op)(*args)
    getattr(ty, op)(*args)
    assert gy._vbox[0] - gver == ty._version - tver == 1
    gs, ts = gc.tensor([1.0, 2.0, 3.0], requires_grad=True), torch.tensor([1.0, 2.0, 3.0])
    ts.requires_grad_()
    gv.mul_(gs * 2)
    tv.mul_(ts * 2)
    w = RNG.uniform(-1, 1, tuple(ty.shape))
    (gy * gc.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(gy.detach().numpy(), ty.detach().numpy())
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(gs.grad.numpy(), ts.grad.numpy())


def test_resize_as_torch():
    torch = pytest.importorskip("torch")
    g, t = gc.arange(6.0), torch.arange(6.0)
    for shape in ((2, 3), (4,), (2, 2)):
        g.resize_(*shape)
        t.resize_(*shape)
        assert tuple(g.shape) == shape
        np.testing.assert_array_equal(g.numpy(), t.numpy())
    g.resize_(3, 3)  # grows: the first elements kept, in order
    assert tuple(g.shape) == (3, 3) and g.reshape(-1)[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    g.resize_as_(gc.zeros(2, 2))
    assert g.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    with pytest.raises(gc.AutogradError, match="resize_"):
        gc.rand(2, requires_grad=True).resize_(3)


def test_new_as_torch():
    torch = pytest.importorskip("torch")
    g, t = gc.ones(2, dtype=gc.int32), torch.ones(2, dtype=torch.int32)
    assert tuple(g.new(2, 3).shape) == tuple(t.new(2, 3).shape) and g.new(2, 3).dtype is gc.int32
    assert g.new([1, 2]).tolist() == t.new([1, 2]).tolist() and g.new([1, 2]).dtype is gc.int32
    assert tuple(g.new().shape) == tuple(t.new().shape) == (0,)
    assert tuple(g.new(gc.Size([4])).shape) == (4,)


def test_top_level_inplace_as_torch():
    torch = pytest.importorskip("torch")
    a = RNG.uniform(0.1, 0.9, (3, 4))
    for name in ("exp_", "sigmoid_", "sqrt_", "log1p_", "square_", "tanh_", "relu_", "zero_"):
        g, t = gc.tensor(a), torch.tensor(a)
        assert getattr(gc, name)(g) is g
        getattr(torch, name)(t)
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)
    g, t = gc.tensor(a - 0.5), torch.tensor(a - 0.5)
    gc.clamp_(g, -0.1, 0.1)
    torch.clamp_(t, -0.1, 0.1)
    np.testing.assert_allclose(g.numpy(), t.numpy())
    for name, args in (("selu_", ()), ("celu_", (0.5,)), ("threshold_", (0.0, -1.0)),
                       ("dropout_", (0.5, False)), ("rrelu_", (0.1, 0.3, False))):  # fmt: skip
        g, t = gc.tensor(a - 0.5), torch.tensor(a - 0.5)
        assert getattr(gc, name)(g, *args) is g
        getattr(torch, name)(t, *args)
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)


def test_copy_functions_as_torch():
    torch = pytest.importorskip("torch")
    a = RNG.uniform(-1, 1, (2, 3, 4))
    for name, args in (("permute_copy", ((2, 0, 1),)), ("transpose_copy", (0, 2)),
                       ("select_copy", (1, 2)), ("diagonal_copy", (0, 1, 2)),
                       ("narrow_copy", (2, 1, 2)), ("unsqueeze_copy", (1,)),
                       ("view_copy", ((6, 4),)), ("expand_copy", ((3, 2, 3, 4),)),
                       ("slice_copy", (2, 0, 4, 2)), ("detach_copy", ()), ("alias_copy", ()),
                       ("unfold_copy", (2, 2, 1)), ("as_strided_copy", ((2, 2), (1, 2))),
                       ("squeeze_copy", ()), ("t_copy", ())):  # fmt: skip
        src = a if name != "t_copy" else a[0]
        g = getattr(gc, name)(gc.tensor(src), *args)
        t = getattr(torch, name)(torch.tensor(src), *args)
        assert g.is_contiguous() and tuple(g.shape) == tuple(t.shape), name
        np.testing.assert_allclose(g.numpy(), t.numpy())
    for name, args in (("split_copy", (2, 2)), ("unbind_copy", (1,)),
                       ("split_with_sizes_copy", ([1, 3], 2))):  # fmt: skip
        g = getattr(gc, name)(gc.tensor(a), *args)
        t = getattr(torch, name)(torch.tensor(a), *args)
        assert len(g) == len(t)
        for x, y in zip(g, t):
            np.testing.assert_allclose(x.numpy(), y.numpy())


def test_set_as_torch():
    torch = pytest.importorskip("torch")
    g, gb = gc.ones(3), gc.zeros(2, 2)
    t, tb = torch.ones(3), torch.zeros(2, 2)
    assert g.set_(gb) is g
    t.set_(tb)
    assert tuple(g.shape) == tuple(t.shape)
    gb[0, 0] = 5.0  # shared storage
    tb[0, 0] = 5.0
    assert g.tolist() == t.tolist()
    g.set_()
    assert tuple(g.shape) == tuple(torch.ones(2).set_().shape) == (0,)
    with pytest.raises(gc.DTypeError, match="set_"):
        gc.ones(2).set_(gc.ones(2, dtype=gc.float64))
    with pytest.raises(gc.AutogradError, match="set_"):
        gc.ones(2, requires_grad=True).set_(gb)


@pytest.mark.filterwarnings("ignore:non-inplace resize")
def test_out_of_place_resize_as_torch():
    torch = pytest.importorskip("torch")
    x = np.arange(6.0)
    g, t = gc.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    gy, ty = g.resize(2, 3), t.resize(2, 3)
    np.testing.assert_array_equal(gy.detach().numpy(), ty.detach().numpy())
    w = np.arange(6.0).reshape(2, 3)
    (gy * gc.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), t.grad.numpy())
    assert tuple(g.resize_as(gc.zeros(3, 2)).shape) == tuple(t.resize_as(torch.zeros(3, 2)).shape)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        g.resize(3, 2)
    with pytest.raises(gc.ShapeError, match="resize"):
        g.resize(4)
