"""MaxUnpool1d/2d/3d (F.max_unpool*), LPPool1d/2d/3d (F.lp_pool*) and FractionalMaxPool2d/3d."""

from __future__ import annotations

from .. import functional as F
from ..module import Module


class _MaxUnpoolNd(Module):
    _fn = staticmethod(F.max_unpool2d)

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of MaxPool1d: forward(input, indices, output_size=None)."""

    _fn = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of MaxPool2d: forward(input, indices, output_size=None)."""

    _fn = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of MaxPool3d: forward(input, indices, output_size=None)."""

    _fn = staticmethod(F.max_unpool3d)


class _LPPoolNd(Module):
    _fn = staticmethod(F.lp_pool2d)

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._fn(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """Power-average pooling over [N, C, L] (F.lp_pool1d)."""

    _fn = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling over [N, C, H, W] (F.lp_pool2d)."""

    _fn = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling over [N, C, D, H, W] (F.lp_pool3d)."""

    _fn = staticmethod(F.lp_pool3d)


class _FractionalMaxPoolNd(Module):
    _fn = staticmethod(F.fractional_max_pool2d)

    def __init__(
        self,
        kernel_size,
        output_size=None,
        output_ratio=None,
        return_indices: bool = False,
        _random_samples=None,
    ):
        super().__init__()
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError(f"{name}: only one of output_size and output_ratio may be specified")
        if output_ratio is not None:
            r = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,)
            if not all(0 < float(v) < 1 for v in r):
                raise ValueError(
                    f"{name}: output_ratio must be between 0 and 1 (got {output_ratio})"
                )
        self.kernel_size = kernel_size
        self.output_size = output_size
        self.output_ratio = output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        return type(self)._fn(
            input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
            _random_samples=self._random_samples,
        )  # fmt: skip


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling over [N, C, H, W] (F.fractional_max_pool2d): fresh random steps
    per call unless _random_samples is given."""

    _fn = staticmethod(F.fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling over [N, C, D, H, W] (F.fractional_max_pool3d)."""

    _fn = staticmethod(F.fractional_max_pool3d)
