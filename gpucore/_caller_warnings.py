"""Warnings that point at the user's line: the first frame outside gpucore.

A fixed ``stacklevel`` cannot: the public forms (ops/api.py) put one generated frame between
the caller and the function (two on a form's first call, through its trampoline), a method
without a form none, and one function is reached through both.
"""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the nearest caller outside gpucore."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        file = frame.f_code.co_filename
        if not (file.startswith(_PACKAGE) or file.startswith("<public form")):
            break
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)
