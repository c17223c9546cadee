"""``gpucore.backends.cudnn``: PyTorch's cuDNN switches, accepted so that scripts setting them run.
gpucore has no cuDNN: ``is_available()`` is False and the flags (``enabled``, ``benchmark``,
``deterministic``, ``allow_tf32``, ``benchmark_limit``, PyTorch's defaults) change nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

enabled: bool = True
benchmark: bool = False
deterministic: bool = False
allow_tf32: bool = True
benchmark_limit: int = 10


def is_available() -> bool:
    """False: gpucore does not use cuDNN."""
    return False


def version() -> int | None:
    """None: no cuDNN library."""
    return None


def is_acceptable(tensor) -> bool:
    """False: cuDNN never runs a gpucore op."""
    return False


@contextlib.contextmanager
def flags(
    enabled: bool = False,
    benchmark: bool = False,
    benchmark_limit: int = 10,
    deterministic: bool = False,
    allow_tf32: bool = True,
) -> Iterator[None]:
    """Set the flags for a block and restore them after it, as ``torch.backends.cudnn.flags``."""
    g = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: g[n] for n in names}
    g.update(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)))
    try:
        yield
    finally:
        g.update(saved)
