"""Builds libgpucore (the C API, gpucore/include/gpucore.h) beside the extension gpucore._cpu.

setup.py's build_ext calls ``build_library`` right after it has built the extension: the library
links the very object files of the kernels (cpu/*.c, cpu/isa/*.c) that went into gpucore._cpu,
plus cpu/capi/*.c, into ``gpucore/lib/libgpucore.so``. A linker version script exports exactly
the functions gpucore.h declares (``GC_API``), so the kernels' own ``gc_*`` names stay hidden.
It also writes ``gpucore/lib/pkgconfig/gpucore.pc`` (paths relative to the .pc file, so the
package can move) and, for a wheel, copies the header into the package's ``include`` folder.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join("gpucore", "include", "gpucore.h")
SOURCES = sorted(glob.glob(os.path.join("cpu", "capi", "*.c")))
DEPENDS = sorted(glob.glob(os.path.join("cpu", "capi", "*.h"))) + [HEADER]

PC = """\
# gpucore's C API (libgpucore), written by cpu/capi/build_lib.py at build time.
prefix=${{pcfiledir}}/../..
includedir=${{prefix}}/include
libdir=${{prefix}}/lib

Name: gpucore
Description: gpucore tensors and kernels from C (libgpucore)
Version: {version}
Cflags: -I${{includedir}}
Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lgpucore
Libs.private: -lm -pthread
"""


def exported_names(header_text: str) -> list[str]:
    """The functions a header declares with GC_API."""
    return re.findall(r"^GC_API\b[^;(]*?\b(gc_\w+)\s*\(", header_text, flags=re.M)


def build_library(cmd, ext, isa_objects: list, flags: list, macros: list) -> str:
    """Compiles cpu/capi and links libgpucore.so next to the extension ``ext`` built by the
    build_ext command ``cmd``; returns the library's path."""
    pkg_dir = os.path.dirname(cmd.get_ext_fullpath(ext.name))
    if getattr(cmd, "editable_mode", False):
        # pip install -e: the extension is copied into the source tree; so is nothing else
        pkg_dir = os.path.join(ROOT, "gpucore")
    lib_dir = os.path.join(pkg_dir, "lib")
    os.makedirs(os.path.join(lib_dir, "pkgconfig"), exist_ok=True)
    version = cmd.distribution.get_version()
    kernel_sources = [s for s in ext.sources if not s.startswith(os.path.join("cpu", "python"))]
    kernel_objects = cmd.compiler.object_filenames(kernel_sources, output_dir=cmd.build_temp)
    objects = cmd.compiler.compile(
        SOURCES,
        output_dir=cmd.build_temp,
        macros=list(macros) + [("GC_VERSION_STRING", f'"{version}"')],
        include_dirs=["cpu", os.path.dirname(HEADER)],
        debug=cmd.debug,
        extra_postargs=list(flags) + ["-fvisibility=hidden"],
        depends=DEPENDS,
    )
    with open(HEADER, encoding="utf-8") as f:
        names = exported_names(f.read())
    script = os.path.join(cmd.build_temp, "libgpucore.map")
    with open(script, "w", encoding="utf-8") as f:
        f.write("{\n  global:\n" + "".join(f"    {n};\n" for n in names) + "  local: *;\n};\n")
    cmd.compiler.link_shared_object(
        objects + kernel_objects + list(isa_objects),
        "libgpucore.so",
        output_dir=lib_dir,
        libraries=["m"],
        extra_postargs=[
            "-pthread",
            f"-Wl,--version-script={script}",
            "-Wl,-soname,libgpucore.so",
            "-Wl,--no-undefined",
        ],
        debug=cmd.debug,
    )
    with open(os.path.join(lib_dir, "pkgconfig", "gpucore.pc"), "w", encoding="utf-8") as f:
        f.write(PC.format(version=version))
    inc_dir = os.path.join(pkg_dir, "include")
    if os.path.abspath(inc_dir) != os.path.abspath(os.path.dirname(HEADER)):
        os.makedirs(inc_dir, exist_ok=True)
        shutil.copyfile(HEADER, os.path.join(inc_dir, "gpucore.h"))
    return os.path.join(lib_dir, "libgpucore.so")
