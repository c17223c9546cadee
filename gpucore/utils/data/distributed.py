"""DistributedSampler: each process of a distributed job loads its own shard of the indices."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

import numpy as np

from .sampler import Sampler


class DistributedSampler(Sampler[int]):
    """The indices of ``dataset`` for one rank of ``num_replicas``, as PyTorch's.

    Every epoch the indices are shuffled (when ``shuffle``) by a permutation seeded with
    ``seed + epoch`` (the same on every rank: call ``set_epoch(epoch)`` at the start of each
    epoch, or every epoch repeats the first one's order), then either padded by repeating the
    first indices to a multiple of ``num_replicas`` or, with ``drop_last``, cut to one; rank
    ``r`` takes every ``num_replicas``-th index starting at ``r``. The ranks' shards are disjoint
    (without padding) and together cover the dataset. ``num_replicas`` and ``rank`` default to
    the default process group's. The permutation comes from numpy's PCG64 generator, so the
    shuffled order differs from PyTorch's for the same seed (the partition rule is the same).
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            # gpucore.distributed starts nothing on import, but only samplers that ask need it
            from ... import distributed as dist  # noqa: PLC0415

            if not dist.is_initialized():
                raise RuntimeError(
                    "DistributedSampler: pass num_replicas and rank, or call "
                    "gpucore.distributed.init_process_group() first"
                )
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(
                f"DistributedSampler: invalid rank {rank!r}, rank should be in the interval "
                f"[0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            elif indices:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the shuffle's seed, so each epoch has its own order."""
        self.epoch = epoch
