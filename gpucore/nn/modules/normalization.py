"""BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm and InstanceNorm2d."""

from __future__ import annotations

from ... import _caller_warnings as caller_warnings
from ... import dtypes as D
from ...creation import ones, tensor, zeros
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..functional.normalization import cross_map_lrn2d as _cross_map_lrn2d
from ..module import Module
from ..parameter import Parameter
from .linear import _new


def _buf(t, device):
    return t if device is None else t.to(device)


def _affine_parameters(m: Module, shape: tuple, affine: bool, bias: bool, device, dtype) -> None:
    """weight and bias Parameters of ``shape`` on LayerNorm and GroupNorm (None when absent)."""
    m.register_parameter("weight", Parameter(_new(shape, device, dtype)) if affine else None)
    m.register_parameter("bias", Parameter(_new(shape, device, dtype)) if affine and bias else None)


def _reset_affine(m: Module) -> None:
    """PyTorch's start: weight ones, bias zeros."""
    if m.weight is not None:
        init.ones_(m.weight)
    if m.bias is not None:
        init.zeros_(m.bias)


class _BatchNorm(Module):
    """Normalizes dim 1 with batch statistics in training and running statistics in eval.

    momentum: the weight of the new batch in the running averages; None gives a cumulative
    moving average (factor 1 / num_batches_tracked). The running variance uses the unbiased
    batch variance, the normalization the biased one, as PyTorch. affine adds a weight (ones)
    and, unless bias=False, a bias (zeros).
    """

    _dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(_new((num_features,), device, dtype))
            if bias:
                self.bias = Parameter(_new((num_features,), device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            dt = dtype if dtype is not None else D.default_float()
            self.register_buffer("running_mean", _buf(zeros(num_features, dtype=dt), device))
            self.register_buffer("running_var", _buf(ones(num_features, dtype=dt), device))
            self.register_buffer("num_batches_tracked", _buf(tensor(0), device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ShapeError(
                f"{type(self).__name__}: expected {want} input, got {input.ndim}D input of shape "
                f"{tuple(input.shape)}"
            )
        if input.shape[1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}({self.num_features}): input of shape "
                f"{tuple(input.shape)} has {input.shape[1]} channels in dim 1"
            )

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of [N, C] or [N, C, L] inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of [N, C, H, W] inputs."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of [N, C, D, H, W] inputs."""

    _dims = (5,)


class LayerNorm(Module):
    """Normalizes the trailing dims given by normalized_shape; elementwise_affine adds a weight
    (ones) and a bias (zeros, unless bias=False) of that shape."""

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """Root-mean-square normalization of the trailing dims given by normalized_shape
    (torch.nn.RMSNorm); elementwise_affine adds a weight (ones) of that shape. eps None is the
    input dtype's machine epsilon."""

    def __init__(
        self,
        normalized_shape,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        shape = self.normalized_shape
        weight = Parameter(_new(shape, device, dtype)) if elementwise_affine else None
        self.register_parameter("weight", weight)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class GroupNorm(Module):
    """Normalizes each group of num_channels / num_groups channels of [N, C, *]; affine adds a
    per-channel weight (ones) and bias (zeros, unless bias=False)."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class InstanceNorm2d(_BatchNorm):
    """Normalizes each channel of each sample of [N, C, H, W] (or unbatched [C, H, W]) over H, W.

    affine (default False) adds a per-channel weight and bias; track_running_stats (default
    False) keeps running averages of the statistics, used in eval mode.
    """

    _dims = (3, 4)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def forward(self, input):
        name = type(self).__name__
        if input.ndim not in self._dims:
            raise ShapeError(
                f"{name}: expected {self._dims[0]}D or {self._dims[1]}D input, got {input.ndim}D "
                f"input of shape {tuple(input.shape)}"
            )
        unbatched = input.ndim == self._dims[0]
        cdim = 0 if unbatched else 1
        if input.shape[cdim] != self.num_features:
            msg = (
                f"{name}({self.num_features}): expected input's size at dim={cdim} "
                f"to match num_features ({self.num_features}), but got "
                f"{input.shape[cdim]} (input shape {tuple(input.shape)})"
            )
            if self.affine:
                raise ShapeError(msg)
            caller_warnings.warn(
                msg + "; normalizing anyway, as the layer has no per-channel state",
                UserWarning,
            )
        x = input.unsqueeze(0) if unbatched else input
        use_input_stats = self.training or not self.track_running_stats
        out = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            use_input_stats,
            0.0 if self.momentum is None else self.momentum,
            self.eps,
        )
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(InstanceNorm2d):
    """Normalizes each channel of each sample of [N, C, L] (or unbatched [C, L]) over L (see
    InstanceNorm2d for affine and track_running_stats)."""

    _dims = (2, 3)


class InstanceNorm3d(InstanceNorm2d):
    """Normalizes each channel of each sample of [N, C, D, H, W] (or unbatched [C, D, H, W])
    over D, H, W (see InstanceNorm2d for affine and track_running_stats)."""

    _dims = (4, 5)


class LocalResponseNorm(Module):
    """Local response normalization across channels (F.local_response_norm)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """PyTorch's legacy cross-channel local response normalization of 4-D inputs
    (torch.nn.CrossMapLRN2d): ``x / (k + alpha / size * s) ** beta`` with s the sum of squares
    over PyTorch's running channel window (which differs from LocalResponseNorm's at the
    edges; see F.normalization.cross_map_lrn2d)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return _cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
