"""DistributedDataParallel and SyncBatchNorm on 2 and 4 ranks against one process training on
the whole batch (the worker is workers/ddp.py)."""

import pytest
from mpi_harness import mpirun, passed

CHECKS = [
    "matches one process",
    "bitwise reproducible",
    "no_sync accumulation",
    "unused parameters",
    "buffers and SyncBatchNorm",
    "checkpoint",
    "replica check",
]


@pytest.mark.parametrize("np", [2, 4])
def test_ddp_on_cpu(np):
    passed(mpirun("ddp.py", np), np, *CHECKS)


def test_ddp_on_vulkan(vulkan):
    passed(mpirun("ddp.py", 2, "vulkan", env={"GPUCORE_VULKAN_ALLOW_CPU": "1"}), 2, *CHECKS)
