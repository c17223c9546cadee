"""Dispatch policy: which backend runs an op.

Today every op runs on the CPU backend (the C extension). The Vulkan issue adds the policy:
ops whose largest tensor has at least GPUCORE_GPU_THRESHOLD elements go to the Vulkan device, and
tensors stay where they were last written. ``backend_for`` is the single place that decision lives.

``trace_ops()`` records which backend ran each op (the demo prints it; tests use it to check
placement).
"""

from __future__ import annotations

import threading

from .backends import cpu as _cpu_backend


def backend_for(op, inputs, specs):
    """The backend that runs ``op`` on ``inputs`` producing outputs described by ``specs``."""
    return _cpu_backend.BACKEND


class _Trace(threading.local):
    records = None


_trace = _Trace()


class trace_ops:
    """Context manager collecting ``(op name, backend name, output shape)`` for each op run in
    this thread::

        with gpucore.dispatch.trace_ops() as ops:
            y = model(x)
        print(ops)
    """

    def __enter__(self) -> list:
        self._prev = _trace.records
        self.records = []
        _trace.records = self.records
        return self.records

    def __exit__(self, *exc):
        _trace.records = self._prev
        return False


def record(op_name: str, backend: str, shape) -> None:
    recs = _trace.records
    if recs is not None:
        recs.append((op_name, backend, tuple(shape)))
