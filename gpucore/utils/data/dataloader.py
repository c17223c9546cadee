"""DataLoader: batches of a dataset, in the main process or in worker processes (PyTorch's
``torch.utils.data.DataLoader``, the same arguments, checks and iteration rules).

Each ``iter(loader)`` draws one base seed from ``generator`` (default: gpucore's default
generator) for its workers, and a shuffling loader's RandomSampler draws its own, so
``gpucore.manual_seed(s)`` before a run fixes both the order and the workers' seeds. The
multi-process iterator is in ``multiprocess.py``.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.context import BaseContext
from typing import Generic, TypeVar

from ...random import Generator
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .iterator import SingleProcessIter
from .multiprocess import MultiProcessingIter
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    _InfiniteConstantSampler,
)

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)
_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches.

    ``batch_size`` samples per batch (None: no automatic batching, ``collate_fn`` gets single
    samples), in order or ``shuffle``d, or in the order of a ``sampler`` (indices) or a
    ``batch_sampler`` (lists of indices); ``drop_last`` drops a short final batch.
    ``collate_fn`` (default ``default_collate``) makes a batch of a list of samples.
    ``num_workers > 0`` loads in that many worker processes (``multiprocessing_context``: a
    start method name or context; default the platform's), each seeded from the iterator's base
    seed and set up by ``worker_init_fn(worker_id)``; ``prefetch_factor`` batches in flight per
    worker (default 2); ``persistent_workers`` keeps them between passes; ``timeout`` (seconds,
    0: none) bounds the wait for a batch. A worker's exception is re-raised here naming the
    worker with its original traceback; a worker that dies raises RuntimeError. ``pin_memory``,
    ``pin_memory_device`` and ``in_order`` are accepted (gpucore has no pinned host memory, and
    batches always come in order).
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler | Iterable | None = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: str | BaseContext | None = None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable "
                "multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing.let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, but "
                    f"got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, but "
                    f"got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler "
                    f"option, but got batch_sampler={batch_sampler}"
                )
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with "
                "drop_last"
            )
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterable_len: int | None = None  # len(self) of an IterableDataset, once asked
        self._iterator = None
        self._initialized = True

    @property
    def multiprocessing_context(self) -> BaseContext | None:
        """The multiprocessing context workers start in (None: the default one)."""
        return self._mp_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx) -> None:
        if ctx is not None:
            if self.num_workers == 0:
                raise ValueError(
                    "multiprocessing_context can only be used with multi-process loading "
                    f"(num_workers > 0), but got num_workers={self.num_workers}"
                )
            if isinstance(ctx, str):
                methods = multiprocessing.get_all_start_methods()
                if ctx not in methods:
                    raise ValueError(
                        "multiprocessing_context option should specify a valid start method in "
                        f"{methods!r}, but got multiprocessing_context={ctx!r}"
                    )
                ctx = multiprocessing.get_context(ctx)
            if not isinstance(ctx, BaseContext):
                raise TypeError(
                    "multiprocessing_context option should be a valid context object or a string "
                    f"specifying the start method, but got multiprocessing_context={ctx}"
                )
        self._mp_context = ctx

    def __setattr__(self, attr: str, val) -> None:
        if attr in _FROZEN and self.__dict__.get("_initialized"):
            raise ValueError(
                f"{attr} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator:
        """A new pass over the data (persistent workers are reused between passes)."""
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown:  # first pass, or a dead worker
                self._iterator = MultiProcessingIter(self)
            else:
                self._iterator.reset(self)
            return self._iterator
        if self.num_workers == 0:
            return SingleProcessIter(self)
        return MultiProcessingIter(self)

    def __len__(self) -> int:
        """Batches per pass: from the (batch) sampler, or for an IterableDataset from its
        ``len`` (divided by ``batch_size``, rounded as ``drop_last`` says)."""
        if self._iterable:
            length = self._iterable_len = len(self.dataset)
            if self.batch_size is not None:
                bs = self.batch_size
                length = length // bs if self.drop_last else math.ceil(length / bs)
            return length
        return len(self._index_sampler)
