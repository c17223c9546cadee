"""The Lazy modules (torch.nn.LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*,
LazyInstanceNorm*): their input size (in_features, in_channels, num_features) is read from the
first input. Until then their weights are UninitializedParameters (an optimizer may already hold
them); the first call builds the ordinary module with the inferred size, moves its freshly
initialised values into those same parameter objects, and turns the module into that class
(``cls_to_become``), as PyTorch does."""

from __future__ import annotations

from ...autograd import no_grad
from ...creation import tensor
from ..module import Module
from ..parameter import UninitializedBuffer, UninitializedParameter
from .conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from .linear import Linear
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)

# The attributes every Module has (hooks, the parameter dicts, training): never copied over.
_MODULE_KEYS = frozenset(Module().__dict__)


class LazyModuleMixin:
    """Infers the module's input size on the first call (``initialize_parameters``), then
    becomes ``cls_to_become``."""

    cls_to_become: type | None = None

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer still waits for its shape."""
        return any(
            isinstance(v, (UninitializedParameter, UninitializedBuffer))
            for v in (*self._parameters.values(), *self._buffers.values())
        )

    def __call__(self, *args, **kwargs):
        if "_lazy_args" in self.__dict__:  # the first call (even with nothing to materialise)
            if not args:
                raise TypeError(f"{type(self).__name__}: the first call needs the input")
            with no_grad():
                self.initialize_parameters(*args)
            self.__class__ = self.cls_to_become
        return Module.__call__(self, *args, **kwargs)

    def _in_size(self, input) -> int:
        raise NotImplementedError

    def initialize_parameters(self, input, *rest) -> None:
        """Build cls_to_become with the size read from ``input`` and take over its values."""
        args, kwargs = self._lazy_args
        real = self.cls_to_become(self._in_size(input), *args, **kwargs)
        for name, p in real._parameters.items():
            mine = self._parameters.get(name)
            if isinstance(mine, UninitializedParameter):
                mine._become(p)
        for name, b in real._buffers.items():
            mine = self._buffers.get(name)
            if isinstance(mine, UninitializedBuffer):
                mine._become(b)
            elif b is not None and mine is None:
                self._buffers[name] = b
        for key, value in real.__dict__.items():
            if key not in _MODULE_KEYS:
                self.__dict__[key] = value
        del self.__dict__["_lazy_args"]


def _uninit(kwargs: dict) -> UninitializedParameter:
    return UninitializedParameter(device=kwargs.get("device"), dtype=kwargs.get("dtype"))


class _LazyBase(LazyModuleMixin):
    def _lazy_init(self, args: tuple, kwargs: dict) -> None:
        Module.__init__(self)
        self._lazy_args = (args, kwargs)


class LazyLinear(_LazyBase, Linear):
    """Linear whose in_features is the last dim of the first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self._lazy_init((out_features,), kw)
        self.in_features, self.out_features = 0, out_features
        self.weight = _uninit(kw)
        if bias:
            self.bias = _uninit(kw)
        else:
            self.register_parameter("bias", None)

    def _in_size(self, input) -> int:
        return input.shape[-1]


class _LazyConvNd(_LazyBase):
    _spatial = 2

    def __init__(self, out_channels: int, kernel_size, **kw):
        self._lazy_init((out_channels, kernel_size), kw)
        self.in_channels, self.out_channels = 0, out_channels
        self.weight = _uninit(kw)
        if kw.get("bias", True):
            self.bias = _uninit(kw)
        else:
            self.register_parameter("bias", None)

    def _in_size(self, input) -> int:
        n = self._spatial
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(
                f"{type(self).__name__}: expected a {n + 1}-D or {n + 2}-D input to infer "
                f"in_channels, got shape {tuple(input.shape)}"
            )
        return input.shape[1] if input.ndim == n + 2 else input.shape[0]


def _conv(name, base, n, transposed):
    if transposed:

        def init(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None):  # fmt: skip
            _LazyConvNd.__init__(
                self, out_channels, kernel_size, stride=stride, padding=padding,
                output_padding=output_padding, groups=groups, bias=bias, dilation=dilation,
                padding_mode=padding_mode, device=device, dtype=dtype,
            )  # fmt: skip
    else:

        def init(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None):  # fmt: skip
            _LazyConvNd.__init__(
                self, out_channels, kernel_size, stride=stride, padding=padding,
                dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
                device=device, dtype=dtype,
            )  # fmt: skip

    doc = f"{base.__name__} whose in_channels is read from the first input (dim 1, or 0 unbatched)."
    return type(
        name,
        (_LazyConvNd, base),
        {"__init__": init, "cls_to_become": base, "_spatial": n, "__doc__": doc},
    )


LazyConv1d = _conv("LazyConv1d", Conv1d, 1, False)
LazyConv2d = _conv("LazyConv2d", Conv2d, 2, False)
LazyConv3d = _conv("LazyConv3d", Conv3d, 3, False)
LazyConvTranspose1d = _conv("LazyConvTranspose1d", ConvTranspose1d, 1, True)
LazyConvTranspose2d = _conv("LazyConvTranspose2d", ConvTranspose2d, 2, True)
LazyConvTranspose3d = _conv("LazyConvTranspose3d", ConvTranspose3d, 3, True)


class _LazyNormBase(_LazyBase):
    _affine_default = True

    def __init__(self, eps: float = 1e-5, momentum=0.1, affine=None, track_running_stats=None,
                 device=None, dtype=None):  # fmt: skip
        affine = self._affine_default if affine is None else affine
        track = self._affine_default if track_running_stats is None else track_running_stats
        kw = {"eps": eps, "momentum": momentum, "affine": affine, "track_running_stats": track,
              "device": device, "dtype": dtype}  # fmt: skip
        self._lazy_init((), kw)
        self.num_features, self.eps, self.momentum = 0, eps, momentum
        self.affine, self.track_running_stats = affine, track
        for name in ("weight", "bias"):
            if affine:
                setattr(self, name, _uninit(kw))
            else:
                self.register_parameter(name, None)
        for name in ("running_mean", "running_var"):
            buf = UninitializedBuffer(device=device, dtype=dtype) if track else None
            self.register_buffer(name, buf)
        self.register_buffer("num_batches_tracked", tensor(0) if track else None)

    def _in_size(self, input) -> int:
        return input.shape[1]  # PyTorch's _LazyNormBase: dim 1, batched or not


def _norm(name, base, affine):
    doc = f"{base.__name__} whose num_features is read from the first input (its dim 1)."
    return type(
        name,
        (_LazyNormBase, base),
        {"cls_to_become": base, "_affine_default": affine, "__doc__": doc,
         "__init__": _LazyNormBase.__init__},
    )  # fmt: skip


LazyBatchNorm1d = _norm("LazyBatchNorm1d", BatchNorm1d, True)
LazyBatchNorm2d = _norm("LazyBatchNorm2d", BatchNorm2d, True)
LazyBatchNorm3d = _norm("LazyBatchNorm3d", BatchNorm3d, True)
LazyInstanceNorm1d = _norm("LazyInstanceNorm1d", InstanceNorm1d, False)
LazyInstanceNorm2d = _norm("LazyInstanceNorm2d", InstanceNorm2d, False)
LazyInstanceNorm3d = _norm("LazyInstanceNorm3d", InstanceNorm3d, False)
