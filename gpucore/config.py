"""gpucore's environment variables: one table of what each GPUCORE_* variable accepts, checked when
this module is imported (gpucore/__init__.py imports it before anything reads a variable).

A variable gpucore reads that holds a value it does not accept raises ``ConfigError`` (a
ValueError) naming the variable, the value and the values it accepts, instead of being ignored
or failing later somewhere unrelated (the C extension, for instance, would silently fall back to
its default). A GPUCORE_* variable gpucore does not know (a typo such as GPUCORE_DEVISE) draws a
warning naming the closest known one. README.md's configuration table lists the same variables
(tests/test_config.py keeps the two in step).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import _caller_warnings as caller_warnings
from .errors import GpucoreError


class ConfigError(GpucoreError, ValueError):
    """A GPUCORE_* environment variable holds a value gpucore does not accept."""


@dataclass(frozen=True)
class Var:
    """One variable: ``check(value)`` is None when the value is accepted, else what is wrong."""

    accepts: str  # the accepted values, as the error message states them
    check: Callable[[str], bool]


def _choice(*values: str) -> Var:
    return Var(" | ".join(values), lambda v: v.strip().lower() in values)


def _int(low: int) -> Var:
    def ok(v: str) -> bool:
        try:
            return int(v.strip()) >= low
        except ValueError:
            return False

    return Var(f"an integer >= {low}", ok)


def _positive_seconds(v: str) -> bool:
    try:
        x = float(v)
    except ValueError:
        return False
    return math.isfinite(x) and x > 0


def _blocking(v: str) -> bool:
    parts = v.split(",")
    return len(parts) == 3 and all(p.strip().isdigit() and int(p) > 0 for p in parts)


def _cache_dir(v: str) -> bool:
    v = v.strip()
    return v == "0" or os.path.isabs(os.path.expanduser(v))


# The variables the library reads (README.md's configuration table).
VARIABLES: dict[str, Var] = {
    "GPUCORE_DEVICE": _choice("auto", "cpu", "vulkan"),
    "GPUCORE_GPU_THRESHOLD": _int(0),
    "GPUCORE_VULKAN_ALLOW_CPU": _choice("0", "1"),
    "GPUCORE_VULKAN_DEVICE": _int(0),
    "GPUCORE_VULKAN_GEMM": _choice("auto", "tiled", "regblock"),
    "GPUCORE_VULKAN_QGEMM": _choice("auto", "dot", "plain"),
    "GPUCORE_VULKAN_TIMEOUT": Var("a finite number of seconds > 0", _positive_seconds),
    "GPUCORE_VULKAN_FUSION": _choice("auto", "0", "1"),
    "GPUCORE_VULKAN_PUSH_DESCRIPTORS": _choice("0", "1"),
    "GPUCORE_VULKAN_RESIDENCY": _choice("0", "1"),
    "GPUCORE_VULKAN_PIPELINE_CACHE": Var(
        "an absolute directory path, or 0 (no disk cache)", _cache_dir
    ),
    "GPUCORE_VULKAN_PREWARM": _choice("0", "1"),
    "GPUCORE_CPU_ISA": _choice("avx512", "avx2", "sse2", "neon", "scalar"),
    "GPUCORE_NUM_THREADS": _int(1),
    "GPUCORE_GEMM_BLOCKING": Var('three positive integers "mc,kc,nc"', _blocking),
    "GPUCORE_HOST_CACHE_MB": _int(0),
    "GPUCORE_PACK": _choice("0", "1"),
    "GPUCORE_CONV": _choice(
        "auto",
        "im2col",
        "direct",
        "direct_t",
        "direct_gw",
        "direct_c1",
        "winograd",
        "pointwise",
        "pointwise_t",
    ),
    # read by cpu/conv_direct*.c, for tests and benchmarks (cpu/README.md, Direct convolution)
    "GPUCORE_CONV_WIDE": _choice("0", "1"),
    "GPUCORE_CONV_TILE_LOOP": _choice("0", "1"),
}

# Read by the project's scripts and tests, not by the library: known, so never a typo warning.
TOOL_VARIABLES = frozenset(
    {
        "GPUCORE_WITH_TORCH",
        "GPUCORE_TEST_REQUIRE_VULKAN",
        "GPUCORE_TEST_REQUIRE_MPI",
        "GPUCORE_TEST_BACKENDS",
        "GPUCORE_TEST_WORKERS",
        "GPUCORE_VENV",
        "GPUCORE_EXTRAS",
        "GPUCORE_APT_EXTRA",
        "GPUCORE_BENCH_REEXECED",
        "GPUCORE_FUZZ_CASES",
        "GPUCORE_FUZZ_SEED",
    }
)


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise ConfigError for the first library variable holding a value it does not accept
    (an empty value means unset); warn about unknown GPUCORE_* names."""
    env = os.environ if environ is None else environ
    for name, var in VARIABLES.items():
        value = env.get(name)
        if value is None or value.strip() == "":
            continue
        if not var.check(value):
            raise ConfigError(
                f"{name}={value!r} is not accepted; expected {var.accepts} (or unset it for the "
                "default; see README.md, Configuration)"
            )
    known = VARIABLES.keys() | TOOL_VARIABLES
    for name in sorted(env):
        if name.startswith("GPUCORE_") and name not in known:
            import difflib  # noqa: PLC0415 - only for a typo's hint (its import costs ~1 ms)

            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            caller_warnings.warn(
                f"{name} is not a gpucore environment variable and is ignored{hint}",
            )


check_environment()
