"""In-place ops under autograd (gpucore/ops/inplace.py): each in-place form on a non-leaf gives the
same values and gradients as the out-of-place computation; views of non-leaves propagate to their
base (CopySlices); leaves requiring grad refuse; modified saved tensors raise; no_grad updates work.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore import AutogradError


def leaf(values, dtype=gc.float64):
    return gc.tensor(values, dtype=dtype, requires_grad=True)


def npv(t):
    return t.detach().numpy(force=True)


X0 = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]])
C = np.array([[2.0, 3.0, -1.0], [1.0, 0.5, 2.0]])


def run_both(inplace_fn, outofplace_fn, w=None):
    """Value and x.grad of sum(w * f(x*1)) via an in-place and an out-of-place f."""
    w = gc.tensor(np.arange(1.0, 7.0).reshape(2, 3) if w is None else w, dtype=gc.float64)
    res = []
    for fn in (inplace_fn, outofplace_fn):
        x = leaf(X0)
        y = x * 1.0
        out = fn(y, x)
        (out * w).sum().backward()
        res.append((npv(out).copy(), npv(x.grad).copy()))
    (v1, g1), (v2, g2) = res
    np.testing.assert_allclose(v1, v2)
    np.testing.assert_allclose(g1, g2)
    return v1, g1


def _ret(y, f):
    f(y)
    return y


C_T = gc.tensor(C, dtype=gc.float64)


@pytest.mark.parametrize(
    "name, ip, oop",
    [
        ("add_", lambda y, x: y.add_(C_T), lambda y, x: y + C_T),
        ("add_ self", lambda y, x: y.add_(x * x), lambda y, x: y + x * x),
        ("sub_", lambda y, x: y.sub_(x.exp()), lambda y, x: y - x.exp()),
        ("mul_", lambda y, x: y.mul_(C_T), lambda y, x: y * C_T),
        ("mul_ by x", lambda y, x: y.mul_(x), lambda y, x: y * x),
        ("div_", lambda y, x: y.div_(C_T), lambda y, x: y / C_T),
        ("pow_", lambda y, x: y.pow_(2), lambda y, x: y**2),
        ("iadd", lambda y, x: _ret(y, lambda t: t.__iadd__(3.0)), lambda y, x: y + 3.0),
        ("imul", lambda y, x: _ret(y, lambda t: t.__imul__(x)), lambda y, x: y * x),
        ("isub", lambda y, x: _ret(y, lambda t: t.__isub__(C_T)), lambda y, x: y - C_T),
        ("itruediv", lambda y, x: _ret(y, lambda t: t.__itruediv__(2.0)), lambda y, x: y / 2.0),
        ("tanh_", lambda y, x: y.tanh_(), lambda y, x: y.tanh()),
        ("sigmoid_", lambda y, x: y.sigmoid_(), lambda y, x: y.sigmoid()),
        ("exp_ twice", lambda y, x: y.mul_(0.5).exp_(), lambda y, x: (y * 0.5).exp()),
        ("clamp_", lambda y, x: y.clamp_(-1.0, 2.0), lambda y, x: y.clamp(-1.0, 2.0)),
        ("copy_", lambda y, x: y.copy_(x * x), lambda y, x: x * x),
        ("copy_ broadcast", lambda y, x: y.copy_(x[0] * 2), lambda y, x: (x[0] * 2).expand(2, 3)),
        ("copy_ const", lambda y, x: y.copy_(C_T), lambda y, x: C_T * 1 + x * 0),
        ("zero_", lambda y, x: y.zero_(), lambda y, x: x * 0),
        ("fill_", lambda y, x: y.fill_(2.5), lambda y, x: x * 0 + 2.5),
        ("zero_ then add", lambda y, x: y.zero_().add_(x), lambda y, x: x * 1),
        (
            "masked_fill_",
            lambda y, x: y.masked_fill_(x > 0, 0.0),
            lambda y, x: gc.where(x > 0, 0.0, y),
        ),
    ],
)
def test_inplace_matches_out_of_place(name, ip, oop):
    run_both(ip, oop)


def test_setitem_values_and_gradients():
    # y = x*1; y[1, 0] = v; y[0] = x[1]*3 (broadcast row); loss = sum(w*y)
    v = leaf([7.0])

    def ip(y, x):
        y[1, 0] = v[0]
        y[0] = x[1] * 3
        return y

    def oop(y, x):
        row0 = x[1] * 3
        row1 = gc.cat([v[0:1], y[1, 1:]])
        return gc.stack([row0, row1])

    val, g = run_both(ip, oop)
    w = np.arange(1.0, 7.0).reshape(2, 3)
    # hand check: y[0] came from 3*x[1], y[1,0] from v; x[0] is fully overwritten
    np.testing.assert_allclose(g[0], 0.0)
    np.testing.assert_allclose(g[1], [3 * w[0, 0], w[1, 1] + 3 * w[0, 1], w[1, 2] + 3 * w[0, 2]])
    assert v.grad is not None and v.grad.tolist() == [2 * w[1, 0]]


def test_setitem_from_own_element_times_constant():
    # mul by a constant keeps only the constant for backward (PyTorch), so reading y[1] and
    # then overwriting y[0] is fine: y = [2*x1, x1, x2]
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    y[0] = y[1] * 2
    np.testing.assert_allclose(npv(y), [4.0, 2.0, 3.0])
    (y * gc.tensor([1.0, 10.0, 100.0], dtype=gc.float64)).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [0.0, 12.0, 100.0])


def test_setitem_advanced_index():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    y = x * 2
    y[gc.tensor([0, 2])] = gc.tensor([10.0, 20.0], dtype=gc.float64)
    np.testing.assert_allclose(npv(y), [10.0, 4.0, 20.0, 8.0])
    (y * y).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [0.0, 16.0, 0.0, 32.0])  # 2 * y * 2 where kept


def test_inplace_on_view_of_non_leaf_propagates_to_base():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x * 1
    y[0] *= 2
    np.testing.assert_allclose(npv(y), [[2.0, 4.0], [3.0, 4.0]])
    y.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [[2.0, 2.0], [1.0, 1.0]])


@pytest.mark.parametrize(
    "view, expected_mask",
    [
        (lambda y: y[:, 1], [[1, 0, 1], [1, 0, 1]]),
        (lambda y: y.T[2], [[1, 1, 0], [1, 1, 0]]),
        (lambda y: y.reshape(6)[1:4], [[1, 0, 0], [0, 1, 1]]),
        (lambda y: y[1:, ::2], [[1, 1, 1], [0, 1, 0]]),
        (lambda y: y.unsqueeze(0)[0, 0], [[0, 0, 0], [1, 1, 1]]),
        (lambda y: y[1, 2], [[1, 1, 1], [1, 1, 0]]),  # 0-d view
    ],
)
def test_view_inplace_variants(view, expected_mask):
    """Multiply a view region of y = x*1 by x**2 there: dL/dx = 1 outside, 3x**2 inside."""
    x = leaf(X0)
    y = x * 1
    v = view(y)
    v.mul_(view(x * x))
    keep = np.array(expected_mask, dtype=bool)
    np.testing.assert_allclose(npv(y), np.where(keep, X0, X0**3))
    y.sum().backward()
    np.testing.assert_allclose(npv(x.grad), np.where(keep, 1.0, 3 * X0**2))


def test_view_of_non_leaf_zeroed():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    y[0].zero_()
    y[2].fill_(5.0)
    np.testing.assert_allclose(npv(y), [0.0, 4.0, 5.0])
    y.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [0.0, 2.0, 0.0])


def test_view_sees_inplace_on_base():
    # v was taken before y was modified: its history must follow the modification
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    v = y[0:2]
    y.mul_(3)
    np.testing.assert_allclose(npv(v), [6.0, 12.0])
    v.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [6.0, 6.0, 0.0])


def test_view_sees_inplace_on_sibling_view():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    y = x * 1
    a = y[0:3]
    b = y[2:4]
    b.mul_(10)  # y[2] is in both views
    (a * gc.tensor([1.0, 2.0, 3.0], dtype=gc.float64)).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [1.0, 2.0, 30.0, 0.0])


def test_base_grad_after_two_view_writes():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    y = x * 1
    y[0:2] *= 2
    y[1:3] *= 3
    np.testing.assert_allclose(npv(y), [2.0, 12.0, 9.0, 4.0])
    y.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [2.0, 6.0, 3.0, 1.0])


def test_view_of_constant_receives_grad_through_copy():
    base = gc.zeros(4, dtype=gc.float64)
    x = leaf([1.0, 2.0])
    base[1:3].copy_(x * x)
    assert base.requires_grad and not base.is_leaf
    (base * gc.tensor([1.0, 2.0, 3.0, 4.0], dtype=gc.float64)).sum().backward()
    np.testing.assert_allclose(npv(x.grad), [2 * 1.0 * 2, 2 * 2.0 * 3])


def test_inplace_into_constant_from_grad_tensor():
    c = gc.zeros(3, dtype=gc.float64)
    x = leaf([1.0, 2.0, 3.0])
    c.add_(x * x)
    assert c.requires_grad and c.grad_fn is not None
    c.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [2.0, 4.0, 6.0])


def test_overwritten_tensor_keeps_requires_grad():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.zero_()
    assert y.requires_grad and not y.is_leaf
    (gx,) = gc.autograd.grad((y + x).sum(), x)
    np.testing.assert_allclose(npv(gx), [1.0, 1.0])


@pytest.mark.parametrize("fill", [lambda t: t.uniform_(), lambda t: t.normal_(0.0, 2.0)])
def test_random_fills_cut_the_history_like_other_overwrites(fill):
    # The new values depend on nothing: y's old history gets zero gradient (as PyTorch), not
    # the gradient of the values it no longer holds.
    x = leaf([1.0, 2.0])
    y = x * 2
    fill(y)
    assert y.requires_grad and not y.is_leaf and y._vbox[0] == 1
    (gx,) = gc.autograd.grad((y + x).sum(), x)
    np.testing.assert_allclose(npv(gx), [1.0, 1.0])
    with pytest.raises(AutogradError, match="leaf"):
        fill(leaf([1.0, 2.0]))
    w = leaf([1.0, 2.0])
    with gc.no_grad():
        fill(w)  # how initialisers fill parameters
    assert w.requires_grad and w.is_leaf and w.grad_fn is None


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.add_(1),
        lambda x: x.mul_(2),
        lambda x: x.zero_(),
        lambda x: x.fill_(1.0),
        lambda x: x.copy_(gc.ones(2, 3, dtype=gc.float64)),
        lambda x: x.__setitem__(0, 1.0),
        lambda x: x.__iadd__(1.0),
        lambda x: x[0].mul_(2),
        lambda x: x.T.add_(1),
    ],
)
def test_inplace_on_leaf_requiring_grad_raises(fn):
    x = leaf(X0)
    with pytest.raises(AutogradError, match="leaf"):
        fn(x)
    np.testing.assert_allclose(npv(x), X0)  # not modified
    assert x._vbox[0] == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda x: (x.exp(), None),  # exp saves its output
        lambda x: (x.sigmoid(), None),
        lambda x: (x.tanh(), None),
        lambda x: (x.sqrt(), None),
        lambda x: (x * 1, lambda y: y * y),  # mul saves its inputs
        lambda x: (x * 1, lambda y: y.log()),
        lambda x: (x * 1, lambda y: y[0:1].exp() * y[1:2]),  # saved view of y
    ],
)
def test_modified_saved_tensor_raises(make):
    x = leaf([1.0, 2.0, 3.0])
    y, consumer = make(x)
    out = y if consumer is None else consumer(y)
    y.add_(1)
    with pytest.raises(AutogradError, match="in-place") as ei:
        out.sum().backward()
    assert "version" in str(ei.value)


def test_modified_saved_tensor_via_view_raises():
    x = leaf([1.0, 2.0, 3.0])
    y = x.exp()
    y[1] = 0.0
    with pytest.raises(AutogradError, match="in-place"):
        y.sum().backward()


def test_modified_saved_tensor_via_detached_alias_raises():
    x = leaf([1.0, 2.0])
    y = x.exp()
    with gc.no_grad():
        y.detach().mul_(2)
    with pytest.raises(AutogradError, match="version"):
        y.sum().backward()


def test_unsaved_tensor_may_be_modified():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    z = y + 1  # add saves nothing
    y.add_(5)
    z.sum().backward()
    np.testing.assert_allclose(npv(x.grad), [2.0, 2.0, 2.0])


def test_inplace_shape_change_rejected():
    y = leaf([1.0, 2.0]) * 1
    with pytest.raises(ValueError, match="shape"):
        y.add_(gc.ones(3, 2, dtype=gc.float64))


# ----------------------------------------------------------------------------- no_grad updates
def test_optimizer_style_update_under_no_grad():
    w = leaf([1.0, 2.0, 3.0])
    (w * w).sum().backward()
    v0 = w._vbox[0]
    with gc.no_grad():
        w.sub_(w.grad * 0.1)
        w[0] = 5.0
    assert w._vbox[0] == v0 + 2
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    np.testing.assert_allclose(npv(w), [5.0, 1.6, 2.4])
    w.grad = None
    (w * w).sum().backward()
    np.testing.assert_allclose(npv(w.grad), [10.0, 3.2, 4.8])


def test_no_grad_inplace_invalidates_saved_leaf():
    w = leaf([1.0, 2.0])
    out = (w * w).sum()  # mul saves w
    with gc.no_grad():
        w.add_(1)
    with pytest.raises(AutogradError, match="version"):
        out.backward()


def test_version_counter_shared_by_views():
    x = gc.zeros(4)
    v = x[1:3]
    n = x._vbox[0]
    v.add_(1)
    assert x._vbox[0] == n + 1 and v._vbox is x._vbox
    x.mul_(2)
    assert v._vbox[0] == n + 2
    np.testing.assert_allclose(x.numpy(), [0.0, 2.0, 2.0, 0.0])


def test_gradcheck_and_gradgradcheck_through_inplace_and_views():
    def f(x):
        y = x * 1
        y[0] *= x[1]
        y[:, 1:].mul_(x[:, :2].tanh())
        y.T[0].add_(x[:, 2].sigmoid())
        z = y.exp() * 1
        z[1, 2] = x[0, 0] * 3
        return z

    x = gc.tensor(
        np.random.default_rng(0).uniform(-1, 1, (2, 3)), dtype=gc.float64, requires_grad=True
    )
    assert gc.autograd.gradcheck(f, [x])
    assert gc.autograd.gradgradcheck(f, [x])


def test_view_and_other_view_of_same_storage_saved_raises():
    # mul_ saves y[1] (needed for y[0]'s gradient) and then bumps the shared version: PyTorch
    # raises here too rather than return a wrong gradient
    x = leaf([1.0, 2.0, 3.0])
    y = x * 1
    y[0] *= y[1]
    with pytest.raises(AutogradError, match="in-place"):
        y.sum().backward()


def test_mul_into_constant_keeps_its_old_value_for_backward():
    # c doesn't require grad; mul_ by w needs c's *old* value for dL/dw
    c = gc.tensor([2.0, 3.0], dtype=gc.float64)
    w = leaf([5.0, 7.0])
    c.mul_(w)
    np.testing.assert_allclose(npv(c), [10.0, 21.0])
    c.sum().backward()
    np.testing.assert_allclose(npv(w.grad), [2.0, 3.0])


def test_plain_inplace_under_grad_mode_records_nothing():
    c = gc.tensor([2.0, 3.0])
    c.mul_(2).add_(1)
    assert not c.requires_grad and c.grad_fn is None
    np.testing.assert_allclose(c.numpy(), [5.0, 7.0])


@pytest.mark.parametrize(
    "shape, wrap",
    [((3, 3), False), ((5, 3), False), ((7, 3), True), ((3, 5), True), ((2, 2, 2), False)],
)
def test_fill_diagonal_matches_numpy_and_torch(shape, wrap):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    ref = x.copy()
    np.fill_diagonal(ref, -1.0, wrap=wrap)  # numpy's rule is PyTorch's
    t = gc.tensor(x)
    assert t.fill_diagonal_(-1.0, wrap=wrap) is t
    np.testing.assert_array_equal(t.numpy(), ref)
    torch = pytest.importorskip("torch")
    tt = torch.tensor(x)
    tt.fill_diagonal_(-1.0, wrap=wrap)
    np.testing.assert_array_equal(tt.numpy(), ref)


def test_fill_diagonal_gradient_and_errors():
    w = gc.ones(3, 3, requires_grad=True)
    y = w * 2
    y.fill_diagonal_(0.0)
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * (1 - np.eye(3)))
    with pytest.raises(gc.errors.ShapeError, match="larger than 1"):
        gc.ones(3).fill_diagonal_(0)
    with pytest.raises(gc.errors.ShapeError, match="equal length"):
        gc.ones(2, 3, 3).fill_diagonal_(0)
