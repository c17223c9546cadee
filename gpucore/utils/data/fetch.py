"""Fetchers: one batch of samples from a dataset, collated. Shared by the single-process loader
and the worker processes (PyTorch's ``torch.utils.data._utils.fetch``)."""

from __future__ import annotations

import operator
from collections.abc import Callable

from ...creation import tensor
from ...dtypes import int64
from .collate import default_collate
from .dataset import Subset, TensorDataset


class MapDatasetFetcher:
    """Batches of a map-style dataset: ``dataset.__getitems__(indices)`` when it has one, else
    ``[dataset[i] for i in indices]``; one ``dataset[index]`` without automatic batching."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, possibly_batched_index):
        """The collated samples at ``possibly_batched_index`` (a list of keys, or one key)."""
        if not self.auto_collation:
            return self.collate_fn(self.dataset[possibly_batched_index])
        if self.collate_fn is default_collate:
            batch = _tensor_dataset_batch(self.dataset, possibly_batched_index)
            if batch is not None:
                return batch
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:
            data = getitems(possibly_batched_index)
        else:
            data = [self.dataset[i] for i in possibly_batched_index]
        return self.collate_fn(data)


def _tensor_dataset_batch(dataset, indices: list) -> list | None:
    """``default_collate([dataset[i] for i in indices])`` in one indexing op per tensor, for a
    TensorDataset (or plain Subsets of one); None for any other dataset. The result is the same
    (a list of the tensors' rows, stacked) without an op per sample."""
    while type(dataset) is Subset:
        indices = [dataset.indices[i] for i in indices]
        dataset = dataset.dataset
    if type(dataset) is not TensorDataset or not indices:
        return None
    if any(isinstance(i, bool) for i in indices):
        return None
    try:
        idx = tensor([operator.index(i) for i in indices], dtype=int64)
    except TypeError:  # keys that are not integers: the dataset's own indexing decides
        return None
    return [t[idx] for t in dataset.tensors]


class IterableDatasetFetcher:
    """Batches of an IterableDataset: the next ``len(index)`` samples of one iterator over it.
    Raises StopIteration when the stream is over (or only a short batch is left and
    ``drop_last``)."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        """The next batch (or sample, without automatic batching) of the stream, collated."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in possibly_batched_index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(possibly_batched_index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(
    iterable: bool, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool
):
    """The fetcher for ``dataset``'s kind."""
    cls = IterableDatasetFetcher if iterable else MapDatasetFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
