"""The data-parallel demo: ``mpirun -np 2 python -m gpucore.examples.digits --distributed``."""

import os
import subprocess
import sys

import pytest
from mpi_harness import need_mpi


def test_digits_trains_data_parallel_and_rank_0_alone_reports(tmp_path):
    pytest.importorskip("sklearn")  # the digits ship with scikit-learn
    cmd = [need_mpi(), "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable]
    cmd += ["-m", "gpucore.examples.digits", "--distributed", "--epochs", "3", "--no-progress"]
    cmd += ["--out", str(tmp_path)]
    env = dict(os.environ, GPUCORE_NUM_THREADS="1")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "data-parallel on 2 ranks" in out
    assert out.count("test accuracy") == 1  # rank 0 alone prints
    acc = float(out.split("test accuracy ")[1].split("%")[0])
    assert acc > 90, out
    assert "predictions identical" in out
    assert sorted(os.listdir(tmp_path))[0] == "digits_cnn.safetensors"
