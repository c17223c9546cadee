"""Fixtures of the Vulkan backend tests: ``variant``, a reduction test (tests/backends/vulkan/
test_reduce.py, test_nn.py) run with subgroup arithmetic (where the device has it) and with the
shared-memory fallback."""

from __future__ import annotations

import pytest

from gpucore.backends.vulkan.kernels import reduce as R


@pytest.fixture(params=["subgroup", "shared"])
def variant(request, vulkan, monkeypatch):
    """Runs the test with subgroup reductions (when the device has them) and without."""
    if request.param == "shared":
        monkeypatch.setattr(R, "SUBGROUPS", False)
    elif not R.device_has_subgroups(vulkan.ctx):
        pytest.skip("the device has no subgroup arithmetic in compute shaders")
    return request.param
