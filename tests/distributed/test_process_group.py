"""gpucore.distributed without a job: what is checked before MPI starts, and the errors a user
gets when a process group is missing or MPI is not installed. (The collectives themselves run
under mpirun: test_collectives.py.)"""

import datetime

import pytest

import gpucore as gc
import gpucore.distributed as dist
from gpucore.distributed import process_group


def test_calls_before_init_process_group_say_what_to_do():
    assert not dist.is_initialized()
    for call in (
        lambda: dist.get_rank(),
        lambda: dist.get_world_size(),
        lambda: dist.all_reduce(gc.ones(2)),
        lambda: dist.barrier(),
    ):
        with pytest.raises(dist.DistError, match="init_process_group"):
            call()
    with pytest.raises(dist.DistError, match="no process group"):
        dist.destroy_process_group()


def test_without_mpi4py_init_names_what_to_install(monkeypatch):
    monkeypatch.setattr(process_group, "is_available", lambda: False)
    monkeypatch.setattr(process_group._World, "mpi", None)
    with pytest.raises(dist.DistError, match=r"mpi4py is not installed.*openmpi-bin.*mpirun"):
        dist.init_process_group()


def test_arguments_are_checked_before_mpi_starts(monkeypatch):
    def no_mpi():
        raise AssertionError("MPI must not start for a bad argument")

    monkeypatch.setattr(process_group, "_import_mpi", no_mpi)
    with pytest.raises(dist.DistError, match="unknown backend 'ucc'"):
        dist.init_process_group("ucc")
    for bad in (0, -1.0, "10", True, datetime.timedelta(0)):
        with pytest.raises(ValueError, match="timeout"):
            dist.init_process_group(timeout=bad)


def test_pytorch_backend_names_run_on_mpi_with_a_warning(monkeypatch):
    def stop():
        raise RuntimeError("stop before MPI")

    monkeypatch.setattr(process_group, "_import_mpi", stop)
    with pytest.warns(UserWarning, match="'nccl' runs on MPI"), pytest.raises(RuntimeError):
        dist.init_process_group("nccl")


def test_reduce_ops_and_availability():
    assert repr(dist.ReduceOp.SUM) == "ReduceOp.SUM"
    assert {op.name for op in vars(dist.ReduceOp).values() if isinstance(op, dist.ReduceOp)} == {
        "sum", "avg", "product", "min", "max", "band", "bor", "bxor",
    }  # fmt: skip
    assert isinstance(dist.is_available(), bool)
    assert gc.distributed is dist and gc.nn.parallel.DistributedDataParallel
