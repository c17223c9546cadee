"""The caching host allocator (cpu/host_cache.c) behind every CPU tensor's storage.

Freed blocks are kept per size class and handed out again warm; what is kept is capped by
GPUCORE_HOST_CACHE_MB; gpucore.empty_cache() gives it back. Reused memory is never assumed zero.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpucore
from gpucore import _cpu
from gpucore.backends.cpu import empty_array


def test_host_empty_is_aligned_writable_and_sized():
    for n in (0, 1, 63, 4096, 4097, 100_000, 3 << 20):
        buf = _cpu.host_empty(n)
        arr = np.frombuffer(buf, np.uint8)
        assert arr.nbytes == n
        assert arr.flags.writeable
        if n:
            assert _cpu.data_ptr(arr) % 64 == 0
            arr[:] = 7
            assert int(arr.sum()) == 7 * n


def test_host_empty_rejects_bad_sizes():
    with pytest.raises(ValueError, match="host_empty: size must be >= 0"):
        _cpu.host_empty(-1)
    with pytest.raises(TypeError):
        _cpu.host_empty("12")


def test_a_freed_block_is_reused_for_the_next_tensor_of_its_size_class():
    gpucore.empty_cache()
    a = empty_array((300, 301), np.float32)
    ptr = _cpu.data_ptr(a)
    del a
    before = _cpu.host_cache_info()
    assert before["cached_bytes"] >= 300 * 301 * 4
    b = empty_array((301, 300), np.float32)  # same bytes, another shape
    assert _cpu.data_ptr(b) == ptr
    after = _cpu.host_cache_info()
    assert after["hits"] == before["hits"] + 1
    assert after["cached_bytes"] < before["cached_bytes"]


def test_views_keep_the_block_alive():
    gpucore.empty_cache()
    a = empty_array((1000, 100), np.float32)
    a[:] = np.arange(100_000, dtype=np.float32).reshape(1000, 100)
    view = a[10:20, ::3]
    del a
    assert _cpu.host_cache_info()["cached_bytes"] == 0  # the view still uses it
    c = empty_array((1000, 100), np.float32)
    c[:] = -1.0  # a different block: the view's data is untouched
    np.testing.assert_array_equal(
        view, np.arange(100_000, dtype=np.float32).reshape(1000, 100)[10:20, ::3]
    )


def test_reused_memory_does_not_leak_into_zeros_and_results():
    x = gpucore.from_numpy(np.full((256, 300), np.nan, np.float32))
    del x  # a NaN-filled block now sits in the cache
    z = gpucore.zeros(256, 300)
    assert not np.isnan(z.numpy()).any() and float(z.abs().sum()) == 0.0
    a = np.random.default_rng(0).standard_normal((256, 300)).astype(np.float32)
    y = gpucore.from_numpy(a) + 1.0
    np.testing.assert_allclose(y.numpy(), a.astype(np.float64) + 1.0, rtol=1e-6)


def test_empty_cache_gives_the_cached_bytes_back():
    a = empty_array((512, 512), np.float32)
    del a
    cached = _cpu.host_cache_info()["cached_bytes"]
    assert cached > 0
    assert gpucore.empty_cache() == cached
    assert _cpu.host_cache_info()["cached_bytes"] == 0


def test_backend_info_reports_isa_threads_blocking_and_cache():
    info = gpucore.backend_info()["cpu"]
    assert info["isa"] in info["available"]
    assert info["threads"] == gpucore.get_num_threads() >= 1
    assert info["caches"]["l1d"] > 0 and info["gemm"]["float32"]["kc"] > 0
    assert set(info["host_cache"]) == {"cached_bytes", "limit_bytes", "hits", "misses"}


def test_set_num_threads_changes_the_pool_and_rejects_bad_values():
    n = gpucore.get_num_threads()
    try:
        gpucore.set_num_threads(1)
        assert gpucore.get_num_threads() == 1
    finally:
        gpucore.set_num_threads(n)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="set_num_threads"):
            gpucore.set_num_threads(bad)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_limit_caps_what_is_kept():
    code = """
        import numpy as np
        from gpucore import _cpu
        from gpucore.backends.cpu import empty_array
        blocks = [empty_array((1 << 18,), np.float32) for _ in range(4)]  # 1 MiB each
        del blocks
        info = _cpu.host_cache_info()
        print(info["limit_bytes"], info["cached_bytes"])
    """
    res = _run(code, GPUCORE_HOST_CACHE_MB="2")
    assert res.returncode == 0, res.stderr
    limit, cached = map(int, res.stdout.split())
    assert limit == 2 << 20 and 0 < cached <= limit
    res = _run(code, GPUCORE_HOST_CACHE_MB="0")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["0", "0"]
