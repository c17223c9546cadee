"""DataLoader with worker processes: the same batches in the same order as in-process loading,
IterableDataset sharding, persistent workers, and failure without hangs (an exception, a killed
worker, a timeout, a batch that cannot be pickled). Datasets are module-level so that the
'spawn' start method can pickle them."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    TensorDataset,
    get_worker_info,
)


class Pairs(Dataset):
    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return gpucore.full((2,), float(i)), np.int64(i), {"name": f"s{i}"}


class Fails(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"sample {i} is broken")
        return i


class Dies(Dataset):
    def __init__(self, how):
        self.how = how

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 3:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(7)
        return i


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(5)
        return i


class Pids(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return os.getpid()


class Sharded(IterableDataset):
    """0..n-1, each worker taking every num_workers-th value from its id on."""

    def __init__(self, n, shard=True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def _flat(loader):
    return [v for b in loader for v in b[1].tolist()]


@pytest.mark.parametrize("workers,bs,prefetch", [(1, 3, None), (2, 1, None), (3, 4, 1), (2, 2, 5)])
def test_same_batches_as_in_process(workers, bs, prefetch):
    ds = Pairs(10)
    ref = list(DataLoader(ds, batch_size=bs))
    dl = DataLoader(ds, batch_size=bs, num_workers=workers, prefetch_factor=prefetch)
    got = list(dl)
    assert len(got) == len(ref) == len(dl)
    for (gx, gy, gd), (rx, ry, rd) in zip(got, ref, strict=True):
        assert isinstance(gx, gpucore.Tensor) and gx.dtype == rx.dtype
        assert gx.tolist() == rx.tolist() and gy.tolist() == ry.tolist() and gd == rd


def test_shuffle_order_matches_in_process_under_the_same_seed():
    ds = Pairs(17)
    gpucore.manual_seed(5)
    ref = _flat(DataLoader(ds, batch_size=4, shuffle=True))
    gpucore.manual_seed(5)
    got = _flat(DataLoader(ds, batch_size=4, shuffle=True, num_workers=2))
    assert got == ref and sorted(got) == list(range(17))


def test_drop_last_with_workers():
    dl = DataLoader(Pairs(10), batch_size=4, drop_last=True, num_workers=2)
    assert [len(b[1]) for b in dl] == [4, 4] and len(dl) == 2


def test_exception_in_a_worker_names_it_and_keeps_the_traceback():
    it = iter(DataLoader(Fails(), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(ValueError) as err:
        next(it)
    msg = str(err.value)
    assert msg.startswith("Caught ValueError in DataLoader worker process 0.")
    assert "Original Traceback" in msg and "__getitem__" in msg and "sample 5 is broken" in msg
    assert next(it).tolist() == [6, 7]  # as PyTorch: the iterator goes on after the error
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_a_dead_worker_raises_instead_of_hanging(how):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+ .*exited unexp"):
        list(DataLoader(Dies(how), batch_size=1, num_workers=2))
    assert time.monotonic() - start < 20


def test_dead_worker_message_names_the_signal():
    with pytest.raises(RuntimeError, match="killed by signal SIGKILL"):
        list(DataLoader(Dies("kill"), batch_size=1, num_workers=1))
    with pytest.raises(RuntimeError, match="exit code 7"):
        list(DataLoader(Dies("exit"), batch_size=1, num_workers=1))


def test_timeout():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
        list(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.3))
    assert time.monotonic() - start < 4


def test_a_batch_that_cannot_be_pickled_is_an_error():
    dl = DataLoader(Fails(), batch_size=2, num_workers=1, collate_fn=lambda b: lambda: b)
    with pytest.raises(Exception, match="in DataLoader worker process 0"):
        next(iter(dl))


def test_iterable_dataset_sharded_with_get_worker_info():
    dl = DataLoader(Sharded(10), batch_size=3, num_workers=2)
    batches = [b.tolist() for b in dl]
    assert batches == [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
    dl = DataLoader(Sharded(10), batch_size=3, num_workers=2, drop_last=True)
    assert [b.tolist() for b in dl] == [[0, 2, 4], [1, 3, 5]]
    dl = DataLoader(Sharded(5), batch_size=None, num_workers=3)
    assert sorted(dl) == [0, 1, 2, 3, 4]


def test_iterable_dataset_without_sharding_repeats_per_worker():
    got = [b.tolist() for b in DataLoader(Sharded(4, shard=False), batch_size=4, num_workers=2)]
    assert got == [[0, 1, 2, 3], [0, 1, 2, 3]]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_iterable_sharding_matches_torch():
    torch = pytest.importorskip("torch")

    class TorchSharded(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, 11, info.num_workers))

    for bs, drop, workers in [(3, False, 2), (2, True, 3), (4, False, 3)]:
        ours = [
            b.tolist() for b in DataLoader(Sharded(11), bs, num_workers=workers, drop_last=drop)
        ]
        ref = [
            b.tolist()
            for b in torch.utils.data.DataLoader(
                TorchSharded(), bs, num_workers=workers, drop_last=drop
            )
        ]
        assert ours == ref


def test_persistent_workers_are_reused():
    dl = DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True)
    e1 = _pids(dl)
    it = iter(dl)
    next(it)  # a pass left unfinished: the next one starts clean
    e2 = _pids(dl)
    assert len(e1) == 3 and len(e2) == 3 and set(e1) == set(e2) and len(set(e1)) == 2
    stream = DataLoader(Sharded(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert (
        [b.tolist() for b in stream] == [b.tolist() for b in stream] == [[0, 2], [1, 3], [4], [5]]
    )


def _pids(loader):
    return [b[0].item() for b in loader]


def test_workers_stop_after_a_pass_unless_persistent():
    it = iter(DataLoader(Pids(), batch_size=3, num_workers=2))
    first = set(next(it).tolist())
    assert len(first) == 1
    list(it)
    assert all(not w.is_alive() for w in it._workers)
    dl = DataLoader(Pids(), batch_size=3, num_workers=2, persistent_workers=True)
    list(dl)
    assert all(w.is_alive() for w in dl._iterator._workers)
    del dl


def test_unfinished_iterator_shuts_its_workers_down():
    it = iter(DataLoader(Pids(), batch_size=1, num_workers=2))
    next(it)
    workers = list(it._workers)
    del it
    deadline = time.monotonic() + 10
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(w.is_alive() for w in workers)


def test_spawn_start_method_pickles_the_dataset_and_its_tensors():
    x = gpucore.arange(8.0).reshape(4, 2).to(gpucore.bfloat16)
    ds = TensorDataset(x, gpucore.arange(4))
    dl = DataLoader(ds, batch_size=3, num_workers=1, multiprocessing_context="spawn")
    batches = list(dl)
    assert [b[1].tolist() for b in batches] == [[0, 1, 2], [3]]
    assert batches[0][0].dtype == gpucore.bfloat16
    assert batches[1][0].to(gpucore.float32).tolist() == [[6.0, 7.0]]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:\tZ") for line in f)  # a zombie has exited
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_workers_exit_when_the_main_process_dies():
    code = textwrap.dedent(
        """
        import os, signal, sys
        sys.path.insert(0, sys.argv[1])
        import gpucore
        from gpucore.utils.data import DataLoader, TensorDataset

        class Pid(TensorDataset):
            def __getitem__(self, i):
                return os.getpid()

        it = iter(DataLoader(Pid(gpucore.arange(100)), batch_size=1, num_workers=2))
        pids = {next(it).item() for _ in range(6)}
        print(" ".join(map(str, sorted(pids))), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", code, os.getcwd()], capture_output=True, text=True, timeout=60
    )
    pids = [int(p) for p in res.stdout.split()]
    assert len(pids) == 2, res.stderr
    deadline = time.monotonic() + 15
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p) for p in pids)


class Numbered(Dataset):
    def __len__(self):
        return 9

    def __getitem__(self, i):
        return {"x": np.arange(3, dtype=np.float32) + i, "y": i, "tag": f"t{i}"}


def test_same_batches_as_torch_with_workers():
    torch = pytest.importorskip("torch")
    order = [4, 0, 8, 2, 6, 1, 7, 3, 5]
    ours = list(DataLoader(Numbered(), batch_size=2, sampler=order, num_workers=2))
    ref = list(torch.utils.data.DataLoader(Numbered(), batch_size=2, sampler=order, num_workers=2))
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref, strict=True):
        assert o["x"].tolist() == r["x"].tolist() and o["y"].tolist() == r["y"].tolist()
        assert list(o["tag"]) == list(r["tag"])


class BrokenStream(IterableDataset):
    def __iter__(self):
        yield 1
        raise OSError("the stream broke")


def test_exception_in_an_iterable_dataset_worker():
    with pytest.raises(OSError, match="(?s)Caught OSError in DataLoader worker process.*broke"):
        list(DataLoader(BrokenStream(), batch_size=2, num_workers=1))


def test_persistent_loader_starts_new_workers_after_one_died():
    dl = DataLoader(Dies("kill"), batch_size=1, num_workers=1, persistent_workers=True)
    for _ in range(2):  # the second pass starts afresh (and meets the same fate)
        with pytest.raises(RuntimeError, match="exited unexpectedly"):
            list(dl)


def test_prefetch_factor_zero_still_loads():
    dl = DataLoader(Pairs(5), batch_size=2, num_workers=2, prefetch_factor=0)
    assert _flat(dl) == list(range(5))
