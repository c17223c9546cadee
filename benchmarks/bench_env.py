"""What the benchmark scripts share about their environment: OpenBLAS variables unset before
numpy loads (they halve numpy's matmul speed here), and how busy other processes kept the
machine (``CpuShare``, ``load_note``), and median times of calls taken in turn (``median_ms``).
Imports nothing but the standard library, so a script can
call ``clean_openblas_env`` before it imports numpy."""

from __future__ import annotations

import os
import sys
import time

BAD_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
REEXEC_MARK = "GPUCORE_BENCH_REEXECED"  # which variables were unset, for the report


def clean_openblas_env(script: str, extra: dict | None = None) -> None:
    """Re-execute the running script without BAD_ENV (and with ``extra`` set) when needed;
    returns when nothing needs to change. ``script`` names it in the error shown when numpy was
    imported too early."""
    bad = [k for k in BAD_ENV if k in os.environ]
    extra = {k: v for k, v in (extra or {}).items() if os.environ.get(k) != v}
    if not bad and not extra:
        return
    if "numpy" in sys.modules:  # too late: OpenBLAS already read the environment
        sys.exit(f"{script}: numpy was imported before the OPENBLAS_* variables could be changed")
    env = {k: v for k, v in os.environ.items() if k not in BAD_ENV}
    env.update(extra)
    env[REEXEC_MARK] = ",".join(bad)
    sys.stdout.flush()
    sys.stderr.flush()
    # orig_argv keeps "-m benchmarks.<script>" and interpreter flags intact.
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


class CpuShare:
    """Fraction of all CPUs that *other* processes kept busy since construction (Linux
    /proc/stat busy time minus this process's own CPU time, and its finished children's when
    ``children``); None where unavailable."""

    def __init__(self, children: bool = False):
        self.children = children
        self.t0, self.busy0, self.self0 = time.perf_counter(), self._busy(), self._self()

    @staticmethod
    def _busy() -> float | None:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def _self(self) -> float:
        t = os.times()
        own = t.user + t.system
        return own + t.children_user + t.children_system if self.children else own

    def others(self) -> float | None:
        busy = self._busy()
        if busy is None or self.busy0 is None:
            return None
        wall = time.perf_counter() - self.t0
        used = busy - self.busy0 - (self._self() - self.self0)
        return min(1.0, max(0.0, used) / (wall * (os.cpu_count() or 1)))


def load_note(share: float | None, when: str, hint: str = "") -> str:
    """A report line on how busy other processes kept the machine ``when``."""
    if share is None:
        return f"- CPU use by other processes {when}: unknown"
    warn = ""
    if share > 0.1:
        warn = f" — **the machine was not idle: numbers are noisy{hint}; rerun on an idle machine**"
    return f"- other processes kept {share:.0%} of the CPUs busy {when}{warn}"


def median_ms(calls: list, n: int) -> list:
    """Median milliseconds of each of ``calls`` over ``n`` rounds, the calls alternating within a
    round (so a noisy stretch of the machine hits every library alike)."""
    times: list = [[] for _ in calls]
    for _ in range(n):
        for i, f in enumerate(calls):
            t0 = time.perf_counter()
            f()
            times[i].append(time.perf_counter() - t0)
    return [sorted(t)[len(t) // 2] * 1e3 for t in times]


def ratio_row(label: str, g, t, n: int, digits: int = 3, timer=median_ms) -> str:
    """A markdown row ``| label | gpucore ms | reference ms | ratio |`` timing ``g`` and ``t``
    alternately with ``timer`` over ``n`` rounds; ``t`` None (no reference library): ``-``."""
    if t is None:
        (a,) = timer([g], n)
        return f"| {label} | {a:.{digits}f} | - | - |"
    a, b = timer([g, t], n)
    return f"| {label} | {a:.{digits}f} | {b:.{digits}f} | {a / b:.2f} |"
