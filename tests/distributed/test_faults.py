"""A rank that fails makes the others fail with an error naming it, within the timeout."""

import time

import pytest
from mpi_harness import mpirun


@pytest.mark.parametrize("np", [2, 4])
def test_a_rank_that_raises_is_named_on_the_others(np):
    res = mpirun("faults.py", np, "raise", "60", timeout=90)
    assert res.returncode != 0
    assert "ValueError: rank one broke on purpose" in res.ranks[1]  # its own traceback
    # every other rank reports rank 1 by name, long before the 60 s timeout
    for r in (0, *range(2, np)):
        want = f"rank 1 failed (ValueError: rank one broke on purpose); this rank ({r}) cannot"
        assert want in res.ranks[r], res.stdout
    assert "finished" not in res.stdout


def test_a_killed_rank_stops_the_job():
    t0 = time.monotonic()
    res = mpirun("faults.py", 2, "kill", "60", timeout=90)
    assert res.returncode != 0
    assert "rank 1" in res.stdout and "signal 9" in res.stdout, res.stdout
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("mode", ["hang", "skip"])
def test_a_rank_that_stops_answering_times_out(mode):
    t0 = time.monotonic()
    res = mpirun("faults.py", 2, mode, "3", timeout=60)
    assert res.returncode != 0
    assert "all_reduce: timed out after 3 s on rank 0" in res.ranks[0], res.stdout
    assert time.monotonic() - t0 < 45  # the timeout, the grace period and start-up, not a hang
    if mode == "skip":
        # rank 1 finished and waits at exit: it is told, answers, and the job ends normally
        assert "rank 1: rank 0 failed (gpucore.errors.DistBackendError" in res.ranks[1]
        assert "while this rank was exiting" in res.ranks[1]
        assert "did not answer" not in res.stdout, res.stdout
    else:
        # rank 1 sleeps: it cannot answer, so rank 0 ends the job after its grace period
        assert "rank 0: ranks [1] did not answer within 3 s; ending the job" in res.ranks[0]


def test_ranks_failing_together_end_the_job_at_once():
    """Every rank raises (a bug after init): each answers the others' notices while it waits
    for their answers to its own, so no rank waits out the grace period."""
    t0 = time.monotonic()
    res = mpirun("faults.py", 3, "all", "60", timeout=60)
    assert res.returncode != 0
    for r in range(3):
        assert f"ValueError: rank {r} broke on purpose" in res.ranks[r], res.stdout
    assert "did not answer" not in res.stdout, res.stdout
    assert "while this rank was exiting" not in res.stdout, res.stdout  # each failed itself
    assert time.monotonic() - t0 < 30


def test_a_rank_that_catches_the_error_still_answers():
    """Rank 0 catches the DistBackendError and exits normally: it answers at exit, so rank 1
    is not left waiting out its grace period to end the job."""
    res = mpirun("faults.py", 3, "catch", "60", timeout=60)
    assert res.returncode != 0
    assert "rank 0 caught: all_reduce: rank 1 failed (ValueError" in res.ranks[0], res.stdout
    assert "did not answer" not in res.stdout, res.stdout


def test_a_failure_after_destroy_process_group_lets_the_others_finish():
    """No rank is in a collective with it any more: the others finish their own work, and the
    job then ends with the failed rank's status."""
    res = mpirun("faults.py", 2, "after_destroy", "60", timeout=60)
    assert res.returncode != 0
    assert "ValueError: rank one broke after destroy_process_group" in res.ranks[1]
    assert "rank 0 saved its results" in res.ranks[0], res.stdout
    assert "did not answer" not in res.stdout, res.stdout
