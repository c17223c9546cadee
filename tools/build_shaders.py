"""Compile shaders/*.comp to SPIR-V shipped in gpucore/backends/vulkan/spirv/.

    python tools/build_shaders.py          # compile what is stale
    python tools/build_shaders.py --check  # exit 1 if any shipped SPIR-V is stale or missing

Each ``shaders/<family>.comp`` compiles to ``<family>.spv``, except the sources listed in
VARIANTS, which compile once per row with that row's ``-D`` defines (ggml's generator table:
output name, source, defines). Includes are looked up next to the including file, then in
INCLUDE_DIRS (cpu/, for the op-code table opcodes.def shared with the C extension).

Each .spv carries a header file ``<name>.spv.sha256`` holding the SHA-256 of its source, the
files it includes (found next to it or in INCLUDE_DIRS) and its defines, so staleness is decided
by content, not timestamps. Importing gpucore never runs a compiler: the SPIR-V is data in the
package.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "shaders"
OUT = ROOT / "gpucore" / "backends" / "vulkan" / "spirv"
INCLUDE_DIRS = [ROOT / "cpu"]  # passed to glslangValidator as -I<dir>
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"', re.M)


class Variant(NamedTuple):
    """One compiled shader: ``<name>.spv`` from ``shaders/<source>`` with ``-D`` defines."""

    name: str
    source: str
    defines: tuple = ()  # (("NAME", "value"), ...)


# Sources compiled more than once (every other shaders/*.comp compiles once, under its own name).
# SUBGROUP: 0 = shared-memory workgroup reductions (every device); 1 = subgroup operations (devices
# with subgroup basic + vote + arithmetic in compute shaders; see kernels/reduce.py). DOT: 1 = the
# integer dot product instruction (devices with shaderIntegerDotProduct; kernels/qgemm.py), 0 =
# plain int32 multiply-adds; SHUFFLE: 1 = activation words passed round the subgroup (CPU-type
# devices with subgroup shuffles), 0 = loaded by every invocation. HALF: 1 = GEMM inputs held as
# float16 / bfloat16 (kernels/gemm.py), 0 = float32.
VARIANTS = [
    Variant("reduce", "reduce.comp", (("SUBGROUP", "0"),)),
    Variant("reduce_sg", "reduce.comp", (("SUBGROUP", "1"),)),
    Variant("softmax", "softmax.comp", (("SUBGROUP", "0"),)),
    Variant("softmax_sg", "softmax.comp", (("SUBGROUP", "1"),)),
    Variant("cross_entropy", "cross_entropy.comp", (("SUBGROUP", "0"),)),
    Variant("cross_entropy_sg", "cross_entropy.comp", (("SUBGROUP", "1"),)),
    Variant("scan", "scan.comp", (("F64", "0"),)),
    Variant("scan64", "scan.comp", (("F64", "1"),)),
    Variant("gemm", "gemm.comp", (("HALF", "0"),)),
    Variant("gemm_half", "gemm.comp", (("HALF", "1"),)),
    Variant("qgemm", "qgemm.comp", (("DOT", "0"), ("SHUFFLE", "0"))),
    Variant("qgemm_dot", "qgemm.comp", (("DOT", "1"), ("SHUFFLE", "0"))),
    Variant("qgemm_sg", "qgemm.comp", (("DOT", "0"), ("SHUFFLE", "1"))),
    Variant("qgemm_dot_sg", "qgemm.comp", (("DOT", "1"), ("SHUFFLE", "1"))),
]


def variants(comp: Path | None = None) -> list[Variant]:
    """Every shader to build (VARIANTS, then one per other shaders/*.comp), or those of one
    source file (its VARIANTS rows, else itself under its own name)."""
    if comp is not None:
        rows = [v for v in VARIANTS if comp.parent == SRC and v.source == comp.name]
        return rows or [Variant(comp.stem, comp.name)]
    listed = {v.source for v in VARIANTS}
    return VARIANTS + [
        Variant(c.stem, c.name) for c in sorted(SRC.glob("*.comp")) if c.name not in listed
    ]


def _find_include(name: str, including: Path) -> Path | None:
    for d in [including.parent, *INCLUDE_DIRS]:
        if (d / name).is_file():
            return d / name
    return None


def dependencies(comp: Path) -> list[Path]:
    """The shader and (recursively) the files it includes, in include order."""
    seen: list[Path] = []

    def walk(p: Path):
        if p in seen:
            return
        seen.append(p)
        for inc in _INCLUDE.findall(p.read_text()):
            found = _find_include(inc, p)
            if found is not None:  # a missing include fails the compile, not the digest
                walk(found)

    walk(comp)
    return seen


def source_digest(comp: Path, defines: tuple = ()) -> str:
    """SHA-256 over the shader, (recursively) the files it includes and the defines."""
    h = hashlib.sha256()
    for p in dependencies(comp):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    for key, value in defines:
        h.update(f"-D{key}={value}\0".encode())
    return h.hexdigest()


def _source(v: Variant, comp: Path | None) -> Path:
    return comp if comp is not None else SRC / v.source


def _stale_variant(v: Variant, comp: Path | None = None) -> bool:
    spv = OUT / (v.name + ".spv")
    stamp = OUT / (v.name + ".spv.sha256")
    if not spv.exists() or not stamp.exists():
        return True
    return stamp.read_text().strip() != source_digest(_source(v, comp), v.defines)


def stale(target: Path | Variant) -> bool:
    """Whether a shader's SPIR-V is missing or out of date: one Variant, or every variant of a
    source file."""
    if isinstance(target, Variant):
        return _stale_variant(target)
    return any(_stale_variant(v, target) for v in variants(target))


def compile_one(target: Path | Variant, glslang: str) -> None:
    v = target if isinstance(target, Variant) else Variant(target.stem, target.name)
    comp = SRC / v.source if isinstance(target, Variant) else target
    spv = OUT / (v.name + ".spv")
    cmd = [glslang, "-V", "--target-env", "vulkan1.1", "-Os"]
    cmd += [f"-I{d}" for d in INCLUDE_DIRS]
    cmd += [f"-D{key}={value}" for key, value in v.defines]
    cmd += ["-o", str(spv), str(comp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"build_shaders: {v.name} ({comp.name}) failed to compile")
    (OUT / (v.name + ".spv.sha256")).write_text(source_digest(comp, v.defines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale shaders")
    args = ap.parse_args(argv)
    bad = [v for v in variants() if stale(v)]
    if args.check:
        for v in bad:
            print(f"stale: {v.name}.spv ({v.source})")
        return 1 if bad else 0
    glslang = shutil.which("glslangValidator")
    if bad and not glslang:
        raise SystemExit(
            "build_shaders: glslangValidator not found (apt-get install glslang-tools)"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    for v in bad:
        compile_one(v, glslang)
        print(f"compiled {v.name}.spv ({v.source})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
