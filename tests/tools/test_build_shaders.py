"""The shipped SPIR-V matches its GLSL sources (tools/build_shaders.py)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location(
        "build_shaders", ROOT / "tools" / "build_shaders.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_shader_is_compiled_and_fresh():
    bs = _load()
    comps = sorted((ROOT / "shaders").glob("*.comp"))
    assert comps, "no shaders found"
    stale = [c.name for c in comps if bs.stale(c)]
    assert stale == [], f"stale SPIR-V, run python tools/build_shaders.py: {stale}"


def test_staleness_follows_the_source(tmp_path, monkeypatch):
    bs = _load()
    src = tmp_path / "shaders"
    out = tmp_path / "spirv"
    src.mkdir()
    out.mkdir()
    (src / "inc.glsl").write_text("// v1\n")
    comp = src / "k.comp"
    comp.write_text('#include "inc.glsl"\nvoid main() {}\n')
    monkeypatch.setattr(bs, "OUT", out)
    assert bs.stale(comp)
    (out / "k.spv").write_bytes(b"x")
    (out / "k.spv.sha256").write_text(bs.source_digest(comp))
    assert not bs.stale(comp)
    (src / "inc.glsl").write_text("// v2\n")  # an include changed: stale again
    assert bs.stale(comp)


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-tools not installed")
def test_shipped_spirv_validates():
    for spv in sorted((ROOT / "gpucore" / "backends" / "vulkan" / "spirv").glob("*.spv")):
        res = subprocess.run(
            ["spirv-val", "--target-env", "vulkan1.1", str(spv)], capture_output=True, text=True
        )
        assert res.returncode == 0, f"{spv.name}: {res.stdout}{res.stderr}"
