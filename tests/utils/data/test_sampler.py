"""Samplers: the partitioning rules of PyTorch's (compared with torch.utils.data when installed,
with hand-derived expectations otherwise), the statistics of the random ones, and their
reproducibility under gpucore's generator."""

import collections

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from gpucore.utils.data.sampler import multinomial, randperm


def test_sequential_sampler():
    s = SequentialSampler(range(5))
    assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5
    assert list(SequentialSampler([])) == []


@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False)])
def test_batch_sampler_partitions(n, bs, drop):
    batches = list(BatchSampler(range(n), bs, drop))
    expect = [list(range(i, min(i + bs, n))) for i in range(0, n, bs)]
    if drop:
        expect = [b for b in expect if len(b) == bs]
    assert batches == expect
    assert len(BatchSampler(range(n), bs, drop)) == len(expect)


def test_batch_sampler_matches_torch_on_the_same_indices():
    torch = pytest.importorskip("torch")
    order = [7, 3, 9, 0, 1, 8, 2, 6, 5, 4, 11]
    for bs in (1, 2, 4, 11, 20):
        for drop in (False, True):
            ours = BatchSampler(order, bs, drop)
            ref = torch.utils.data.BatchSampler(order, bs, drop)
            assert list(ours) == list(ref) and len(ours) == len(ref)
            ours = BatchSampler(SequentialSampler(order), bs, drop)
            ref = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(order), bs, drop)
            assert list(ours) == list(ref)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_batch_sampler_checks_batch_size(bad):
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(3), bad, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(range(3), 2, 1)


def test_random_sampler_is_a_permutation_and_reproducible():
    s = RandomSampler(range(50))
    gpucore.manual_seed(0)
    a = list(s)
    gpucore.manual_seed(0)
    b = list(s)
    assert a == b and sorted(a) == list(range(50)) and a != list(range(50))
    assert list(s) != a  # the next pass draws a new seed
    g1, g2 = gpucore.Generator(5), gpucore.Generator(5)
    assert list(RandomSampler(range(20), generator=g1)) == list(
        RandomSampler(range(20), generator=g2)
    )


def test_random_sampler_without_generator_takes_one_draw_per_pass():
    gpucore.manual_seed(1)
    list(RandomSampler(range(1000)))
    after_big = gpucore.get_rng_state()
    gpucore.manual_seed(1)
    list(RandomSampler(range(3)))
    assert gpucore.get_rng_state() == after_big  # one seed draw, whatever the size


def test_random_sampler_num_samples_chains_permutations():
    s = RandomSampler(range(10), num_samples=25, generator=gpucore.Generator(3))
    out = list(s)
    assert len(out) == len(s) == 25
    assert sorted(out[:10]) == list(range(10)) and sorted(out[10:20]) == list(range(10))
    assert len(set(out[20:])) == 5


def test_random_sampler_with_replacement():
    s = RandomSampler(range(7), replacement=True, num_samples=1000, generator=gpucore.Generator(1))
    out = list(s)
    assert len(out) == 1000 and set(out) == set(range(7))
    counts = np.bincount(out, minlength=7)
    assert counts.min() > 100  # expected ~143 each
    assert len(list(RandomSampler(range(7), replacement=True))) == 7


def test_random_sampler_checks_match_torch():
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            RandomSampler(range(3), num_samples=bad)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler([])


def test_random_sampler_follows_its_data_source_length():
    data = [1, 2, 3]
    s = RandomSampler(data)
    data.append(4)
    assert len(s) == 4 and sorted(s) == [0, 1, 2, 3]


def test_subset_random_sampler():
    idx = [10, 20, 30, 40, 50]
    s = SubsetRandomSampler(idx, generator=gpucore.Generator(2))
    out = list(s)
    assert sorted(out) == idx and len(s) == 5
    gpucore.manual_seed(4)
    a = list(SubsetRandomSampler(idx))
    gpucore.manual_seed(4)
    assert list(SubsetRandomSampler(idx)) == a


def test_subset_random_sampler_visits_the_same_indices_as_torch():
    torch = pytest.importorskip("torch")
    idx = [3, 1, 4, 15, 9, 26, 5]
    ref = list(torch.utils.data.SubsetRandomSampler(idx))
    assert sorted(SubsetRandomSampler(idx)) == sorted(ref)


def test_weighted_sampler_frequencies_follow_the_weights():
    w = [0.1, 0.0, 0.4, 0.5]
    s = WeightedRandomSampler(w, 20000, generator=gpucore.Generator(0))
    out = list(s)
    assert len(out) == len(s) == 20000
    freq = np.bincount(out, minlength=4) / 20000
    assert freq[1] == 0
    np.testing.assert_allclose(freq, w, atol=0.02)
    assert s.weights.dtype == gpucore.float64 and s.weights.tolist() == w


def test_weighted_sampler_without_replacement():
    w = gpucore.tensor([1.0, 5.0, 0.0, 2.0, 3.0])
    out = list(WeightedRandomSampler(w, 4, replacement=False, generator=gpucore.Generator(1)))
    assert sorted(out) == [0, 1, 3, 4]
    firsts = collections.Counter(
        list(WeightedRandomSampler([1.0, 9.0], 2, replacement=False))[0] for _ in range(400)
    )
    assert firsts[1] > 300  # the heavy one comes first ~90% of the time
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        list(WeightedRandomSampler(w, 5, replacement=False))
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist"):
        list(WeightedRandomSampler(w, 6, replacement=False))


def test_weighted_sampler_checks_as_torch():
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            WeightedRandomSampler([1.0], bad)
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        WeightedRandomSampler([1.0], 1, replacement=0)
    with pytest.raises(ValueError, match=r"weights should be a 1d sequence .* shape \(2, 1\)"):
        WeightedRandomSampler([[1.0], [2.0]], 1)
    with pytest.raises(RuntimeError, match="element < 0"):
        list(WeightedRandomSampler([1.0, -1.0], 1))
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        list(WeightedRandomSampler([0.0, 0.0], 1))


def test_weighted_sampler_errors_match_torch():
    torch = pytest.importorskip("torch")
    for args in [([[1.0], [2.0]], 1), ([1.0], 0), ([1.0], 1, 1)]:
        with pytest.raises(ValueError) as ref:
            torch.utils.data.WeightedRandomSampler(*args)
        with pytest.raises(ValueError) as ours:
            WeightedRandomSampler(*args)
        assert str(ours.value) == str(ref.value)


def test_randperm_and_multinomial_helpers():
    assert randperm(0) == [] and randperm(1) == [0]
    p = randperm(100, gpucore.Generator(9))
    assert sorted(p) == list(range(100)) and p == randperm(100, gpucore.Generator(9))
    assert multinomial(np.array([0.0, 1.0]), 5, True) == [1] * 5


def test_sampler_base_and_generic_subscript():
    class Evens(Sampler[int]):
        def __init__(self, n):
            super().__init__(None)  # PyTorch < 2.2 passed data_source up: still accepted
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

    assert list(Evens(7)) == [0, 2, 4, 6]
    with pytest.raises(NotImplementedError):
        iter(Sampler())
