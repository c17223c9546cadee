"""Device discovery and failure behaviour (gpucore/backends/vulkan/device.py, gpucore.vulkan)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import gpucore
from gpucore.backends.vulkan import device as D


def _run(code: str, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUCORE_")}
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=e,
        timeout=120,
    )


NO_LOADER = """
import sys
sys.modules['vulkan'] = None  # as if the vulkan package / libvulkan were missing
"""


def test_without_a_loader_gpucore_runs_on_the_cpu():
    res = _run(
        NO_LOADER
        + """
import gpucore, numpy as np
assert gpucore.vulkan.is_available() is False
assert gpucore.vulkan.devices() == []
assert 'vulkan' in gpucore.vulkan.unavailable_reason()
x = gpucore.ones(100, 100)
y = (x * 3).sum()
assert y.item() == 30000.0 and y.device.type == 'cpu'
print('ok')
"""
    )
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


def test_backend_info_reports_the_vulkan_device_or_why_not():
    code = """
import gpucore
info = gpucore.backend_info()
print('vulkan', info['vulkan'], '|', info.get('vulkan_unavailable', ''))
"""
    res = _run(NO_LOADER + code)
    assert res.returncode == 0, res.stderr
    assert "vulkan None |" in res.stdout and "libvulkan1" in res.stdout
    if D.probe()[2]:
        res = _run(code, GPUCORE_VULKAN_ALLOW_CPU="1")
        assert res.returncode == 0, res.stderr
        name = gpucore.dispatch.vulkan_backend(allow_cpu=True).ctx.info.name
        assert f"vulkan {name} (" in res.stdout, res.stdout


def test_unavailable_reason_names_the_real_cause():
    # A bad GPUCORE_VULKAN_DEVICE must be reported as such, not as "only CPU-type devices".
    res = _run(
        """
import gpucore
print('available', gpucore.vulkan.is_available())
print('reason', gpucore.vulkan.unavailable_reason())
""",
        GPUCORE_VULKAN_DEVICE="99",
    )
    assert res.returncode == 0, res.stderr
    assert "available False" in res.stdout
    if D.probe()[2]:
        assert "GPUCORE_VULKAN_DEVICE='99' does not name a device" in res.stdout, res.stdout


def test_asking_for_vulkan_without_a_device_names_the_fix():
    res = _run(
        NO_LOADER
        + """
import gpucore
try:
    gpucore.ones(3) + 1
except gpucore.DeviceError as e:
    print('DeviceError:', e)
""",
        GPUCORE_DEVICE="vulkan",
    )
    assert res.returncode == 0, res.stderr
    assert "DeviceError:" in res.stdout
    assert "mesa-vulkan-drivers" in res.stdout


def test_set_device_policy_vulkan_without_a_device_raises():
    res = _run(
        NO_LOADER
        + """
import gpucore
try:
    gpucore.set_device_policy('vulkan')
except gpucore.DeviceError as e:
    print('raised', 'vulkan' in str(e))
"""
    )
    assert "raised True" in res.stdout, res.stderr


def test_bad_policy_names_are_rejected():
    with pytest.raises(ValueError, match="auto"):
        gpucore.set_device_policy("gpu")
    with pytest.raises(ValueError, match="auto"):
        gpucore.device_policy("cuda")


def test_choose_prefers_discrete_then_integrated_and_skips_cpu_unless_allowed(monkeypatch):
    monkeypatch.delenv("GPUCORE_VULKAN_DEVICE", raising=False)
    mk = lambda i, t: D.DeviceInfo(index=i, name=f"d{i}", type=t, driver="1", api_version="1.3")  # noqa: E731
    cpu, integ, disc, virt = mk(0, "cpu"), mk(1, "integrated"), mk(2, "discrete"), mk(3, "virtual")
    assert D.choose([cpu, integ, disc, virt], allow_cpu=False) is disc
    assert D.choose([cpu, integ, virt], allow_cpu=False) is integ
    assert D.choose([cpu, virt], allow_cpu=False) is virt
    assert D.choose([cpu], allow_cpu=False) is None
    assert D.choose([cpu], allow_cpu=True) is cpu


def test_gpucore_vulkan_device_picks_by_index(monkeypatch):
    mk = lambda i, t: D.DeviceInfo(index=i, name=f"d{i}", type=t, driver="1", api_version="1.3")  # noqa: E731
    devs = [mk(0, "discrete"), mk(1, "cpu")]
    monkeypatch.setenv("GPUCORE_VULKAN_DEVICE", "1")
    assert D.choose(devs, allow_cpu=False) is devs[1]
    monkeypatch.setenv("GPUCORE_VULKAN_DEVICE", "7")
    with pytest.raises(gpucore.DeviceError, match="2"):
        D.choose(devs, allow_cpu=False)


def test_devices_report_name_type_driver_and_limits(vulkan):
    devs = gpucore.vulkan.devices()
    assert gpucore.vulkan.device_count() == len(devs) >= 1
    for d in devs:
        assert d["type"] in ("discrete", "integrated", "virtual", "cpu", "other")
        assert d["name"] and d["driver"]
        assert d["limits"]["maxStorageBufferRange"] > 0
        assert d["limits"]["maxPushConstantsSize"] >= 128


def test_a_cpu_type_device_is_not_used_by_auto_unless_allowed():
    res = _run("""
import gpucore
devs = gpucore.vulkan.devices()
only_cpu = devs and all(d['type'] == 'cpu' for d in devs)
print('only_cpu', bool(only_cpu), 'available', gpucore.vulkan.is_available())
""")
    assert res.returncode == 0, res.stderr
    if "only_cpu True" in res.stdout:
        assert "available False" in res.stdout
    res = _run(
        """
import gpucore
print('available', gpucore.vulkan.is_available())
""",
        GPUCORE_VULKAN_ALLOW_CPU="1",
    )
    if D.probe()[2]:
        assert "available True" in res.stdout, res.stderr


def test_subgroup_properties_are_read_once_by_the_context(vulkan):
    # Kernels choose their variants from the context's subgroup properties (one query there).
    from gpucore.backends.vulkan.kernels import gemm as G
    from gpucore.backends.vulkan.kernels import reduce as R

    ctx = vulkan.ctx
    vk = ctx.vk
    assert ctx.subgroup_size >= 1
    assert ctx.has_subgroup_ops(0) is ctx.subgroup_compute
    shuffle = ctx.has_subgroup_ops(vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT)
    assert bool(G.subgroup_shuffle_size(ctx)) == (
        shuffle and ctx.subgroup_size % 4 == 0 and 4 <= ctx.subgroup_size <= 64
    )
    if G.subgroup_shuffle_size(ctx):
        assert G.subgroup_shuffle_size(ctx) == ctx.subgroup_size
    arith = (
        vk.VK_SUBGROUP_FEATURE_BASIC_BIT
        | vk.VK_SUBGROUP_FEATURE_VOTE_BIT
        | vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT
    )
    assert R.device_has_subgroups(ctx) == (ctx.subgroup_size > 1 and ctx.has_subgroup_ops(arith))
    if ctx.is_cpu:  # lavapipe: subgroups of 8 (or more) with every operation gpucore uses
        assert ctx.subgroup_size >= 4 and R.device_has_subgroups(ctx) and shuffle


def test_a_missing_shader_names_the_fix(vulkan):
    with pytest.raises(gpucore.DeviceError, match="build_shaders"):
        vulkan.ctx.pipelines.get("no_such_shader", 1)
