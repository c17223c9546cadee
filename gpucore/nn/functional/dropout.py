"""Dropout: dropout (elements) and dropout2d (whole channels), both with a Philox mask from
gpucore's random stream (gpucore.manual_seed) and the 1 / (1 - p) scale."""

from __future__ import annotations

import warnings

from ...errors import ShapeError
from ...ops.random import _dropout_mask
from ...tensor import Tensor
from ._utils import _check_tensor


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p (a Philox mask from gpucore.rand) and scale the rest
    by 1/(1-p); the identity when not training or p == 0."""
    _check_tensor("dropout", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout(): probability p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    mask = _dropout_mask(input, p)  # one kernel on the input's device; same stream as rand
    if inplace:
        return input.mul_(mask)
    return input * mask


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels (all of [..., H, W] for one sample and channel) with probability p and
    scale the rest by 1/(1-p); the identity when not training or p == 0. The mask is drawn from
    gpucore's random stream (gpucore.manual_seed)."""
    _check_tensor("dropout2d", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout2d(): probability p must be in [0, 1], got {p}")
    if input.ndim < 2:
        raise ShapeError(
            f"dropout2d(): expected a 3-D [N, C, L] or 4-D [N, C, H, W] input, got shape "
            f"{tuple(input.shape)}"
        )
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim.",
            UserWarning,
            stacklevel=2,
        )
    elif input.ndim != 4:
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d; dropout2d exists to "
            "drop channels of 3-D or 4-D inputs. Dims 0 and 1 are taken as batch and channel.",
            UserWarning,
            stacklevel=2,
        )
    if not training or p == 0.0:
        return input
    # A [N, C, 1, ...] view carries the device and dtype the mask needs: one draw per channel.
    like = input.detach()[(slice(None), slice(None)) + (slice(0, 1),) * (input.ndim - 2)]
    mask = _dropout_mask(like, p)
    if inplace:
        return input.mul_(mask)
    return input * mask
