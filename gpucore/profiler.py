"""``with gpucore.profiler() as p:`` — CPU time per op and GPU time per dispatch.

CPU time is measured around each op's backend call (recording, for Vulkan ops); GPU time comes
from timestamp queries written around every dispatch while the profiler is active. ``p.table()``
returns a markdown table; ``p.events`` and ``p.gpu_events`` hold the raw records.
"""

from __future__ import annotations

from collections import defaultdict

from . import dispatch


class profiler:
    """Context manager collecting per-op CPU time and per-dispatch GPU time."""

    def __init__(self):
        self.events: list = []  # (op, backend, cpu seconds)
        self.gpu_events: list = []  # (op, gpu seconds)
        self._stream = None
        self._outer = None  # the enclosing profiler's GPU event list, restored on exit

    def _cpu_event(self, op, backend, seconds):
        self.events.append((op, backend, seconds))

    def __enter__(self):
        be = dispatch._vulkan_cache.get("instance") or dispatch.vulkan_backend()
        if be is not None:
            be.ctx.stream.synchronize()
            self._stream = be.ctx.stream
            self._outer = self._stream.profile
            self._stream.profile = self.gpu_events
        dispatch._profilers.append(self)
        dispatch.profiling[0] = True
        dispatch._update_fast()
        return self

    def __exit__(self, *exc):
        be = dispatch._vulkan_cache.get("instance")
        if be is not None:
            be.ctx.stream.synchronize()
        if self._stream is not None:
            # a nested profiler hands its dispatches to the enclosing one, which keeps timing
            if self._outer is not None:
                self._outer.extend(self.gpu_events)
            self._stream.profile = self._outer
            self._stream = self._outer = None
        dispatch._profilers.remove(self)
        dispatch.profiling[0] = bool(dispatch._profilers)
        dispatch._update_fast()
        return False

    def summary(self) -> list:
        """Rows (op, backend, calls, cpu_ms, gpu_ms, dispatches) sorted by total time."""
        rows: dict = defaultdict(lambda: [0, 0.0, 0.0, 0])
        for op, backend, s in self.events:
            r = rows[(op, backend)]
            r[0] += 1
            r[1] += s * 1e3
        for op, s in self.gpu_events:
            key = (op, "vulkan")
            r = rows[key]
            r[2] += s * 1e3
            r[3] += 1
        out = [(op, be, *vals) for (op, be), vals in rows.items()]
        out.sort(key=lambda r: -(r[3] + r[4]))
        return out

    def table(self) -> str:
        """A markdown table of the summary."""
        lines = [
            "| op | backend | calls | CPU ms | GPU ms | dispatches |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for op, be, calls, cpu, gpu, nd in self.summary():
            lines.append(f"| {op} | {be} | {calls} | {cpu:.3f} | {gpu:.3f} | {nd} |")
        return "\n".join(lines)
