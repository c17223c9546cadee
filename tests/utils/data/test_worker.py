"""The worker side: get_worker_info, the per-worker seeds (PyTorch's scheme: base_seed + id for
random and gpucore, PyTorch's hashed state for numpy), worker_init_fn, the exception wrapper,
and tensors crossing process boundaries."""

import os
import pickle
import random
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import DataLoader, Dataset, WorkerInfo, get_worker_info
from gpucore.utils.data.worker import ExceptionWrapper, _generate_state, seed_worker


class Report(Dataset):
    """Sample i: what the worker loading it knows and draws."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        info = get_worker_info()
        return {
            "id": info.id,
            "num_workers": info.num_workers,
            "seed": info.seed,
            "same_dataset_type": type(info.dataset) is Report,
            "random": random.random(),
            "numpy": float(np.random.rand()),
            "gpucore": gpucore.rand(1).item(),
            "pid": os.getpid(),
            "initial_seed": gpucore.initial_seed(),  # PyTorch's seed_worker recipe reads it
        }


def _samples(loader):
    out = []
    for batch in loader:
        out.extend(dict(zip(batch, vals)) for vals in zip(*(batch[k].tolist() for k in batch)))
    return out


def test_get_worker_info_is_none_in_the_main_process():
    assert get_worker_info() is None


def test_worker_info_is_frozen():
    info = WorkerInfo(id=1, num_workers=2, seed=5, dataset=None)
    with pytest.raises(AttributeError):
        info.id = 3
    assert "id=1" in repr(info) and "num_workers=2" in repr(info)


@pytest.mark.parametrize("base", [0, 1, 2**32 - 1, 2**32 + 7, 2**63 - 2, 123456789123])
def test_generate_state_matches_torch(base):
    pytest.importorskip("torch")
    from torch.utils.data._utils.worker import _generate_state as ref

    for wid in range(4):
        assert _generate_state(base, wid) == ref(base, wid)


def test_seed_worker_seeds_the_three_generators():
    seed = seed_worker(1000, 3)
    assert seed == 1003
    r, n, g = random.random(), np.random.rand(), gpucore.rand(1).item()
    assert r == random.Random(1003).random()
    assert n == np.random.RandomState(_generate_state(1000, 3)).rand()
    assert g == gpucore.rand(1, generator=gpucore.Generator(1003)).item()


def test_workers_are_seeded_from_the_base_seed():
    dl = DataLoader(Report(), batch_size=1, num_workers=2)
    gpucore.manual_seed(11)
    first = _samples(dl)
    gpucore.manual_seed(11)
    again = _samples(dl)
    assert [dict(s, pid=0) for s in first] == [dict(s, pid=0) for s in again]  # new processes
    assert {s["id"] for s in first} == {0, 1} and all(s["num_workers"] == 2 for s in first)
    assert all(s["same_dataset_type"] for s in first)
    base = first[0]["seed"] - first[0]["id"]
    for s in first:
        assert s["seed"] == base + s["id"] == s["initial_seed"]
    # the first sample of each worker: its first draw from each seeded generator
    for wid in (0, 1):
        s = next(x for x in first if x["id"] == wid)
        assert s["random"] == random.Random(base + wid).random()
        assert s["numpy"] == np.random.RandomState(_generate_state(base, wid)).rand()
        assert s["gpucore"] == gpucore.rand(1, generator=gpucore.Generator(base + wid)).item()
    assert len({s["pid"] for s in first}) == 2 and os.getpid() not in {s["pid"] for s in first}


def test_base_seed_comes_from_the_loader_generator():
    gen = gpucore.Generator(5)
    a = _samples(DataLoader(Report(), batch_size=2, num_workers=1, generator=gen))
    gen.manual_seed(5)
    b = _samples(DataLoader(Report(), batch_size=2, num_workers=1, generator=gen))
    assert [s["seed"] for s in a] == [s["seed"] for s in b]
    base = gpucore.Generator(5)
    expect = gpucore.randint(0, 2**63 - 1, (), generator=base).item()
    assert a[0]["seed"] == expect


class InitCheck(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return os.environ.get("DATALOADER_TEST_WORKER_TAG", "")


def _tag_worker(worker_id):
    info = get_worker_info()
    assert info is not None and info.id == worker_id
    os.environ["DATALOADER_TEST_WORKER_TAG"] = f"w{worker_id}"


def test_worker_init_fn_runs_in_each_worker():
    dl = DataLoader(InitCheck(), batch_size=1, num_workers=2, worker_init_fn=_tag_worker)
    tags = [b[0] for b in dl]
    assert tags == ["w0", "w1", "w0", "w1"]  # tasks go round-robin, come back in order
    assert "DATALOADER_TEST_WORKER_TAG" not in os.environ


def _failing_init(worker_id):
    raise KeyError(f"init of worker {worker_id} failed")


def test_worker_init_fn_errors_are_reraised():
    dl = DataLoader(InitCheck(), batch_size=1, num_workers=2, worker_init_fn=_failing_init)
    with pytest.raises(KeyError) as err:
        list(dl)
    msg = str(err.value)
    assert "Caught KeyError in DataLoader worker process 0." in msg
    assert "_failing_init" in msg and "init of worker 0 failed" in msg
    assert "\n" in msg and "\\n" not in msg  # KeyError shows the traceback's lines


def test_exception_wrapper_falls_back_to_runtime_error():
    class NeedsTwo(Exception):
        def __init__(self, a, b):
            super().__init__(a, b)

    try:
        raise NeedsTwo(1, 2)
    except NeedsTwo:
        w = ExceptionWrapper(where="in DataLoader worker process 3")
    with pytest.raises(RuntimeError, match="Caught NeedsTwo in DataLoader worker process 3"):
        w.reraise()


def test_tensors_cross_processes_by_value():
    x = gpucore.arange(12.0).reshape(3, 4)
    for t in (x, x[1:, ::2], x.to(gpucore.bfloat16), gpucore.tensor([True, False]), x.sum()):
        back = pickle.loads(ForkingPickler.dumps(t))
        assert back.dtype == t.dtype and back.shape == t.shape  # 0-d stays 0-d
        assert back.to(gpucore.float32).tolist() == t.to(gpucore.float32).tolist()
        assert back._data.ctypes.data % 64 == 0  # fresh aligned storage
    leaf = gpucore.ones(2, requires_grad=True)
    back = pickle.loads(ForkingPickler.dumps(leaf * 2))
    assert pickle.loads(ForkingPickler.dumps(leaf)).requires_grad
    assert back.grad_fn is None  # the graph does not cross processes
