"""Failure notices between ranks: a rank that dies of an exception tells the others, by name.

MPI has no fault tolerance: when one rank raises, the others wait in their next collective
forever. So ``init_process_group`` installs an exception hook. A rank whose uncaught exception
ends it prints its traceback as usual, sends a notice (its rank and the exception) to every
other rank on a communicator of its own, and waits up to ``GRACE`` seconds (or the timeout, if
shorter) for all of them to acknowledge. A rank waiting in a collective looks for notices while
it polls and raises DistBackendError naming the failed rank; when that error ends it too, its
hook prints it, acknowledges, and waits for the failed rank's verdict:

- every other rank acknowledged (a rank that failed on its own meanwhile answers the notice
  it finds while waiting for its own answers, so ranks failing together do not wait each other
  out): the failed rank releases them and all ranks exit normally (with status 1, which
  ``mpirun`` reports);
- some rank did not (it is not in a collective, and would keep ``mpirun`` waiting): the failed
  rank ends its process at once, without MPI_Finalize, and ``mpirun`` stops the whole job, as
  it does for a rank killed outright (a signal, ``os._exit``); the ranks that acknowledged are
  still waiting when it does.

Why not MPI_Abort: with Open MPI 4.1, an MPI_Abort that races another rank's exit (one that
acknowledged, or one that returned without making the collective) can leave ``mpirun``
deadlocked in its PMIx server shutdown after every rank has gone: about one job in a dozen on
2 loaded cores, in both the raise and the skip cases of tests/distributed/test_faults.py. The
same happens when the job is stopped while a rank waits in MPI_Finalize (one that finished, or
returned without making the collective), so at exit each rank first waits for the others in a
barrier of its own that keeps answering notices (a rank that caught the DistBackendError
acknowledges there). A script that calls ``MPI.Finalize()`` itself skips that barrier and is
deaf again from then on. After ``destroy_process_group`` a failing rank tells nobody (no rank
is in a collective with it; the others may still be finishing their own work) and goes to the
exit barrier like the rest; notices from others are still answered there.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import traceback

from ..errors import DistBackendError

GRACE = 5.0  # at most this many seconds (or the timeout) for the others to print their error
# how much longer than the grace a rank that acknowledged waits for the verdict before exiting
RELEASE_MARGIN = 10.0
_NOTICE, _ACK, _RELEASE = 7001, 7002, 7003


class _State:
    comm = None  # a duplicate of COMM_WORLD for notices only
    rank = -1
    size = 0
    grace = GRACE
    previous_hook = None
    failed_peer = None  # the rank whose notice this rank raised for, until acknowledged
    group_alive = False  # from init_process_group to destroy_process_group
    failed_self = False  # this rank has told the others of its own failure


def start(comm, rank: int, size: int, timeout: float) -> None:
    """Begin listening (called by init_process_group with a communicator of its own)."""
    if _State.comm is not None:
        _State.comm.Free()  # a group initialized again after destroy_process_group
    _State.comm, _State.rank, _State.size = comm, rank, size
    _State.grace = min(GRACE, timeout)
    _State.failed_peer = None
    _State.group_alive = True
    if _State.previous_hook is None:
        _State.previous_hook = sys.excepthook
        sys.excepthook = _hook
        atexit.register(_exit_barrier)


def group_destroyed() -> None:
    """Called by destroy_process_group: no rank can be waiting in a collective with this one
    any more, so a failure from here on is not told (the others may still be finishing their
    work); the exit barrier still answers the others' notices."""
    _State.group_alive = False


def _exit_barrier() -> None:
    """Wait at exit until every rank is exiting, answering failure notices meanwhile.

    MPI_Finalize waits for the other ranks too, but deaf: if one of them then fails, the job is
    stopped while this rank sits in Finalize, which is what deadlocks Open MPI 4.1's ``mpirun``
    (see the module docstring). Here it acknowledges the notice, so the job ends normally."""
    comm = _State.comm
    if comm is None or _State.size < 2 or sys.modules["mpi4py.MPI"].Is_finalized():
        return  # (a script may call MPI.Finalize itself)
    try:
        if _State.failed_peer is not None:
            _acknowledge(comm)  # the rank caught the DistBackendError and went on to exit
        done = comm.Ibarrier()
        pause = 0.0005
        while not done.Test():
            if comm.iprobe(tag=_NOTICE):
                _answer_at_exit(comm)
            time.sleep(pause)
            pause = min(2 * pause, 0.01)  # nothing to spin for: keep the cores for the others
    except Exception:  # noqa: BLE001 - an exit handler must not raise; Finalize still runs
        traceback.print_exc()


def _answer_at_exit(comm) -> None:
    MPI = sys.modules["mpi4py.MPI"]
    status = MPI.Status()
    notice = comm.recv(source=MPI.ANY_SOURCE, tag=_NOTICE, status=status)
    if not _State.failed_self:  # (else a rank that failed at the same time as this one)
        print(
            f"rank {_State.rank}: rank {notice['rank']} failed ({notice['error']}) while this "
            "rank was exiting",
            file=sys.stderr,
            flush=True,
        )
    comm.send(None, dest=status.Get_source(), tag=_ACK)


def _acknowledge(comm) -> None:
    """Answer the notice check() raised for, then wait for the failed rank's verdict (released:
    exit normally; otherwise ``mpirun`` stops the job while this rank waits)."""
    peer, _State.failed_peer = _State.failed_peer, None
    comm.send(None, dest=peer, tag=_ACK)
    _poll(comm, peer, _RELEASE, _State.grace + RELEASE_MARGIN)


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
            _acknowledge(comm)  # this rank failed because another did
        elif _State.group_alive:
            _notify_and_end(comm, exc_type, exc)
    except Exception:  # noqa: BLE001 - a hook must not raise; the job still ends
        traceback.print_exc()


def _notify_and_end(comm, exc_type, exc) -> None:
    error = "".join(traceback.format_exception_only(exc_type, exc)).strip()[:500]
    notice = {"rank": _State.rank, "error": error}
    _State.failed_self = True
    peers = [r for r in range(_State.size) if r != _State.rank]
    for r in peers:
        comm.isend(notice, dest=r, tag=_NOTICE)
    MPI = sys.modules["mpi4py.MPI"]
    status = MPI.Status()
    waiting = set(peers)
    deadline = time.monotonic() + _State.grace
    while waiting and time.monotonic() < deadline:
        for r in list(waiting):
            if comm.iprobe(source=r, tag=_ACK):
                comm.recv(source=r, tag=_ACK)
                waiting.discard(r)
        if comm.iprobe(tag=_NOTICE):
            # a rank that failed on its own meanwhile (every rank raising the same error):
            # it knows, and is waiting for this rank's answer as this rank waits for its
            comm.recv(source=MPI.ANY_SOURCE, tag=_NOTICE, status=status)
            comm.send(None, dest=status.Get_source(), tag=_ACK)
            waiting.discard(status.Get_source())
        elif waiting:
            time.sleep(0.005)
    if waiting:
        print(
            f"rank {_State.rank}: ranks {sorted(waiting)} did not answer within "
            f"{_State.grace:g} s; ending the job",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)
    for r in peers:
        comm.send(None, dest=r, tag=_RELEASE)


def _poll(comm, source: int, tag: int, seconds: float) -> bool:
    """Receive one empty message from ``source`` within ``seconds``; whether it came."""
    deadline = time.monotonic() + seconds
    while True:
        if comm.iprobe(source=source, tag=tag):
            comm.recv(source=source, tag=tag)
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
