"""PyTorch's inference_mode (gpucore/autograd/grad_mode.py) and the legacy Variable
(gpucore/autograd/variable.py), compared with torch where it is installed."""

from __future__ import annotations

import threading

import pytest

import gpucore as gc
from gpucore.autograd import Variable, inference_mode, is_inference_mode_enabled


@pytest.fixture(autouse=True)
def _restore_modes():
    yield
    assert gc.is_grad_enabled() and not gc.is_inference_mode_enabled()


def test_inference_mode_context():
    x = gc.ones(2, requires_grad=True)
    with gc.inference_mode():
        assert is_inference_mode_enabled() and not gc.is_grad_enabled()
        y = x * 2
        with gc.enable_grad():  # as in PyTorch's no_grad: recording can be switched back on
            assert gc.is_grad_enabled() and gc.is_inference_mode_enabled()
        assert not gc.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    with gc.inference_mode(False):
        assert gc.is_grad_enabled() and not gc.is_inference_mode_enabled()
    with gc.no_grad(), gc.inference_mode(False):
        assert not gc.is_grad_enabled()  # inference_mode(False) changes nothing


def test_inference_mode_decorators_and_nesting():
    @gc.inference_mode
    def bare():
        return gc.is_inference_mode_enabled(), gc.is_grad_enabled()

    @gc.inference_mode()
    def called():
        with inference_mode():
            pass
        return gc.is_inference_mode_enabled(), gc.is_grad_enabled()

    @gc.inference_mode(mode=False)
    def off():
        return gc.is_inference_mode_enabled()

    assert bare() == (True, False) and called() == (True, False) and off() is False
    assert bare.__name__ == "bare"
    with gc.no_grad():
        assert bare() == (True, False)
        assert not gc.is_grad_enabled() and not gc.is_inference_mode_enabled()


def test_inference_mode_restores_after_exceptions_and_is_per_thread():
    with pytest.raises(ValueError), gc.inference_mode():
        raise ValueError
    seen = []
    with gc.inference_mode():
        t = threading.Thread(target=lambda: seen.append(gc.is_inference_mode_enabled()))
        t.start()
        t.join()
    assert seen == [False]


def test_variable_is_the_legacy_alias():
    x = gc.ones(2)
    v = Variable(x, requires_grad=True)
    assert v is not x and v.requires_grad and not x.requires_grad
    v.data.add_(1)  # shares x's storage
    assert x.tolist() == [2.0, 2.0]
    assert isinstance(x, Variable) and not isinstance([1], Variable)
    assert Variable([1.0, 2.0]).tolist() == [1.0, 2.0] and not Variable(x).requires_grad
    assert gc.autograd.Variable is Variable
    y = Variable(gc.ones(3), requires_grad=True)
    (y * y).sum().backward()
    assert y.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(gc.DTypeError):
        Variable(gc.arange(3), requires_grad=True)


def test_same_behaviour_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, gc):
        x = lib.ones(2, requires_grad=True)
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
            assert not (x * 2).requires_grad
        assert not lib.is_inference_mode_enabled()
        v = lib.autograd.Variable(lib.ones(2), requires_grad=True)
        assert v.requires_grad and v.is_leaf and isinstance(v, lib.autograd.Variable)
