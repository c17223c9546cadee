"""Builds the C test programs of tests/capi/c/ with the system compiler against the installed
libgpucore (gpucore.get_include(), get_library_dir()), and runs them.

Three builds of each program:
- ``plain``: against the installed library, as a user would link it;
- ``asan``: program and library (cpu/capi/*.c with the kernels of cpu/*.c, portable ISA only)
  compiled from the source tree with -fsanitize=address,undefined, statically linked;
- ``valgrind``: the plain build run under valgrind (skipped when valgrind is missing).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import gpucore
from gpucore import capi

ROOT = Path(__file__).resolve().parents[2]
C_DIR = Path(__file__).resolve().parent / "c"
CC = shutil.which("cc") or shutil.which("gcc")
WARN = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-pthread"]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]

# every test module of tests/capi sets pytestmark = NEEDS (a conftest's pytestmark is not inherited)
# The head of a ctypes script that loads libgpucore (argv[1]) without importing gpucore.
CTYPES_PRELUDE = """
import ctypes, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
assert "gpucore" not in sys.modules
class Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 256)]
P = ctypes.c_void_p
"""
NEEDS = pytest.mark.skipif(
    CC is None or not os.path.exists(capi.get_library_path()),
    reason="needs a C compiler and the built libgpucore (Linux)",
)


def compile_c(args: list[str], cwd=None) -> None:
    r = subprocess.run([CC, *args], capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise AssertionError(f"cc {' '.join(args)} failed:\n{r.stderr[-4000:]}")


def build_plain(src: Path, out: Path, extra=()) -> Path:
    d = gpucore.get_library_dir()
    compile_c(
        [*WARN, "-O1", "-g", str(src), f"-I{gpucore.get_include()}", f"-L{d}", f"-Wl,-rpath,{d}"]
        + [f"-l{n}" for n in gpucore.get_libraries()]
        + list(extra)
        + ["-lm", "-o", str(out)]
    )
    return out


@pytest.fixture(scope="session")
def asan_lib(tmp_path_factory) -> Path:
    """libgpucore's sources compiled with the sanitizers into a static archive."""
    out = tmp_path_factory.mktemp("asan")
    sources = (
        sorted(glob.glob(str(ROOT / "cpu" / "*.c")))
        + [str(ROOT / "cpu" / "isa" / "scalar.c")]
        + sorted(glob.glob(str(ROOT / "cpu" / "capi" / "*.c")))
    )
    objs = []
    for i, src in enumerate(sources):
        obj = out / f"{i}_{Path(src).stem}.o"
        compile_c(
            ["-std=c11", "-O1", "-g", *SAN, "-pthread", "-fno-math-errno"]
            + [f"-I{ROOT / 'cpu'}", f"-I{ROOT / 'gpucore' / 'include'}", "-c", src]
            + ["-o", str(obj)]
        )
        objs.append(str(obj))
    lib = out / "libgpucore_asan.a"
    subprocess.run(["ar", "rcs", str(lib), *objs], check=True)
    return lib


@pytest.fixture(scope="session")
def programs(tmp_path_factory):
    """build(name, mode) -> the program tests/capi/c/<name>.c built for mode (cached)."""
    out = tmp_path_factory.mktemp("capi")
    cache: dict = {}

    def build(name: str, mode: str = "plain", lib: Path | None = None) -> Path:
        key = (name, mode)
        if key not in cache:
            src = C_DIR / f"{name}.c"
            exe = out / f"{name}_{mode}"
            if mode == "asan":
                compile_c(
                    [*WARN, "-O1", "-g", *SAN, str(src), f"-I{ROOT / 'gpucore' / 'include'}"]
                    + [str(lib), "-lm", "-o", str(exe)]
                )
            else:
                build_plain(src, exe)
            cache[key] = exe
        return cache[key]

    return build


def run(exe: Path, *args, valgrind: bool = False, env=None, timeout=600, check=True) -> str:
    """exe's stdout; with ``check`` it must exit 0 without a FAIL line. Never a word on stderr
    (the library does not print; sanitizers and valgrind would)."""
    cmd = [str(exe), *map(str, args)]
    if valgrind:
        cmd = [
            "valgrind",
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect",
            "--quiet",
            f"--suppressions={Path(__file__).resolve().parent / 'valgrind.supp'}",
            *cmd,
        ]
    e = dict(os.environ)
    e.update(env or {})
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1:allocator_may_return_null=1")
    e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    e.setdefault(
        "LSAN_OPTIONS",
        f"suppressions={Path(__file__).resolve().parent / 'lsan.supp'}:print_suppressions=0",
    )
    r = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    tail = f"{exe.name} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    if check:
        assert r.returncode == 0, tail
        assert "FAIL" not in r.stdout, tail
    # the library never prints; sanitizers and valgrind report here (errors.c's impossible
    # allocation makes ASan warn that it returned NULL: that one is expected)
    noise = re.compile(r"==\d+==WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]+ bytes")
    assert noise.sub("", r.stderr).strip() == "", tail
    return r.stdout
