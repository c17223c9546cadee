"""Temporary files of gpucore.save (gpucore/io/atomic.py): a save after a kill -9 deletes the
dead writer's temporary, never a live writer's nor another target's; temporary names stay within
the file system's name limit, so a legal 255-byte name can be saved."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from serialization_helpers import assert_same

import gpucore
from gpucore.io import atomic
from gpucore.io import safetensors_format as fmt

posix_only = pytest.mark.skipif(os.name != "posix", reason="kill -9 and flock are POSIX")
LONG = "模" * 85  # 255 bytes in UTF-8: the longest legal name on ext4, xfs, btrfs, tmpfs


def _writer(target, pause: str) -> str:
    """A child that saves two tensors to ``target`` and, at the second, either kills itself
    (pause='kill') or says 'writing' and waits for a line on stdin."""
    return textwrap.dedent(
        f"""
        import os, signal, sys, gpucore
        from gpucore.io import safetensors_format as fmt
        real, n = fmt._payload, []
        def hook(t):
            n.append(1)
            if len(n) == 2:
                if {pause!r} == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                print("writing", flush=True)
                sys.stdin.readline()
            return real(t)
        fmt._payload = hook
        gpucore.save({{"w": gpucore.ones(100), "v": gpucore.full((100,), 2.0)}}, {str(target)!r})
        """
    )


def _temps(folder) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".tmp"))


@posix_only
@pytest.mark.parametrize("name", ["ckpt.safetensors", LONG], ids=["short", "255-byte"])
def test_a_killed_save_leaves_a_temporary_that_the_next_save_deletes(tmp_path, name):
    target = tmp_path / name
    r = subprocess.run([sys.executable, "-c", _writer(target, "kill")], timeout=60)
    assert r.returncode == -9
    (left,) = _temps(tmp_path)
    assert left.startswith(".") and len(os.fsencode(left)) <= 255
    other = tmp_path / "other.safetensors"
    gpucore.save({"x": 1}, other)  # another target's save leaves it alone
    assert _temps(tmp_path) == [left]
    gpucore.save({"x": 2}, target)
    assert _temps(tmp_path) == []
    assert gpucore.load(target) == {"x": 2}


@posix_only
def test_a_live_writers_temporary_is_kept(tmp_path):
    target = tmp_path / "ckpt.safetensors"
    child = subprocess.Popen(
        [sys.executable, "-c", _writer(target, "wait")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "writing"
        (theirs,) = _temps(tmp_path)
        old = time.time() - 2 * atomic.STALE_SECONDS  # even an old-looking one: it is locked
        os.utime(tmp_path / theirs, (old, old))
        gpucore.save({"mine": 1}, target)
        assert _temps(tmp_path) == [theirs]
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()
    assert _temps(tmp_path) == []
    assert gpucore.load(target)["v"].tolist() == [2.0] * 100


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(p.stdout)


@posix_only
def test_which_temporaries_are_stale(tmp_path):
    name = "ckpt.safetensors"
    dead, host = _dead_pid(), atomic._HOST
    other_host = "0000" if host != "0000" else "ffff"
    old = time.time() - atomic.STALE_SECONDS - 60
    files = {  # file name -> (age, deleted?)
        f".{name}.{dead}.{host}00000001.tmp": (None, True),  # its writer died
        f".{name}.{os.getpid()}.{host}00000002.tmp": (None, False),  # a writer that runs
        f".{name}.{os.getpid()}.{host}00000003.tmp": (old, True),  # ... yet untouched for long
        f".{name}.{dead}.{other_host}00000004.tmp": (None, False),  # pid of another machine
        f".{name}.{dead}.{other_host}00000005.tmp": (old, True),
        f".{name}.0123456789ab.tmp": (None, False),  # gpucore before the pid: age decides
        f".{name}.0123456789ac.tmp": (old, True),
        f".other.{dead}.{host}00000006.tmp": (old, False),  # another target's
        f".{name}.{dead}.{host}0000000.tmp": (old, False),  # not a temporary name
        f".{name}.bak": (old, False),
    }
    for f, (age, _) in files.items():
        (tmp_path / f).write_bytes(b"partial")
        if age is not None:
            os.utime(tmp_path / f, (age, age))
    folder_like = tmp_path / f".{name}.{dead}.{host}00000007.tmp"
    folder_like.mkdir()
    os.symlink(tmp_path / f".{name}.bak", tmp_path / f".{name}.{dead}.{host}00000008.tmp")
    gpucore.save({"x": 1}, tmp_path / name)
    kept = set(os.listdir(tmp_path))
    for f, (_, deleted) in files.items():
        assert (f not in kept) == deleted, f
    assert folder_like.is_dir() and f".{name}.{dead}.{host}00000008.tmp" in kept


def test_temporary_names_fit_the_name_limit(tmp_path, monkeypatch):
    seen = []
    real = fmt._payload

    def spy(t):
        seen.extend(f for f in os.listdir(tmp_path) if f.endswith(".tmp"))
        return real(t)

    monkeypatch.setattr(fmt, "_payload", spy)
    obj = {"w": gpucore.arange(5).float()}
    for name in (LONG, "x" * 255, "é" * 127, "short"):
        gpucore.save(obj, tmp_path / name)
        assert_same(gpucore.load(tmp_path / name), obj)
    assert len(seen) == 4 and all(len(os.fsencode(f)) <= 255 for f in seen), seen
    assert sorted(os.listdir(tmp_path)) == sorted([LONG, "x" * 255, "é" * 127, "short"])


@pytest.mark.parametrize("limit", [255, 143, 64])
def test_temp_stem_is_a_prefix_and_a_hash(limit):
    for name in (LONG, "a" * 300, "ü" * 200, "ok"):
        stem = atomic.temp_stem(name, limit)
        assert stem == atomic.temp_stem(name, limit)  # the same for every writer
        assert len(os.fsencode(stem)) + atomic._OVERHEAD <= limit or stem == name
        if stem != name:
            prefix, digest = stem.rsplit("~", 1)
            assert name.startswith(prefix) and len(digest) == 8
    assert atomic.temp_stem(LONG, 255) != atomic.temp_stem(LONG[:-1] + "x", 255)
