"""examples/c: export_digits.py saves the digits model, predict.c (built as its comment says,
with pkg-config against the installed package) classifies the held-out images from C alone and
agrees with gpucore's Python predictions."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpucore

from .conftest import CC, NEEDS

pytestmark = NEEDS

ROOT = Path(__file__).resolve().parents[2]


def test_predict_c_classifies_the_digits_like_python(tmp_path):
    pytest.importorskip("sklearn")
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    out = tmp_path / "digits"
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "c" / "export_digits.py"), "--out", str(out)]
        + ["--checkpoint", str(tmp_path / "none.safetensors"), "--epochs", "1"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, PKG_CONFIG_PATH=gpucore.get_pkg_config_dir())
    exe = tmp_path / "predict"
    build = subprocess.run(
        f"{CC} -std=c11 -O2 -Wall -Wextra -Werror {ROOT / 'examples' / 'c' / 'predict.c'} "
        f"$(pkg-config --cflags --libs gpucore) -o {exe}",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    r = subprocess.run(
        [str(exe), out / "digits.gcm", out / "images.f32", out / "labels.i64"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    got = np.array(r.stdout.split(), np.int64)
    want = np.fromfile(out / "python_predictions.i64", np.int64)
    np.testing.assert_array_equal(got, want)
    assert r.stderr.startswith("accuracy ")
