"""Parallel wrappers: ``DistributedDataParallel`` (data parallelism over MPI ranks) and
``DataParallel`` (PyTorch's single-process wrapper; runs the module as it is)."""

from ..modules.data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
