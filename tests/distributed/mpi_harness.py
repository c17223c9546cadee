"""Runs worker scripts under a real ``mpirun`` for the distributed tests.

Without mpirun or mpi4py the tests skip, unless GPUCORE_TEST_REQUIRE_MPI=1 (set by .ci/run, whose
set-up installs both), which makes them fail: CI must never pass by skipping MPI.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")


def _require() -> bool:
    return os.environ.get("GPUCORE_TEST_REQUIRE_MPI", "") not in ("", "0")


def need_mpi() -> str:
    """The mpirun executable, or skip (fail under GPUCORE_TEST_REQUIRE_MPI=1)."""
    mpirun = shutil.which("mpirun")
    missing = []
    if mpirun is None:
        missing.append("mpirun (apt-get install openmpi-bin)")
    if importlib.util.find_spec("mpi4py") is None:
        missing.append("mpi4py (pip install 'gpucore[distributed]')")
    if missing:
        msg = "MPI is not installed: " + ", ".join(missing)
        if _require():
            pytest.fail(msg + " (GPUCORE_TEST_REQUIRE_MPI=1)")
        pytest.skip(msg)
    return mpirun


def mpirun(worker: str, np: int, *args: str, timeout: float = 120, env: dict | None = None):
    """Run ``workers/<worker>`` on ``np`` ranks; the CompletedProcess (stdout and stderr merged).

    ``res.ranks[r]`` is rank r's own output (its stdout and stderr, in order). Assert a rank's
    message there, not in ``res.stdout``: mpirun forwards the ranks' writes as they come, so two
    tracebacks written at once interleave mid-line in the merged text ("ValueErrorraise ...")."""
    exe = need_mpi()
    with tempfile.TemporaryDirectory(prefix="gpucore-mpirun-") as logs:
        cmd = [exe, "--allow-run-as-root", "--oversubscribe", "-np", str(np)]
        cmd += ["--output-filename", logs, "--merge-stderr-to-stdout"]
        cmd += [sys.executable, os.path.join(WORKERS, worker), *args]
        full_env = dict(os.environ)
        # one thread per rank: the ranks share the machine's cores
        full_env.setdefault("GPUCORE_NUM_THREADS", "1")
        full_env.update(env or {})
        res = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            env=full_env,
        )
        res.ranks = [_rank_output(logs, r) for r in range(np)]
    return res


def _rank_output(logs: str, rank: int) -> str:
    """What rank ``rank`` wrote ('' if it wrote nothing: a rank killed before its first write)."""
    # Open MPI 4 writes <dir>/<job>/rank.<r>/stdout; the job number is 1 under one mpirun
    for job in sorted(os.listdir(logs)):
        path = os.path.join(logs, job, f"rank.{rank}", "stdout")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                return f.read()
    return ""


def passed(res, np: int, *checks: str) -> None:
    """Assert that every rank printed ``PASS <check>`` for every check and mpirun succeeded."""
    out = res.stdout
    assert res.returncode == 0, out[-4000:]
    for check in checks:
        for r in range(np):
            own = res.ranks[r]
            assert f"rank {r} PASS {check}" in own, f"rank {r} did not pass {check}:\n{own[-4000:]}"
