"""Sample inputs of the ops, declared next to each op (``defop(..., samples=...)``).

An op's samples are what tests/ops/test_every_op.py runs it on, on every backend: each ``Sample``
holds the op's inputs as numpy arrays (float arrays in float64; the test casts them to each
dtype it checks), its keyword attributes, and ``ref``, the float64 numpy reference of its
output(s). Differentiable ops are also gradient-checked on the float inputs. The idea is PyTorch's
OpInfo and ggml's test-backend-ops: one harness enumerates every op x every backend, and an op
without samples fails it.

Samples are built lazily (``samples`` is a function) so importing gpucore costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class Sample:
    """One check of an op.

        inputs: numpy arrays; float arrays are the op's float inputs (cast to the dtype under test),
        others (int64 indices, bool masks) are passed as they are. attrs: the op's keyword
        attributes. ref(*inputs, **attrs): the float64 reference, an array or a tuple of arrays (one
        per output). grad: gradient-check the float inputs (differentiable ops only). call: for ops
        that ``apply`` cannot run directly (in-place updates, device moves), ``call(op, *tensors,
        **attrs)`` runs the op and returns what ``ref`` describes. on_vulkan: an op with a Vulkan
    kernel must run there on this sample's float32 inputs (False where the kernel rightly refuses
    them, e.g. int64 data). atol/rtol: float32 tolerances
        (float64 uses 1e-10 / 1e-8 unless the sample says otherwise with ``tol64``).
    """

    __slots__ = ("inputs", "attrs", "ref", "grad", "call", "on_vulkan", "atol", "rtol", "tol64")

    def __init__(
        self,
        *inputs,
        ref: Callable,
        grad: bool = True,
        call: Callable | None = None,
        on_vulkan: bool = True,
        atol: float = 1e-5,
        rtol: float = 1e-4,
        tol64: tuple = (1e-10, 1e-8),
        **attrs,
    ):
        self.inputs = tuple(np.asarray(a) for a in inputs)
        self.attrs = attrs
        self.ref = ref
        self.grad = grad
        self.call = call
        self.on_vulkan = on_vulkan
        self.atol = atol
        self.rtol = rtol
        self.tol64 = tol64

    def __repr__(self) -> str:
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.inputs)
        return f"Sample({shapes}, {self.attrs})"


def uniform(*shape, low: float = -2.0, high: float = 2.0, seed: int = 0) -> np.ndarray:
    """float64 values drawn uniformly from [low, high) (a fixed seed per call site)."""
    return np.random.default_rng(seed).uniform(low, high, shape)


def away_from(x: np.ndarray, points=(0.0,), gap: float = 0.05) -> np.ndarray:
    """x with values within ``gap`` of any of ``points`` pushed out (kinks and poles make finite
    differences meaningless there)."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < gap
        x[near] = p + np.where(x[near] >= p, gap, -gap)
    return x


def unary(ref: Callable, low: float = -2.0, high: float = 2.0, kinks=(), **kw) -> Callable:
    """Samples of a one-input elementwise op: a 3x5 block, a 0-d value, an empty tensor, and a
    4100-element vector (above the default GPU threshold)."""

    def samples():
        def vals(*shape, seed):
            return away_from(uniform(*shape, low=low, high=high, seed=seed), kinks)

        return [
            Sample(vals(3, 5, seed=1), ref=ref, **kw),
            Sample(vals(seed=2), ref=ref, **kw),
            Sample(np.zeros((0, 3)), ref=ref, grad=False, **kw),
            Sample(vals(4100, seed=3), ref=ref, grad=False, **kw),
        ]

    return samples


def binary(
    ref: Callable,
    low: float = -2.0,
    high: float = 2.0,
    low_b: float | None = None,
    high_b: float | None = None,
    kinks_b=(),
    broadcast: bool = True,
    **kw,
) -> Callable:
    """Samples of a two-input elementwise op: equal shapes, broadcasting both ways and a 0-d
    operand (unless ``broadcast=False``: ops whose inputs share one shape), and a large pair.
    ``low_b``/``high_b`` give the second operand its own range, ``kinks_b`` its points to avoid."""
    lb = low if low_b is None else low_b
    hb = high if high_b is None else high_b

    def samples():
        def a(*shape, seed):
            return uniform(*shape, low=low, high=high, seed=seed)

        def b(*shape, seed):
            return away_from(uniform(*shape, low=lb, high=hb, seed=seed), kinks_b)

        out = [Sample(a(3, 5, seed=1), b(3, 5, seed=2), ref=ref, **kw)]
        if broadcast:
            out += [
                Sample(a(2, 3, 4, seed=3), b(3, 1, seed=4), ref=ref, **kw),
                Sample(a(1, 4, seed=5), b(3, 1, seed=6), ref=ref, **kw),
                Sample(a(3, 4, seed=7), b(seed=8), ref=ref, **kw),
            ]
        out.append(Sample(a(4100, seed=9), b(4100, seed=10), ref=ref, grad=False, **kw))
        return out

    return samples


def halves(*shape, seed: int) -> np.ndarray:
    """uniform values rounded to multiples of 0.5: equal values occur, so ties are checked
    (comparisons, max/min and their indices)."""
    return np.round(uniform(*shape, seed=seed) * 2) / 2


def bools(*shape, seed: int = 0) -> np.ndarray:
    """bool values, about half True (masks, logical ops)."""
    return np.random.default_rng(seed).random(shape) < 0.5


def integers(high: int, *shape, low: int = 0, seed: int = 0) -> np.ndarray:
    """int64 values drawn uniformly from [low, high) (indices, class targets)."""
    return np.random.default_rng(seed).integers(low, high, shape, dtype=np.int64)


def via(fn: Callable) -> Callable:
    """A ``Sample.call`` running ``fn(*tensors, **attrs)`` (the op's public function, or a
    lambda around ``apply``) instead of ``apply(op, ...)``: for the edges a wrapper handles
    (negative dims, broadcasting) or strided operands the harness does not make."""
    return lambda op, *tensors, **attrs: fn(*tensors, **attrs)
