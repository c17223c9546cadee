"""Data-parallel training over MPI, with ``torch.distributed``'s names.

Launch with ``mpirun -np N python script.py``; call ``init_process_group()`` (MPI supplies the
rank and world size), then use the collectives on gpucore tensors or wrap a model in
``gpucore.nn.parallel.DistributedDataParallel``. Importing this module under an MPI launcher sets
torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` variables where unset
(``launcher``); MPI itself starts only in ``init_process_group``. Needs mpi4py (the
``distributed`` extra) and an MPI (``openmpi-bin``); without them ``is_available()`` is False and
``init_process_group`` says what to install.
"""

from ..errors import DistBackendError, DistError
from . import process_group as _pg
from .collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter_tensor,
    scatter,
    send,
)
from .launcher import export_torchrun_env as _export_torchrun_env
from .objects import all_gather_object, broadcast_object_list, gather_object
from .process_group import (
    GroupMember,
    ProcessGroup,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
    new_group,
)
from .work import Work

_export_torchrun_env()
_pg.prefer_fast_nonblocking_allreduce()

__all__ = [
    "DistBackendError",
    "DistError",
    "GroupMember",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_global_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "isend",
    "new_group",
    "recv",
    "reduce",
    "reduce_scatter_tensor",
    "scatter",
    "send",
]
