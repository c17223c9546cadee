"""``python -m gpucore.capi --include | --libdir | --library | --pkg-config-path | --cflags |
--libs``: prints where the C API lives (see gpucore/capi/__init__.py)."""

from __future__ import annotations

import sys

from . import cflags, get_include, get_library_dir, get_library_path, get_pkg_config_dir, libs

_ANSWERS = {
    "--include": get_include,
    "--libdir": get_library_dir,
    "--library": get_library_path,
    "--pkg-config-path": get_pkg_config_dir,
    "--cflags": cflags,
    "--libs": libs,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in _ANSWERS:
        print(f"usage: python -m gpucore.capi {{{'|'.join(_ANSWERS)}}}", file=sys.stderr)
        return 2
    print(_ANSWERS[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
