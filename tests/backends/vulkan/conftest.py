"""Fixtures for Vulkan tests.

Tests that need a device take the ``vulkan`` fixture: it runs the test under the 'vulkan' device
policy (every op with a shader goes to the device, whatever its size). Without a device the test
is skipped, unless GPUCORE_TEST_REQUIRE_VULKAN=1 (set by .ci/run), which makes it fail: CI must
never pass by skipping the GPU path.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import gpucore


def _require() -> bool:
    return os.environ.get("GPUCORE_TEST_REQUIRE_VULKAN", "") not in ("", "0")


@pytest.fixture
def vulkan():
    be = gpucore.dispatch.vulkan_backend(allow_cpu=True)
    if be is None:
        msg = "no Vulkan device: " + (gpucore.vulkan.unavailable_reason() or "unknown reason")
        if _require():
            pytest.fail(msg + " (GPUCORE_TEST_REQUIRE_VULKAN=1)")
        pytest.skip(msg)
    with gpucore.device_policy("vulkan"):
        yield be
    gpucore.vulkan.synchronize()


def on_cpu(fn, *args, **kwargs):
    """Run fn under the 'cpu' policy (the reference path)."""
    with gpucore.device_policy("cpu"):
        return fn(*args, **kwargs)


def assert_close_to_cpu(fn, inputs, rtol=1e-5, atol=1e-6):
    """fn(*inputs) on the device equals fn on the CPU; also checks it actually ran there."""
    with gpucore.dispatch.trace_ops() as ops:
        out = fn(*inputs)
    ref = on_cpu(fn, *[t.cpu() if isinstance(t, gpucore.Tensor) else t for t in inputs])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(
            o.detach().cpu().numpy().astype(np.float64),
            r.detach().numpy().astype(np.float64),
            rtol=rtol,
            atol=atol,
        )
    return ops
