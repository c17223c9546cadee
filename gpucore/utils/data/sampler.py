"""Samplers: which dataset indices a DataLoader loads, and in what order (PyTorch's
``torch.utils.data.sampler``).

Random samplers draw from gpucore's Philox generator (``gpucore.random``): a ``generator``
argument when given, else the default generator, so ``gpucore.manual_seed(s)`` makes shuffling
reproducible. As in PyTorch, a ``RandomSampler`` without a generator takes one seed from the
default generator per pass and shuffles with a private generator seeded with it. The streams
differ from PyTorch's (a different generator), the partitioning rules do not.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Generic, TypeVar

import numpy as np

from ...creation import tensor as _tensor
from ...dtypes import float64
from ...ops.random import randint
from ...random import Generator
from ...tensor import Tensor

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

T_co = TypeVar("T_co", covariant=True)
_INT63 = 2**63 - 1


# ------------------------------------------------------------------ draws from gpucore's generator
def random_seed(generator: Generator | None = None) -> int:
    """One int in [0, 2**63 - 1) from ``generator`` (None: the default generator), as PyTorch's
    ``torch.empty((), dtype=torch.int64).random_(generator=...)``."""
    return int(randint(0, _INT63, (), generator=generator).item())


def randperm(n: int, generator: Generator | None = None) -> list[int]:
    """A uniformly random permutation of ``range(n)`` as a list (sorting 63-bit random keys)."""
    if n <= 0:
        return []
    keys = randint(0, _INT63, (n,), generator=generator).numpy()
    return np.argsort(keys, kind="stable").tolist()


def _uniform(n: int, generator: Generator | None) -> np.ndarray:
    """``n`` float64 values uniform in (0, 1], 53 random bits each."""
    bits = randint(0, 2**53, (n,), generator=generator).numpy()
    return (bits.astype(np.float64) + 1.0) * 2.0**-53


def multinomial(
    weights: np.ndarray, num_samples: int, replacement: bool, generator: Generator | None = None
) -> list[int]:
    """Indices drawn with probabilities proportional to ``weights`` (1-D, float64), with the
    checks and messages of ``torch.multinomial``. Without replacement each draw removes its
    category (exponential races: the ``num_samples`` smallest ``-log(u) / w``)."""
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = float(weights.sum())
    if not total > 0:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        cdf = np.cumsum(weights)
        x = (1.0 - _uniform(num_samples, generator)) * cdf[-1]  # in [0, total)
        idx = np.searchsorted(cdf, x, side="right")
        return np.minimum(idx, len(weights) - 1).tolist()
    if num_samples > len(weights):
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    if num_samples > int(np.count_nonzero(weights)):
        raise RuntimeError(
            "invalid multinomial distribution (with replacement=False, not enough non-negative "
            "category to sample)"
        )
    with np.errstate(divide="ignore"):
        keys = -np.log(_uniform(len(weights), generator)) / weights
    return np.argsort(keys, kind="stable")[:num_samples].tolist()


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ------------------------------------------------------------------------------------ samplers
class Sampler(Generic[T_co]):
    """Base class of samplers: ``__iter__`` yields indices (or lists of indices, for batch
    samplers); ``__len__``, when defined, is how many. ``Sampler[int]`` subscripts as PyTorch's.
    The ``data_source`` argument older PyTorch took is accepted and ignored."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices of ``data_source``: a permutation (``num_samples`` beyond ``len`` chains
    fresh permutations), or with ``replacement=True`` independent uniform draws."""

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if not _is_int(self.num_samples) or self.num_samples <= 0:
            raise ValueError(
                "num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        """``num_samples`` when given, else the data source's current length."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        gen = self.generator
        if gen is None:  # one draw from the default generator per pass, as PyTorch
            gen = Generator(random_seed())
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(0, n, (32,), generator=gen).tolist()
            yield from randint(0, n, (self.num_samples % 32,), generator=gen).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, gen)
            yield from randperm(n, gen)[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a random order (a fresh permutation each pass)."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices of ``range(len(weights))`` drawn with probability proportional
    to ``weights`` (which need not sum to 1), with or without replacement."""

    def __init__(
        self,
        weights: Sequence[float] | Tensor | np.ndarray,
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ) -> None:
        if not _is_int(num_samples) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        w = weights.tolist() if isinstance(weights, Tensor) else weights
        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}"
            )
        self.weights = _tensor(w, dtype=float64)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        w = np.asarray(self.weights.numpy(), dtype=np.float64)  # read now: it may be replaced
        yield from multinomial(w, self.num_samples, self.replacement, self.generator)

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups the indices of ``sampler`` (any iterable of indices) into lists of
    ``batch_size``; the last, shorter one is dropped when ``drop_last``."""

    def __init__(
        self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool
    ) -> None:
        if not _is_int(batch_size) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        while batch := list(itertools.islice(it, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return (
            n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
        )


class _InfiniteConstantSampler(Sampler[None]):
    """What an IterableDataset's loader batches: ``None`` forever (the dataset decides)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None
