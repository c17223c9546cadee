"""A job in which rank 1 fails (run by test_faults.py): ``raise``, ``kill`` (SIGKILL), ``hang``
(never reaches the collective) or ``skip`` (returns early without calling it). The other ranks
sit in an all_reduce with a short timeout and must fail, never hang. ``all``: every rank raises
at once (none is in a collective to be told)."""

import datetime
import os
import signal
import sys
import time

import gpucore as gc
import gpucore.distributed as dist

mode, timeout = sys.argv[1], float(sys.argv[2])
dist.init_process_group(timeout=datetime.timedelta(seconds=timeout))
if mode == "all":
    raise ValueError(f"rank {dist.get_rank()} broke on purpose")
if dist.get_rank() == 1:
    if mode == "raise":
        raise ValueError("rank one broke on purpose")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(3600)
if dist.get_rank() != 1 or mode != "skip":
    dist.all_reduce(gc.ones(1000))
print(f"rank {dist.get_rank()} finished", flush=True)
