"""gpucore.accelerator: reports the Vulkan device when the 'auto' policy would use one, creates
nothing at import, and answers like torch.accelerator when there is none."""

import os
import subprocess
import sys
import textwrap

import pytest

import gpucore
from gpucore import accelerator
from gpucore.errors import DeviceError


def _run(code: str, **env) -> str:
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_agrees_with_gpucore_vulkan():
    available = gpucore.vulkan.is_available()
    assert accelerator.is_available() is available
    if available:
        assert accelerator.current_accelerator() == gpucore.device("vulkan")
        assert accelerator.device_count() >= 1 and accelerator.current_device_index() == 0
    else:
        assert accelerator.current_accelerator() is None
        assert accelerator.current_accelerator(check_available=True) is None
        assert accelerator.device_count() == 0


def test_without_a_usable_device(monkeypatch):
    monkeypatch.setattr(gpucore.vulkan, "is_available", lambda: False)
    assert not accelerator.is_available() and accelerator.current_accelerator() is None
    assert accelerator.device_count() == 0
    for fn, args in [("current_device_index", ()), ("synchronize", ()), ("set_device_index", (0,))]:
        with pytest.raises(DeviceError, match="Cannot access accelerator device"):
            getattr(accelerator, fn)(*args)


def test_the_usual_script_lines_land_on_the_cpu_without_a_device(monkeypatch):
    monkeypatch.setattr(gpucore.vulkan, "is_available", lambda: False)
    acc = accelerator.current_accelerator()
    device = acc.type if accelerator.is_available() else "cpu"
    assert gpucore.ones(2).to(device).is_cpu


def test_import_creates_no_device():
    out = _run(
        """
        import gpucore, gpucore.accelerator
        from gpucore.backends.vulkan import device
        print(gpucore.dispatch._vulkan_cache == {}, device._Probe.done)
        """
    )
    assert out == "True False"


def test_reports_a_usable_vulkan_device():
    if not gpucore.vulkan.devices():
        pytest.skip("no Vulkan device at all: " + gpucore.vulkan.unavailable_reason())
    # CPU-type devices (lavapipe) count once allowed, as for the 'auto' policy
    out = _run(
        """
        import gpucore
        acc = gpucore.accelerator
        dev = acc.current_accelerator()
        t = gpucore.arange(5000.0).to(dev)
        acc.synchronize()
        acc.set_device_index(0)
        acc.set_device_index("vulkan:0")
        try:
            acc.set_device_index(1)
        except gpucore.DeviceError:
            pass
        print(acc.is_available(), dev, acc.device_count() >= 1, acc.current_device_index(),
              t.is_vulkan, t.is_cuda, (t * 2).sum().item())
        """,
        GPUCORE_VULKAN_ALLOW_CPU="1",
    )
    assert out == f"True vulkan True 0 True False {2 * sum(range(5000))}.0"
