"""Elementwise fusion: consecutive contiguous float32 elementwise ops become one dispatch.

The stream keeps one pending ``Program`` (shaders/fused.comp). An elementwise kernel
(kernels/unary.py, kernels/elementwise.py) offers its op with ``kernels.common.try_fuse``; the op
joins the program when it has the program's element count and its operands fit the program's 8
slots, and the stream records the program as a single dispatch (``Stream.flush_program``) before
anything else it records, before a submit, and when the program is full. A chain of k elementwise
ops thus costs one dispatch and no barriers instead of k dispatches with k - 1 barriers; on a CPU
driver, where each dispatch costs ~25-40 µs of thread hand-off, and on GPUs, where each barrier
drains the pipe, that is most of their cost.

Every op still stores its result (the output tensor exists in Python and may be read later), so
fusion saves dispatches and barriers, not memory traffic; an op that reads the previous op's
result takes it from a register.

Correctness rests on the program being per-element: invocation i touches only element i of every
slot (or the one float of a broadcast slot). So an operand joins only when its byte range is
disjoint from every slot's or identical to one (in-place ops); a broadcast slot is never written;
anything else flushes the program first and starts a new one, and an op that cannot be a program
even alone (its output overlaps its input at another offset) takes the unfused kernel.

Where it is on: GPUs by default. Not on CPU-type devices (lavapipe): there the interpreter loop
costs ~25 ns per element and op against ~1.6 ns for the one-op shaders (llvmpipe runs the op and
slot selection as per-lane code), far more than the ~30 µs per dispatch it saves, except for the
smallest tensors. GPUCORE_VULKAN_FUSION=1 turns it on everywhere (tests do, to check it on
lavapipe), =0 off everywhere; the profiler turns it off while it times ops one by one.
"""

from __future__ import annotations

import os

import numpy as np

from ... import _cpu

# The program's encoding, from cpu/opcodes.def (shared with fused.comp) through the extension.
_F = _cpu.OPCODES["fused"]
MAX_SLOTS = _F["MAX_SLOTS"]  # storage bindings (every Vulkan device we target has >= 8 per stage)
MAX_OPS = _F["MAX_OPS"]  # what is left of 128 bytes of push constants
# instruction fields (see fused.comp)
SRC_NONE, SRC_ACC = _F["SRC_NONE"], _F["SRC_ACC"]
BACKWARD, BINARY = _F["BACKWARD"], _F["BINARY"]
COPY = _F["COPY"]  # a unary code with no function: the identity
_A_SHIFT, _B_SHIFT, _OUT_SHIFT = _F["SRC_A_SHIFT"], _F["SRC_B_SHIFT"], _F["OUT_SHIFT"]
_COUNT_SHIFT = _F["COUNT_SHIFT"]
# binary op codes inside the program (fused.comp's binary_op), by registry op name
BINARY_CODES = dict(_cpu.OPCODES["fused_binary"])


def enabled_by_env() -> bool | None:
    """GPUCORE_VULKAN_FUSION: True for "1", False for "0", None (per device) when unset."""
    v = os.environ.get("GPUCORE_VULKAN_FUSION", "").strip()
    if v in ("", "auto"):
        return None
    if v not in ("0", "1"):
        raise ValueError(f"GPUCORE_VULKAN_FUSION={v!r}: expected 0, 1 or auto")
    return v == "1"


def enabled_for(ctx) -> bool:
    """Whether the stream of this device fuses: the environment's choice, else GPUs only; never
    where a shader cannot bind the program's slots."""
    if ctx.limits.get("maxPerStageDescriptorStorageBuffers", 0) < MAX_SLOTS:
        return False
    env = enabled_by_env()
    return (not ctx.is_cpu) if env is None else env


def encode(op: int, a: int, b: int, out: int) -> int:
    """One instruction word: op, sources a and b (slot, SRC_ACC or SRC_NONE), out slot."""
    return op | (a << _A_SHIFT) | (b << _B_SHIFT) | (out << _OUT_SHIFT)


class Program:
    """The pending fused program: slots (operand byte ranges), instruction words, op names and
    the arrays its dispatch must keep alive."""

    __slots__ = ("n", "slots", "written", "codes", "names", "keep", "last_out", "local")

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.n = 0
        self.slots: list = []  # [block, start byte, end byte, broadcast?, Operand]
        self.written = 0  # bit k: slot k is written
        self.codes: list = []
        self.names: list = []
        self.keep: list = []
        self.last_out = -1
        self.local = 64  # workgroup size of the dispatch (set by Stream.elementwise)

    def _slot(self, new: list, op, bcast: bool):
        """Index of the slot holding op's byte range: an existing one (identical range), or one
        appended to ``new``; None when the range partially overlaps a slot (broadcast slots
        never match a full-length range, so they are never written)."""
        blk = op.block
        start = op.bind_off + 4 * op.offset
        end = start + (4 if bcast else 4 * self.n)
        for idx, s in enumerate(self.slots + new):
            if s[0] is not blk or s[2] <= start or end <= s[1]:
                continue
            if s[1] != start or s[2] != end or s[3] != bcast:
                return None
            return idx
        new.append([blk, start, end, bcast, op])
        return len(self.slots) + len(new) - 1

    def add(self, code: int, name: str, n: int, out_op, in_ops: list) -> bool:
        """Append ``out = op(inputs)``; False (program unchanged) when it does not fit.
        in_ops: [(Operand, broadcast?)], 1 or 2 of them (backward ops: saved, grad)."""
        if self.codes and (n != self.n or len(self.codes) >= MAX_OPS):
            return False
        n0 = self.n
        self.n = n
        new: list = []
        srcs = [self._slot(new, op, bcast and n > 1) for op, bcast in in_ops]
        dst = self._slot(new, out_op, False)
        if None in srcs or dst is None or len(self.slots) + len(new) > MAX_SLOTS:
            self.n = n0
            return False
        # the previous op's result is in a register
        src = [SRC_ACC if s == self.last_out else s for s in srcs]
        b = src[1] if len(src) > 1 else SRC_NONE
        self.slots += new
        self.written |= 1 << dst
        self.codes.append(encode(code, src[0], b, dst))
        self.names.append(name)
        self.last_out = dst
        return True

    def bindings(self) -> list:
        """One binding per shader slot (unused slots repeat slot 0, read-only)."""
        out = []
        for k, s in enumerate(self.slots):
            op = s[4]
            out.append((op.block, op.bind_off, op.bind_size, bool(self.written >> k & 1)))
        first = out[0]
        out += [(first[0], first[1], first[2], False)] * (MAX_SLOTS - len(out))
        return out

    def push(self) -> np.ndarray:
        """fused.comp's push-constant block: n, off[MAX_SLOTS], meta, code[MAX_OPS] (32 words)."""
        words = np.zeros(2 + MAX_SLOTS + MAX_OPS, np.uint32)
        words[0] = self.n
        meta = len(self.codes) << _COUNT_SHIFT
        for k, s in enumerate(self.slots):
            words[1 + k] = s[4].offset
            if s[3]:
                meta |= 1 << k
        words[1 + MAX_SLOTS] = meta
        words[2 + MAX_SLOTS : 2 + MAX_SLOTS + len(self.codes)] = self.codes
        return words

    def label(self) -> str:
        if len(self.names) == 1:
            return self.names[0]
        return "fused(" + ",".join(self.names) + ")"
