"""A job in which rank 1 fails (run by test_faults.py): ``raise``, ``kill`` (SIGKILL), ``hang``
(never reaches the collective) or ``skip`` (returns early without calling it). The other ranks
sit in an all_reduce with a short timeout and must fail, never hang. ``all``: every rank raises
at once (none is in a collective to be told). ``catch``: rank 1 raises and rank 0 catches the
DistBackendError and exits normally. ``after_destroy``: rank 1 raises after
destroy_process_group while rank 0 still works (saving results) for 2 s."""

import datetime
import os
import signal
import sys
import time

import gpucore as gc
import gpucore.distributed as dist

mode, timeout = sys.argv[1], float(sys.argv[2])
dist.init_process_group(timeout=datetime.timedelta(seconds=timeout))
rank = dist.get_rank()
if mode == "all":
    raise ValueError(f"rank {rank} broke on purpose")
if mode == "after_destroy":
    dist.all_reduce(gc.ones(1000))
    dist.destroy_process_group()
    if rank == 1:
        raise ValueError("rank one broke after destroy_process_group")
    time.sleep(2)
    print(f"rank {rank} saved its results", flush=True)
    sys.exit(0)
if rank == 1:
    if mode in ("raise", "catch"):
        raise ValueError("rank one broke on purpose")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(3600)
if rank != 1 or mode != "skip":
    try:
        dist.all_reduce(gc.ones(1000))
    except dist.DistBackendError as e:
        if mode != "catch" or rank != 0:
            raise
        print(f"rank 0 caught: {e}", flush=True)
        sys.exit(0)
print(f"rank {rank} finished", flush=True)
