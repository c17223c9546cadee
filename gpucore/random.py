"""Random numbers from a counter-based generator (Philox4x32-10).

The stream for a (seed, offset) pair is defined independently of the device: word i of a call is
word ``i % 4`` of Philox4x32-10 at counter ``offset + i // 4`` with key ``seed``. So a Vulkan kernel
given the same seed and offset reproduces the CPU stream bit for bit. Each call advances the
offset by the number of 128-bit counter blocks it consumed.
"""

from __future__ import annotations

import os
import threading


class Generator:
    """Holds a seed and an offset (in 128-bit Philox blocks); thread-safe."""

    def __init__(self, seed: int = 0):
        self._lock = threading.Lock()
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if not 0 <= seed < 2**64:
            seed &= 2**64 - 1
        with self._lock:
            self._seed = seed
            self._offset = 0
        return self

    def seed(self) -> int:
        """Reseed from the OS entropy pool and return the new seed."""
        s = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> tuple[int, int]:
        return (self._seed, self._offset)

    def set_state(self, state: tuple[int, int]) -> None:
        with self._lock:
            self._seed, self._offset = int(state[0]), int(state[1])

    def take(self, nwords: int) -> tuple[int, int]:
        """Reserve ``nwords`` 32-bit words of the stream; returns (seed, starting block)."""
        with self._lock:
            start = self._offset
            self._offset += (nwords + 3) // 4
            return self._seed, start


default_generator = Generator(int.from_bytes(os.urandom(8), "little"))


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (all devices share it)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> tuple[int, int]:
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)
