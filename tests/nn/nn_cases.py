"""Shared by the topic files of tests/nn (``from nn_cases import ...``; tests/nn/conftest.py
puts this folder on sys.path): the module table (``Case``: one gpucore.nn module with its
arguments, inputs and numpy float64 reference, in ACTIVATION_CASES ... LOSS_CASES, all of them in
CASES), the check each topic file runs on its part of the table (``check_forward``,
``check_input_gradients``, ``check_parameter_gradients``, ``check_error``,
``check_match_torch``), and the inputs and numpy references the functional tests share.

Each module is specified by:
- its forward against a numpy float64 formula written here (not gpucore's functional), with
  non-default constructor arguments, in float32 and float64 (check_forward);
- its plumbing: parameters, buffers and state_dict keys as PyTorch names them, gradients reaching
  the input (gradcheck) and the parameters (finite differences), in-place variants;
- PyTorch's exact repr, hard-coded (test_torch_parity.py);
- its errors on bad input and bad arguments (each topic file's MODULE_ERRORS);
- where torch is installed, PyTorch's module on the same input and parameters
  (check_match_torch)."""

import math

import numpy as np
import pytest
from helpers import assert_close, check_grad, np_softmax, rand, to_np

import gpucore
import gpucore.nn as nn

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
REDUCTIONS = ["none", "mean", "sum"]


def f32(a):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def exact(a):
    """``a`` rounded to float32, so float32 and float64 runs see the same values."""
    return np.asarray(a, np.float64).astype(np.float32).astype(np.float64)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reduce(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


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


# ============================================================================= inputs
X = rand((2, 4, 3), -8, 8)  # activations: past every kink, clamp and softplus threshold
P = rand((2, 3, 4), -4, 4, seed=1)  # PReLU: channels in dim 1
IMG = rand((2, 6, 2, 3), seed=2)  # GroupNorm
INST = rand((2, 3, 3, 4), seed=3)  # InstanceNorm2d
T3, T4, T5 = rand((2, 3, 4), seed=4), rand((1, 2, 3, 4), seed=5), rand((1, 2, 2, 3, 4), seed=6)
U = rand((1, 2, 3, 4), seed=7)  # Upsample
A, B, C = rand((4, 5), seed=8), rand((4, 5), seed=9), rand((4, 5), seed=10)
Y4 = np.array([1.0, -1.0, -1.0, 1.0])
YPM = np.where(rand((4, 5), seed=11) > 0, 1.0, -1.0)  # +-1 targets
Y01 = (rand((4, 5), seed=12) > 0).astype(np.float64)  # multi-label targets
LOGP = exact(np.log(np_softmax(rand((4, 5), seed=13), 1)))  # log-probabilities
PROB = exact(np_softmax(rand((4, 5), seed=14), 1))
PROB[1, 2] = 0.0  # KL: 0 * log 0 is 0
LOGT = LOGP[::-1].copy()  # log-probability targets
COUNTS = np.array(
    [
        [0.0, 1.0, 2.0, 5.0, 3.0],
        [0.5, 1.5, 8.0, 0.0, 2.5],
        [4.0, 1.0, 0.0, 2.0, 6.0],
        [1.0, 3.0, 2.0, 0.5, 7.0],
    ]
)  # Poisson targets
W5 = np.array([0.5, 1.0, 2.0, 0.25, 1.5])  # class weights

# parameter values exact in float32: the modules hold float32 parameters until .double()
PRELU_W = np.array([0.25, -0.5, 1.5])
GN_W = np.array([0.5, -1.0, 2.0, 1.5, 0.25, -0.75])
GN_B = np.array([0.125, -0.25, 0.375, 0.0, 1.0, -1.0])
IN_W, IN_B = np.array([1.5, -0.5, 2.0]), np.array([0.25, 0.0, -1.0])


# ============================================================================= references
def np_prelu(x, a):
    return np.where(x > 0, x, x * np.reshape(a, (1, -1) + (1,) * (x.ndim - 2)))


def np_group_norm(x, g, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    out = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    out = out.reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


def np_instance_norm(x, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    out = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


def np_norm(x, p, axis, keepdims=False):
    if p == math.inf:
        return np.abs(x).max(axis=axis, keepdims=keepdims)
    return (np.abs(x) ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


def interp_matrix(n_in, n_out, mode, align_corners=False, scale_factor=None):
    """(n_out, n_in) weights of 1-D resampling, PyTorch's source index: nearest takes
    floor(j * ratio); linear blends floor(src) and the next with src = (j + 0.5) * ratio - 0.5
    (clamped at 0), or j * (n_in - 1) / (n_out - 1) with align_corners. ratio is
    1 / scale_factor when given, else n_in / n_out."""
    ratio = 1 / scale_factor if scale_factor else n_in / n_out
    m = np.zeros((n_out, n_in))
    for j in range(n_out):
        if mode == "nearest":
            m[j, min(math.floor(j * ratio), n_in - 1)] = 1.0
            continue
        if align_corners:
            src = j * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            src = max((j + 0.5) * ratio - 0.5, 0.0)
        i0 = min(math.floor(src), n_in - 1)
        lam = src - i0
        m[j, i0] += 1 - lam
        m[j, min(i0 + 1, n_in - 1)] += lam
    return m


def np_resize(x, size, mode, align_corners=False, scale_factor=(None, None)):
    """Resample the last two dims of [N, C, H, W] (separable)."""
    mh = interp_matrix(x.shape[2], size[0], mode, align_corners, scale_factor[0])
    mw = interp_matrix(x.shape[3], size[1], mode, align_corners, scale_factor[1])
    return np.einsum("ih,nchw,jw->ncij", mh, x, mw)


def np_cosine(a, b, dim, eps):
    na = np.maximum(np.sqrt((a * a).sum(dim, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(dim, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(dim)


def np_pnorm(d, p, keepdims=False):
    return (np.abs(d) ** p).sum(-1, keepdims=keepdims) ** (1 / p)


def np_kl(x, t, log_target=False):
    if log_target:
        return np.exp(t) * (t - x)
    return np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0) - t * x


def np_poisson(x, t, log_input=True, full=False, eps=1e-8):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:  # Stirling's approximation of log(t!), for t > 1
        ts = np.where(t > 1, t, 2.0)
        loss = loss + np.where(t > 1, ts * np.log(ts) - ts + 0.5 * np.log(2 * np.pi * ts), 0.0)
    return loss


def np_cosine_embedding(a, b, y, margin):
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    return np.where(y == 1, 1 - cos, np.maximum(cos - margin, 0.0))


def np_triplet(a, pos, neg, margin, p, eps, swap):
    d_pos, d_neg = np_pnorm(a - pos + eps, p), np_pnorm(a - neg + eps, p)
    if swap:
        d_neg = np.minimum(d_neg, np_pnorm(pos - neg + eps, p))
    return np.maximum(margin + d_pos - d_neg, 0.0)


def np_multilabel_soft_margin(x, y, w=None):
    loss = -(y * -np.logaddexp(0, -x) + (1 - y) * -np.logaddexp(0, x))
    return (loss if w is None else loss * w).mean(-1)


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


# ============================================================================= the checks
def check_forward(case):
    expected = case.ref(*[v.copy() for v in case.inputs])
    out = ours(case, gpucore.float32)(*[f32(v) for v in case.inputs])
    assert out.dtype is gpucore.float32
    assert_close(out, expected, rtol=1e-5, atol=1e-6, what="float32")
    out = ours(case)(*[f64(v) for v in case.inputs])
    assert out.dtype is gpucore.float64
    assert_close(out, expected, rtol=1e-10, atol=1e-12, what="float64")


# a loss's 'mean' and 'sum' share the backward of its 'none' (and of its default) case
def grad_cases(cases):
    return [c for c in cases if c.kwargs.get("reduction") not in ("mean", "sum")]


def check_input_gradients(case):
    m = ours(case)
    xs = [f64(v, grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    check_grad(m, *xs)


def finite_difference_grads(m, loss, eps=1e-6):
    """Central differences of ``loss()`` with respect to each parameter of ``m``."""
    grads = {}
    for name, p in m.named_parameters():
        base = to_np(p).copy()
        g = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            values = []
            for step in (eps, -eps):
                moved = base.copy()
                moved[i] += step
                with gpucore.no_grad():
                    p.copy_(f64(moved))
                    values.append(loss().item())
            g[i] = (values[0] - values[1]) / (2 * eps)
        with gpucore.no_grad():
            p.copy_(f64(base))
        grads[name] = g
    return grads


def check_parameter_gradients(case):
    m = ours(case)
    xs = [f64(v) for v in case.inputs]
    upstream = f64(rand(case.ref(*case.inputs).shape, seed=20))

    def loss():
        return (m(*xs) * upstream).sum()

    loss().backward()
    numeric = finite_difference_grads(m, loss)
    assert set(numeric) == set(case.params)
    for name, p in m.named_parameters():
        assert p.grad is not None, name
        assert_close(p.grad, numeric[name], rtol=1e-6, atol=1e-8, what=name)


def error_ids(errors):
    return [f"{e.__name__}-{m}" for _, e, m in errors]


def check_error(fn, exc, match):
    assert issubclass(gpucore.ShapeError, ValueError)
    with pytest.raises(exc, match=match):
        fn()


def check_match_torch(case):
    torch = pytest.importorskip("torch")
    m = ours(case)
    tm = case.build(torch.nn, torch.tensor).double()
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    xs = [f64(v, grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    txs = [torch.tensor(v, requires_grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    out, tout = m(*xs), tm(*txs)
    assert_close(out, tout.detach().numpy(), rtol=1e-5, atol=1e-6, what="forward")
    if not case.torch_grad:
        return
    upstream = rand(tuple(tout.shape), seed=40)
    (out * f64(upstream)).sum().backward()
    (tout * torch.tensor(upstream)).sum().backward()
    for i, (x, tx) in enumerate(zip(xs, txs)):
        if i not in case.fixed:
            assert_close(x.grad, tx.grad.numpy(), rtol=1e-5, atol=1e-6, what=f"input {i}")
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        assert_close(p.grad, tp.grad.numpy(), rtol=1e-5, atol=1e-6, what=name)
