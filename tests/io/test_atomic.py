"""The atomic-write promise of gpucore.save (gpucore/io/atomic.py): an exception, a failing
fsync or rename, or a hard crash mid-write leaves the old file intact (and no temporary file, but
after a crash); a successful overwrite keeps the file mode and follows symlinks."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest
from serialization_helpers import assert_same

import gpucore
from gpucore.io import safetensors_format as fmt

OLD = {"weights": gpucore.arange(10).float(), "epoch": 1}
NEW = {"weights": gpucore.ones(10), "more": gpucore.zeros(1000), "epoch": 2}


@pytest.fixture
def old_file(tmp_path):
    p = tmp_path / "ckpt.safetensors"
    gpucore.save(OLD, p)
    return p


def _assert_old_intact(p):
    assert_same(gpucore.load(p), OLD)
    assert os.listdir(p.parent) == [p.name], "temporary file left behind"


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_exception_mid_write_keeps_old_file(old_file, monkeypatch, exc):
    calls = []
    real = fmt._payload

    def failing(t):
        calls.append(t)
        if len(calls) == 2:  # the header and the first tensor are already written
            raise exc
        return real(t)

    monkeypatch.setattr(fmt, "_payload", failing)
    with pytest.raises(type(exc)):
        gpucore.save(NEW, old_file)
    assert len(calls) == 2
    monkeypatch.undo()
    _assert_old_intact(old_file)


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_failing_fsync_or_rename_keeps_old_file(old_file, monkeypatch, where):
    def boom(*a):
        raise OSError(f"injected {where} failure")

    monkeypatch.setattr(os, where, boom)
    with pytest.raises(OSError, match="injected"):
        gpucore.save(NEW, old_file)
    monkeypatch.undo()
    _assert_old_intact(old_file)


def test_hard_crash_mid_write_keeps_old_file(old_file):
    script = textwrap.dedent(
        f"""
        import os, gpucore
        from gpucore.io import safetensors_format as fmt
        real, n = fmt._payload, []
        def crash(t):
            n.append(1)
            if len(n) == 2:
                os._exit(17)
            return real(t)
        fmt._payload = crash
        gpucore.save({{"w": gpucore.ones(100), "v": gpucore.ones(100)}}, {str(old_file)!r})
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert r.returncode == 17, r.stderr.decode()
    assert_same(gpucore.load(old_file), OLD)
    leftovers = [f for f in os.listdir(old_file.parent) if f != old_file.name]
    assert all(f.startswith(".ckpt.safetensors.") and f.endswith(".tmp") for f in leftovers)


def test_successful_overwrite_keeps_mode_and_follows_symlinks(old_file):
    os.chmod(old_file, 0o640)
    gpucore.save(NEW, old_file)
    assert_same(gpucore.load(old_file), NEW)
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(old_file).st_mode) == 0o640
    link = old_file.parent / "latest"
    try:
        os.symlink(old_file.name, link)
    except (OSError, NotImplementedError):
        return
    gpucore.save(OLD, link)
    assert os.path.islink(link)
    assert_same(gpucore.load(old_file), OLD)
    assert sorted(os.listdir(old_file.parent)) == sorted([old_file.name, "latest"])


def test_save_into_missing_folder_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        gpucore.save(OLD, tmp_path / "no" / "such.safetensors")
