"""pixel_shuffle and pixel_unshuffle: channels to and from space blocks, as reshapes and one
permute (so any backend runs them and autograd differentiates them)."""

from __future__ import annotations

import operator

from ...errors import ShapeError
from ...tensor import Tensor
from ._utils import _check_tensor


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """[*, C*r*r, H, W] -> [*, C, H*r, W*r] (torch.nn.functional.pixel_shuffle)."""
    _check_tensor("pixel_shuffle", input, floating=False)
    r = operator.index(upscale_factor)
    if r < 1:
        raise ValueError(f"pixel_shuffle(): upscale_factor must be positive, got {r}")
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise ShapeError(
            f"pixel_shuffle(): expected an input [*, C*{r}*{r}, H, W] of at least 3 dims, got "
            f"shape {tuple(input.shape)}"
        )
    *lead, c, h, w = input.shape
    b = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(b), b, b + 3, b + 1, b + 4, b + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """[*, C, H*r, W*r] -> [*, C*r*r, H, W] (torch.nn.functional.pixel_unshuffle)."""
    _check_tensor("pixel_unshuffle", input, floating=False)
    r = operator.index(downscale_factor)
    if r < 1:
        raise ValueError(f"pixel_unshuffle(): downscale_factor must be positive, got {r}")
    if input.ndim < 3 or input.shape[-2] % r or input.shape[-1] % r:
        raise ShapeError(
            f"pixel_unshuffle(): expected an input [*, C, H*{r}, W*{r}] of at least 3 dims, "
            f"got shape {tuple(input.shape)}"
        )
    if input.numel() == 0:  # as PyTorch: an empty input comes back with its own shape
        return input.clone()
    *lead, c, h, w = input.shape
    b = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(b), b, b + 2, b + 4, b + 1, b + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """[N, C, *] with the channels regrouped (torch.nn.functional.channel_shuffle): channel
    g * (C / groups) + i moves to i * groups + g (a reshape, a transpose and a reshape)."""
    _check_tensor("channel_shuffle", input, floating=False)
    g = operator.index(groups)
    if g < 1:
        raise ValueError(
            "channel_shuffle(): Number of groups to divide channels in must be positive. Value "
            f"of groups:{g}"
        )
    if input.ndim < 3:
        raise ShapeError(
            f"channel_shuffle(): channel_shuffle expects input to have at least 3 dimensions, "
            f"but got input with sizes {list(input.shape)}"
        )
    n, c, *rest = input.shape
    if c % g:
        raise ShapeError(
            f"channel_shuffle(): Number of channels must be divisible by groups. Got {c} "
            f"channels and {g} groups."
        )
    x = input.reshape(n, g, c // g, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """torch.nn.functional.native_channel_shuffle: channel_shuffle (PyTorch's native kernel of
    it; the same result)."""
    return channel_shuffle(input, groups)
