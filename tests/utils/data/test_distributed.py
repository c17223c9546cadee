"""gpucore.utils.data.distributed: DistributedSampler's shards, as PyTorch's."""

import pytest

from gpucore.utils.data import DistributedSampler


def shards(n, replicas, **kw):
    return [list(DistributedSampler(range(n), replicas, r, **kw)) for r in range(replicas)]


@pytest.mark.parametrize("n,replicas", [(10, 2), (10, 3), (7, 4), (3, 5), (12, 4)])
def test_shards_partition_the_dataset(n, replicas):
    for shuffle in (False, True):
        got = shards(n, replicas, shuffle=shuffle, seed=3)
        per = -(-n // replicas)
        assert all(len(s) == per for s in got)
        flat = [i for s in got for i in s]
        assert sorted(set(flat)) == list(range(n))  # every index, padding repeats the first
        assert len(flat) == per * replicas
        dropped = shards(n, replicas, shuffle=shuffle, seed=3, drop_last=True)
        flat = [i for s in dropped for i in s]
        assert len(flat) == len(set(flat)) == (n // replicas) * replicas


def test_matches_pytorch_without_shuffle():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler as TorchSampler

    for n, replicas in [(10, 3), (7, 4), (3, 5)]:
        for drop_last in (False, True):
            for r in range(replicas):
                ours = DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last)
                theirs = TorchSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last)
                assert list(ours) == list(theirs) and len(ours) == len(theirs)
    assert torch  # imported for the reference


def test_epochs_reshuffle_identically_on_every_rank():
    a = DistributedSampler(range(100), 2, 0, seed=5)
    b = DistributedSampler(range(100), 2, 1, seed=5)
    first = list(a) + list(b)
    a.set_epoch(1)
    b.set_epoch(1)
    second = list(a) + list(b)
    assert sorted(first) == sorted(second) == list(range(100))
    assert first != second and list(a) == list(a)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rank should be in the interval"):
        DistributedSampler(range(4), 2, 2)
    with pytest.raises(ValueError, match="num_replicas"):
        DistributedSampler(range(4), 0, 0)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))
