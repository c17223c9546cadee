"""Setting a tensor's requires_grad flag: ``t.requires_grad = v`` gets the checks of
``t.requires_grad_(v)``, as PyTorch (a bool; a leaf, but for ``requires_grad_(True)`` on a
non-leaf; True only on a float dtype), with the same exception classes; leaves that PyTorch
lets change (made under no_grad, views of a leaf that does not require grad, Parameters), the
module-level switches (``Module.requires_grad_``, ``from_pretrained(freeze=)``) and the flag
through pickling, deepcopy and the C fast lane. The last part replays each case with torch when
it is installed."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from helpers import to_np as npv

import gpucore as gc
import gpucore.nn as nn
from gpucore import ArgumentTypeError, AutogradError, DTypeError
from gpucore.errors import GradDTypeError

NOT_FLOAT = [gc.int64, gc.int32, gc.uint8, gc.bool]


def _non_leaf():
    x = gc.tensor([1.0, 2.0, 3.0], dtype=gc.float64, requires_grad=True)
    return x * 2


# ----------------------------------------------------------------------------- non-leaves
@pytest.mark.parametrize("flag", [True, False])
def test_assigning_to_a_non_leaf_raises(flag):
    y = _non_leaf()
    with pytest.raises(AutogradError, match="only change requires_grad flags of leaf") as e:
        y.requires_grad = flag
    assert isinstance(e.value, RuntimeError)
    assert "(3,)" in str(e.value) and "float64" in str(e.value)  # which tensor
    assert ("detach()" in str(e.value)) is (not flag)  # False: the way out
    assert y.requires_grad and y.grad_fn is not None  # unchanged


def test_requires_grad_method_on_a_non_leaf():
    y = _non_leaf()
    assert y.requires_grad_() is y and y.requires_grad_(True) is y  # already True: no change
    assert y.grad_fn is not None
    with pytest.raises(AutogradError, match="detach()"):
        y.requires_grad_(False)


def test_view_of_a_leaf_that_requires_grad_is_not_a_leaf():
    x = gc.ones(3, requires_grad=True)
    v = x[1:]
    assert not v.is_leaf
    with pytest.raises(AutogradError, match="leaf"):
        v.requires_grad = False


# ----------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dt", NOT_FLOAT, ids=str)
def test_true_on_a_non_float_tensor_raises_false_is_fine(dt):
    t = gc.zeros(2, 3, dtype=dt)
    for set_true in (lambda: setattr(t, "requires_grad", True), lambda: t.requires_grad_(True)):
        with pytest.raises(GradDTypeError, match="floating point") as e:
            set_true()
        # gpucore's DTypeError (a TypeError) and PyTorch's RuntimeError: both catch it
        assert isinstance(e.value, DTypeError) and isinstance(e.value, RuntimeError)
        assert str(dt) in str(e.value) and "(2, 3)" in str(e.value)
        assert t.requires_grad is False
    t.requires_grad = False
    assert t.requires_grad_(False) is t and t.requires_grad is False


def test_int_parameter_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(gc.ones(2, dtype=gc.int64))
    p = nn.Parameter(gc.ones(2, dtype=gc.int64), requires_grad=False)
    with pytest.raises(GradDTypeError):
        p.requires_grad = True


# ----------------------------------------------------------------------------- non-bools
NON_BOOLS = [1, 0, None, "yes", 1.0, np.bool_(True)]


@pytest.mark.parametrize("value", NON_BOOLS, ids=repr)
def test_a_non_bool_is_refused(value):
    t = gc.ones(2)
    with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
        t.requires_grad = value  # PyTorch's RuntimeError
    with pytest.raises(ArgumentTypeError, match="must be bool, not " + type(value).__name__):
        t.requires_grad_(value)  # PyTorch's TypeError
    with pytest.raises(RuntimeError, match="must be a bool"):
        _non_leaf().requires_grad = value  # the type is checked first
    assert t.requires_grad is False


def test_a_tensor_is_not_a_bool():
    t = gc.ones(2)
    with pytest.raises(RuntimeError, match="got Tensor"):
        t.requires_grad = gc.tensor(True)


# ----------------------------------------------------------------------------- leaves
def test_leaf_made_under_no_grad_can_require_grad():
    x = gc.tensor([1.0, 2.0], dtype=gc.float64, requires_grad=True)
    with gc.no_grad():
        z = x * 3
    assert z.is_leaf and not z.requires_grad
    z.requires_grad = True
    (z * z).sum().backward()
    np.testing.assert_allclose(npv(z.grad), [6.0, 12.0])  # d(z^2)/dz = 2z, z = [3, 6]
    assert x.grad is None


def test_view_of_a_leaf_without_grad_is_a_leaf_that_can_require_grad():
    base = gc.tensor([1.0, 2.0, 3.0], dtype=gc.float64)
    v = base[1:]
    assert v.is_leaf
    v.requires_grad = True
    (v * v).sum().backward()
    np.testing.assert_allclose(npv(v.grad), [4.0, 6.0])
    assert base.grad is None and not base.requires_grad


def test_leaf_flag_round_trip():
    t = gc.ones(2)
    t.requires_grad = True
    assert t.requires_grad is True and t.is_leaf
    t.requires_grad = False
    assert t.requires_grad is False


def test_parameter_flag():
    p = nn.Parameter(gc.ones(2), requires_grad=False)
    assert not p.requires_grad
    p.requires_grad = True
    (p * 2).sum().backward()
    np.testing.assert_allclose(npv(p.grad), [2.0, 2.0])


def test_module_requires_grad_():
    m = nn.Linear(2, 2)
    assert m.requires_grad_(False) is m
    assert [p.requires_grad for p in m.parameters()] == [False, False]
    m.requires_grad_(True)
    assert [p.requires_grad for p in m.parameters()] == [True, True]


@pytest.mark.parametrize("freeze", [True, False])
def test_embedding_from_pretrained_freeze(freeze):
    w = gc.ones(3, 2)
    assert nn.Embedding.from_pretrained(w, freeze=freeze).weight.requires_grad is (not freeze)
    bag = nn.EmbeddingBag.from_pretrained(w, freeze=freeze)
    assert bag.weight.requires_grad is (not freeze)


# ----------------------------------------------------------------------------- the slot
def test_fast_lane_results_start_without_grad():
    # the small-op lane (cpu/python/fastpath.c) writes the flag's slot by name: a fresh result
    # holds False (not None), and is a leaf that can then require grad
    a, b = gc.ones(4), gc.ones(4)
    out = a + b
    assert out.requires_grad is False and out.is_leaf
    out.requires_grad = True
    assert out.requires_grad is True
    a.requires_grad = True
    assert (a + b).requires_grad is True


@pytest.mark.parametrize("flag", [True, False])
def test_pickle_and_deepcopy_keep_the_flag(flag):
    t = gc.ones(2, requires_grad=flag)
    p = nn.Parameter(gc.ones(2), requires_grad=flag)
    for src in (t, p):
        for out in (pickle.loads(pickle.dumps(src)), copy.deepcopy(src)):
            assert type(out) is type(src) and out.requires_grad is flag and out.is_leaf


FACTORIES = {
    "ones": lambda m, v: m.ones(2, requires_grad=v),
    "zeros": lambda m, v: m.zeros(2, requires_grad=v),
    "empty": lambda m, v: m.empty(2, requires_grad=v),
    "tensor": lambda m, v: m.tensor([1.0, 2.0], requires_grad=v),
    "arange": lambda m, v: m.arange(3.0, requires_grad=v),
    "randn": lambda m, v: m.randn(2, requires_grad=v),
    "asarray": lambda m, v: m.asarray([1.0], requires_grad=v),
    "Tensor": lambda m, v: m.Tensor([1.0]).requires_grad_(v),
    "Parameter": lambda m, v: m.nn.Parameter(m.ones(2), requires_grad=v),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_take_a_bool_requires_grad(name):
    make = FACTORIES[name]
    assert make(gc, True).requires_grad is True and make(gc, True).is_leaf
    assert make(gc, False).requires_grad is False
    for value in (1, np.bool_(True), "yes"):
        with pytest.raises(TypeError, match="must be bool"):
            make(gc, value)


def test_asarray_requires_grad_on_a_tensor_makes_a_new_leaf():
    src = gc.tensor([1.0, 2.0])
    out = gc.asarray(src, requires_grad=True)
    assert out.requires_grad and out.is_leaf and not src.requires_grad


@pytest.mark.parametrize("dt", NOT_FLOAT, ids=str)
def test_data_of_a_tensor_that_requires_grad_must_stay_float(dt):
    p = nn.Parameter(gc.ones(2))
    with pytest.raises(GradDTypeError, match="must be of a floating point dtype"):
        p.data = gc.ones(2, dtype=dt)
    assert p.dtype == gc.float32 and npv(p).tolist() == [1.0, 1.0]  # untouched
    q = gc.ones(2)  # no grad: any dtype may be set, as in PyTorch
    q.data = gc.ones(2, dtype=dt)
    assert q.dtype == dt


# ----------------------------------------------------------------------------- against torch
def _outcome(fn, m):
    """(the builtin class raised or None, the flag after) of fn(module m)."""
    try:
        t = fn(m)
    except (RuntimeError, TypeError) as e:
        return (RuntimeError if isinstance(e, RuntimeError) else TypeError), None
    return None, bool(t.requires_grad)


def _setattr(t, v):
    t.requires_grad = v
    return t


def _set_data(t, v):
    t.data = v
    return t


def _under_no_grad(m):
    x = m.ones(2, requires_grad=True)
    with m.no_grad():
        z = x * 2
    return _setattr(z, True)


def _y(m):
    return m.ones(2, requires_grad=True) * 2


TORCH_CASES = {
    "non-leaf = True": lambda m: _setattr(_y(m), True),
    "non-leaf = False": lambda m: _setattr(_y(m), False),
    "non-leaf.requires_grad_(True)": lambda m: _y(m).requires_grad_(),
    "non-leaf.requires_grad_(False)": lambda m: _y(m).requires_grad_(False),
    "int64 = True": lambda m: _setattr(m.ones(2, dtype=m.int64), True),
    "int64 = False": lambda m: _setattr(m.ones(2, dtype=m.int64), False),
    "bool.requires_grad_(True)": lambda m: m.ones(2, dtype=m.bool).requires_grad_(True),
    "bool.requires_grad_(False)": lambda m: m.ones(2, dtype=m.bool).requires_grad_(False),
    "= 1": lambda m: _setattr(m.ones(2), 1),
    "= None": lambda m: _setattr(m.ones(2), None),
    "= np.bool_": lambda m: _setattr(m.ones(2), np.bool_(True)),
    "requires_grad_(1)": lambda m: m.ones(2).requires_grad_(1),
    "requires_grad_(np.bool_)": lambda m: m.ones(2).requires_grad_(np.bool_(False)),
    "non-leaf = 1": lambda m: _setattr(_y(m), 1),
    "leaf made under no_grad = True": _under_no_grad,
    "view of a leaf = True": lambda m: _setattr(m.ones(3)[1:], True),
    "view of a grad leaf = False": lambda m: _setattr(m.ones(3, requires_grad=True)[1:], False),
    "Parameter(False) = True": lambda m: _setattr(
        m.nn.Parameter(m.ones(2), requires_grad=False), True
    ),
    "Parameter(int64)": lambda m: m.nn.Parameter(m.ones(2, dtype=m.int64)),
    "Linear.requires_grad_(False)": lambda m: m.nn.Linear(2, 2).requires_grad_(False).weight,
    "from_pretrained(freeze=True)": lambda m: m.nn.Embedding.from_pretrained(m.ones(3, 2)).weight,
    "ones(requires_grad=1)": lambda m: m.ones(2, requires_grad=1),
    "Parameter(requires_grad=1)": lambda m: m.nn.Parameter(m.ones(2), requires_grad=1),
    "Parameter.data = int64": lambda m: _set_data(
        m.nn.Parameter(m.ones(2)), m.ones(2, dtype=m.int64)
    ),
    "from_pretrained(freeze=False)": lambda m: (
        m.nn.Embedding.from_pretrained(m.ones(3, 2), freeze=False).weight
    ),
}


@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_same_outcome_as_torch(case):
    torch = pytest.importorskip("torch")
    fn = TORCH_CASES[case]
    assert _outcome(fn, gc) == _outcome(fn, torch)
