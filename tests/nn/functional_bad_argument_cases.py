"""The calls tests/nn/test_functional_bad_arguments.py makes for ``gpucore.nn.functional``: a valid
call per public function (generic, or from TEMPLATES where the signature cannot say) and the bad
variants tests/bad_argument_cases.py derives from it, with one change: None for a parameter
annotated ``Tensor | None`` (a bias, a weight) is a valid argument, so it is compared with PyTorch
instead of having to raise.
"""

from __future__ import annotations

import inspect

import numpy as np
from bad_argument_cases import Case, generic_call, get, slots, t, variants

import gpucore as gc


def unit(*shape, seed: int = 0) -> gc.Tensor:
    """float32 in (0.05, 0.95): probabilities for binary_cross_entropy."""
    rng = np.random.default_rng(seed + 11 * len(shape))
    return gc.tensor(rng.uniform(0.05, 0.95, size=shape).astype(np.float32))


def signs(*shape, seed: int = 0) -> gc.Tensor:
    """float32 of +-1: the targets of the embedding losses."""
    rng = np.random.default_rng(seed + 13 * len(shape))
    return gc.tensor(np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32))


def _pooled(n: int) -> tuple:
    """(values, indices, kernel 2) of a max pooling of a [1, 3, 4, ...] input over n dims."""
    pool = (gc.nn.functional.max_pool1d, gc.nn.functional.max_pool2d, gc.nn.functional.max_pool3d)
    vals, idx = pool[n - 1](t(1, 3, *(4,) * n), 2, return_indices=True)
    return vals, idx, 2


# Valid calls where the generic one (every required positional parameter a float32 tensor of
# shape (3, 4)) is wrong: an explicit dim, image-shaped inputs, indices, sizes. name ->
# () -> (args, kwargs). A function that needs one and has none fails test_valid_call.
TEMPLATES = {
    "softmax": lambda: ((t(3, 4), 1), {}),
    "log_softmax": lambda: ((t(3, 4), 1), {}),
    "softmin": lambda: ((t(3, 4), 1), {}),
    "prelu": lambda: ((t(3, 4), t(4, seed=1)), {}),
    "linear": lambda: ((t(3, 4), t(5, 4, seed=1), t(5, seed=2)), {}),
    "conv2d": lambda: ((t(2, 3, 5, 5), t(4, 3, 3, 3, seed=1), t(4, seed=2)), {}),
    # (N, C * kh * kw, L) = (1, 3 * 2 * 2, 4) folded back into 3 x 3 with a 2 x 2 kernel
    "fold": lambda: ((t(1, 12, 4), (3, 3), 2), {}),
    "unfold": lambda: ((t(1, 3, 3, 3), 2), {}),
    "conv1d": lambda: ((t(2, 3, 5), t(4, 3, 3, seed=1), t(4, seed=2)), {}),
    "conv_transpose1d": lambda: ((t(2, 3, 5), t(3, 4, 3, seed=1), t(4, seed=2)), {}),
    "conv_transpose2d": lambda: ((t(2, 3, 4, 4), t(3, 4, 3, 3, seed=1), t(4, seed=2)), {}),
    "bilinear": lambda: ((t(3, 4), t(3, 2, seed=1), t(5, 4, 2, seed=2), t(5, seed=3)), {}),
    "adaptive_avg_pool1d": lambda: ((t(1, 3, 4), 2), {}),
    "adaptive_max_pool1d": lambda: ((t(1, 3, 4), 2), {}),
    "adaptive_max_pool2d": lambda: ((t(1, 3, 4, 4), 2), {}),
    "avg_pool1d": lambda: ((t(1, 3, 4), 2), {}),
    "max_pool1d": lambda: ((t(1, 3, 4), 2), {}),
    "pixel_shuffle": lambda: ((t(1, 8, 2, 3), 2), {}),
    "pixel_unshuffle": lambda: ((t(1, 2, 4, 6), 2), {}),
    "rms_norm": lambda: ((t(3, 4), (4,), t(4, seed=1)), {}),
    "embedding_bag": lambda: ((t(2, 3, kind="index:5"), t(5, 4, seed=1)), {}),
    "adaptive_avg_pool2d": lambda: ((t(1, 3, 4, 4), 2), {}),
    "avg_pool2d": lambda: ((t(1, 3, 4, 4), 2), {}),
    "max_pool2d": lambda: ((t(1, 3, 4, 4), 2), {}),
    "conv3d": lambda: ((t(2, 3, 4, 4, 3), t(4, 3, 2, 2, 2, seed=1), t(4, seed=2)), {}),
    "conv_transpose3d": lambda: ((t(2, 3, 3, 2, 3), t(3, 4, 2, 2, 2, seed=1), t(4, seed=2)), {}),
    "adaptive_avg_pool3d": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
    "adaptive_max_pool3d": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
    "avg_pool3d": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
    "max_pool3d": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
    "batch_norm": lambda: (
        (t(3, 4), t(4, seed=1), unit(4, seed=2), t(4, seed=3), t(4, seed=4)),
        {},
    ),
    "group_norm": lambda: ((t(2, 4, 3), 2, t(4, seed=1), t(4, seed=2)), {}),
    "instance_norm": lambda: ((t(2, 3, 4),), {}),
    "local_response_norm": lambda: ((t(2, 3, 4), 2), {}),
    "gaussian_nll_loss": lambda: ((t(3, 4), t(3, 4, seed=1), t(3, 4, seed=2).abs()), {}),
    "layer_norm": lambda: ((t(3, 4), (4,), t(4, seed=1), t(4, seed=2)), {}),
    "embedding": lambda: ((t(3, kind="index:5"), t(5, 4, seed=1)), {}),
    "one_hot": lambda: ((t(3, kind="index:4"), 4), {}),
    "pad": lambda: ((t(3, 4), (1, 2)), {}),
    "interpolate": lambda: ((t(1, 2, 3), 5), {}),
    "upsample": lambda: ((t(1, 2, 3), 5), {}),
    "upsample_nearest": lambda: ((t(1, 2, 3), 5), {}),
    "upsample_bilinear": lambda: ((t(1, 2, 3, 3), 5), {}),
    "binary_cross_entropy": lambda: ((unit(3, 4), unit(3, 4, seed=1)), {}),
    "cosine_embedding_loss": lambda: ((t(3, 4), t(3, 4, seed=1), signs(3)), {}),
    "cross_entropy": lambda: ((t(3, 4), t(3, kind="index:4")), {}),
    "nll_loss": lambda: ((t(3, 4), t(3, kind="index:4")), {}),
    "grid_sample": lambda: ((t(1, 2, 4, 4), t(1, 3, 3, 2, seed=1)), {"align_corners": False}),
    "affine_grid": lambda: ((t(2, 2, 3), (2, 3, 4, 4)), {"align_corners": False}),
    "ctc_loss": lambda: ((t(6, 2, 4), t(2, 3, kind="index:4", seed=1), (6, 5), (3, 2)), {}),
    "multi_margin_loss": lambda: ((t(3, 4), t(3, kind="index:4")), {}),
    "multilabel_margin_loss": lambda: ((t(3, 4), t(3, 4, kind="index:4")), {}),
    "channel_shuffle": lambda: ((t(1, 4, 2, 2), 2), {}),
    "lp_pool1d": lambda: ((t(1, 3, 4), 2, 2), {}),
    "lp_pool2d": lambda: ((t(1, 3, 4, 4), 2, 2), {}),
    "lp_pool3d": lambda: ((t(1, 3, 4, 4, 4), 2, 2), {}),
    "max_pool1d_with_indices": lambda: ((t(1, 3, 4), 2), {}),
    "max_pool2d_with_indices": lambda: ((t(1, 3, 4, 4), 2), {}),
    "max_pool3d_with_indices": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
    "adaptive_max_pool1d_with_indices": lambda: ((t(1, 3, 4), 2), {}),
    "adaptive_max_pool2d_with_indices": lambda: ((t(1, 3, 4, 4), 2), {}),
    "adaptive_max_pool3d_with_indices": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
    # values and indices of a real max pooling (distinct indices: where two coincide, which
    # value PyTorch keeps is unspecified)
    "fractional_max_pool2d": lambda: ((t(1, 3, 5, 5), 2, 3), {}),
    "fractional_max_pool2d_with_indices": lambda: ((t(1, 3, 5, 5), 2, 3), {}),
    "fractional_max_pool3d": lambda: ((t(1, 3, 5, 5, 5), 2, 3), {}),
    "fractional_max_pool3d_with_indices": lambda: ((t(1, 3, 5, 5, 5), 2, 3), {}),
    "max_unpool1d": lambda: (_pooled(1), {}),
    "max_unpool2d": lambda: (_pooled(2), {}),
    "max_unpool3d": lambda: (_pooled(3), {}),
    "native_channel_shuffle": lambda: ((t(1, 4, 2, 2), 2), {}),
    "conv_tbc": lambda: ((t(5, 2, 3), t(2, 3, 4, seed=1), t(4, seed=2)), {}),
    "linear_cross_entropy": lambda: ((t(3, 4), t(5, 4, seed=1), t(3, kind="index:5")), {}),
    # self-attention: E 4, 2 heads, packed projections with biases
    "multi_head_attention_forward": lambda: (
        (
            t(3, 2, 4),
            t(3, 2, 4, seed=1),
            t(3, 2, 4, seed=2),
            4,
            2,
            t(12, 4, seed=3),
            t(12, seed=4),
            None,
            None,
            False,
            0.0,
            t(4, 4, seed=5),
            t(4, seed=6),
        ),
        {},
    ),  # fmt: skip
}


def valid_call(name, fn):
    return TEMPLATES[name]() if name in TEMPLATES else generic_call(fn)


def _optional_tensor(fn, slot) -> bool:
    """Whether the parameter at ``slot`` is annotated ``Tensor | None``."""
    params = list(inspect.signature(fn).parameters.values())
    if slot[0] == "k":
        p = inspect.signature(fn).parameters[slot[1]]
    elif len(slot) == 3 or slot[1] >= len(params):
        return False
    else:
        p = params[slot[1]]
    return isinstance(p.annotation, str) and "None" in p.annotation


def f_variants(fn, args, kwargs):
    """variants() of bad_argument_cases, with None for an optional Tensor not strict."""
    optional = {s for s in slots(args, kwargs) if _optional_tensor(fn, s)}
    for case in variants(fn, args, kwargs):
        if case.label in {f"type {s} NoneType" for s in optional}:
            case = case._replace(strict=False)
        yield case


__all__ = ["TEMPLATES", "Case", "f_variants", "get", "valid_call"]
