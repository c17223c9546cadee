"""The iterators a DataLoader returns: what both share (``BaseIter``) and the one that loads in
the calling process (``SingleProcessIter``); the worker-pool one is in ``multiprocess.py``."""

from __future__ import annotations

import warnings

from .fetch import create_fetcher
from .sampler import random_seed


class BaseIter:
    """State shared by both iterators: the index stream, the worker base seed, the fetch
    settings, and the check that an IterableDataset does not outrun the length it reported."""

    def __init__(self, loader):
        self._loader = loader
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._index_sampler = loader._index_sampler
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._collate_fn = loader.collate_fn
        self._num_workers = loader.num_workers
        self._base_seed = random_seed(loader.generator)
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        expected = self._loader._iterable_len
        if self._iterable and expected is not None and self._num_yielded > expected:
            warnings.warn(
                f"Length of IterableDataset {self._dataset} was reported to be {expected} (when "
                f"accessing len(dataloader)), but {self._num_yielded} samples have been fetched.",
                stacklevel=2,
            )
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)


class SingleProcessIter(BaseIter):
    """Loads each batch in the calling process when it is asked for."""

    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = create_fetcher(
            self._iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        return self._fetcher.fetch(self._next_index())
