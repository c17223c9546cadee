"""The Vulkan kernel table (``KERNELS``), the ``kernel`` decorator and the launch helpers the
family modules share (see the package docstring)."""

from __future__ import annotations

import numpy as np

from .. import fusion

KERNELS: dict = {}
MAX_GROUPS_X = 65535


def kernel(*names, accepts=None):
    """Register the decorated function as the Vulkan kernel of the named ops. ``accepts(inputs,
    specs)`` overrides the default rule (float32 inputs and outputs only)."""

    def deco(fn):
        if accepts is not None:
            fn.accepts = accepts
        for n in names:
            if n in KERNELS:
                raise ValueError(f"Vulkan kernel for {n!r} registered twice")
            KERNELS[n] = fn
        return fn

    return deco


def _push(*values) -> np.ndarray:
    if not any(isinstance(v, float) for v in values):
        try:  # the common all-int block in one conversion (~4x cheaper than the loop below)
            return np.array(values, np.uint32)
        except (OverflowError, TypeError, ValueError):
            pass  # negative ints wrap to 32 bits below
    out = np.empty(len(values), np.uint32)
    for i, v in enumerate(values):
        if isinstance(v, float):
            out[i] = np.float32(v).view(np.uint32)
        else:
            out[i] = int(v) & 0xFFFFFFFF
    return out


def groups_1d(n: int, local: int) -> tuple:
    g = max(1, -(-n // local))
    gx = min(g, MAX_GROUPS_X)
    return (gx, -(-g // gx), 1)


def local_size(be) -> int:
    # A CPU driver wants few, fat invocations; GPUs want a few warps per group.
    return 64 if be.ctx.is_cpu else 256


def flat_local_size(be) -> int:
    """Workgroup size of the one-invocation-per-element shaders (no shared memory, no barriers).
    lavapipe pays ~0.7 µs per workgroup and little per invocation: relu over 64K floats took
    780 µs with 64-wide groups and 70 µs with 1024-wide ones, so a CPU device gets its largest."""
    ctx = be.ctx
    if ctx.is_cpu:
        return min(1024, ctx.limits["maxComputeWorkGroupInvocations"])
    return 256


def contiguous(be, arr: np.ndarray) -> np.ndarray:
    """arr itself when C-contiguous, else a device copy made by the strided-copy shader."""
    if arr.flags.c_contiguous:
        return arr
    out = be.empty_array(arr.shape, arr.dtype)
    copy_array(be, out, arr)
    return out


def launch(
    be,
    shader: str,
    spec: tuple,
    operands,
    push: np.ndarray,
    groups: tuple,
    local: int | None = None,
    label: str = "",
):
    """Record one dispatch. operands: [(array, writes?)] in binding order."""
    local = local or local_size(be)
    ctx = be.ctx
    pipe = ctx.pipelines.get(shader, len(operands), spec, local)
    bindings = []
    keep = []
    for arr, writes in operands:
        op = be.operand(arr)
        bindings.append(op.binding(writes))
        keep.append(arr)
    ctx.stream.dispatch(pipe, bindings, push, groups, label=label or shader, keep=keep)


def _dispatch(be, shader: str, spec: tuple, operands, push, groups):
    """launch() for operands already resolved: [(array, Operand, writes?)] (saves re-resolving
    each binding, a noticeable share of the per-op Python cost)."""
    ctx = be.ctx
    local = flat_local_size(be)
    pipe = ctx.pipelines.get(shader, len(operands), spec, local)
    ctx.stream.dispatch(
        pipe,
        [o.binding(w) for _, o, w in operands],
        push,
        groups,
        label=shader,
        keep=[a for a, _, _ in operands],
    )


# ----------------------------------------------------------------------------- copies
def _word_layout(arr: np.ndarray, op):
    """(shape, strides, offset) of arr in shader items: 32-bit words, or bytes / 16-bit units for
    1- and 2-byte items (copy.comp's BYTES modes); 8-byte items become 2 words."""
    if arr.itemsize in (1, 2, 4):
        return list(arr.shape), list(op.strides), op.offset
    # 8-byte items: a trailing dim of 2 words
    return (list(arr.shape) + [2], [2 * s for s in op.strides] + [1], 2 * op.offset)


def word_copy_ok(arr: np.ndarray) -> bool:
    return arr.itemsize == 4 or (arr.itemsize == 8 and arr.ndim < 8)


def copy_ok(arr: np.ndarray) -> bool:
    """copy_array can copy arr: 32-bit or 64-bit items, or bytes (bool) and 16-bit items (float16,
    bfloat16) through copy.comp's byte modes, with at most 8 dims (counting an 8-byte item's 2
    words) once size-1 dims go."""
    if arr.itemsize not in (1, 2, 4, 8):
        return False
    return sum(n != 1 for n in arr.shape) + (arr.itemsize == 8) <= 8


def _merge_dims(shape, sst, dstr) -> list:
    """[(size, src stride, dst stride)] with size-1 dims dropped and neighbouring dims merged
    where both operands step through them as one."""
    dims: list = []
    for sh, a, b in zip(shape, sst, dstr):
        if sh == 1:
            continue
        if dims and dims[-1][1] == a * sh and dims[-1][2] == b * sh:
            dims[-1] = (dims[-1][0] * sh, a, b)
            continue
        dims.append((sh, a, b))
    return dims or [(1, 0, 0)]


def try_fuse(be, code: int, name: str, out: np.ndarray, *inputs: np.ndarray) -> bool:
    """Offer ``out = op(*inputs)`` to the stream's pending program; True when it was taken (the
    caller records nothing). Operands: float32, out contiguous, each input contiguous with out's
    element count or a single element. False: the caller runs its own kernel."""
    stream = be.ctx.stream
    if not stream.fuse:
        return False
    n = out.size
    if not out.flags.c_contiguous or out.dtype != np.float32:
        return False
    in_ops = []
    for x in inputs:
        if x.dtype != np.float32:
            return False
        if x.size == n and x.flags.c_contiguous:
            in_ops.append((be.operand(x), False))
        elif x.size == 1:
            in_ops.append((be.operand(x), True))
        else:
            return False
    return stream.elementwise(
        code, name, n, be.operand(out), in_ops, (out,) + inputs, flat_local_size(be)
    )


def copy_array(be, dst: np.ndarray, src: np.ndarray):
    """dst[...] = src on the device (same shape, same itemsize of 1, 2, 4 or 8 bytes; any
    strides). 1- and 2-byte items (bool, float16, bfloat16) go through copy.comp's byte modes,
    which write only their own bytes, so dst may share words with data other dispatches write (a
    slice of cat's output)."""
    n = dst.size
    if n == 0 or (
        dst.dtype == src.dtype == np.float32 and try_fuse(be, fusion.COPY, "copy", dst, src)
    ):
        return
    od, os_ = be.operand(dst), be.operand(src)
    shape, sst, soff = _word_layout(src, os_)
    _, dstr, doff = _word_layout(dst, od)
    dims = _merge_dims(shape, sst, dstr)
    nd = len(dims)
    if nd > 8:
        raise ValueError(f"internal: copy of {nd} dims after merging exceeds copy.comp's 8")
    pad = 8 - nd
    words = 1
    for sh, _, _ in dims:
        words *= sh
    push = _push(
        words,
        nd,
        soff,
        doff,
        *([d[0] for d in dims] + [1] * pad),
        *([d[1] for d in dims] + [0] * pad),
        *([d[2] for d in dims] + [0] * pad),
    )
    local = flat_local_size(be)
    spec = (dst.itemsize,) if dst.itemsize in (1, 2) else ()
    launch(
        be, "copy", spec, [(src, False), (dst, True)], push, groups_1d(words, local), local=local
    )


def _accepts_words(inputs, specs):
    return all(copy_ok(t._data) for t in inputs)
