"""Build script for the C extension gpucore._cpu (metadata lives in pyproject.toml).

cpu/*.c (the kernels), cpu/python/*.c (the Python bindings) and cpu/isa/scalar.c are portable C
compiled with the baseline flags; cpu/opcodes.def is the op-code table they include.  On x86 the
ISA-specific files cpu/isa/{sse2,avx2,avx512}.c are compiled as well, each with its own -m flags
(see ISA_FLAGS), and the extension picks one at import after checking the CPU (cpu/dispatch.c).
On arm64 cpu/isa/neon.c is compiled (NEON is baseline there: no extra flags) and always picked
unless GPUCORE_CPU_ISA says otherwise.  Elsewhere only the portable files are built.
On Linux the same kernel objects are then linked with cpu/capi/*.c into gpucore/lib/libgpucore.so,
the C API (cpu/capi/build_lib.py; gpucore/include/gpucore.h, examples/c/README.md).
"""

import glob
import importlib.util
import os
import platform
import shutil
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# -ffp-contract=off: gcc's -std=c11 implies it, clang's does not; contracting a * b + c into an
# FMA on some ISAs and not others would change bits between the ISA builds.
BASE_FLAGS = [
    "-std=c11",
    "-O3",
    "-fno-math-errno",
    "-ffp-contract=off",
    "-pthread",
    "-Wall",
    "-Wno-unused-function",
]

# Flags per ISA file (gcc and clang spell them the same).  Only the micro-kernels and the vector
# math live in these files; everything else is compiled once with BASE_FLAGS.
ISA_FLAGS = {
    "sse2": ["-msse2"],
    "avx2": ["-mavx2", "-mfma"],
    "avx512": ["-mavx512f", "-mavx2", "-mfma"],
}
# arm64: AdvSIMD (NEON) is part of the baseline every arm64 compiler targets, so neon.c needs no
# flag; an -march here would only narrow what the user's own CFLAGS allow.
ARM64_ISA_FLAGS = {"neon": []}


def _target_is_x86() -> bool:
    """True when the extension is built for x86 / x86-64 (cross builds follow the host tag)."""
    plat = (os.environ.get("_PYTHON_HOST_PLATFORM") or sysconfig.get_platform()).lower()
    if any(a in plat for a in ("arm", "aarch64", "ppc", "s390", "riscv", "universal2")):
        return False
    machine = platform.machine().lower()
    return machine in ("x86_64", "amd64", "i386", "i686", "x86") or plat.endswith(
        ("x86_64", "amd64", "i686", "win32")
    )


def _target_is_arm64() -> bool:
    """True when the extension is built for arm64 / aarch64 alone (universal2 builds compile each
    file for x86-64 and arm64 at once, so they stay portable-only)."""
    plat = (os.environ.get("_PYTHON_HOST_PLATFORM") or sysconfig.get_platform()).lower()
    return "universal2" not in plat and ("aarch64" in plat or "arm64" in plat)


X86 = _target_is_x86() and sys.platform != "win32"
ARM64 = not X86 and _target_is_arm64() and sys.platform != "win32"
if X86:
    isa_flags, isa_macros = ISA_FLAGS, [("GC_X86_ISA", "1")]
elif ARM64:
    isa_flags, isa_macros = ARM64_ISA_FLAGS, [("GC_NEON_ISA", "1")]
else:
    isa_flags, isa_macros = {}, []
# cpu/*.c: the kernels (no Python); cpu/python/*.c: the Python bindings and module
portable = sorted(glob.glob("cpu/*.c")) + sorted(glob.glob("cpu/python/*.c")) + ["cpu/isa/scalar.c"]
# each ISA's file and its family files cpu/isa/<isa>_*.c (e.g. avx512_conv_backward.c), one flag set
isa_sources = {
    isa: [f"cpu/isa/{isa}.c", *sorted(glob.glob(f"cpu/isa/{isa}_*.c"))] for isa in isa_flags
}
# libgpucore, the C API (cpu/capi/, gpucore/include/gpucore.h): linked from the same kernel objects
_spec = importlib.util.spec_from_file_location("capi_build", "cpu/capi/build_lib.py")
capi = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(capi)


class BuildExt(build_ext):
    """Compiles each ISA file with its own flags, then links them into the extension."""

    def build_extension(self, ext):
        objects = []
        if ext.name == "gpucore._cpu" and isa_sources:
            macros = list(ext.define_macros)
            for isa, sources in isa_sources.items():
                objects += self.compiler.compile(
                    sources,
                    output_dir=self.build_temp,
                    macros=macros,
                    include_dirs=ext.include_dirs,
                    debug=self.debug,
                    extra_postargs=BASE_FLAGS + isa_flags[isa],
                    depends=ext.depends,
                )
            ext.extra_objects = list(ext.extra_objects or []) + objects
        super().build_extension(ext)
        if ext.name == "gpucore._cpu" and sys.platform.startswith("linux"):
            capi.build_library(self, ext, objects, BASE_FLAGS, ext.define_macros)

    def copy_extensions_to_source(self):
        """build_ext --inplace: the C API's library, header and pkg-config file too."""
        super().copy_extensions_to_source()
        built = os.path.join(self.build_lib, "gpucore", "lib")
        if os.path.isdir(built):
            shutil.copytree(built, os.path.join("gpucore", "lib"), dirs_exist_ok=True)


setup(
    ext_modules=[
        Extension(
            "gpucore._cpu",
            sources=portable,
            include_dirs=["cpu"],
            define_macros=isa_macros,
            extra_compile_args=BASE_FLAGS,
            libraries=["m"],
            extra_link_args=["-pthread"],
            depends=sorted(
                glob.glob("cpu/*.h")
                + glob.glob("cpu/python/*.h")
                + glob.glob("cpu/isa/*.[ch]")
                + ["cpu/opcodes.def"]
                + capi.SOURCES
                + capi.DEPENDS
            ),
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
