"""Random sampling inside a captured graph: the generator's position lives in device memory.

A fill recorded with its seed and offset as push constants would draw the same numbers at every
replay. As PyTorch's CUDA graphs do with Philox (seed and offset "extragraph" tensors), each
generator a capture samples from gets a 4-word device buffer (seed low, high, base block low,
high); the captured fills read it and add their offset relative to the capture's start
(shaders/random.comp, STATE = 1). ``capture`` registers the generator and hands the kernel that
buffer (``state.SAMPLING``). At the end of the capture the generator is put back where it was
(a capture runs nothing) and the number of blocks the graph draws is kept; each ``replay``
writes the generator's current seed and offset into the buffer and advances the generator by
that number, exactly as the eager step would have. So N replays draw what N eager steps would
have drawn, in the same order, and replays interleaved with eager sampling stay in one stream.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..random import Generator
from . import state

_MASK64 = 2**64 - 1
_LO = 0xFFFFFFFF


class _Stream:
    __slots__ = ("gen", "seed", "base", "state", "blocks")

    def __init__(self, gen: Generator, arr: np.ndarray):
        self.gen = gen
        self.seed, self.base = gen.get_state()
        self.state = arr  # the device buffer the captured fills read
        self.blocks = 0  # drawn by one replay, known at the end of the capture


class Streams:
    """The generators one graph samples from (``VulkanGraph._rng``)."""

    def __init__(self):
        self.streams: dict = {}  # id(generator) -> _Stream

    @contextlib.contextmanager
    def capture(self, gen: Generator, be):
        """Around one sampling op of the capture: registers ``gen`` and points the Vulkan fill
        at its device buffer (``state.SAMPLING``: this thread, the buffer and the capture's
        base offset)."""
        s = self.streams.get(id(gen))
        if s is None:
            s = self.streams[id(gen)] = _Stream(gen, be.empty_array((4,), np.uint32))
        elif gen.initial_seed() != s.seed:
            raise RuntimeError(
                "a generator was reseeded in the middle of a capture (gpucore.vulkan.graph); "
                "seed it before capturing: replays take the generator's seed when they run"
            )
        state.SAMPLING[0] = (threading.get_ident(), s.state, s.base)
        try:
            yield
        finally:
            state.SAMPLING[0] = None

    def end(self, abort: bool) -> None:
        """At the end of the capture: each generator back where the capture found it; the blocks
        a replay draws kept (``abort``: nothing kept)."""
        for s in self.streams.values():
            seed, offset = s.gen.get_state()
            s.blocks = (offset - s.base) & _MASK64
            s.gen.set_state((seed, s.base))
        if abort:
            self.streams.clear()

    def before_replay(self, be, cap) -> None:
        """Write each generator's seed and offset into its device buffer and advance the
        generator past what the replay draws. The previous replay (the buffer's only reader) is
        waited for first, as its resubmission would wait anyway; the host then writes the
        buffer's memory in place (a staged device queues its copy before the replay)."""
        if not self.streams:
            return
        cap.wait()
        for s in self.streams.values():
            gen = s.gen
            with gen._lock:
                seed, offset = gen._seed, gen._offset
                gen._offset = (offset + s.blocks) & _MASK64
            s.state[:] = (seed & _LO, seed >> 32, offset & _LO, offset >> 32)
            be._push_staging(s.state)
