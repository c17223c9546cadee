"""Dropout: dropout (elements), dropout1d/2d/3d (whole channels) and alpha_dropout /
feature_alpha_dropout (SELU networks), all with a Philox mask from
gpucore's random stream (gpucore.manual_seed) and the 1 / (1 - p) scale."""

from __future__ import annotations

from ... import _caller_warnings as caller_warnings
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
        caller_warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim.",
            UserWarning,
        )
    elif input.ndim != 4:
        caller_warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d; dropout2d exists to "
            "drop channels of 3-D or 4-D inputs. Dims 0 and 1 are taken as batch and channel.",
            UserWarning,
        )
    if not training or p == 0.0:
        return input
    # A [N, C, 1, ...] view carries the device and dtype the mask needs: one draw per channel.
    like = input.detach()[(slice(None), slice(None)) + (slice(0, 1),) * (input.ndim - 2)]
    mask = _dropout_mask(like, p)
    if inplace:
        return input.mul_(mask)
    return input * mask


def _channel_dropout(
    name: str, input: Tensor, p: float, training: bool, inplace: bool, dims: tuple
) -> Tensor:
    """dropout1d / dropout3d: whole channels of a batched ([N, C, ...], ndim dims[1]) or
    unbatched ([C, ...], ndim dims[0]) input, as PyTorch's feature dropout."""
    _check_tensor(name, input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}(): probability p must be in [0, 1], got {p}")
    if input.ndim not in dims:
        msg = (
            f"{name}(): expected {dims[0]}-D or {dims[1]}-D input (unbatched or batched), got "
            f"shape {tuple(input.shape)}"
        )
        if name == "dropout1d" or input.ndim < 1:
            raise ShapeError(msg)
        # PyTorch's dropout3d only warns (deprecated) and drops along dim 0 as unbatched
        caller_warnings.warn(msg + "; this is deprecated in PyTorch", UserWarning)
    if not training or p == 0.0:
        return input
    lead = 2 if input.ndim == dims[1] else 1
    like = input.detach()[(slice(None),) * lead + (slice(0, 1),) * (input.ndim - lead)]
    mask = _dropout_mask(like, p)
    if inplace:
        return input.mul_(mask)
    return input * mask


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of a [N, C, L] (or unbatched [C, L]) input with probability p and
    scale the rest by 1/(1-p), as torch.nn.functional.dropout1d."""
    return _channel_dropout("dropout1d", input, p, training, inplace, (2, 3))


def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of a [N, C, D, H, W] (or unbatched [C, D, H, W]) input with
    probability p and scale the rest by 1/(1-p), as torch.nn.functional.dropout3d."""
    return _channel_dropout("dropout3d", input, p, training, inplace, (4, 5))


_SELU_ALPHA = 1.7580993408473766  # -scale * alpha of SELU: the value dropped units take


def _alpha(name: str, input: Tensor, p: float, training: bool, inplace: bool, feature: bool):
    _check_tensor(name, input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}(): probability p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    if feature:
        if input.ndim < 2:
            raise ShapeError(
                f"{name}(): expected an input with at least 2 dims [N, C, ...], got shape "
                f"{tuple(input.shape)}"
            )
        like = input.detach()[(slice(None),) * 2 + (slice(0, 1),) * (input.ndim - 2)]
    else:
        like = input.detach()
    keep = (_dropout_mask(like, p) != 0).to(input.dtype)
    a = 1.0 / ((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p)) ** 0.5
    b = (keep - 1.0) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
    if inplace:
        return input.mul_(keep * a).add_(b)
    return input * (keep * a) + b


def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value and an
    affine map keeps mean 0 and variance 1, as torch.nn.functional.alpha_dropout."""
    return _alpha("alpha_dropout", input, p, training, inplace, False)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """alpha_dropout of whole channels ([N, C, ...]), as
    torch.nn.functional.feature_alpha_dropout."""
    return _alpha("feature_alpha_dropout", input, p, training, inplace, True)


def feature_dropout(input: Tensor, p: float, train: bool, inplace: bool = False) -> Tensor:
    """torch.feature_dropout's rule: one keep-or-drop draw per [N, C] pair of an input with at
    least 2 dims (a 2-D input is then dropped element by element), the kept ones scaled by
    1/(1-p); the identity when not training or p == 0."""
    _check_tensor("feature_dropout", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"feature_dropout(): probability p must be in [0, 1], got {p}")
    if input.ndim < 2:
        raise ShapeError(
            f"feature_dropout(): Feature dropout requires at least 2 dimensions in the input, "
            f"got shape {tuple(input.shape)}"
        )
    if not train or p == 0.0:
        return input
    like = input.detach()[(slice(None),) * 2 + (slice(0, 1),) * (input.ndim - 2)]
    mask = _dropout_mask(like, p)
    if inplace:
        return input.mul_(mask)
    return input * mask
