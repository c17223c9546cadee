"""Datasets and their combinations, and random_split (lengths, fractions, generator)."""

import warnings

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)


class Squares(Dataset[int]):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i


class Count(IterableDataset):
    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __iter__(self):
        return iter(range(self.start, self.stop))

    def __len__(self):
        return self.stop - self.start


def test_base_classes():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())
    assert isinstance(Squares(2) + Squares(3), ConcatDataset)
    assert isinstance(Count(0, 2) + Count(2, 3), ChainDataset)


def test_tensor_dataset():
    x, y = gpucore.arange(12.0).reshape(4, 3), gpucore.tensor([0, 1, 0, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    assert xi.tolist() == [6.0, 7.0, 8.0] and yi.item() == 0
    assert ds.tensors[0] is x
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(x, gpucore.zeros(5))


def test_stack_dataset():
    a, b = Squares(3), [10, 11, 12]
    assert StackDataset(a, b)[1] == (1, 11) and len(StackDataset(a, b)) == 3
    assert StackDataset(x=a, y=b)[2] == {"x": 4, "y": 12}
    assert StackDataset(a, b).__getitems__([0, 2]) == [(0, 10), (4, 12)]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(a, [1])
    with pytest.raises(ValueError, match="At least one dataset"):
        StackDataset()
    with pytest.raises(ValueError, match="both types are given"):
        StackDataset(a, y=b)


def test_concat_dataset():
    ds = ConcatDataset([Squares(2), [100, 101, 102], Squares(1)])
    assert len(ds) == 6 and ds.cumulative_sizes == [2, 5, 6]
    assert [ds[i] for i in range(6)] == [0, 1, 100, 101, 102, 0]
    assert ds[-1] == 0 and ds[-4] == 100
    with pytest.raises(ValueError, match="absolute value of index"):
        ds[-7]
    with pytest.raises(AssertionError, match="empty iterable"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        ConcatDataset([Count(0, 1)])


def test_concat_dataset_matches_torch():
    torch = pytest.importorskip("torch")
    parts = [list(range(3)), list(range(10, 14)), [99]]
    ours, ref = ConcatDataset(parts), torch.utils.data.ConcatDataset(parts)
    assert ours.cumulative_sizes == ref.cumulative_sizes
    assert [ours[i] for i in range(-8, 8)] == [ref[i] for i in range(-8, 8)]


def test_chain_dataset():
    ds = ChainDataset([Count(0, 3), Count(10, 12)])
    assert list(ds) == [0, 1, 2, 10, 11] and len(ds) == 5
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        list(ChainDataset([Squares(2)]))


def test_subset():
    base = Squares(10)
    s = Subset(base, [9, 0, 3])
    assert len(s) == 3 and [s[i] for i in range(3)] == [81, 0, 9]
    assert s.__getitems__([2, 0]) == [9, 81]

    class Batched(Squares):
        def __getitems__(self, idx):
            return [("batched", i) for i in idx]

    assert Subset(Batched(5), [4, 1]).__getitems__([0, 1]) == [("batched", 4), ("batched", 1)]

    class Doubled(Subset):
        def __getitem__(self, i):
            return 2 * super().__getitem__(i)

    assert Doubled(base, [3]).__getitems__([0]) == [18]  # the subclass's lookup is used


def test_subset_list_index_goes_to_the_dataset():
    x = gpucore.arange(10)
    s = Subset(TensorDataset(x), [5, 6, 7])
    (got,) = s[[0, 2]]
    assert got.tolist() == [5, 7]


def test_random_split_lengths_and_generator():
    ds = Squares(10)
    a, b = random_split(ds, [7, 3], generator=gpucore.Generator(42))
    assert len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    a2, b2 = random_split(ds, [7, 3], generator=gpucore.Generator(42))
    assert a.indices == a2.indices and b.indices == b2.indices
    gpucore.manual_seed(8)
    c = random_split(ds, [5, 5])
    gpucore.manual_seed(8)
    assert random_split(ds, [5, 5])[0].indices == c[0].indices
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [5, 6])


@pytest.mark.parametrize(
    "n,fracs",
    [
        (10, [0.5, 0.5]),
        (10, [0.3, 0.3, 0.4]),
        (11, [0.25, 0.25, 0.5]),
        (7, [1 / 3] * 3),
        (5, [1.0]),
    ],
)
def test_random_split_fractions_as_torch(n, fracs):
    sizes = [len(s) for s in random_split(Squares(n), fracs)]
    # floor(n * f) each, the remainder handed out one by one from the first split
    expect = [int(np.floor(n * f)) for f in fracs]
    for i in range(n - sum(expect)):
        expect[i % len(expect)] += 1
    assert sizes == expect
    try:
        import torch
    except ImportError:
        return
    assert sizes == [len(s) for s in torch.utils.data.random_split(range(n), fracs)]


def test_random_split_fraction_checks():
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(Squares(4), [0.5, 1.5, -1.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        random_split(Squares(2), [0.9, 0.05, 0.05])
    assert any("Length of split at index 2 is 0" in str(x.message) for x in w)
