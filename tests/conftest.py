"""Shared test set-up.

- Puts tests/ on sys.path so test modules can ``import helpers`` (tests have no __init__.py).
- The ``vulkan`` fixture: runs a test under the 'vulkan' device policy (every op with a shader goes
  to the device, whatever its size). Without a device the test is skipped, unless
  GPUCORE_TEST_REQUIRE_VULKAN=1 (set by .ci/run), which makes it fail: CI must never pass by
  skipping the GPU path.
- The ``tolerance`` fixture of the bad-argument sweeps (tests/test_bad_arguments.py,
  test_special_bad_arguments.py, nn/test_functional_bad_arguments.py): each test on the CPU and
  under the 'vulkan' policy, with its results' tolerance against PyTorch's.
"""

import os
import sys

import pytest

import gpucore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


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


@pytest.fixture(params=["cpu", "vulkan"])
def tolerance(request):
    """The backend (the 'vulkan' policy sends every op with a shader to the device) and the
    (atol, rtol) of its float32 results against PyTorch's."""
    if request.param == "vulkan":
        request.getfixturevalue("vulkan")
        return (1e-4, 1e-3)  # lavapipe's transcendental functions are less exact
    return (1e-5, 1e-4)
