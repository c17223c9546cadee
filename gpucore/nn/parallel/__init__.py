"""Parallel wrappers: ``DistributedDataParallel`` (data parallelism over MPI ranks)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
