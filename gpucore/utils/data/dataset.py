"""Datasets (PyTorch's ``torch.utils.data.dataset``): the map-style ``Dataset`` (``__getitem__``
and ``__len__``), the stream-style ``IterableDataset`` (``__iter__``), and the ways of combining
them: TensorDataset, StackDataset, ConcatDataset, ChainDataset, Subset, random_split."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from ...errors import ShapeError
from ...random import Generator
from ...tensor import Tensor
from .sampler import randperm

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map from keys (usually ``0 .. len - 1``) to samples. Subclasses define
    ``__getitem__`` and usually ``__len__`` (which the default samplers need); a
    ``__getitems__(indices)`` returning a list of samples lets the DataLoader fetch a batch in
    one call. ``a + b`` is ``ConcatDataset([a, b])``."""

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A stream of samples: subclasses define ``__iter__``. With ``num_workers > 0`` every
    worker iterates its own copy, so a dataset that should not repeat samples splits the stream
    with ``get_worker_info()`` (``id``, ``num_workers``). ``a + b`` is ``ChainDataset``."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; the tensors share their first size."""

    def __init__(self, *tensors: Tensor) -> None:
        if any(t.size(0) != tensors[0].size(0) for t in tensors):
            raise ShapeError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Datasets of one length side by side: sample ``i`` is ``tuple(d[i] for d in args)``, or
    ``{k: d[i]}`` for keyword datasets."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                "input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        return [self[i] for i in indices]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset[T_co]):
    """Map-style datasets one after another; ``cumulative_sizes[k]`` is where dataset k ends."""

    @staticmethod
    def cumsum(sequence: Iterable) -> list[int]:
        """The running totals of the lengths of ``sequence``'s datasets."""
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[k][idx if k == 0 else idx - self.cumulative_sizes[k - 1]]


class ChainDataset(IterableDataset):
    """IterableDatasets one after another, chained on the fly."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def _checked(self) -> Iterator[IterableDataset]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield d

    def __iter__(self) -> Iterator:
        for d in self._checked():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._checked())


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        if type(self).__getitem__ is not Subset.__getitem__:  # a subclass's own lookup wins
            return [self[i] for i in indices]
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def _split_lengths(n: int, lengths: Sequence[int | float]) -> list[int]:
    """Fractions summing to 1 become ``floor(n * f)`` each, the remainder handed out one by one
    from the first split on (PyTorch's rule); integer lengths pass through."""
    if not (math.isclose(sum(lengths), 1) and sum(lengths) <= 1):
        return [int(x) for x in lengths]
    sizes = []
    for i, frac in enumerate(lengths):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        sizes.append(math.floor(n * frac))
    for i in range(n - sum(sizes)):
        sizes[i % len(sizes)] += 1
    for i, size in enumerate(sizes):
        if size == 0:
            warnings.warn(
                f"Length of split at index {i} is 0. This might result in an empty dataset.",
                stacklevel=3,
            )
    return sizes


def random_split(
    dataset: Dataset[T_co],
    lengths: Sequence[int | float],
    generator: Generator | None = None,
) -> list[Subset[T_co]]:
    """Split ``dataset`` at random into non-overlapping Subsets of the given ``lengths``, or of
    ``floor(f * len(dataset))`` for fractions ``f`` summing to 1 (the remainder goes one by one
    to the first splits). ``generator`` (default: gpucore's default generator) fixes the split.
    """
    sizes = _split_lengths(len(dataset), lengths)
    if sum(sizes) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(sizes), generator)
    return [
        Subset(dataset, indices[end - size : end])
        for end, size in zip(itertools.accumulate(sizes), sizes)
    ]
