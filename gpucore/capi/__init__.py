"""Where the C API lives in the installed package: libgpucore and gpucore.h (see
gpucore/include/gpucore.h and examples/c/README.md).

    cc prog.c $(pkg-config --cflags --libs gpucore)
        with PKG_CONFIG_PATH="$(python -m gpucore.capi --pkg-config-path)"
    cc prog.c -I"$(python -m gpucore.capi --include)" -L"$(python -m gpucore.capi --libdir)" \\
        -Wl,-rpath,"$(python -m gpucore.capi --libdir)" -lgpucore

``python -m gpucore.capi`` (__main__.py) prints one of these places: ``--include``,
``--libdir``, ``--pkg-config-path``, ``--cflags``, ``--libs``, ``--library`` (the .so's path).
Nothing here loads the library.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]  # the gpucore package


def get_include() -> str:
    """The folder holding gpucore.h (pass it to the compiler as -I)."""
    return str(_PKG / "include")


def get_library_dir() -> str:
    """The folder holding libgpucore.so (pass it to the linker as -L, and as an rpath)."""
    return str(_PKG / "lib")


def get_libraries() -> list[str]:
    """The libraries to link, as -l names: ``["gpucore"]``."""
    return ["gpucore"]


def get_library_path() -> str:
    """The full path of libgpucore.so (for dlopen, ctypes.CDLL, ffi bindings)."""
    return str(_PKG / "lib" / "libgpucore.so")


def get_pkg_config_dir() -> str:
    """The folder holding gpucore.pc: put it on PKG_CONFIG_PATH."""
    return str(_PKG / "lib" / "pkgconfig")


def cflags() -> str:
    return f"-I{get_include()}"


def libs() -> str:
    d = get_library_dir()
    return f"-L{d} -Wl,-rpath,{d} " + " ".join(f"-l{n}" for n in get_libraries())
