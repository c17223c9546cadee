"""Compile shaders/*.comp to SPIR-V shipped in gpucore/backends/vulkan/spirv/.

    python tools/build_shaders.py          # compile what is stale
    python tools/build_shaders.py --check  # exit 1 if any shipped SPIR-V is stale or missing

Each .spv carries a header file ``<name>.spv.sha256`` holding the SHA-256 of its source and the
includes it uses, so staleness is decided by content, not timestamps. Importing gpucore never runs
a compiler: the SPIR-V is data in the package.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "shaders"
OUT = ROOT / "gpucore" / "backends" / "vulkan" / "spirv"
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.M)


def source_digest(comp: Path) -> str:
    """SHA-256 over the shader and (recursively) the files it includes."""
    h = hashlib.sha256()
    seen = set()

    def feed(p: Path):
        if p in seen:
            return
        seen.add(p)
        text = p.read_bytes()
        h.update(p.name.encode() + b"\0" + text)
        for inc in _INCLUDE.findall(text.decode()):
            feed(p.parent / inc)

    feed(comp)
    return h.hexdigest()


def stale(comp: Path) -> bool:
    spv = OUT / (comp.stem + ".spv")
    stamp = OUT / (comp.stem + ".spv.sha256")
    if not spv.exists() or not stamp.exists():
        return True
    return stamp.read_text().strip() != source_digest(comp)


def compile_one(comp: Path, glslang: str) -> None:
    spv = OUT / (comp.stem + ".spv")
    cmd = [glslang, "-V", "--target-env", "vulkan1.1", "-Os", "-o", str(spv), str(comp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"build_shaders: {comp.name} failed to compile")
    (OUT / (comp.stem + ".spv.sha256")).write_text(source_digest(comp) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale shaders")
    args = ap.parse_args(argv)
    comps = sorted(SRC.glob("*.comp"))
    bad = [c for c in comps if stale(c)]
    if args.check:
        for c in bad:
            print(f"stale: {c.name}")
        return 1 if bad else 0
    glslang = shutil.which("glslangValidator")
    if bad and not glslang:
        raise SystemExit(
            "build_shaders: glslangValidator not found (apt-get install glslang-tools)"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    for c in bad:
        compile_one(c, glslang)
        print(f"compiled {c.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
