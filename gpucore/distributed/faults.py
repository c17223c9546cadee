"""Failure notices between ranks: a rank that dies of an exception tells the others, by name.

MPI has no fault tolerance: when one rank raises, the others wait in their next collective
forever. So ``init_process_group`` installs an exception hook. A rank whose uncaught exception
ends it prints its traceback as usual, sends a notice (its rank and the exception) to every other
rank on a communicator of its own, waits up to ``GRACE`` seconds for each to acknowledge, and
then aborts the MPI job (so a rank that is not in a collective cannot keep ``mpirun`` waiting).
A rank waiting in a collective looks for notices while it polls and raises DistBackendError
naming the failed rank; when that error ends it too, its hook prints it and acknowledges. A rank
killed outright (a signal, ``os._exit``) is reported by ``mpirun`` itself, which then stops the
job.
"""

from __future__ import annotations

import sys
import time
import traceback

from ..errors import DistBackendError

GRACE = 5.0  # at most this many seconds (or the timeout) for the others to print their error
_NOTICE, _ACK = 7001, 7002


class _State:
    comm = None  # a duplicate of COMM_WORLD for notices only
    rank = -1
    size = 0
    grace = GRACE
    previous_hook = None
    failed_peer = None  # the notice this rank raised for (its hook acknowledges it)


def start(comm, rank: int, size: int, timeout: float) -> None:
    """Begin listening (called by init_process_group with a communicator of its own)."""
    _State.comm, _State.rank, _State.size = comm, rank, size
    _State.grace = min(GRACE, timeout)
    _State.failed_peer = None
    if _State.previous_hook is None:
        _State.previous_hook = sys.excepthook
        sys.excepthook = _hook


def stop() -> None:
    """Stop listening (destroy_process_group)."""
    if _State.comm is not None:
        _State.comm.Free()
    _State.comm = None
    if _State.previous_hook is not None:
        sys.excepthook = _State.previous_hook
        _State.previous_hook = None


def check(what: str) -> None:
    """Raise DistBackendError if another rank has reported its failure."""
    comm = _State.comm
    if comm is None or not comm.iprobe(tag=_NOTICE):
        return
    MPI = sys.modules["mpi4py.MPI"]
    status = MPI.Status()
    notice = comm.recv(source=MPI.ANY_SOURCE, tag=_NOTICE, status=status)
    _State.failed_peer = status.Get_source()
    raise DistBackendError(
        f"{what}: rank {notice['rank']} failed ({notice['error']}); this rank "
        f"({_State.rank}) cannot complete the collective. The traceback of rank "
        f"{notice['rank']} is in its output."
    )


def _hook(exc_type, exc, tb) -> None:
    previous = _State.previous_hook or sys.__excepthook__
    previous(exc_type, exc, tb)
    comm = _State.comm
    if comm is None or _State.size < 2:
        return
    try:
        sys.stderr.flush()
        sys.stdout.flush()
        if _State.failed_peer is not None:
            # this rank failed because another did: acknowledge so the other may stop the job
            comm.send(None, dest=_State.failed_peer, tag=_ACK)
            return
        _notify_and_abort(comm, exc_type, exc)
    except Exception:  # noqa: BLE001 - a hook must not raise; the job still ends
        traceback.print_exc()


def _notify_and_abort(comm, exc_type, exc) -> None:
    error = "".join(traceback.format_exception_only(exc_type, exc)).strip()[:500]
    notice = {"rank": _State.rank, "error": error}
    peers = [r for r in range(_State.size) if r != _State.rank]
    for r in peers:
        comm.isend(notice, dest=r, tag=_NOTICE)
    acked = 0
    deadline = time.monotonic() + _State.grace
    while acked < len(peers) and time.monotonic() < deadline:
        if comm.iprobe(tag=_ACK):
            comm.recv(tag=_ACK)
            acked += 1
        else:
            time.sleep(0.005)
    comm.Abort(1)
