"""Vulkan kernels: Philox random fills (shaders/random.comp), the CPU generator's stream.

The kernels of the sampling ops uniform, normal and dropout_mask (gpucore/ops/random.py) call
``fill(be, out, mode, seed, offset, a, b)``, which writes into a contiguous device array the
values the C extension's ``philox`` / ``uniform`` / ``normal`` would write for the same seed and
block offset, and ``DROPOUT`` the CPU's dropout mask ``(rand >= p).to(float32) * scale``.

Exactness: WORDS, UNIFORM and DROPOUT are bit for bit the CPU's. NORMAL evaluates logf, sinf,
cosf and sqrtf in float-float arithmetic and rounds each to float32 as the CPU's libm does, so
it matches the CPU on almost every element; where the CPU's libm is not correctly rounded (glibc
logf is within 0.82 ulp, sincosf 0.56 ulp) an element differs by one ulp of that intermediate,
a few ulp of the result at most (see the shader's header and tests/backends/vulkan/test_random.py).

Inside a captured graph (gpucore.vulkan.graph) a fill reads its seed and base offset from the
graph's device buffer for the generator (gpucore/graphs/rng.py hands it over in
``graphs.state.SAMPLING``), pushing only its offset relative to the capture's start: each
replay then draws where the generator stands when it runs. A fill in a capture without that
buffer (a sampling op with no captured form) is refused.

Arrays larger than one storage binding are filled by several dispatches; each starts on a block
boundary (a multiple of 4 elements), so the counter of its first element is offset + start / 4.
"""

from __future__ import annotations

import threading

import numpy as np

from .... import _cpu
from ....graphs import state as _graph_state
from ..refusals import refusal
from .common import _push, groups_1d, kernel, launch, local_size

_MODE = _cpu.OPCODES["random_mode"]  # random.comp's MODE (cpu/opcodes.def)
WORDS, UNIFORM, NORMAL, DROPOUT = (_MODE[k] for k in ("WORDS", "UNIFORM", "NORMAL", "DROPOUT"))
_MASK64 = (1 << 64) - 1


def _fill_push(n, out_off, seed, ctr, a, b, state_off=0):
    # Mirrors random.comp's Push block (9 words).
    lo = 0xFFFFFFFF
    return _push(
        n, out_off, seed & lo, seed >> 32, ctr & lo, ctr >> 32, float(a), float(b), state_off
    )


def fill(be, out: np.ndarray, mode: int, seed: int, offset: int, a: float = 0.0, b: float = 0.0):
    """Record the fill of contiguous device array ``out`` (float32, or uint32 for WORDS) from the
    stream at (seed, block offset). a, b: low/high (UNIFORM), mean/std (NORMAL), p/scale
    (DROPOUT); they are rounded to float32 first, as the C extension does."""
    state = None  # (the generator's device buffer, the capture's base offset)
    if be.ctx.stream.capture is not None:
        sampling = _graph_state.SAMPLING[0]
        if sampling is None or sampling[0] != threading.get_ident():
            # the seed would be baked in: replays would repeat its numbers
            raise refusal("this random sampling op (it has no captured form)")
        state = sampling[1:]
        offset = (offset - state[1]) & _MASK64  # relative to the capture's start
    if not out.flags.c_contiguous or out.itemsize != 4:
        raise ValueError("random fill: out must be a contiguous array of 32-bit elements")
    flat = out.reshape(-1)
    n = flat.size
    if n == 0:
        return
    seed &= _MASK64
    limit = be.ctx.limits["maxStorageBufferRange"] - be.align
    step = max(4, (limit // 4) // 4 * 4)  # elements per dispatch, whole blocks
    local = local_size(be)
    for start in range(0, n, step):
        part = flat[start : start + step]
        m = part.size
        ctr = (offset + start // 4) & _MASK64
        if state is None:
            push = _fill_push(m, be.operand(part).offset, seed, ctr, a, b)
            bound = [(part, True), (part, False)]  # binding 1 unread (STATE = 0)
        else:
            push = _fill_push(m, be.operand(part).offset, 0, ctr, a, b, be.operand(state[0]).offset)
            bound = [(part, True), (state[0], False)]
        launch(
            be,
            "random",
            (mode, int(state is not None)),
            bound,
            push,
            groups_1d(-(-m // 4), local),
            local=local,
            label="random",
        )


# The registry's sampling ops (gpucore/ops/random.py). They fill outputs of any size themselves
# (several dispatches, each starting on a block boundary), so the backend need not split them.
def _any_size(fn):
    fn.any_size = True
    return fn


@kernel("uniform")
@_any_size
def _uniform(be, out, *, shape, seed, offset, low, high):
    fill(be, out, UNIFORM, seed, offset, low, high)


@kernel("normal")
@_any_size
def _normal(be, out, *, shape, seed, offset, mean, std):
    fill(be, out, NORMAL, seed, offset, mean, std)


@kernel("dropout_mask")
@_any_size
def _dropout_mask(be, out, *, shape, seed, offset, p):
    """out = 1/(1-p) where the stream's uniform u >= p, else 0 (scale 1 when p == 1)."""
    scale = 1.0 / (1.0 - p) if p < 1.0 else 1.0
    fill(be, out, DROPOUT, seed, offset, p, scale)
