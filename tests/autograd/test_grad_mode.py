"""no_grad / enable_grad / set_grad_enabled: context managers, decorators, nesting, threads."""

from __future__ import annotations

import threading

import pytest

import gpucore as gc
from gpucore.autograd import is_grad_enabled


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    yield
    assert is_grad_enabled(), "a test left grad mode off"


def leaf():
    return gc.tensor([1.0, 2.0], requires_grad=True)


def test_no_grad_context():
    x = leaf()
    with gc.no_grad():
        assert not is_grad_enabled() and not gc.is_grad_enabled()
        y = x * 2
    assert is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert (x * 2).requires_grad


def test_no_grad_decorator():
    x = leaf()

    @gc.no_grad()
    def f(t):
        """doc"""
        assert not is_grad_enabled()
        return t * 2

    assert f.__name__ == "f" and f.__doc__ == "doc"
    assert not f(x).requires_grad
    assert is_grad_enabled()
    assert not f(x).requires_grad  # reusable


def test_decorators_without_parentheses():
    # As PyTorch 2: @no_grad and @enable_grad work bare, not only as @no_grad().
    x = leaf()

    @gc.no_grad
    def f(t):
        """doc"""
        assert not is_grad_enabled()
        return t * 2

    @gc.enable_grad
    def g(t):
        return t * 2

    assert f.__name__ == "f" and f.__doc__ == "doc"
    assert not f(x).requires_grad and is_grad_enabled()
    with gc.no_grad():
        assert g(x).requires_grad
        assert not is_grad_enabled()
    with pytest.raises(TypeError, match="no arguments"):
        gc.no_grad(3)


def test_enable_grad_inside_no_grad_context_and_decorator():
    x = leaf()

    @gc.enable_grad()
    def g(t):
        return t * 2

    with gc.no_grad():
        with gc.enable_grad():
            assert is_grad_enabled()
            assert (x * 2).requires_grad
        assert not is_grad_enabled()
        assert g(x).requires_grad
        assert not is_grad_enabled()
        assert not (x * 2).requires_grad


def test_set_grad_enabled_context_and_decorator():
    x = leaf()
    with gc.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with gc.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not is_grad_enabled()
    assert is_grad_enabled()

    @gc.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert is_grad_enabled(), "decorating must not switch the mode"
    assert not f(x).requires_grad
    assert is_grad_enabled()


def test_set_grad_enabled_as_a_plain_call():
    gc.set_grad_enabled(False)
    try:
        assert not is_grad_enabled()
        assert not (leaf() * 2).requires_grad
    finally:
        gc.set_grad_enabled(True)
    assert is_grad_enabled()


def test_nesting_restores_each_level_and_survives_exceptions():
    with gc.no_grad():
        with gc.no_grad():
            pass
        assert not is_grad_enabled()
        with pytest.raises(ValueError):
            with gc.enable_grad():
                raise ValueError("boom")
        assert not is_grad_enabled()
    assert is_grad_enabled()

    @gc.no_grad()
    def bad():
        raise KeyError

    with pytest.raises(KeyError):
        bad()
    assert is_grad_enabled()


def test_reentrant_decorated_function():
    @gc.no_grad()
    def rec(n):
        assert not is_grad_enabled()
        return 0 if n == 0 else rec(n - 1) + 1

    assert rec(3) == 3 and is_grad_enabled()


def test_same_context_object_used_twice():
    ctx = gc.no_grad()
    with ctx:
        with ctx:
            assert not is_grad_enabled()
        assert not is_grad_enabled()
    assert is_grad_enabled()


def test_grad_mode_is_thread_local():
    errors = []
    inside = threading.Event()
    release = threading.Event()

    def worker():
        try:
            with gc.no_grad():
                inside.set()
                release.wait(5)
                if is_grad_enabled():
                    errors.append("worker saw grad enabled inside no_grad")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(5)
    # the worker is inside no_grad: this thread still records
    assert is_grad_enabled()
    assert (leaf() * 2).requires_grad
    release.set()
    t.join()
    assert not errors

    # and a new thread starts with grad enabled even when this one has it off
    seen = []
    with gc.no_grad():
        th = threading.Thread(target=lambda: seen.append(is_grad_enabled()))
        th.start()
        th.join()
    assert seen == [True]


def test_in_place_under_no_grad_on_leaf_bumps_version():
    x = leaf()
    v0 = x._vbox[0]
    with gc.no_grad():
        x.sub_(gc.tensor([0.5, 0.5]))
        x.mul_(2)
    assert x._vbox[0] == v0 + 2
    assert x.is_leaf and x.requires_grad and x.grad_fn is None
    assert x.detach().numpy().tolist() == [1.0, 3.0]
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 6.0]
