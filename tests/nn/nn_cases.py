"""The table of gpucore.nn modules shared by the topic files of tests/nn (``from nn_cases import
...``; tests/nn/conftest.py puts this folder on sys.path): ``Case``, one module with its
arguments, inputs and numpy float64 reference, in ACTIVATION_CASES ... LOSS_CASES, all of them in
CASES. The inputs and references are in nn_refs.py; the checks each topic file runs on its part of
the table (``check_forward``, ``check_input_gradients``, ``check_parameter_gradients``,
``check_error``, ``check_match_torch``) in nn_checks.py.

Each module is specified by:
- its forward against a numpy float64 formula (here or in nn_refs.py, not gpucore's
  functional), with non-default constructor arguments, in float32 and float64 (check_forward);
- its plumbing: parameters, buffers and state_dict keys as PyTorch names them, gradients reaching
  the input (gradcheck) and the parameters (finite differences), in-place variants;
- PyTorch's exact repr, hard-coded (test_torch_parity.py);
- its errors on bad input and bad arguments (each topic file's MODULE_ERRORS);
- where torch is installed, PyTorch's module on the same input and parameters
  (check_match_torch)."""

import numpy as np
from helpers import np_softmax
from nn_refs import (
    COUNTS,
    GN_B,
    GN_W,
    IMG,
    IN_B,
    IN_W,
    INST,
    LOGP,
    LOGT,
    PRELU_W,
    PROB,
    REDUCTIONS,
    SELU_ALPHA,
    SELU_SCALE,
    T3,
    T4,
    T5,
    W5,
    Y01,
    Y4,
    YPM,
    A,
    B,
    C,
    P,
    U,
    X,
    exact,
    np_cosine,
    np_cosine_embedding,
    np_group_norm,
    np_instance_norm,
    np_kl,
    np_multilabel_soft_margin,
    np_pnorm,
    np_poisson,
    np_prelu,
    np_resize,
    np_triplet,
    reduce,
    sigmoid,
)

import gpucore
import gpucore.nn as nn


class Case:
    """One module under test: ``getattr(namespace, name)(*args, **kwargs)`` on gpucore.nn (and
    torch.nn), numpy arrays among the kwargs becoming tensors; ``params`` (name: array) are
    loaded into it; fed ``inputs`` (float64 arrays exact in float32) it returns ``ref(*inputs)``.
    ``fixed``: the indices of the inputs not differentiated (targets); ``torch_grad=False``:
    PyTorch's gradient is not the derivative of its forward (compare the forward only)."""

    def __init__(self, name, *args, inputs, ref, params=None, fixed=(), torch_grad=True, **kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs
        self.inputs, self.ref, self.params, self.fixed = inputs, ref, params or {}, fixed
        self.torch_grad = torch_grad

    def build(self, ns, tensor):
        kwargs = {k: tensor(v) if isinstance(v, np.ndarray) else v for k, v in self.kwargs.items()}
        m = getattr(ns, self.name)(*self.args, **kwargs)
        result = m.load_state_dict({k: tensor(v) for k, v in self.params.items()}, strict=False)
        assert not result.unexpected_keys
        return m

    def __repr__(self):
        kw = [
            f"{k}=array" if isinstance(v, np.ndarray) else f"{k}={v!r}"
            for k, v in self.kwargs.items()
        ]
        return f"{self.name}({', '.join([repr(a) for a in self.args] + kw)})"


def ours(case, dtype=gpucore.float64):
    return case.build(nn, gpucore.tensor).to(dtype)


# ============================================================================= the cases
def _pad(x, widths, **kw):
    """np.pad of the trailing dims; ``widths`` in numpy's order (first padded dim first)."""
    return np.pad(x, [(0, 0)] * (x.ndim - len(widths)) + list(widths), **kw)


def _reflect(x, widths):
    return _pad(x, widths, mode="reflect")


def _edge(x, widths):
    return _pad(x, widths, mode="edge")


ACTIVATION_CASES = [
    Case("SiLU", inputs=[X], ref=lambda x: x * sigmoid(x)),
    Case("Mish", inputs=[X], ref=lambda x: x * np.tanh(np.logaddexp(0, x))),
    Case("ELU", alpha=0.5, inputs=[X], ref=lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    Case(
        "SELU", inputs=[X], ref=lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))
    ),
    Case(
        "CELU",
        alpha=1.5,
        inputs=[X],
        ref=lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5)),
    ),
    Case(
        "Softplus",
        beta=2,
        threshold=5,
        inputs=[X],
        ref=lambda x: np.where(2 * x > 5, x, np.logaddexp(0, 2 * x) / 2),
    ),
    Case("Hardtanh", -2, 3, inputs=[X], ref=lambda x: np.clip(x, -2, 3)),
    Case("ReLU6", inputs=[X], ref=lambda x: np.clip(x, 0, 6)),
    Case("Hardsigmoid", inputs=[X], ref=lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    Case("Hardswish", inputs=[X], ref=lambda x: x * np.clip(x + 3, 0, 6) / 6),
    Case("LogSigmoid", inputs=[X], ref=lambda x: -np.logaddexp(0, -x)),
    Case("Softsign", inputs=[X], ref=lambda x: x / (1 + np.abs(x))),
    Case("Tanhshrink", inputs=[X], ref=lambda x: x - np.tanh(x)),
    Case("Softmin", dim=1, inputs=[X], ref=lambda x: np_softmax(-x, 1)),
    Case("GLU", dim=1, inputs=[X], ref=lambda x: x[:, :2] * sigmoid(x[:, 2:])),
    Case("GLU", inputs=[X[..., :2]], ref=lambda x: x[..., :1] * sigmoid(x[..., 1:])),
    Case(
        "PReLU",
        num_parameters=3,
        init=0.1,
        inputs=[P],  # the slope is a float32 parameter
        ref=lambda x: np_prelu(x, exact([0.1] * 3)),
    ),
    Case("PReLU", 3, params={"weight": PRELU_W}, inputs=[P], ref=lambda x: np_prelu(x, PRELU_W)),
    Case("PReLU", inputs=[P], ref=lambda x: np_prelu(x, [0.25])),  # one slope for all channels
]


NORM_CASES = [
    Case(
        "GroupNorm",
        2,
        6,
        params={"weight": GN_W, "bias": GN_B},
        inputs=[IMG],
        ref=lambda x: np_group_norm(x, 2, GN_W, GN_B),
    ),
    Case(
        "GroupNorm",
        3,
        6,
        eps=1e-3,
        affine=False,
        inputs=[IMG],
        ref=lambda x: np_group_norm(x, 3, eps=1e-3),
    ),
    Case(
        "GroupNorm",
        6,
        6,
        params={"weight": GN_W, "bias": GN_B},
        inputs=[IMG[:, :, 0]],
        ref=lambda x: np_group_norm(x, 6, GN_W, GN_B),
    ),  # [N, C, L]
    Case(
        "GroupNorm", 2, 6, affine=False, inputs=[IMG[:, :, 0, 0]], ref=lambda x: np_group_norm(x, 2)
    ),  # [N, C]: groups of 3 features
    Case(
        "InstanceNorm2d",
        3,
        affine=True,
        track_running_stats=True,
        params={"weight": IN_W, "bias": IN_B},
        inputs=[INST],
        ref=lambda x: np_instance_norm(x, IN_W, IN_B),
    ),
    Case("InstanceNorm2d", 3, eps=1e-3, inputs=[INST], ref=lambda x: np_instance_norm(x, eps=1e-3)),
    Case(
        "InstanceNorm2d",
        3,
        affine=True,
        params={"weight": IN_W, "bias": IN_B},
        inputs=[INST[0]],
        ref=lambda x: np_instance_norm(x[None], IN_W, IN_B)[0],
    ),  # [C, H, W]
]


PAD_CASES = [
    Case(
        "ConstantPad1d",
        (1, 2),
        3.5,
        inputs=[T3],
        ref=lambda x: _pad(x, [(1, 2)], constant_values=3.5),
    ),
    Case(
        "ConstantPad2d",
        (1, 0, 2, 3),
        -1.0,
        inputs=[T4],
        ref=lambda x: _pad(x, [(2, 3), (1, 0)], constant_values=-1.0),
    ),
    Case(
        "ConstantPad2d",
        1,
        2.0,
        inputs=[T3],  # unbatched [C, H, W]
        ref=lambda x: _pad(x, [(1, 1), (1, 1)], constant_values=2.0),
    ),
    Case(
        "ConstantPad3d",
        (1, 0, 0, 2, 1, 1),
        0.5,
        inputs=[T5],
        ref=lambda x: _pad(x, [(1, 1), (0, 2), (1, 0)], constant_values=0.5),
    ),
    Case("ZeroPad1d", (2, 1), inputs=[T3], ref=lambda x: _pad(x, [(2, 1)])),
    Case("ZeroPad2d", (1, 0, 2, 3), inputs=[T4], ref=lambda x: _pad(x, [(2, 3), (1, 0)])),
    Case(
        "ZeroPad2d",
        (-1, 2, 1, -1),
        inputs=[T4],  # negative padding crops
        ref=lambda x: _pad(x[..., :-1, 1:], [(1, 0), (0, 2)]),
    ),
    Case(
        "ZeroPad3d",
        (1, 0, 0, 2, 1, 1),
        inputs=[T5],
        ref=lambda x: _pad(x, [(1, 1), (0, 2), (1, 0)]),
    ),
    Case("ReflectionPad1d", (2, 1), inputs=[T3], ref=lambda x: _reflect(x, [(2, 1)])),
    Case("ReflectionPad2d", (1, 0, 2, 1), inputs=[T4], ref=lambda x: _reflect(x, [(2, 1), (1, 0)])),
    Case("ReflectionPad2d", 1, inputs=[T3], ref=lambda x: _reflect(x, [(1, 1), (1, 1)])),
    Case(
        "ReflectionPad3d",
        (1, 0, 0, 2, 1, 1),
        inputs=[T5],
        ref=lambda x: _reflect(x, [(1, 1), (0, 2), (1, 0)]),
    ),
    Case("ReplicationPad1d", (3, 1), inputs=[T3], ref=lambda x: _edge(x, [(3, 1)])),
    Case("ReplicationPad1d", 2, inputs=[T3[0]], ref=lambda x: _edge(x, [(2, 2)])),  # [C, W]
    Case("ReplicationPad2d", (2, 0, 1, 3), inputs=[T4], ref=lambda x: _edge(x, [(1, 3), (2, 0)])),
    Case(
        "ReplicationPad3d",
        (1, 0, 0, 2, 1, 1),
        inputs=[T5],
        ref=lambda x: _edge(x, [(1, 1), (0, 2), (1, 0)]),
    ),
]


UPSAMPLE_CASES = [
    Case("Upsample", size=(5, 7), inputs=[U], ref=lambda x: np_resize(x, (5, 7), "nearest")),
    Case("Upsample", size=2, inputs=[U], ref=lambda x: np_resize(x, (2, 2), "nearest")),
    Case("Upsample", scale_factor=2, inputs=[U], ref=lambda x: np_resize(x, (6, 8), "nearest")),
    Case(
        "Upsample",
        scale_factor=(2, 1.5),
        mode="bilinear",
        inputs=[U],
        ref=lambda x: np_resize(x, (6, 6), "linear", scale_factor=(2, 1.5)),
    ),
    Case(
        "Upsample",
        size=(5, 7),
        mode="bilinear",
        align_corners=True,
        inputs=[U],
        ref=lambda x: np_resize(x, (5, 7), "linear", align_corners=True),
    ),
    # the output size is floor(in * 1.5); recompute_scale_factor samples at in / out instead
    Case(
        "Upsample",
        scale_factor=1.5,
        mode="bilinear",
        recompute_scale_factor=True,
        inputs=[U],
        ref=lambda x: np_resize(x, (4, 6), "linear"),
    ),
    Case(
        "Upsample",
        scale_factor=2.5,
        mode="linear",
        inputs=[T3],
        ref=lambda x: np_resize(x[:, :, None], (1, 10), "linear", scale_factor=(1, 2.5))[:, :, 0],
    ),
    Case(
        "UpsamplingNearest2d",
        scale_factor=2,
        inputs=[U],
        ref=lambda x: x.repeat(2, axis=2).repeat(2, axis=3),
    ),
    Case(
        "UpsamplingNearest2d",
        size=(2, 5),
        inputs=[U],
        ref=lambda x: np_resize(x, (2, 5), "nearest"),
    ),
    Case(
        "UpsamplingBilinear2d",
        size=(5, 7),
        inputs=[U],
        ref=lambda x: np_resize(x, (5, 7), "linear", align_corners=True),
    ),
    Case(
        "UpsamplingBilinear2d",
        scale_factor=2,
        inputs=[U],
        ref=lambda x: np_resize(x, (6, 8), "linear", align_corners=True),
    ),
]


DISTANCE_CASES = [
    Case("CosineSimilarity", inputs=[A, B], ref=lambda a, b: np_cosine(a, b, 1, 1e-8)),
    Case(
        "CosineSimilarity",
        dim=0,
        eps=1e-6,
        inputs=[A, B],
        ref=lambda a, b: np_cosine(a, b, 0, 1e-6),
    ),
    # norms of a below eps: clamped. PyTorch clamps the norm in place under no_grad, so its
    # gradient ignores the clamp; ours is the derivative of the forward (gradcheck).
    Case(
        "CosineSimilarity",
        dim=1,
        eps=0.5,
        inputs=[A * 0.03125, B],
        torch_grad=False,
        ref=lambda a, b: np_cosine(a, b, 1, 0.5),
    ),
    Case("PairwiseDistance", inputs=[A, B], ref=lambda a, b: np_pnorm(a - b + 1e-6, 2)),
    Case(
        "PairwiseDistance",
        p=1.0,
        keepdim=True,
        inputs=[A, B],
        ref=lambda a, b: np_pnorm(a - b + 1e-6, 1, keepdims=True),
    ),
    Case(
        "PairwiseDistance",
        p=3.0,
        eps=1e-3,
        inputs=[A, B[0]],  # broadcast
        ref=lambda a, b: np_pnorm(a - b + 1e-3, 3),
    ),
]


def _loss_cases():
    cases = []
    for r in ["batchmean", "sum", "none"]:  # 'mean' warns: test_kl_div_loss_mean_warns

        def batch(loss, r=r):
            return loss.sum() / loss.shape[0] if r == "batchmean" else reduce(loss, r)

        cases += [
            Case(
                "KLDivLoss",
                reduction=r,
                inputs=[LOGP, PROB],
                fixed=(1,),
                ref=lambda x, t, batch=batch: batch(np_kl(x, t)),
            ),
            Case(
                "KLDivLoss",
                reduction=r,
                log_target=True,
                inputs=[LOGP, LOGT],
                fixed=(1,),
                ref=lambda x, t, batch=batch: batch(np_kl(x, t, log_target=True)),
            ),
        ]
    for r in REDUCTIONS:
        cases += [
            Case(
                "PoissonNLLLoss",
                reduction=r,
                inputs=[A, COUNTS],
                fixed=(1,),
                ref=lambda x, t, r=r: reduce(np_poisson(x, t), r),
            ),
            Case(
                "PoissonNLLLoss",
                log_input=False,
                full=True,
                eps=1e-4,
                reduction=r,
                inputs=[exact(np.abs(A) + 0.1), COUNTS],
                fixed=(1,),
                ref=lambda x, t, r=r: reduce(np_poisson(x, t, False, True, 1e-4), r),
            ),
            Case(
                "CosineEmbeddingLoss",
                margin=0.3,
                reduction=r,
                inputs=[A, B, Y4],
                fixed=(2,),
                ref=lambda a, b, y, r=r: reduce(np_cosine_embedding(a, b, y, 0.3), r),
            ),
            Case(
                "MarginRankingLoss",
                margin=0.5,
                reduction=r,
                inputs=[A[:, 0], B[:, 0], Y4],
                fixed=(2,),
                ref=lambda a, b, y, r=r: reduce(np.maximum(-y * (a - b) + 0.5, 0.0), r),
            ),
            Case(
                "HingeEmbeddingLoss",
                margin=1.5,
                reduction=r,
                inputs=[A, YPM],
                fixed=(1,),
                ref=lambda x, y, r=r: reduce(np.where(y == 1, x, np.maximum(1.5 - x, 0.0)), r),
            ),
            Case(
                "TripletMarginLoss",
                margin=0.8,
                p=1.0,
                eps=1e-4,
                swap=True,
                reduction=r,
                inputs=[A, B, C],
                ref=lambda a, p, n, r=r: reduce(np_triplet(a, p, n, 0.8, 1.0, 1e-4, True), r),
            ),
            Case(
                "SoftMarginLoss",
                reduction=r,
                inputs=[2 * A, YPM],
                fixed=(1,),
                ref=lambda x, y, r=r: reduce(np.logaddexp(0, -y * x), r),
            ),
            Case(
                "MultiLabelSoftMarginLoss",
                weight=W5,
                reduction=r,
                inputs=[A, Y01],
                fixed=(1,),
                ref=lambda x, y, r=r: reduce(np_multilabel_soft_margin(x, y, W5), r),
            ),
        ]
    cases += [  # the defaults: margin 0 / 1, p = 2, no swap, no weight
        Case(
            "CosineEmbeddingLoss",
            inputs=[A, B, Y4],
            fixed=(2,),
            ref=lambda a, b, y: np_cosine_embedding(a, b, y, 0.0).mean(),
        ),
        Case(
            "MarginRankingLoss",
            inputs=[A[:, 0], B[:, 0], Y4],
            fixed=(2,),
            ref=lambda a, b, y: np.maximum(-y * (a - b), 0.0).mean(),
        ),
        Case(
            "HingeEmbeddingLoss",
            inputs=[A, YPM],
            fixed=(1,),
            ref=lambda x, y: np.where(y == 1, x, np.maximum(1 - x, 0.0)).mean(),
        ),
        Case(
            "TripletMarginLoss",
            inputs=[A, B, C],
            ref=lambda a, p, n: np_triplet(a, p, n, 1.0, 2.0, 1e-6, False).mean(),
        ),
        Case(
            "MultiLabelSoftMarginLoss",
            inputs=[A, Y01],
            fixed=(1,),
            ref=lambda x, y: np_multilabel_soft_margin(x, y).mean(),
        ),
    ]
    return cases


LOSS_CASES = _loss_cases()
CASES = ACTIVATION_CASES + NORM_CASES + PAD_CASES + UPSAMPLE_CASES + DISTANCE_CASES + LOSS_CASES
