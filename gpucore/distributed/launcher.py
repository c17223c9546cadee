"""What an MPI launcher tells a process about its place in the job, read without starting MPI.

``mpirun`` (Open MPI), ``mpiexec`` (MPICH, Intel MPI) and ``srun`` (Slurm) each export the rank and
the job size under their own names. PyTorch scripts read torchrun's names (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``) before they call ``init_process_group``, so
importing ``gpucore.distributed`` under an MPI launcher fills those in (never overriding a value
already set): a nanoGPT-style ``ddp = int(os.environ.get("RANK", -1)) != -1`` then sees the job.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass

# (rank, size, local rank, local size) variables per launcher, in the order they are tried
_LAUNCHERS = (
    (
        "Open MPI",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("PMIx", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
    ("MPICH / Intel MPI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


@dataclass(frozen=True)
class LaunchInfo:
    """The launcher's name and this process's rank, job size, and rank and size on its node."""

    launcher: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def _int(env: MutableMapping, name: str) -> int | None:
    v = env.get(name)
    if v is None:
        return None
    try:
        return int(v.strip().split("(")[0])  # SLURM_NTASKS_PER_NODE may read "2(x3)"
    except ValueError:
        return None


def launch_info(env: MutableMapping | None = None) -> LaunchInfo | None:
    """The job an MPI-style launcher started this process in, or None outside one."""
    env = os.environ if env is None else env
    for name, rank_v, size_v, lrank_v, lsize_v in _LAUNCHERS:
        rank, size = _int(env, rank_v), _int(env, size_v)
        if rank is None or size is None or not 0 <= rank < size:
            continue
        lrank = _int(env, lrank_v)
        lsize = _int(env, lsize_v)
        return LaunchInfo(
            name,
            rank,
            size,
            rank if lrank is None else lrank,
            size if lsize is None else lsize,
        )
    return None


def export_torchrun_env(env: MutableMapping | None = None) -> LaunchInfo | None:
    """Set RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the launcher's variables where
    they are not set yet; returns what was found (None outside a launcher: nothing is set)."""
    env = os.environ if env is None else env
    info = launch_info(env)
    if info is not None:
        env.setdefault("RANK", str(info.rank))
        env.setdefault("WORLD_SIZE", str(info.world_size))
        env.setdefault("LOCAL_RANK", str(info.local_rank))
        env.setdefault("LOCAL_WORLD_SIZE", str(info.local_world_size))
    return info
