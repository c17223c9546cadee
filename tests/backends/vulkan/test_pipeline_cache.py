"""The pipeline cache on disk (backends/vulkan/pipeline_store.py): the file format and its
validation, saving only what changed, a corrupt file ignored and replaced, processes starting at
once, and a later process starting from the saved data; the list of used pipelines beside it, and
their creation in the background at the next start (pipelines.py, prewarm)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np

from gpucore.backends.vulkan import fusion
from gpucore.backends.vulkan import pipeline_store as PS
from gpucore.backends.vulkan.pipelines import PipelineCache, shader_digest

KEY = PS.Key(0x10DE, 0x2330, 7, bytes(range(16)))
DRIVER_DATA = PS.DRIVER_HEADER.pack(32, 1, 0x10DE, 0x2330, bytes(range(16))) + b"x" * 40


def test_the_file_round_trips_and_every_damage_is_refused():
    blob = PS.pack(KEY, DRIVER_DATA)
    assert PS.unpack(KEY, blob) == DRIVER_DATA
    flipped = bytearray(blob)
    flipped[-1] ^= 1
    bad_driver = PS.DRIVER_HEADER.pack(32, 1, 0x1002, 0x2330, bytes(range(16))) + b"x" * 40
    damaged = {
        "empty": b"",
        "truncated header": blob[:20],
        "truncated data": blob[:-5],
        "padded": blob + b"\0",
        "flipped byte": bytes(flipped),
        "magic": b"NOTMAGIC" + blob[8:],
        "other driver version": PS.pack(PS.Key(0x10DE, 0x2330, 8, KEY.uuid), DRIVER_DATA),
        "other uuid": PS.pack(PS.Key(0x10DE, 0x2330, 7, bytes(16)), DRIVER_DATA),
        "driver header of another device": PS.pack(KEY, bad_driver),
        "no driver header": PS.pack(KEY, b"abc"),
    }
    for what, data in damaged.items():
        assert PS.unpack(KEY, data) is None, what


def test_location_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path / "pc"))
    assert PS.directory() == tmp_path / "pc"
    monkeypatch.setenv(PS.ENV, "0")
    assert PS.directory() is None and PS.path_for(KEY) is None
    assert not PS.write(KEY, DRIVER_DATA) and PS.read(KEY) is None
    monkeypatch.delenv(PS.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert PS.directory() == tmp_path / "xdg" / "gpucore"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert PS.directory() == tmp_path / "home" / ".cache" / "gpucore"


def test_write_is_atomic_and_read_checks(monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    assert PS.write(KEY, DRIVER_DATA)
    assert PS.read(KEY) == DRIVER_DATA
    assert os.listdir(tmp_path) == [PS.path_for(KEY).name]  # no temporary file left
    PS.path_for(KEY).write_bytes(PS.pack(KEY, DRIVER_DATA)[:-1])
    assert PS.read(KEY) is None
    monkeypatch.setattr(PS, "MAX_BYTES", 10)
    PS.path_for(KEY).write_bytes(PS.pack(KEY, DRIVER_DATA))
    assert PS.read(KEY) is None  # larger than any cache of ours: not read whole


def test_an_unwritable_place_or_a_dead_writer_is_no_error(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    monkeypatch.setenv(PS.ENV, str(blocker / "sub"))  # a directory under a file: cannot exist
    assert not PS.write(KEY, DRIVER_DATA)
    assert PS.read(KEY) is None
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    stale = tmp_path / (PS.path_for(KEY).name + ".abc.tmp")  # a writer died before renaming
    stale.write_bytes(b"partial")
    fresh = tmp_path / (PS.path_for(KEY).name + ".def.tmp")  # one still writing
    fresh.write_bytes(b"partial")
    os.utime(stale, (0, 0))
    assert PS.write(KEY, DRIVER_DATA)
    assert not stale.exists() and fresh.exists()
    assert PS.read(KEY) == DRIVER_DATA


def _cache(vulkan) -> PipelineCache:
    ctx = vulkan.ctx
    key = PS.Key.of(ctx.vk, ctx.physical)
    return PipelineCache(ctx.vk, ctx.device, ctx.push_descriptor is not None, key=key)


def test_save_writes_what_changed_and_a_new_cache_starts_from_it(vulkan, monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    first = _cache(vulkan)
    try:
        assert first.loaded_bytes == 0
        first.get("fused", fusion.MAX_SLOTS, (), 64)
        assert first.save()
        data = first._data(first.cache)
        assert PS.read(first.key) == data
        assert not first.save()  # unchanged: not written again
    finally:
        first.destroy()
    second = _cache(vulkan)
    try:
        assert second.loaded_bytes == len(data) > 0  # a hit: it started from the file
        assert not second.save()
    finally:
        second.destroy()


def test_a_corrupt_file_is_ignored_and_replaced(vulkan, monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    key = PS.Key.of(vulkan.ctx.vk, vulkan.ctx.physical)
    for junk in (b"\xff" * 300, PS.pack(key, b"garbage that is no pipeline cache at all")):
        PS.path_for(key).write_bytes(junk)
        pc = _cache(vulkan)
        try:
            assert pc.loaded_bytes == 0
            pc.get("fused", fusion.MAX_SLOTS, (), 64)
            assert pc.save()
            assert PS.read(key) == pc._data(pc.cache)
        finally:
            pc.destroy()


def test_another_process_file_is_merged_not_lost(vulkan, monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    pc = _cache(vulkan)
    try:
        ours = pc._data(pc.cache)
        # what another process saved meanwhile: valid for this driver, different from ours
        PS.write(pc.key, ours + b"\0" * 8)
        pc.get("fused", fusion.MAX_SLOTS, (), 64)
        assert pc.save()
        assert PS.read(pc.key) is not None
    finally:
        pc.destroy()


CHILD = """
import numpy as np
import gpucore as gc
x = gc.tensor(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096)
with gc.device_policy('vulkan'):
    y = (x @ x).relu().sum().item()
a = x.numpy().astype(np.float64)
ok = abs(y - np.maximum(a @ a, 0).sum()) < 1e-4 * abs(y)
print('result', ok, 'loaded', gc.vulkan.stats()['pipeline_cache_bytes'])
"""
WANT = "result True"


def _start(cache_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCORE_")}
    env[PS.ENV] = str(cache_dir)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(p) -> str:
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    assert WANT in out, out
    return out


def test_processes_starting_at_once_share_the_file(vulkan, tmp_path):
    key = PS.Key.of(vulkan.ctx.vk, vulkan.ctx.physical)
    path = tmp_path / f"vulkan-pipelines-{key.digest()}.bin"
    procs = [_start(tmp_path) for _ in range(2)]
    outs = [_finish(p) for p in procs]
    # each finds no file, or the one the other wrote first if it finished before this one began
    assert all(re.search(r"loaded \d+", o) for o in outs), outs
    # one whole file and its key list, no temporary left
    assert sorted(os.listdir(tmp_path)) == [path.name, PS.keys_path(key).name]
    data = PS.unpack(key, path.read_bytes())
    assert data is not None
    # the next two (again at once) start from it
    procs = [_start(tmp_path) for _ in range(2)]
    for p in procs:
        assert f"loaded {len(data)}" in _finish(p)
    assert PS.unpack(key, path.read_bytes()) is not None


def test_a_process_survives_a_corrupt_file(vulkan, tmp_path):
    key = PS.Key.of(vulkan.ctx.vk, vulkan.ctx.physical)
    path = tmp_path / f"vulkan-pipelines-{key.digest()}.bin"
    path.write_bytes(PS.pack(key, b"")[:-7] + b"\x01" * 1000)
    assert "loaded 0" in _finish(_start(tmp_path))
    assert PS.unpack(key, path.read_bytes()) is not None  # replaced by a valid file


def test_no_file_when_the_disk_cache_is_off(vulkan, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCORE_")}
    env[PS.ENV] = "0"
    env["XDG_CACHE_HOME"] = str(tmp_path)
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    assert WANT in res.stdout
    # (the driver may keep caches of its own there: Mesa writes mesa_shader_cache/)
    assert not [f for _, _, files in os.walk(tmp_path) for f in files if "vulkan-pipelines" in f]


def test_the_key_list_round_trips_and_damage_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    keys = [(("binary", 3, 64, (1, 2, 3)), "ab12"), (("gemm", 3, 256, ()), "cd34")]
    assert PS.write_keys(KEY, keys)
    assert PS.read_keys(KEY) == keys
    assert PS.write_keys(KEY, [(("binary", 3, 64, (np.int32(7),)), "ab12")])  # numpy ints too
    assert PS.read_keys(KEY) == [(("binary", 3, 64, (7,)), "ab12")]
    path = PS.keys_path(KEY)
    path.write_text(
        '[["binary", 3, 64, [1], "d"], ["x y", 3, 64, [], "d"], ["relu", 99, 64, [], "d"], '
        '["relu", 1, 64, [1.5], "d"], ["relu", 1, 0, [], "d"], ["relu", 1, 64, []], '
        '["relu", 1, 64, [' + ",".join(["1"] * 33) + '], "d"], "junk", '
        '["binary", 3, 64, [1], "e"]]'
    )
    # bad entries dropped (a 33-constant spec among them), a repeated key once
    assert PS.read_keys(KEY) == [(("binary", 3, 64, (1,)), "d")]
    for junk in ("", "{", '{"a": 1}', "\xff"):
        path.write_text(junk)
        assert PS.read_keys(KEY) == []
    many = [(("binary", 3, 64, (i,)), "d") for i in range(2 * PS.KEYS_MAX)]
    assert PS.write_keys(KEY, many)
    assert PS.read_keys(KEY) == many[: PS.KEYS_MAX]
    monkeypatch.setenv(PS.ENV, "0")
    assert PS.read_keys(KEY) == [] and not PS.write_keys(KEY, keys)


def test_prewarm_creates_the_listed_pipelines_in_the_background(vulkan, monkeypatch, tmp_path):
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    monkeypatch.delenv("GPUCORE_VULKAN_PREWARM", raising=False)
    first = _cache(vulkan)
    try:
        first.get("fused", fusion.MAX_SLOTS, (), 64)
        first.get("fused", fusion.MAX_SLOTS, (), 128)
        first.save()
    finally:
        first.destroy()
    want = [("fused", fusion.MAX_SLOTS, 64, ()), ("fused", fusion.MAX_SLOTS, 128, ())]
    fused = shader_digest("fused")
    assert fused and PS.read_keys(first.key) == [(k, fused) for k in want]
    # skipped, not an error: a key of a shader this package lacks, and one written for another
    # version of the shader (its bindings or constants may mean something else now)
    PS.write_keys(
        first.key,
        [
            (("no_such_shader", 2, 64, ()), ""),
            (("fused", fusion.MAX_SLOTS, 256, ()), "0" * 16),
            *[(k, fused) for k in want],
        ],
    )
    pc = _cache(vulkan)
    try:
        assert not pc.prewarm(cpu_device=True)  # a CPU device: off unless asked
        monkeypatch.setenv("GPUCORE_VULKAN_PREWARM", "1")
        assert pc.prewarm(cpu_device=True)
        got = pc.get("fused", fusion.MAX_SLOTS, (), 64)  # while the thread runs: one pipeline
        pc.stop_prewarm()
        assert pc._thread is None
        assert pc.get("fused", fusion.MAX_SLOTS, (), 64) is got
        assert pc.get("fused", fusion.MAX_SLOTS, (), 128).local_size == 128
        assert pc.prewarmed + pc.created == 2 and pc.prewarmed >= 1
        assert not pc.warm and list(pc.pipelines) == want
    finally:
        pc.destroy()
    off = _cache(vulkan)
    try:
        monkeypatch.setenv("GPUCORE_VULKAN_PREWARM", "0")
        assert not off.prewarm(cpu_device=False)
    finally:
        off.destroy()


PREWARMED = """
import numpy as np
import gpucore as gc
from gpucore.backends.vulkan import context
ctx = context.get(allow_cpu=True)
ctx.pipelines._thread.join()  # let the background thread finish its list first
x = gc.tensor(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096)
with gc.device_policy('vulkan'):
    y = (x @ x).relu().sum().item()
a = x.numpy().astype(np.float64)
ok = abs(y - np.maximum(a @ a, 0).sum()) < 1e-4 * abs(y)
s = gc.vulkan.stats()
print('result', ok, 'prewarmed', s['pipelines_prewarmed'], 'created', s['pipelines_created'])
"""


def test_the_next_process_finds_its_pipelines_made(vulkan, monkeypatch, tmp_path):
    _finish(_start(tmp_path))  # the first process leaves the list of what it used
    monkeypatch.setenv(PS.ENV, str(tmp_path))
    key = PS.Key.of(vulkan.ctx.vk, vulkan.ctx.physical)
    n = len(PS.read_keys(key))
    assert n >= 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCORE_")}
    env.update({PS.ENV: str(tmp_path), "GPUCORE_VULKAN_PREWARM": "1"})
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PREWARMED)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    assert f"result True prewarmed {n} created 0" in res.stdout, res.stdout
