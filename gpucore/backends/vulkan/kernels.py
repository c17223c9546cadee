"""Vulkan kernels, keyed by registry op name: ``fn(backend, out, *inputs, **attrs)``.

Inputs and outputs are numpy views over device memory (see memory.py); ``backend.operand(arr)``
gives the binding and element offset/strides a shader needs. A kernel records dispatches on the
stream and returns at once: nothing waits for the device here.

Push-constant layouts are declared once in each shader and mirrored once here, next to the
function that fills them (``_push`` packs ints as uint32 and floats as float32 bits).
"""

from __future__ import annotations

import numpy as np

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


def contiguous(be, arr: np.ndarray) -> np.ndarray:
    """arr itself when C-contiguous, else a device copy made by the strided-copy shader."""
    if arr.flags.c_contiguous:
        return arr
    out = be.empty_array(arr.shape, arr.dtype)
    KERNELS["clone"](be, out, arr)
    return out


def launch(be, shader: str, spec: tuple, operands, push: np.ndarray, groups: tuple,
           local: int | None = None, label: str = ""):
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


def elem_offset(be, arr: np.ndarray) -> int:
    return be.operand(arr).offset


# ----------------------------------------------------------------------------- unary
_UNARY_CODES = {
    "neg": 0, "abs": 1, "exp": 2, "log": 3, "sqrt": 4, "relu": 5, "sigmoid": 6, "tanh": 7,
    "gelu": 8, "sign": 10, "sin": 11, "cos": 12, "reciprocal": 13,
}


def _unary(code):
    def run(be, out, x, **attrs):
        c = code
        if attrs.get("approximate") == "tanh":
            c = 9
        x = contiguous(be, x)
        n = out.size
        if n == 0:
            return
        ox, oy = be.operand(x), be.operand(out)
        launch(be, "unary", (c, 0), [(x, False), (x, False), (out, True)],
               _push(n, ox.offset, ox.offset, oy.offset), groups_1d(n, local_size(be)))

    return run


for _name, _code in _UNARY_CODES.items():
    kernel(_name)(_unary(_code))


def _unary_bwd(code):
    def run(be, out, g, saved, **attrs):
        c = 9 if (code == 8 and attrs.get("approximate") == "tanh") else code
        g = contiguous(be, g)
        saved = contiguous(be, saved)
        n = out.size
        if n == 0:
            return
        os_, og, oy = be.operand(saved), be.operand(g), be.operand(out)
        launch(be, "unary", (c, 1), [(saved, False), (g, False), (out, True)],
               _push(n, os_.offset, og.offset, oy.offset), groups_1d(n, local_size(be)))

    return run


kernel("relu_backward")(_unary_bwd(5))
kernel("sigmoid_backward")(_unary_bwd(6))
kernel("tanh_backward")(_unary_bwd(7))
kernel("gelu_backward")(_unary_bwd(8))
