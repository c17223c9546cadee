"""Global switch for graph recording: no_grad, enable_grad, set_grad_enabled, inference_mode.

Each works as a context manager and as a decorator, like PyTorch's. The flag is per thread, so a
worker thread under no_grad does not silence recording in another.
"""

from __future__ import annotations

import functools
import threading


class _State(threading.local):
    enabled = True
    inference = False  # inside inference_mode()

    def __init__(self):
        # Values to restore on exit, one per active context (per thread, so one context object
        # can be shared by threads and entered re-entrantly).
        self.stack = []


_state = _State()


def is_grad_enabled() -> bool:
    """True when ops record the graph for autograd."""
    return _state.enabled


class _GradModeContext:
    _value: bool

    def __enter__(self):
        _state.stack.append(_state.enabled)
        _state.enabled = self._value
        return self

    def __exit__(self, *exc):
        _state.enabled = _state.stack.pop()
        return False

    def __call__(self, fn):
        value = self._value

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _state.enabled
            _state.enabled = value
            try:
                return fn(*args, **kwargs)
            finally:
                _state.enabled = prev

        return wrapper


class _NoParamGradModeContext(_GradModeContext):
    """Also usable as a decorator without parentheses (``@no_grad``), as PyTorch's."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        if not callable(orig_func):
            raise TypeError(f"{cls.__name__}() takes no arguments, got {orig_func!r}")
        return cls()(orig_func)


class no_grad(_NoParamGradModeContext):
    """Disable graph recording inside the block or decorated function."""

    def __init__(self, orig_func=None):
        self._value = False


class enable_grad(_NoParamGradModeContext):
    """Enable graph recording inside the block, e.g. within a no_grad region."""

    def __init__(self, orig_func=None):
        self._value = True


class set_grad_enabled(_GradModeContext):
    """Set recording on or off; takes effect immediately (also as a plain call), and undoes itself
    at the end of a ``with`` block."""

    def __init__(self, mode: bool):
        self._prev = _state.enabled
        self._value = bool(mode)
        _state.enabled = self._value

    def __enter__(self):
        # The first ``with`` restores the mode from before construction, which already switched it.
        prev, self._prev = self._prev, None
        _state.stack.append(_state.enabled if prev is None else prev)
        _state.enabled = self._value
        return self

    def __call__(self, fn):
        # Used as a decorator, the mode must apply only inside calls, not from decoration on.
        if self._prev is not None:
            _state.enabled = self._prev
            self._prev = None
        return super().__call__(fn)


def is_inference_mode_enabled() -> bool:
    """True inside ``inference_mode()``."""
    return _state.inference


class inference_mode:  # noqa: N801 - PyTorch's name
    """PyTorch's ``inference_mode``: ``no_grad`` for inference code (a context manager, and a
    decorator with or without parentheses); ``is_inference_mode_enabled()`` is True inside.
    ``inference_mode(False)`` changes nothing. gpucore has no separate inference tensors: tensors
    made inside are ordinary tensors without history, as under ``no_grad``."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        _state.stack.append((_state.enabled, _state.inference))
        if self.mode:
            _state.enabled, _state.inference = False, True
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.inference = _state.stack.pop()
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self) -> inference_mode:
        return inference_mode(self.mode)
