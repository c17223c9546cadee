"""The CPU kernel table (``KERNELS``), the fast-lane table (``FAST``), the ``kernel`` decorator,
the extension's op codes (``UNARY``, ``BINARY``) and the helpers the family modules share.

The tables live here rather than in the package's ``__init__`` so that the family modules,
which register into them, import a sibling module and not the package that imports them (no
import cycle; see tools/import_graph.py).
"""

from __future__ import annotations

import math

import numpy as np

from .... import _cpu
from ....errors import GpucoreIndexError

KERNELS: dict = {}
# Ops that the extension's fast lane (fast_unary, fast_binary, fast_unary_backward) runs whole
# (checks, output, kernel, Tensor) when called without attributes: op name -> (C entry, kernel
# code), inputs in the op's order. Filled by unary.py and elementwise.py next to each op's kernel.
FAST: dict = {}
_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))


def _codes(prefix: str) -> dict:
    """{op name: code} of the extension's ``<prefix>*`` constants (``UNARY_NEG`` -> ``"neg"``)."""
    return {n[len(prefix) :].lower(): getattr(_cpu, n) for n in dir(_cpu) if n.startswith(prefix)}


UNARY = _codes("UNARY_")
BINARY = _codes("BINARY_")


def kernel(*names):
    """Register the decorated function as the CPU kernel of the named ops."""

    def deco(fn):
        for n in names:
            if n in KERNELS:
                raise ValueError(f"CPU kernel for {n!r} registered twice")
            KERNELS[n] = fn
        return fn

    return deco


def special_kernel(name: str):
    """The kernel of a one-input torch.special function computed in C in double
    (``_cpu.special``, cpu/special.c; its code from ``OPCODES["special"]``)."""
    code = _cpu.OPCODES["special"][name]

    def run(out, x):
        _cpu.special(code, np.ascontiguousarray(x, out.dtype).reshape(-1), out.reshape(-1))

    run.__name__ = f"_{name}"
    return run


def _special_operand(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """An input of ``_cpu.special2``: out's dtype, flat, of out's size or one element."""
    a = np.asarray(a)
    if a.shape != out.shape:
        if a.size == 1:
            return np.ascontiguousarray(a, out.dtype).reshape(1)
        a = np.broadcast_to(a, out.shape)
    return np.ascontiguousarray(a, out.dtype).reshape(-1)


def special2_kernel(name: str):
    """The kernel of a two-input torch.special function computed in C (``_cpu.special2``,
    cpu/special.c; its code from ``OPCODES["special2"]``): both inputs in the output's dtype, as
    PyTorch casts them to the common dtype (a one-element input is broadcast by the C loop)."""
    code = _cpu.OPCODES["special2"][name]

    def run(out, a, b):
        _cpu.special2(code, _special_operand(a, out), _special_operand(b, out), out.reshape(-1))

    run.__name__ = f"_{name}"
    return run


def _isf(a: np.ndarray) -> bool:
    return a.dtype in _FLOAT


def _c(a: np.ndarray, dtype=None) -> np.ndarray:
    """C-contiguous (and of ``dtype`` if given), copying only when needed."""
    if dtype is not None and a.dtype != dtype:
        return np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _oni(x: np.ndarray, dims: tuple):
    """x as a contiguous [outer, n, inner] array reducing ``dims`` (reductions, softmax)."""
    shape = x.shape
    if not dims:
        return _c(x), x.size, 1, 1
    if dims == tuple(range(dims[0], dims[-1] + 1)):
        xc = _c(x)
        outer = math.prod(shape[: dims[0]])
        n = math.prod(shape[dims[0] : dims[-1] + 1])
        inner = math.prod(shape[dims[-1] + 1 :])
        return xc, outer, n, inner
    keep = tuple(i for i in range(x.ndim) if i not in dims)
    xc = np.ascontiguousarray(x.transpose(keep + dims))
    return xc, math.prod(shape[i] for i in keep), math.prod(shape[i] for i in dims), 1


def _check_index(index: np.ndarray, size: int, op: str):
    """Raise GpucoreIndexError unless every index lies in [0, size) (indexing, pooling)."""
    if index.size and (index.min() < 0 or index.max() >= size):
        raise GpucoreIndexError(
            f"{op}(): index values must be in [0, {size}); got values in "
            f"[{int(index.min())}, {int(index.max())}]"
        )
