"""pad (torch.nn.functional.pad): constant padding (and cropping) of any trailing dims by
concatenation, reflect/replicate/circular padding of the last 1-3 dims by an index_select per
dim (the source positions are built once per shape)."""

from __future__ import annotations

import functools
import operator

import numpy as np

from ...creation import full
from ...errors import ShapeError
from ...ops.joining import cat
from ...tensor import Tensor
from ._utils import _check_tensor, _const

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


@functools.lru_cache(maxsize=256)
def _pad_index(mode: str, size: int, lo: int, hi: int) -> np.ndarray | None:
    """Source positions (int64) of a padded axis, or None when it is the unpadded axis."""
    pos = np.arange(size + lo + hi, dtype=np.int64) - lo
    if mode == "reflect":
        pos = np.abs(pos)
        pos = np.where(pos > size - 1, 2 * (size - 1) - pos, pos)
    elif mode == "replicate":
        pos = np.clip(pos, 0, size - 1)
    else:
        pos = pos % size
    if len(pos) == size and (pos == np.arange(size)).all():
        return None
    return pos


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative amounts, crop) the trailing dims as torch.nn.functional.pad.

    pad: (left, right) for the last dim, then (top, bottom) for the one before, and so on.
    'constant' fills with value (default 0) and pads any number of dims; 'reflect' (mirror
    without repeating the edge), 'replicate' (repeat the edge) and 'circular' (wrap around) pad
    the last 1, 2 or 3 dims of a 2-3, 3-4 or 4-5 dim input.
    """
    _check_tensor("pad", input, floating=False)
    try:
        amounts = tuple(operator.index(p) for p in pad)
    except TypeError:
        raise TypeError(f"pad(): pad must be a sequence of ints, got {pad!r}") from None
    if len(amounts) % 2:
        raise ValueError(f"pad(): padding length must be divisible by 2, got {len(amounts)}")
    k = len(amounts) // 2
    if k > input.ndim:
        raise ValueError(
            f"pad(): padding length {len(amounts)} is too large for a {input.ndim}-D input "
            f"(at most 2 per dim)"
        )
    if mode not in _PAD_MODES:
        raise ValueError(f"pad(): mode must be one of {', '.join(_PAD_MODES)}; got {mode!r}")
    shape = tuple(input.shape)
    for i in range(k):
        d = input.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        if shape[d] + lo + hi < 0:
            raise ShapeError(
                f"pad(): the input size {shape[d]} plus padding {lo} and {hi} gives a negative "
                f"output size at dim {d} of an input of shape {shape}"
            )
    if mode == "constant":
        return _pad_constant(input, amounts, 0 if value is None else value)
    if value is not None and value != 0:
        raise ValueError(f'pad(): padding mode "{mode}" does not take a value argument')
    if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"pad(): mode {mode!r} pads the last 1, 2 or 3 dims of a 2-3, 3-4 or 4-5 dim "
            f"input; got a padding of length {len(amounts)} for a {input.ndim}-D input"
        )
    out = input
    for i in range(k):
        d = input.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        n = shape[d]
        if n == 0:
            raise ShapeError(f"pad(): mode {mode!r} needs a non-empty dim {d}, got shape {shape}")
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(
                f"pad(): reflect padding must be less than the input size, got padding "
                f"({lo}, {hi}) at dim {d} of an input of shape {shape}"
            )
        if mode == "circular" and (lo > n or hi > n):
            raise ValueError(
                f"pad(): circular padding ({lo}, {hi}) at dim {d} of an input of shape {shape} "
                "wraps around more than once"
            )
        idx = _pad_index(mode, n, lo, hi)
        if idx is not None:
            out = out.index_select(d, _const(idx))
    return out


def _pad_constant(input: Tensor, amounts: tuple, value) -> Tensor:
    out = input
    for i in range(len(amounts) // 2):
        d = input.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        n = out.shape[d]
        start, stop = max(-lo, 0), n - max(-hi, 0)
        if start > n or stop < 0 or stop < start:
            raise ShapeError(f"pad(): cropping ({lo}, {hi}) is larger than dim {d} of size {n}")
        if start or stop != n:
            out = out.narrow(d, start, stop - start)
        parts = []
        for amount in (lo, hi):
            if amount > 0:
                fill_shape = tuple(out.shape[:d]) + (amount,) + tuple(out.shape[d + 1 :])
                parts.append(full(fill_shape, value, dtype=out.dtype, device=out.device))
            else:
                parts.append(None)
        if parts[0] is not None or parts[1] is not None:
            out = cat([t for t in (parts[0], out, parts[1]) if t is not None], d)
    return out
