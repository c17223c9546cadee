"""The process group: MPI started once, communicators per group, and every wait bounded.

Each group owns a duplicate of its MPI communicator, so gpucore's collectives never match
messages of other MPI users in the same process. Every collective is issued non-blocking and
waited for by polling (``wait``): a rank that failed is reported by name within the group's
timeout (see ``faults``), and a rank that stopped answering gives a DistBackendError instead of
a hang. Open MPI's non-blocking all-reduce defaults to an algorithm 2-3x slower than its blocking
one on one machine (measured: 16 MiB 6.8 ms against 2.4 ms); the ring/Rabenseifner algorithm,
selected below unless the user chose one, matches the blocking call.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import time
import warnings
import zlib

import numpy as np

from ..errors import DistBackendError, DistError
from . import faults

# Backends that scripts written for PyTorch ask for; all of them run on MPI here.
_ALIASES = ("mpi", "gloo", "nccl", "cpu:gloo,cuda:nccl", "cpu:gloo", "cuda:nccl")
_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)  # PyTorch's default for non-NCCL groups
_INSTALL_HINT = (
    "install an MPI and mpi4py: `apt-get install openmpi-bin libopenmpi-dev` (or your site's MPI "
    "module) and `pip install 'gpucore[distributed]'` (mpi4py), then launch with "
    "`mpirun -np N python script.py`"
)
_SPIN_POLLS = 4096  # polls before a waiting rank yields its core, when ranks outnumber cores
_CHECK_EVERY = 256  # polls between looks at the clock and at failure notices


class ProcessGroup:
    """A set of ranks with their own communicator (``new_group``; ``group.WORLD`` for all)."""

    def __init__(self, comm, ranks: tuple, timeout: float, name: str):
        self.comm = comm
        self.ranks = ranks  # global ranks, in group-rank order
        self.timeout = timeout
        self.name = name

    def rank(self) -> int:
        """This process's rank in the group."""
        return self.comm.Get_rank()

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    def group_rank(self, global_rank: int, what: str, arg: str) -> int:
        """A global rank (as PyTorch's src/dst arguments are) as a rank in this group."""
        if isinstance(global_rank, bool) or not isinstance(global_rank, int):
            raise TypeError(f"{what}: {arg} must be an int rank, got {global_rank!r}")
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise DistError(
                f"{what}: {arg}={global_rank} is not a member of the process group {self.name!r} "
                f"(global ranks {list(self.ranks)})"
            ) from None

    def __repr__(self) -> str:
        return f"ProcessGroup({self.name!r}, ranks={list(self.ranks)})"


class _World:
    mpi = None  # the mpi4py.MPI module, once MPI is started
    world: ProcessGroup | None = None
    groups: list = []
    # More ranks on this machine than CPUs for them (mpirun --oversubscribe): a waiting rank
    # yields its core after a while, or the rank it waits for cannot run. Otherwise it spins,
    # as MPI's own blocking calls do: yielding to an unrelated process delays the collective.
    oversubscribed = False


class GroupMember:
    """PyTorch's markers: ``GroupMember.WORLD`` (the default group) and ``NON_GROUP_MEMBER``
    (what ``new_group`` returns on ranks outside the group)."""

    WORLD = None
    NON_GROUP_MEMBER = object()


class group:  # noqa: N801 - PyTorch's name (torch.distributed.group.WORLD)
    """``group.WORLD``: pass it (or None) as ``group=`` for every rank."""

    WORLD = None


def is_available() -> bool:
    """Whether gpucore.distributed can run here: mpi4py is installed (MPI is not started)."""
    return importlib.util.find_spec("mpi4py") is not None


def prefer_fast_nonblocking_allreduce() -> None:
    """Select Open MPI's Rabenseifner non-blocking all-reduce unless the user chose one: read
    when MPI starts, so this runs on import of gpucore.distributed too (a script that imports
    mpi4py itself afterwards still gets it). Other MPIs ignore the variable."""
    os.environ.setdefault("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3")


def _import_mpi():
    if _World.mpi is not None:
        return _World.mpi
    if not is_available():
        raise DistError(f"init_process_group: mpi4py is not installed; {_INSTALL_HINT}")
    prefer_fast_nonblocking_allreduce()
    try:
        from mpi4py import MPI  # noqa: PLC0415 - starts MPI: only when a group is created
    except (ImportError, RuntimeError, OSError) as e:
        raise DistError(f"init_process_group: MPI could not start ({e}); {_INSTALL_HINT}") from e
    _World.mpi = MPI
    return MPI


def _seconds(timeout, what: str) -> float:
    if timeout is None:
        timeout = _DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(
            f"{what}: timeout must be a datetime.timedelta or a number of seconds > 0, got "
            f"{timeout!r}"
        )
    return float(timeout)


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout=None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Join the job this process was launched in (``mpirun -np N python script.py``).

    MPI supplies the rank and the world size; ``rank``/``world_size`` given here are checked
    against them. ``backend`` may be "mpi" or, for scripts written for PyTorch, "gloo"/"nccl"
    (both run on MPI; a warning says so). ``init_method`` and ``store`` are not needed (MPI does
    the rendezvous) and are ignored. ``timeout`` (a timedelta or seconds, default 30 minutes)
    bounds every collective: a rank that fails or stops answering raises DistBackendError on the
    others instead of hanging them.
    """
    if _World.world is not None:
        raise DistError("init_process_group: the default process group is already initialized")
    name = "mpi" if backend is None else str(backend).lower()
    if name not in _ALIASES:
        raise DistError(
            f"init_process_group: unknown backend {backend!r}; gpucore runs on MPI: use "
            "backend='mpi' (or 'gloo'/'nccl', which are mapped to it)"
        )
    if name != "mpi":
        warnings.warn(
            f"init_process_group: backend {backend!r} runs on MPI in gpucore", stacklevel=2
        )
    seconds = _seconds(timeout, "init_process_group")
    MPI = _import_mpi()
    comm = MPI.COMM_WORLD
    size, me = comm.Get_size(), comm.Get_rank()
    if world_size not in (-1, None) and world_size != size:
        raise DistError(
            f"init_process_group: world_size={world_size} but MPI started {size} processes; "
            f"launch with `mpirun -np {world_size}` or leave world_size out"
        )
    if rank not in (-1, None) and rank != me:
        raise DistError(
            f"init_process_group: rank={rank} but MPI gave this process rank {me}; leave rank "
            "out (MPI assigns ranks)"
        )
    world = ProcessGroup(comm.Dup(), tuple(range(size)), seconds, "WORLD")
    # (os.cpu_count, not the affinity mask: mpirun binds each rank to one core)
    _World.oversubscribed = _local_ranks(comm) > (os.cpu_count() or 1)
    faults.start(comm.Dup(), me, size, seconds)
    _World.world = world
    _World.groups = [world]


def _local_ranks(comm) -> int:
    """How many ranks of the job run on this machine."""
    local = comm.Split_type(_World.mpi.COMM_TYPE_SHARED)
    try:
        return local.Get_size()
    finally:
        local.Free()


def is_initialized() -> bool:
    """Whether ``init_process_group`` has run (and ``destroy_process_group`` not since)."""
    return _World.world is not None


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Release a group's communicator; without an argument, every group and the default one."""
    if group is not None and group is not _World.world:
        if group in _World.groups:
            _World.groups.remove(group)
            group.comm.Free()
        return
    if _World.world is None:
        raise DistError("destroy_process_group: no process group is initialized")
    for g in _World.groups:
        g.comm.Free()
    _World.groups = []
    _World.world = None
    faults.group_destroyed()  # (its communicator stays: notices are answered up to exit)


def resolve(group, what: str) -> ProcessGroup | None:
    """The ProcessGroup a ``group=`` argument names (None or group.WORLD: the default one), or
    None on a rank outside it (collectives then do nothing there, as PyTorch's)."""
    if _World.world is None:
        raise DistError(
            f"{what}: the default process group has not been initialized; call "
            "gpucore.distributed.init_process_group() first (and launch with mpirun)"
        )
    if group is None:
        return _World.world
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup or None, got {group!r}")
    if group not in _World.groups:
        raise DistError(f"{what}: process group {group.name!r} has been destroyed")
    return group


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (default: the world), -1 outside it."""
    pg = resolve(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in ``group`` (default: the world), -1 outside it."""
    pg = resolve(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """The backend of ``group``: always "mpi"."""
    resolve(group, "get_backend")
    return "mpi"


def get_process_group_ranks(group: ProcessGroup | None) -> list:
    """The global ranks of ``group``'s members, in group-rank order."""
    pg = resolve(group, "get_process_group_ranks")
    return [] if pg is None else list(pg.ranks)


def get_global_rank(group: ProcessGroup | None, group_rank: int) -> int:
    """The global rank of ``group``'s member ``group_rank``."""
    pg = resolve(group, "get_global_rank")
    if pg is None or not 0 <= group_rank < pg.size():
        raise DistError(f"get_global_rank: {group_rank} is not a rank of the group")
    return pg.ranks[group_rank]


def new_group(
    ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False
):
    """A process group of the given global ranks (default: all). Every rank of the world must
    call it, in the same order; ranks outside get ``GroupMember.NON_GROUP_MEMBER``."""
    world = resolve(None, "new_group")
    size = world.size()
    members = tuple(range(size)) if ranks is None else tuple(sorted(set(ranks)))
    for r in members:
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < size:
            raise DistError(f"new_group: rank {r!r} is not in the world of {size} ranks")
    if not members:
        raise DistError("new_group: ranks is empty")
    seconds = world.timeout if timeout is None else _seconds(timeout, "new_group")
    check_same(world, "new_group", repr(members))
    comm = world.comm.Create(world.comm.Get_group().Incl(list(members)))
    if comm == _World.mpi.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, members, seconds, f"group{len(_World.groups)}")
    _World.groups.append(pg)
    return pg


def wait(requests: list, pg: ProcessGroup, what: str, timeout: float | None = None) -> None:
    """Wait for MPI requests, failing instead of hanging: a failure notice from another rank or
    the group's timeout raises DistBackendError naming the call."""
    MPI = _World.mpi
    deadline = None
    polls = 0
    testall = MPI.Request.Testall
    while not testall(requests):
        polls += 1
        if polls % _CHECK_EVERY == 0:
            faults.check(what)
            now = time.monotonic()
            if deadline is None:
                deadline = now + (pg.timeout if timeout is None else timeout)
            elif now > deadline:
                raise DistBackendError(
                    f"{what}: timed out after {pg.timeout if timeout is None else timeout:g} s "
                    f"on rank {_World.world.rank()} waiting for the other ranks of "
                    f"{pg.name} (ranks {list(pg.ranks)}); one of them failed, hung, or did not "
                    "make the same call"
                )
        if polls > _SPIN_POLLS and _World.oversubscribed:
            os.sched_yield()


def check_same(pg: ProcessGroup, what: str, signature: str) -> None:
    """Raise DistError on every rank when the ranks of ``pg`` disagree on ``signature`` (a
    collective's tensor shapes and dtypes): MPI would otherwise read past a buffer or hang. One
    all-reduce (max) of (hash, -hash): equal on every rank only if every rank's hash is equal."""
    h = zlib.crc32(signature.encode())
    buf = np.array((h, -h), dtype=np.int64)
    MPI = _World.mpi
    wait([pg.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.MAX)], pg, what)
    if buf[0] == h and -buf[1] == h:
        return
    everyone = np.zeros((pg.size(), 256), dtype=np.uint8)
    mine = np.frombuffer(signature.encode()[:256].ljust(256, b"\0"), dtype=np.uint8)
    wait([pg.comm.Iallgather(mine, everyone)], pg, what)
    said = [bytes(row).rstrip(b"\0").decode(errors="replace") for row in everyone]
    lines = [f"  rank {pg.ranks[i]}: {s}" for i, s in enumerate(said)]
    raise DistError(
        f"{what}: the ranks called it with different tensors (shapes or dtypes must match):\n"
        + "\n".join(lines)
    )
