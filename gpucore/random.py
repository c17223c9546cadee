"""Random numbers from a counter-based generator (Philox4x32-10).

The stream for a (seed, offset) pair is defined independently of the device: word i of a call is
word ``i % 4`` of Philox4x32-10 at counter ``offset + i // 4`` with key ``seed``. So a Vulkan kernel
given the same seed and offset reproduces the CPU stream bit for bit.

Offset bookkeeping: every call starts at a fresh 128-bit block and advances the offset by the
number of blocks it touched, ``ceil(words / 4)`` (the block counter wraps modulo 2**64). Words
per call: ``rand`` one per element, ``randn`` ``2 * ceil(n / 2)`` (Box-Muller pairs), ``randint``
two per element (a 64-bit draw). So ``rand(5)`` then ``rand(5)`` gives ``rand(13)[:5]`` and
``rand(13)[8:]`` (words 5..7 of the first call are skipped), not ``rand(10)``.

Values (see cpu/README.md): ``rand`` in float32 is ``(word >> 8) * 2**-24``; for float16 and
bfloat16 it is ``(word >> (32 - p)) * 2**-p`` with p = 11 and 8 (their precisions), so every value
is exact and below 1; float64 takes the float32 values. ``randint(low, high)`` is
``low + (w0 | w1 << 32) % (high - low)`` over consecutive word pairs.
"""

from __future__ import annotations

import os
import threading

_MASK64 = 2**64 - 1


class Generator:
    """Holds a seed and an offset (in 128-bit Philox blocks); thread-safe."""

    def __init__(self, seed: int = 0):
        self._lock = threading.Lock()
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        """Set the key (taken modulo 2**64, so -1 is 2**64 - 1) and restart at block 0."""
        seed = int(seed) & _MASK64
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
        """Restore a (seed, offset) pair from ``get_state()``; both must lie in [0, 2**64)."""
        seed, offset = int(state[0]), int(state[1])
        if not (0 <= seed <= _MASK64 and 0 <= offset <= _MASK64):
            raise ValueError(
                f"set_state(): seed and offset must be in [0, 2**64), got ({seed}, {offset})"
            )
        with self._lock:
            self._seed, self._offset = seed, offset

    def take(self, nwords: int) -> tuple[int, int]:
        """Reserve ``nwords`` 32-bit words of the stream; returns (seed, starting block)."""
        with self._lock:
            start = self._offset
            self._offset = (start + (nwords + 3) // 4) & _MASK64
            return self._seed, start


default_generator = Generator(int.from_bytes(os.urandom(8), "little"))


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (all devices share it)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Reseed the default generator from the OS entropy pool; returns the new seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state() -> tuple[int, int]:
    """The default generator's (seed, offset), for ``set_rng_state``."""
    return default_generator.get_state()


def set_rng_state(state) -> None:
    """Restore the default generator's (seed, offset) from ``get_rng_state()``."""
    default_generator.set_state(state)
