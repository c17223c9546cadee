"""Every collective on every rank against numpy, sync and async, on 2 and 4 ranks and with
Vulkan tensors (the worker is workers/collectives.py)."""

import pytest
from mpi_harness import mpirun, passed

CHECKS = [
    f"{name} async={a}" for a in (False, True) for name in ("all_reduce", "rooted", "gathers")
] + ["point_to_point", "objects_groups_errors"]


@pytest.mark.parametrize("np", [2, 4])
def test_collectives_on_cpu_tensors(np):
    passed(mpirun("collectives.py", np), np, *CHECKS)


def test_collectives_on_vulkan_tensors(vulkan):
    res = mpirun("collectives.py", 2, "vulkan", env={"GPUCORE_VULKAN_ALLOW_CPU": "1"})
    passed(res, 2, *CHECKS)
