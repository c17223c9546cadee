"""Warnings that point at the user's line: the first frame outside gpucore's modules.

A fixed ``stacklevel`` cannot: the public forms (ops/api.py) put one generated frame between
the caller and the function (two on a form's first call, through its trampoline), a method
without a form none, and one function is reached through both.
"""

from __future__ import annotations

import sys
import warnings


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the nearest caller outside gpucore."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        # by module name, not file path (a package shipped as .pyc alone keeps its build paths);
        # a public form's frames run in its own namespace (ops/api.py: "_gc_fn", its function)
        g = frame.f_globals
        module = g.get("__name__") or ""
        if _importing(frame):
            # a warning raised while gpucore is imported (config.check_environment): the import
            # system's frames, which warnings.warn skips and does not count, lead to the
            # user's import statement
            frame = frame.f_back
            continue
        # importlib.import_module (plugin loaders, entry points) is one counted frame between
        # the import system's and the user's
        if not (
            module in ("gpucore", "importlib") or module.startswith("gpucore.") or "_gc_fn" in g
        ):
            break
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


def _importing(frame) -> bool:
    """Whether ``frame`` is the import system's, as warnings.warn tells them apart."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name
