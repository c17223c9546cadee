"""DataLoader in the calling process: batching, shuffling, samplers, drop_last, len, collate_fn,
IterableDatasets, the argument checks of PyTorch's, and the same batches as PyTorch's loader
when it is installed."""

import warnings

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
)


class Pairs(Dataset):
    """Sample i is (float vector [i, i], label i % 3)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(2, i, np.float32), i % 3


class Stream(IterableDataset):
    def __init__(self, n, reported=None):
        self.n, self.reported = n, reported

    def __iter__(self):
        assert get_worker_info() is None
        return iter(range(self.n))

    def __len__(self):
        return self.n if self.reported is None else self.reported


def _labels(loader):
    return [b[1].tolist() for b in loader]


@pytest.mark.parametrize("n,bs,drop", [(10, 4, False), (10, 4, True), (8, 4, True), (3, 5, False)])
def test_batches_len_and_drop_last(n, bs, drop):
    dl = DataLoader(Pairs(n), batch_size=bs, drop_last=drop)
    batches = list(dl)
    sizes = [len(b[1]) for b in batches]
    full, rest = divmod(n, bs)
    assert sizes == [bs] * full + ([rest] if rest and not drop else [])
    assert len(dl) == len(batches)
    x, y = batches[0]
    assert x.dtype == gpucore.float32 and x.shape == (sizes[0], 2)
    assert y.dtype == gpucore.int64


def test_tensor_dataset_batches():
    x = gpucore.arange(20.0).reshape(10, 2)
    y = gpucore.arange(10)
    out = list(DataLoader(TensorDataset(x, y), batch_size=4))
    assert [b[1].tolist() for b in out] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert out[2][0].tolist() == [[16.0, 17.0], [18.0, 19.0]]


def test_shuffle_is_a_permutation_reproducible_with_manual_seed():
    dl = DataLoader(Pairs(20), batch_size=6, shuffle=True)
    gpucore.manual_seed(123)
    a = _labels(dl)
    gpucore.manual_seed(123)
    b = [bb[0][:, 0].tolist() for bb in dl]
    assert sorted(v for batch in b for v in batch) == list(map(float, range(20)))
    assert [[int(v) % 3 for v in batch] for batch in b] == a
    assert [len(x) for x in b] == [6, 6, 6, 2]
    gen = gpucore.Generator(7)
    first = [
        bb[0][:, 0].tolist()
        for bb in DataLoader(Pairs(20), batch_size=6, shuffle=True, generator=gen)
    ]
    gen.manual_seed(7)
    again = [
        bb[0][:, 0].tolist()
        for bb in DataLoader(Pairs(20), batch_size=6, shuffle=True, generator=gen)
    ]
    assert first == again


def test_epochs_differ():
    dl = DataLoader(Pairs(30), batch_size=30, shuffle=True)
    gpucore.manual_seed(0)
    e1 = next(iter(dl))[0][:, 0].tolist()
    e2 = next(iter(dl))[0][:, 0].tolist()
    assert e1 != e2 and sorted(e1) == sorted(e2)


def test_sampler_and_batch_sampler():
    ds = Pairs(10)
    dl = DataLoader(ds, batch_size=3, sampler=[9, 8, 7, 6, 5])
    assert [b[0][:, 0].tolist() for b in dl] == [[9.0, 8.0, 7.0], [6.0, 5.0]] and len(dl) == 2
    sub = DataLoader(ds, batch_size=2, sampler=SubsetRandomSampler([1, 3, 5]))
    assert sorted(v for b in sub for v in b[0][:, 0].tolist()) == [1.0, 3.0, 5.0]
    bs = BatchSampler(SequentialSampler(ds), 4, drop_last=True)
    dl = DataLoader(ds, batch_sampler=bs)
    assert [len(b[1]) for b in dl] == [4, 4] and len(dl) == 2
    assert dl.batch_size is None and dl.drop_last is False
    custom = DataLoader(ds, batch_sampler=[[0, 5], [2]])
    assert [b[0][:, 0].tolist() for b in custom] == [[0.0, 5.0], [2.0]]
    w = DataLoader(ds, batch_size=5, sampler=WeightedRandomSampler([0.0] * 9 + [1.0], 10))
    assert all(v == 9.0 for b in w for v in b[0][:, 0].tolist())


def test_no_automatic_batching():
    dl = DataLoader(Pairs(3), batch_size=None)
    items = list(dl)
    assert len(items) == len(dl) == 3
    x, y = items[1]  # default_convert: the tuple becomes a list, arrays become tensors
    assert isinstance(items[1], list) and isinstance(x, gpucore.Tensor) and y == 1
    assert list(DataLoader([5, 6], batch_size=None)) == [5, 6]


def test_collate_fn_and_getitems():
    dl = DataLoader(Pairs(5), batch_size=2, collate_fn=lambda b: [s[1] for s in b])
    assert list(dl) == [[0, 1], [2, 0], [1]]

    class Batched(Pairs):
        calls = []

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [self[i] for i in idx]

    ds = Batched(4)
    list(DataLoader(ds, batch_size=3))
    assert ds.calls == [[0, 1, 2], [3]]


def test_iterable_dataset_in_process():
    dl = DataLoader(Stream(7), batch_size=3)
    assert [b.tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6]] and len(dl) == 3
    dl = DataLoader(Stream(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in dl] == [[0, 1, 2], [3, 4, 5]] and len(dl) == 2
    assert list(DataLoader(Stream(2), batch_size=None)) == [0, 1]


def test_iterable_dataset_longer_than_reported_warns():
    dl = DataLoader(Stream(5, reported=2), batch_size=1)
    assert len(dl) == 2
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert len(list(dl)) == 5
    assert any("was reported to be 2" in str(x.message) for x in w)


def test_accepted_arguments():
    dl = DataLoader(Pairs(4), batch_size=2, pin_memory=True, pin_memory_device="", in_order=True)
    assert len(list(dl)) == 2 and dl.pin_memory
    assert DataLoader(Pairs(4), num_workers=2).prefetch_factor == 2
    assert DataLoader(Pairs(4)).prefetch_factor is None


@pytest.mark.parametrize(
    "kwargs,err,msg",
    [
        ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
        ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
        ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified"),
        ({"num_workers": 1, "prefetch_factor": -1}, ValueError, "should be non-negative"),
        ({"persistent_workers": True}, ValueError, "persistent_workers option needs"),
        ({"shuffle": True, "sampler": [0]}, ValueError, "mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler option is"),
        ({"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler option is"),
        ({"batch_size": None, "drop_last": True}, ValueError, "disables auto-batching"),
        ({"multiprocessing_context": "fork"}, ValueError, "can only be used with multi-process"),
        ({"num_workers": 1, "multiprocessing_context": "nope"}, ValueError, "valid start method"),
        ({"num_workers": 1, "multiprocessing_context": 3}, TypeError, "valid context object"),
    ],
)
def test_argument_checks(kwargs, err, msg):
    with pytest.raises(err, match=msg):
        DataLoader(Pairs(4), **kwargs)


def test_argument_checks_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        {"num_workers": -1},
        {"prefetch_factor": 2},
        {"shuffle": True, "sampler": [0]},
        {"batch_sampler": [[0]], "batch_size": 2},
        {"batch_size": None, "drop_last": True},
    ]
    for kw in cases:
        with pytest.raises(ValueError) as ours:
            DataLoader(Pairs(4), **kw)
        with pytest.raises(ValueError) as ref:
            torch.utils.data.DataLoader(Pairs(4), **kw)
        assert str(ours.value) == str(ref.value)


def test_iterable_dataset_refuses_sampling_options():
    for kw in ({"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected"):
            DataLoader(Stream(3), **kw)
    DataLoader(Stream(3), shuffle=False)


def test_frozen_attributes():
    dl = DataLoader(Pairs(4), batch_size=2)
    for name in ("batch_size", "sampler", "batch_sampler", "drop_last", "dataset"):
        with pytest.raises(ValueError, match=f"{name} attribute should not be set"):
            setattr(dl, name, None)
    dl.num_workers = 0  # others may change


def test_same_batches_as_torch():
    torch = pytest.importorskip("torch")
    ds = Pairs(11)
    order = [3, 1, 4, 10, 5, 9, 2, 6, 8, 7, 0]
    for bs, drop in [(1, False), (3, False), (3, True), (11, False)]:
        ours = DataLoader(ds, batch_size=bs, drop_last=drop, sampler=order)
        ref = torch.utils.data.DataLoader(ds, batch_size=bs, drop_last=drop, sampler=order)
        assert len(ours) == len(ref)
        for (ox, oy), (rx, ry) in zip(ours, ref, strict=True):
            assert ox.tolist() == rx.tolist() and oy.tolist() == ry.tolist()
            assert str(ox.dtype)[-7:] == str(rx.dtype)[-7:]


def test_default_collate_is_the_default():
    dl = DataLoader(Pairs(2), batch_size=2)
    assert dl.collate_fn is default_collate
