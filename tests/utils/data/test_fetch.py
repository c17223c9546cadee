"""Fetchers: a TensorDataset batch (directly or through Subsets, as random_split gives) is one
indexing op per tensor, with exactly default_collate's result; everything else goes sample by
sample. The IterableDataset fetcher's end-of-stream and drop_last rules."""

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import Subset, TensorDataset, default_collate
from gpucore.utils.data.fetch import IterableDatasetFetcher, MapDatasetFetcher


def _slow(ds, idx):
    return default_collate([ds[i] for i in idx])  # sample by sample, as PyTorch


def _check_same(fast, slow):
    assert isinstance(fast, list) and len(fast) == len(slow)
    for f, s in zip(fast, slow, strict=True):
        assert f.dtype == s.dtype and f.shape == s.shape
        assert f.to(gpucore.float32).tolist() == s.to(gpucore.float32).tolist()


@pytest.mark.parametrize("dtype", [gpucore.float32, gpucore.int64, gpucore.bool, gpucore.bfloat16])
def test_tensor_dataset_batches_equal_default_collate(dtype):
    x = gpucore.arange(24.0).reshape(6, 2, 2).to(dtype)
    ds = TensorDataset(x, gpucore.arange(6))
    fetcher = MapDatasetFetcher(ds, True, default_collate, False)
    for idx in ([0, 1, 2], [5, -1, 0], [np.int64(3), np.int32(4)], [2]):
        _check_same(fetcher.fetch(idx), _slow(ds, idx))


def test_subsets_of_a_tensor_dataset():
    ds = TensorDataset(gpucore.arange(10.0), gpucore.arange(10) * 2)
    sub = Subset(Subset(ds, [9, 8, 7, 6, 5]), [4, 0, 2])
    _check_same(
        MapDatasetFetcher(sub, True, default_collate, False).fetch([0, 1, 2]), _slow(sub, [0, 1, 2])
    )
    got = MapDatasetFetcher(sub, True, default_collate, False).fetch([1, 0])
    assert got[0].tolist() == [9.0, 5.0] and got[1].tolist() == [18, 10]


def test_gradients_flow_through_a_batch():
    w = gpucore.arange(4.0, requires_grad=True)
    batch = MapDatasetFetcher(TensorDataset(w), True, default_collate, False).fetch([3, 3, 0])
    batch[0].sum().backward()
    assert w.grad.tolist() == [1.0, 0.0, 0.0, 2.0]
    w.grad = None
    default_collate([w[1], w[1]]).sum().backward()  # the stacking path keeps the graph too
    assert w.grad.tolist() == [0.0, 2.0, 0.0, 0.0]


def test_other_keys_and_collate_fns_go_sample_by_sample():
    ds = TensorDataset(gpucore.arange(3))
    with pytest.raises(Exception):  # noqa: B017 - the dataset's own indexing error
        MapDatasetFetcher(ds, True, default_collate, False).fetch([0.5])
    seen = []
    collate = lambda b: seen.append(b) or b  # noqa: E731
    MapDatasetFetcher(ds, True, collate, False).fetch([1, 2])
    assert len(seen[0]) == 2 and seen[0][0][0].item() == 1
    with pytest.raises(IndexError):
        MapDatasetFetcher(ds, True, default_collate, False).fetch([3])


def test_collated_tensors_are_fresh_copies():
    rows = [gpucore.zeros(2), gpucore.ones(2)]
    batch = default_collate(rows)
    batch.add_(5)
    assert rows[0].tolist() == [0.0, 0.0] and batch.tolist() == [[5.0, 5.0], [6.0, 6.0]]


def test_iterable_fetcher_end_and_drop_last():
    f = IterableDatasetFetcher(range(5), True, list, False)
    assert f.fetch([None] * 2) == [0, 1] and f.fetch([None] * 2) == [2, 3]
    assert f.fetch([None] * 2) == [4]
    with pytest.raises(StopIteration):
        f.fetch([None] * 2)
    f = IterableDatasetFetcher(range(5), True, list, True)
    f.fetch([None] * 2), f.fetch([None] * 2)
    with pytest.raises(StopIteration):
        f.fetch([None] * 2)  # one sample left: dropped
    f = IterableDatasetFetcher(range(1), False, lambda x: x * 10, False)
    assert f.fetch(None) == 0
    with pytest.raises(StopIteration):
        f.fetch(None)
