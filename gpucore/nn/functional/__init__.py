"""Functional neural-network ops with PyTorch's names and semantics (``import
gpucore.nn.functional as F``), one module per topic as in gpucore/nn/modules/: activation,
linear, attention, conv (and conv3d), pooling (pooling3d, pooling_extra: max_unpool, lp_pool,
the *_with_indices names; pooling_fractional), pixelshuffle (and channel_shuffle),
normalization, dropout, sparse, padding, upsampling, grid (affine_grid, grid_sample), distance,
loss (loss_gaussian, loss_ctc, loss_margin: the multi-class and soft margin losses and the
triplet loss with a custom distance); _utils holds the argument checks they share.

Everything here is a composition of registry ops (matmul, im2col, reductions, where...), so it runs
on whichever backend the dispatch policy picks and autograd differentiates it with no backward of
its own. Geometry constants (pooling masks and divisors, padding and interpolation indices) are
built once per shape and cached. The exceptions are fused ops with their own backward in
gpucore/ops: max_pool2d (the composition of im2col, max, a one-hot mask, where and sum dominated
CNN training steps), cross_entropy's rows and conv2d where it runs in the C extension, and
grid_sample (host tensors) and ctc_loss (the alpha / beta recursions), whose kernels are C.
"""

# The private helpers below are part of F's surface: nn.modules.loss calls F._check_reduction and
# the tests use F._pair and F._pool_args to build their references.
from ...amp import autocast_mode
from ...ops.api import checked
from ...ops.registry import AUTOCAST
from ._utils import _check_reduction, _pair
from .activation import (
    celu,
    celu_,
    elu,
    elu_,
    gelu,
    glu,
    gumbel_softmax,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    relu_,
    rrelu,
    rrelu_,
    selu,
    selu_,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
    threshold_,
)
from .attention import multi_head_attention_forward, scaled_dot_product_attention
from .conv import conv1d, conv2d, conv_tbc, conv_transpose1d, conv_transpose2d, fold, unfold
from .conv3d import conv3d, conv_transpose3d
from .distance import cosine_similarity, pairwise_distance, pdist
from .dropout import (
    alpha_dropout,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
)
from .grid import affine_grid, grid_sample
from .linear import bilinear, linear, linear_cross_entropy
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    triplet_margin_loss,
)
from .loss_ctc import ctc_loss
from .loss_gaussian import gaussian_nll_loss
from .loss_margin import (
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_with_distance_loss,
)
from .normalization import (
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    normalize,
    rms_norm,
)
from .padding import pad
from .pixelshuffle import (
    channel_shuffle,
    native_channel_shuffle,
    pixel_shuffle,
    pixel_unshuffle,
)
from .pooling import (
    _pool_args,
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from .pooling3d import adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, max_pool3d
from .pooling_extra import (
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from .pooling_fractional import (
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from .sparse import embedding, embedding_bag, one_hot
from .upsampling import interpolate, upsample, upsample_bilinear, upsample_nearest

from . import toplevel  # noqa: E402, F401  isort: skip  (gpucore.dropout, gpucore.conv2d, ...)

__all__ = [
    # activation
    "celu",
    "celu_",
    "elu",
    "elu_",
    "gaussian_nll_loss",
    "gelu",
    "gumbel_softmax",
    "glu",
    "hardsigmoid",
    "hardshrink",
    "hardswish",
    "hardtanh",
    "hardtanh_",
    "leaky_relu",
    "leaky_relu_",
    "log_softmax",
    "logsigmoid",
    "mish",
    "prelu",
    "relu",
    "relu_",
    "relu6",
    "rrelu",
    "rrelu_",
    "selu",
    "selu_",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "threshold_",
    # linear, attention, conv, pooling
    "linear",
    "linear_cross_entropy",
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
    "bilinear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "fold",
    "unfold",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "pixel_shuffle",
    "pixel_unshuffle",
    "affine_grid",
    "grid_sample",
    "channel_shuffle",
    "native_channel_shuffle",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    # normalization, dropout, sparse
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "local_response_norm",
    "normalize",
    "rms_norm",
    "alpha_dropout",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "feature_alpha_dropout",
    "embedding",
    "embedding_bag",
    "one_hot",
    # padding, upsampling, distance
    "pad",
    "interpolate",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
    "cosine_similarity",
    "pairwise_distance",
    "pdist",
    # loss
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cosine_embedding_loss",
    "cross_entropy",
    "ctc_loss",
    "hinge_embedding_loss",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "margin_ranking_loss",
    "mse_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "triplet_margin_with_distance_loss",
]


def _public_forms() -> None:
    """F.<name> is the checked public form of each function (gpucore/ops/api.py): a non-Tensor
    where a Tensor belongs raises TypeError naming the function and the argument, and an error
    from inside names the function; the modules calling each other use the plain functions."""
    namespace = globals()
    for name in __all__:
        fn = namespace[name]
        if autocast_mode.listed(name):  # autocast's casts (losses: float32) inside a region
            inside = autocast_mode.listed_function(name, fn)
            namespace[name] = checked(name, fn, inside, AUTOCAST)
        else:
            namespace[name] = checked(name, fn)


_public_forms()
