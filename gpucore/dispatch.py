"""Dispatch policy: which backend runs an op.

Today every op runs on the CPU backend (the C extension). The Vulkan issue adds the policy:
ops whose largest tensor has at least GPUCORE_GPU_THRESHOLD elements go to the Vulkan device, and
tensors stay where they were last written. ``backend_for`` is the single place that decision lives.
"""

from __future__ import annotations

from .backends import cpu as _cpu_backend


def backend_for(op, inputs, specs):
    """The backend that runs ``op`` on ``inputs`` producing outputs described by ``specs``."""
    return _cpu_backend.BACKEND
