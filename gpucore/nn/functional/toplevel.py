"""The functional forms PyTorch also exposes at the top level (``torch.dropout``,
``torch.conv2d``, ``torch.layer_norm``, ...), with the top-level signatures, which differ from
F's in places: ``dropout(input, p, train)``, ``batch_norm``'s and ``instance_norm``'s argument
order, ``embedding(weight, indices)``, ``max_pool2d``'s ``stride=()``. Each calls its
nn.functional implementation."""

from __future__ import annotations

from ...ops.api import public
from ...tensor import Tensor
from . import activation as A
from . import conv as C
from . import distance as Dist
from . import normalization as N
from . import pixelshuffle as P
from . import pooling as Pool
from . import pooling3d as Pool3
from . import sparse as S
from .conv3d import conv3d as _conv3d
from .conv3d import conv_transpose3d as _conv_transpose3d
from .dropout import dropout as _dropout
from .dropout import feature_dropout as _feature_dropout
from .linear import bilinear as _bilinear


@public("dropout", method=False)
def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.dropout: F.dropout(input, p, training=train)."""
    return _dropout(input, p, train)


@public("layer_norm", method=False)
def layer_norm(
    input: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
    cudnn_enable: bool = True,
) -> Tensor:
    """torch.layer_norm: F.layer_norm (cudnn_enable is accepted and ignored)."""
    return N.layer_norm(input, normalized_shape, weight, bias, eps)


@public("batch_norm", method=False)
def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """torch.batch_norm (weight and bias before the running statistics): F.batch_norm."""
    return N.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@public("group_norm", method=False)
def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
    cudnn_enabled: bool = True,
) -> Tensor:
    """torch.group_norm: F.group_norm."""
    return N.group_norm(input, num_groups, weight, bias, eps)


@public("instance_norm", method=False)
def instance_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """torch.instance_norm (weight and bias first): F.instance_norm."""
    return N.instance_norm(
        input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
    )


@public("embedding", method=False)
def embedding(
    weight: Tensor,
    indices: Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """torch.embedding (weight first; padding_idx -1 means none): F.embedding."""
    pad = None if padding_idx == -1 else padding_idx
    return S.embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


@public("conv1d", method=False)
def conv1d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
    groups: int = 1,
) -> Tensor:  # fmt: skip
    """torch.conv1d: F.conv1d."""
    return C.conv1d(input, weight, bias, stride, padding, dilation, groups)


@public("conv2d", method=False)
def conv2d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
    groups: int = 1,
) -> Tensor:  # fmt: skip
    """torch.conv2d: F.conv2d."""
    return C.conv2d(input, weight, bias, stride, padding, dilation, groups)


@public("conv3d", method=False)
def conv3d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
    groups: int = 1,
) -> Tensor:  # fmt: skip
    """torch.conv3d: F.conv3d."""
    return _conv3d(input, weight, bias, stride, padding, dilation, groups)


@public("conv_transpose2d", method=False)
def conv_transpose2d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
    output_padding=0, groups: int = 1, dilation=1,
) -> Tensor:  # fmt: skip
    """torch.conv_transpose2d: F.conv_transpose2d."""
    return C.conv_transpose2d(
        input, weight, bias, stride, padding, output_padding, groups, dilation
    )


@public("conv_transpose3d", method=False)
def conv_transpose3d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
    output_padding=0, groups: int = 1, dilation=1,
) -> Tensor:  # fmt: skip
    """torch.conv_transpose3d: F.conv_transpose3d."""
    return _conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


@public("max_pool2d", method=False)
def max_pool2d(
    input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False
) -> Tensor:
    """torch.max_pool2d (stride () means kernel_size): F.max_pool2d."""
    return Pool.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@public("max_pool3d", method=False)
def max_pool3d(
    input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False
) -> Tensor:
    """torch.max_pool3d (stride () means kernel_size): F.max_pool3d."""
    return Pool3.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@public("avg_pool1d", method=False)
def avg_pool1d(
    input: Tensor, kernel_size, stride=(), padding=0, ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:  # fmt: skip
    """torch.avg_pool1d (stride () means kernel_size): F.avg_pool1d."""
    return Pool.avg_pool1d(
        input, kernel_size, stride or None, padding, ceil_mode, count_include_pad
    )


@public("adaptive_avg_pool1d", method=False)
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """torch.adaptive_avg_pool1d: F.adaptive_avg_pool1d."""
    return Pool.adaptive_avg_pool1d(input, output_size)


@public("pixel_shuffle", method=False)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """torch.pixel_shuffle: F.pixel_shuffle."""
    return P.pixel_shuffle(input, upscale_factor)


@public("channel_shuffle", method=False)
def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """torch.channel_shuffle: F.channel_shuffle."""
    return P.channel_shuffle(input, groups)


@public("cosine_similarity", method=False)
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-08) -> Tensor:
    """torch.cosine_similarity: F.cosine_similarity."""
    return Dist.cosine_similarity(x1, x2, dim, eps)


@public("pairwise_distance", method=False)
def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-06, keepdim: bool = False
) -> Tensor:
    """torch.pairwise_distance: F.pairwise_distance."""
    return Dist.pairwise_distance(x1, x2, p, eps, keepdim)


@public("selu", method=False)
def selu(input: Tensor) -> Tensor:
    """torch.selu: F.selu."""
    return A.selu(input)


@public("celu", method=False)
def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """torch.celu: F.celu."""
    return A.celu(input, alpha)


@public("threshold", method=False)
def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """torch.threshold: F.threshold."""
    return A.threshold(input, threshold, value)


@public("hardshrink")
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """torch.hardshrink / Tensor.hardshrink: F.hardshrink."""
    return A.hardshrink(input, lambd)


@public("rrelu", method=False)
def rrelu(
    input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
    generator=None,
) -> Tensor:  # fmt: skip
    """torch.rrelu: F.rrelu (training draws the slopes from gpucore's default stream)."""
    return A.rrelu(input, lower, upper, training)


@public("rms_norm", method=False)
def rms_norm(
    input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """torch.rms_norm: F.rms_norm."""
    return N.rms_norm(input, normalized_shape, weight, eps)


@public("pixel_unshuffle", method=False)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """torch.pixel_unshuffle: F.pixel_unshuffle."""
    return P.pixel_unshuffle(input, downscale_factor)


@public("native_channel_shuffle", method=False)
def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """torch.native_channel_shuffle: F.native_channel_shuffle (channel_shuffle)."""
    return P.channel_shuffle(input, groups)


@public("conv_tbc", method=False)
def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """torch.conv_tbc: F.conv_tbc."""
    return C.conv_tbc(input, weight, bias, pad)


@public("feature_dropout", method=False)
def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_dropout: one keep-or-drop draw per (sample, channel) of an input with at
    least 2 dims, the kept values scaled by 1/(1-p)."""
    return _feature_dropout(input, p, train)


@public("feature_dropout_", method=False)
def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_dropout_: feature_dropout written into input, which is returned."""
    return _feature_dropout(input, p, train, inplace=True)


@public("embedding_renorm_", method=False)
def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """torch.embedding_renorm_: the rows of input named by indices rescaled in place to at most
    max_norm (the renormalization F.embedding's max_norm runs)."""
    return S.embedding_renorm_(input, indices, max_norm, norm_type)


@public("bilinear", method=False)
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """torch.bilinear: F.bilinear."""
    return _bilinear(input1, input2, weight, bias)


@public("prelu")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """torch.prelu / Tensor.prelu: F.prelu."""
    return A.prelu(input, weight)


@public("convolution", method=False)
def convolution(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride,
    padding,
    dilation,
    transposed: bool,
    output_padding,
    groups: int,
) -> Tensor:
    """torch.convolution: F.conv1d / conv2d / conv3d, or their transposed forms, as picked by
    weight's number of dims (3, 4 or 5) and ``transposed``."""
    forms = {
        (3, False): C.conv1d, (4, False): C.conv2d, (5, False): _conv3d,
        (3, True): C.conv_transpose1d, (4, True): C.conv_transpose2d, (5, True): _conv_transpose3d,
    }  # fmt: skip
    form = forms.get((weight.ndim, bool(transposed)))
    if form is None:
        raise ValueError(
            f"convolution(): weight must have 3, 4 or 5 dims (1-D, 2-D or 3-D convolution), got "
            f"shape {tuple(weight.shape)}"
        )
    if transposed:
        return form(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return form(input, weight, bias, stride, padding, dilation, groups)
