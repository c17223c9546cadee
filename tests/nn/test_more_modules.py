"""The newer gpucore.nn modules: the activations SiLU ... PReLU, GroupNorm and InstanceNorm2d,
Dropout2d, the padding layers, Upsample and its 2d variants, CosineSimilarity and
PairwiseDistance, and the extra losses (KLDivLoss ... MultiLabelSoftMarginLoss).

Each module is specified by:
- its forward against a numpy float64 formula written here (not gpucore's functional), with
  non-default constructor arguments, in float32 and float64 (CASES, test_forward);
- its plumbing: parameters, buffers and state_dict keys as PyTorch names them, gradients reaching
  the input (gradcheck) and the parameters (finite differences), in-place variants;
- PyTorch's exact repr, hard-coded (REPRS);
- its errors on bad input and bad arguments (ERRORS);
- where torch is installed, PyTorch's module on the same input and parameters (test_match_torch).
The functional forms are tested in test_functional_extra.py.
"""

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

    def __init__(self, name, *args, inputs, ref, params=None, fixed=(), torch_grad=True,
                 **kwargs):
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
        kw = [f"{k}=array" if isinstance(v, np.ndarray) else f"{k}={v!r}"
              for k, v in self.kwargs.items()]
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
COUNTS = np.array([[0.0, 1.0, 2.0, 5.0, 3.0], [0.5, 1.5, 8.0, 0.0, 2.5],
                   [4.0, 1.0, 0.0, 2.0, 6.0], [1.0, 3.0, 2.0, 0.5, 7.0]])  # Poisson targets
W5 = np.array([0.5, 1.0, 2.0, 0.25, 1.5])  # class weights

# parameter values exact in float32: the modules hold float32 parameters until .double()
PRELU_W = np.array([0.25, -0.5, 1.5])
GN_W = np.array([0.5, -1.0, 2.0, 1.5, 0.25, -0.75])
GN_B = np.array([0.125, -0.25, 0.375, 0.0, 1.0, -1.0])
IN_W, IN_B = np.array([1.5, -0.5, 2.0]), np.array([0.25, 0.0, -1.0])


# ============================================================================= references
def np_prelu(x, a):
    return np.where(x > 0, x, x * np.reshape(a, (1, -1) + (1,) * (x.ndim - 2)))


def np_group_norm(x, groups, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    y = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps))
    y = y.reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(per_channel) + b.reshape(per_channel)
    return y


def np_instance_norm(x, w=None, b=None, eps=1e-5):
    """[N, C, H, W]: each (sample, channel) plane normalized with its biased variance."""
    mean, var = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w.reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1)
    return y


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
    Case("SELU", inputs=[X],
         ref=lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))),
    Case("CELU", alpha=1.5, inputs=[X],
         ref=lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5))),
    Case("Softplus", beta=2, threshold=5, inputs=[X],
         ref=lambda x: np.where(2 * x > 5, x, np.logaddexp(0, 2 * x) / 2)),
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
    Case("PReLU", num_parameters=3, init=0.1, inputs=[P],  # the slope is a float32 parameter
         ref=lambda x: np_prelu(x, exact([0.1] * 3))),
    Case("PReLU", 3, params={"weight": PRELU_W}, inputs=[P], ref=lambda x: np_prelu(x, PRELU_W)),
    Case("PReLU", inputs=[P], ref=lambda x: np_prelu(x, [0.25])),  # one slope for all channels
]

NORM_CASES = [
    Case("GroupNorm", 2, 6, params={"weight": GN_W, "bias": GN_B}, inputs=[IMG],
         ref=lambda x: np_group_norm(x, 2, GN_W, GN_B)),
    Case("GroupNorm", 3, 6, eps=1e-3, affine=False, inputs=[IMG],
         ref=lambda x: np_group_norm(x, 3, eps=1e-3)),
    Case("GroupNorm", 6, 6, params={"weight": GN_W, "bias": GN_B}, inputs=[IMG[:, :, 0]],
         ref=lambda x: np_group_norm(x, 6, GN_W, GN_B)),  # [N, C, L]
    Case("GroupNorm", 2, 6, affine=False, inputs=[IMG[:, :, 0, 0]],
         ref=lambda x: np_group_norm(x, 2)),  # [N, C]: groups of 3 features
    Case("InstanceNorm2d", 3, affine=True, track_running_stats=True,
         params={"weight": IN_W, "bias": IN_B}, inputs=[INST],
         ref=lambda x: np_instance_norm(x, IN_W, IN_B)),
    Case("InstanceNorm2d", 3, eps=1e-3, inputs=[INST],
         ref=lambda x: np_instance_norm(x, eps=1e-3)),
    Case("InstanceNorm2d", 3, affine=True, params={"weight": IN_W, "bias": IN_B},
         inputs=[INST[0]], ref=lambda x: np_instance_norm(x[None], IN_W, IN_B)[0]),  # [C, H, W]
]

PAD_CASES = [
    Case("ConstantPad1d", (1, 2), 3.5, inputs=[T3],
         ref=lambda x: _pad(x, [(1, 2)], constant_values=3.5)),
    Case("ConstantPad2d", (1, 0, 2, 3), -1.0, inputs=[T4],
         ref=lambda x: _pad(x, [(2, 3), (1, 0)], constant_values=-1.0)),
    Case("ConstantPad2d", 1, 2.0, inputs=[T3],  # unbatched [C, H, W]
         ref=lambda x: _pad(x, [(1, 1), (1, 1)], constant_values=2.0)),
    Case("ConstantPad3d", (1, 0, 0, 2, 1, 1), 0.5, inputs=[T5],
         ref=lambda x: _pad(x, [(1, 1), (0, 2), (1, 0)], constant_values=0.5)),
    Case("ZeroPad1d", (2, 1), inputs=[T3], ref=lambda x: _pad(x, [(2, 1)])),
    Case("ZeroPad2d", (1, 0, 2, 3), inputs=[T4], ref=lambda x: _pad(x, [(2, 3), (1, 0)])),
    Case("ZeroPad2d", (-1, 2, 1, -1), inputs=[T4],  # negative padding crops
         ref=lambda x: _pad(x[..., :-1, 1:], [(1, 0), (0, 2)])),
    Case("ZeroPad3d", (1, 0, 0, 2, 1, 1), inputs=[T5],
         ref=lambda x: _pad(x, [(1, 1), (0, 2), (1, 0)])),
    Case("ReflectionPad1d", (2, 1), inputs=[T3], ref=lambda x: _reflect(x, [(2, 1)])),
    Case("ReflectionPad2d", (1, 0, 2, 1), inputs=[T4],
         ref=lambda x: _reflect(x, [(2, 1), (1, 0)])),
    Case("ReflectionPad2d", 1, inputs=[T3], ref=lambda x: _reflect(x, [(1, 1), (1, 1)])),
    Case("ReflectionPad3d", (1, 0, 0, 2, 1, 1), inputs=[T5],
         ref=lambda x: _reflect(x, [(1, 1), (0, 2), (1, 0)])),
    Case("ReplicationPad1d", (3, 1), inputs=[T3], ref=lambda x: _edge(x, [(3, 1)])),
    Case("ReplicationPad1d", 2, inputs=[T3[0]], ref=lambda x: _edge(x, [(2, 2)])),  # [C, W]
    Case("ReplicationPad2d", (2, 0, 1, 3), inputs=[T4], ref=lambda x: _edge(x, [(1, 3), (2, 0)])),
    Case("ReplicationPad3d", (1, 0, 0, 2, 1, 1), inputs=[T5],
         ref=lambda x: _edge(x, [(1, 1), (0, 2), (1, 0)])),
]

UPSAMPLE_CASES = [
    Case("Upsample", size=(5, 7), inputs=[U], ref=lambda x: np_resize(x, (5, 7), "nearest")),
    Case("Upsample", size=2, inputs=[U], ref=lambda x: np_resize(x, (2, 2), "nearest")),
    Case("Upsample", scale_factor=2, inputs=[U], ref=lambda x: np_resize(x, (6, 8), "nearest")),
    Case("Upsample", scale_factor=(2, 1.5), mode="bilinear", inputs=[U],
         ref=lambda x: np_resize(x, (6, 6), "linear", scale_factor=(2, 1.5))),
    Case("Upsample", size=(5, 7), mode="bilinear", align_corners=True, inputs=[U],
         ref=lambda x: np_resize(x, (5, 7), "linear", align_corners=True)),
    # the output size is floor(in * 1.5); recompute_scale_factor samples at in / out instead
    Case("Upsample", scale_factor=1.5, mode="bilinear", recompute_scale_factor=True, inputs=[U],
         ref=lambda x: np_resize(x, (4, 6), "linear")),
    Case("Upsample", scale_factor=2.5, mode="linear", inputs=[T3],
         ref=lambda x: np_resize(x[:, :, None], (1, 10), "linear", scale_factor=(1, 2.5))[:, :, 0]),
    Case("UpsamplingNearest2d", scale_factor=2, inputs=[U],
         ref=lambda x: x.repeat(2, axis=2).repeat(2, axis=3)),
    Case("UpsamplingNearest2d", size=(2, 5), inputs=[U],
         ref=lambda x: np_resize(x, (2, 5), "nearest")),
    Case("UpsamplingBilinear2d", size=(5, 7), inputs=[U],
         ref=lambda x: np_resize(x, (5, 7), "linear", align_corners=True)),
    Case("UpsamplingBilinear2d", scale_factor=2, inputs=[U],
         ref=lambda x: np_resize(x, (6, 8), "linear", align_corners=True)),
]

DISTANCE_CASES = [
    Case("CosineSimilarity", inputs=[A, B], ref=lambda a, b: np_cosine(a, b, 1, 1e-8)),
    Case("CosineSimilarity", dim=0, eps=1e-6, inputs=[A, B],
         ref=lambda a, b: np_cosine(a, b, 0, 1e-6)),
    # norms of a below eps: clamped. PyTorch clamps the norm in place under no_grad, so its
    # gradient ignores the clamp; ours is the derivative of the forward (gradcheck).
    Case("CosineSimilarity", dim=1, eps=0.5, inputs=[A * 0.03125, B], torch_grad=False,
         ref=lambda a, b: np_cosine(a, b, 1, 0.5)),
    Case("PairwiseDistance", inputs=[A, B], ref=lambda a, b: np_pnorm(a - b + 1e-6, 2)),
    Case("PairwiseDistance", p=1.0, keepdim=True, inputs=[A, B],
         ref=lambda a, b: np_pnorm(a - b + 1e-6, 1, keepdims=True)),
    Case("PairwiseDistance", p=3.0, eps=1e-3, inputs=[A, B[0]],  # broadcast
         ref=lambda a, b: np_pnorm(a - b + 1e-3, 3)),
]


def _loss_cases():
    cases = []
    for r in ["batchmean", "sum", "none"]:  # 'mean' warns: test_kl_div_loss_mean_warns
        def batch(loss, r=r):
            return loss.sum() / loss.shape[0] if r == "batchmean" else reduce(loss, r)

        cases += [
            Case("KLDivLoss", reduction=r, inputs=[LOGP, PROB], fixed=(1,),
                 ref=lambda x, t, batch=batch: batch(np_kl(x, t))),
            Case("KLDivLoss", reduction=r, log_target=True, inputs=[LOGP, LOGT], fixed=(1,),
                 ref=lambda x, t, batch=batch: batch(np_kl(x, t, log_target=True))),
        ]
    for r in REDUCTIONS:
        cases += [
            Case("PoissonNLLLoss", reduction=r, inputs=[A, COUNTS], fixed=(1,),
                 ref=lambda x, t, r=r: reduce(np_poisson(x, t), r)),
            Case("PoissonNLLLoss", log_input=False, full=True, eps=1e-4, reduction=r,
                 inputs=[exact(np.abs(A) + 0.1), COUNTS], fixed=(1,),
                 ref=lambda x, t, r=r: reduce(np_poisson(x, t, False, True, 1e-4), r)),
            Case("CosineEmbeddingLoss", margin=0.3, reduction=r, inputs=[A, B, Y4], fixed=(2,),
                 ref=lambda a, b, y, r=r: reduce(np_cosine_embedding(a, b, y, 0.3), r)),
            Case("MarginRankingLoss", margin=0.5, reduction=r, inputs=[A[:, 0], B[:, 0], Y4],
                 fixed=(2,),
                 ref=lambda a, b, y, r=r: reduce(np.maximum(-y * (a - b) + 0.5, 0.0), r)),
            Case("HingeEmbeddingLoss", margin=1.5, reduction=r, inputs=[A, YPM], fixed=(1,),
                 ref=lambda x, y, r=r: reduce(np.where(y == 1, x, np.maximum(1.5 - x, 0.0)), r)),
            Case("TripletMarginLoss", margin=0.8, p=1.0, eps=1e-4, swap=True, reduction=r,
                 inputs=[A, B, C],
                 ref=lambda a, p, n, r=r: reduce(np_triplet(a, p, n, 0.8, 1.0, 1e-4, True), r)),
            Case("SoftMarginLoss", reduction=r, inputs=[2 * A, YPM], fixed=(1,),
                 ref=lambda x, y, r=r: reduce(np.logaddexp(0, -y * x), r)),
            Case("MultiLabelSoftMarginLoss", weight=W5, reduction=r, inputs=[A, Y01], fixed=(1,),
                 ref=lambda x, y, r=r: reduce(np_multilabel_soft_margin(x, y, W5), r)),
        ]
    cases += [  # the defaults: margin 0 / 1, p = 2, no swap, no weight
        Case("CosineEmbeddingLoss", inputs=[A, B, Y4], fixed=(2,),
             ref=lambda a, b, y: np_cosine_embedding(a, b, y, 0.0).mean()),
        Case("MarginRankingLoss", inputs=[A[:, 0], B[:, 0], Y4], fixed=(2,),
             ref=lambda a, b, y: np.maximum(-y * (a - b), 0.0).mean()),
        Case("HingeEmbeddingLoss", inputs=[A, YPM], fixed=(1,),
             ref=lambda x, y: np.where(y == 1, x, np.maximum(1 - x, 0.0)).mean()),
        Case("TripletMarginLoss", inputs=[A, B, C],
             ref=lambda a, p, n: np_triplet(a, p, n, 1.0, 2.0, 1e-6, False).mean()),
        Case("MultiLabelSoftMarginLoss", inputs=[A, Y01], fixed=(1,),
             ref=lambda x, y: np_multilabel_soft_margin(x, y).mean()),
    ]
    return cases


LOSS_CASES = _loss_cases()
CASES = (ACTIVATION_CASES + NORM_CASES + PAD_CASES + UPSAMPLE_CASES + DISTANCE_CASES
         + LOSS_CASES)


# ============================================================================= forward
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_forward(case):
    expected = case.ref(*[v.copy() for v in case.inputs])
    out = ours(case, gpucore.float32)(*[f32(v) for v in case.inputs])
    assert out.dtype is gpucore.float32
    assert_close(out, expected, rtol=1e-5, atol=1e-6, what="float32")
    out = ours(case)(*[f64(v) for v in case.inputs])
    assert out.dtype is gpucore.float64
    assert_close(out, expected, rtol=1e-10, atol=1e-12, what="float64")


# a loss's 'mean' and 'sum' share the backward of its 'none' (and of its default) case
GRAD_CASES = [c for c in CASES if c.kwargs.get("reduction") not in ("mean", "sum")]


@pytest.mark.parametrize("case", GRAD_CASES, ids=repr)
def test_input_gradients(case):
    m = ours(case)
    xs = [f64(v, grad=i not in case.fixed) for i, v in enumerate(case.inputs)]
    check_grad(m, *xs)


def test_softmin_implicit_dim_warns_as_pytorch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        out = nn.Softmin()(f64(X))
    assert_close(out, np_softmax(-X, 0))  # a 3-D input: dim 0, PyTorch's legacy choice


def test_kl_div_loss_mean_warns():
    with pytest.warns(UserWarning, match="batchmean"):
        out = nn.KLDivLoss()(f64(LOGP), f64(PROB))
    assert_close(out, np_kl(LOGP, PROB).mean())


# ============================================================================= in place
INPLACE = ["SiLU", "Mish", "ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish"]


@pytest.mark.parametrize("case", [c for c in ACTIVATION_CASES if c.name in INPLACE], ids=repr)
def test_inplace(case):
    x = f32(X)
    out = ours(case, gpucore.float32)(x)
    assert out is not x and to_np(x).tolist() == X.tolist()  # the default leaves x alone
    inplace = Case(case.name, *case.args, inputs=case.inputs, ref=case.ref, inplace=True,
                   **case.kwargs)
    m = ours(inplace, gpucore.float32)
    assert m.inplace is True
    assert m(x) is x
    assert_close(x, case.ref(X), rtol=1e-5, atol=1e-6)
    # on a non-leaf, autograd sees through the in-place op
    w = f64(X, grad=True)
    ours(inplace)(w * 1.0).sum().backward()
    w2 = f64(X, grad=True)
    ours(case)(w2).sum().backward()
    assert_close(w.grad, to_np(w2.grad), rtol=1e-12, atol=1e-12)
    with pytest.raises(gpucore.AutogradError, match="leaf"):
        ours(inplace)(f64(X, grad=True))


# ============================================================================= parameters
def test_prelu_parameters():
    m = nn.PReLU()
    assert m.num_parameters == 1 and m.init == 0.25
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    assert to_np(m.weight).tolist() == [0.25]
    m = nn.PReLU(num_parameters=3, init=0.1)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert list(m.state_dict()) == ["weight"] and list(m.buffers()) == []
    assert tuple(m.weight.shape) == (3,) and m.weight.dtype is gpucore.float32
    assert_close(m.weight, [0.1, 0.1, 0.1])
    m.load_state_dict({"weight": gpucore.tensor(PRELU_W)})
    assert_close(m(f32(P)), np_prelu(P, PRELU_W))
    m.reset_parameters()
    assert_close(m.weight, [0.1, 0.1, 0.1])


def test_group_norm_parameters():
    m = nn.GroupNorm(2, 6)
    assert (m.num_groups, m.num_channels, m.eps, m.affine) == (2, 6, 1e-5, True)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert list(m.state_dict()) == ["weight", "bias"] and list(m.buffers()) == []
    assert to_np(m.weight).tolist() == [1.0] * 6 and to_np(m.bias).tolist() == [0.0] * 6
    no_bias = nn.GroupNorm(2, 6, bias=False)
    assert no_bias.bias is None and list(no_bias.state_dict()) == ["weight"]
    plain = nn.GroupNorm(3, 6, affine=False)
    assert plain.weight is None and plain.bias is None and list(plain.state_dict()) == []


def test_instance_norm_parameters_and_buffers():
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in m.named_buffers()] == ["running_mean", "running_var",
                                                "num_batches_tracked"]
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"]
    assert to_np(m.running_mean).tolist() == [0.0] * 3
    assert to_np(m.running_var).tolist() == [1.0] * 3
    assert m.num_batches_tracked.dtype is gpucore.int64 and m.num_batches_tracked.item() == 0
    plain = nn.InstanceNorm2d(3)  # PyTorch's defaults: no affine, no running stats
    assert plain.weight is None and plain.running_mean is None
    assert list(plain.state_dict()) == [] and list(plain.parameters()) == []


def test_parameter_free_modules_have_no_state():
    for case in CASES:
        if case.name not in ("PReLU", "GroupNorm", "InstanceNorm2d", "MultiLabelSoftMarginLoss"):
            m = ours(case)
            assert list(m.state_dict()) == [] and list(m.parameters()) == [], case
    m = nn.MultiLabelSoftMarginLoss(weight=gpucore.tensor(W5))  # class weights: a buffer
    assert list(m.state_dict()) == ["weight"] and list(m.parameters()) == []


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


@pytest.mark.parametrize("case", [c for c in CASES if c.params], ids=repr)
def test_parameter_gradients(case):
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


def test_prelu_weight_gradient_by_hand():
    m = nn.PReLU(3).double()
    m.load_state_dict({"weight": f64(PRELU_W)})
    g = rand(P.shape, seed=21)
    x = f64(P, grad=True)
    (m(x) * f64(g)).sum().backward()
    assert_close(m.weight.grad, np.where(P > 0, 0.0, P * g).sum((0, 2)), rtol=1e-12)
    assert_close(x.grad, np.where(P > 0, g, g * PRELU_W.reshape(1, 3, 1)), rtol=1e-12)


# ============================================================================= running stats
def test_instance_norm_running_stats():
    m = nn.InstanceNorm2d(3, momentum=0.3, affine=True, track_running_stats=True).double()
    m.load_state_dict({"weight": f64(IN_W), "bias": f64(IN_B)}, strict=False)
    mean, var = np.zeros(3), np.ones(3)
    for step in range(2):  # train: instance statistics out, running averages updated
        x = rand((2, 3, 3, 4), seed=30 + step)
        assert_close(m(f64(x)), np_instance_norm(x, IN_W, IN_B), rtol=1e-10, atol=1e-12)
        mean = 0.7 * mean + 0.3 * x.mean((2, 3)).mean(0)
        var = 0.7 * var + 0.3 * x.var((2, 3), ddof=1).mean(0)  # unbiased, averaged over N
        assert_close(m.running_mean, mean, rtol=1e-12, atol=1e-14)
        assert_close(m.running_var, var, rtol=1e-12)
    assert m.num_batches_tracked.item() == 0  # as PyTorch: instance norm never counts batches
    m.eval()  # eval: the running statistics normalize
    x = rand((2, 3, 3, 4), seed=32)
    shape = (1, 3, 1, 1)
    ref = ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * IN_W.reshape(shape)
           + IN_B.reshape(shape))
    assert_close(m(f64(x)), ref, rtol=1e-10, atol=1e-12)
    assert_close(m(f64(x[1])), ref[1], rtol=1e-10, atol=1e-12)  # unbatched [C, H, W]
    assert_close(m.running_mean, mean, rtol=1e-12, atol=1e-14)  # eval leaves them alone
    check_grad(m, f64(x, grad=True))


def test_instance_norm_without_running_stats_or_momentum():
    x = rand((2, 3, 3, 4), seed=33)
    plain = nn.InstanceNorm2d(3).double().eval()  # no running stats: instance stats in eval too
    assert_close(plain(f64(x)), np_instance_norm(x), rtol=1e-10, atol=1e-12)
    frozen = nn.InstanceNorm2d(3, momentum=None, track_running_stats=True).double()
    frozen(f64(x))  # momentum None: PyTorch passes 0.0, the averages do not move
    assert to_np(frozen.running_mean).tolist() == [0.0] * 3
    assert to_np(frozen.running_var).tolist() == [1.0] * 3


# ============================================================================= Dropout2d
def test_dropout2d():
    m = nn.Dropout2d(p=0.25)
    assert (m.p, m.inplace) == (0.25, False) and list(m.state_dict()) == []
    x = gpucore.ones(8, 16, 3, 2)
    gpucore.manual_seed(0)
    y = to_np(m(x))
    per_channel = y.reshape(8, 16, -1)
    # whole channels are zeroed, the rest scaled by 1 / (1 - p)
    assert (per_channel.min(-1) == per_channel.max(-1)).all()
    assert set(np.unique(per_channel).tolist()) == {0.0, float(np.float32(1 / 0.75))}
    assert 0.1 < (per_channel[..., 0] == 0).mean() < 0.4
    assert to_np(x).min() == 1.0  # not in place
    gpucore.manual_seed(0)
    assert (to_np(m(x)) == y).all()  # the seed fixes the mask
    gpucore.manual_seed(0)
    inplace = nn.Dropout2d(p=0.25, inplace=True)
    assert inplace(x) is x and (to_np(x) == y).all()
    m.eval()
    z = f32(T4)
    assert_close(m(z), T4, rtol=0, atol=0)  # eval: the identity
    # the gradient flows through the kept channels, scaled
    gpucore.manual_seed(1)
    m.train()
    a = f64(rand((2, 4, 2, 2), seed=34), grad=True)
    out = m(a)
    out.sum().backward()
    kept = to_np(out) != 0
    assert_close(a.grad, np.where(kept, 1 / 0.75, 0.0), rtol=1e-12)


# ============================================================================= repr
REPRS = [
    (nn.SiLU(), "SiLU()"),
    (nn.SiLU(inplace=True), "SiLU(inplace=True)"),
    (nn.Mish(inplace=True), "Mish(inplace=True)"),
    (nn.ELU(), "ELU(alpha=1.0)"),
    (nn.ELU(alpha=0.5, inplace=True), "ELU(alpha=0.5, inplace=True)"),
    (nn.SELU(), "SELU()"),
    (nn.SELU(inplace=True), "SELU(inplace=True)"),
    (nn.CELU(alpha=1.5), "CELU(alpha=1.5)"),
    (nn.CELU(1.5, inplace=True), "CELU(alpha=1.5, inplace=True)"),
    (nn.Softplus(), "Softplus(beta=1.0, threshold=20.0)"),
    (nn.Softplus(beta=2, threshold=5), "Softplus(beta=2, threshold=5)"),
    (nn.Hardtanh(), "Hardtanh(min_val=-1.0, max_val=1.0)"),
    (nn.Hardtanh(-2, 3), "Hardtanh(min_val=-2, max_val=3)"),
    (nn.Hardtanh(-2, 3, inplace=True), "Hardtanh(min_val=-2, max_val=3, inplace=True)"),
    (nn.ReLU6(), "ReLU6()"),
    (nn.ReLU6(inplace=True), "ReLU6(inplace=True)"),
    (nn.Hardsigmoid(), "Hardsigmoid()"),
    (nn.Hardsigmoid(inplace=True), "Hardsigmoid()"),  # PyTorch prints no inplace flag here
    (nn.Hardswish(inplace=True), "Hardswish()"),
    (nn.LogSigmoid(), "LogSigmoid()"),
    (nn.Softsign(), "Softsign()"),
    (nn.Tanhshrink(), "Tanhshrink()"),
    (nn.Softmin(), "Softmin(dim=None)"),
    (nn.Softmin(dim=1), "Softmin(dim=1)"),
    (nn.GLU(), "GLU(dim=-1)"),
    (nn.GLU(dim=1), "GLU(dim=1)"),
    (nn.PReLU(), "PReLU(num_parameters=1)"),
    (nn.PReLU(num_parameters=3, init=0.1), "PReLU(num_parameters=3)"),
    (nn.GroupNorm(2, 6), "GroupNorm(2, 6, eps=1e-05, affine=True, bias=True)"),
    (nn.GroupNorm(3, 6, eps=1e-3, affine=False),
     "GroupNorm(3, 6, eps=0.001, affine=False, bias=False)"),
    (nn.GroupNorm(2, 6, bias=False), "GroupNorm(2, 6, eps=1e-05, affine=True, bias=False)"),
    (nn.InstanceNorm2d(3), "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, "
                           "bias=False, track_running_stats=False)"),
    (nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
     "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, "
     "track_running_stats=True)"),
    (nn.Dropout2d(), "Dropout2d(p=0.5, inplace=False)"),
    (nn.Dropout2d(p=0.25, inplace=True), "Dropout2d(p=0.25, inplace=True)"),
    (nn.ConstantPad1d((1, 2), 3.5), "ConstantPad1d(padding=(1, 2), value=3.5)"),
    (nn.ConstantPad1d(2, 1), "ConstantPad1d(padding=(2, 2), value=1)"),
    (nn.ConstantPad2d((1, 0, 2, 3), -1.0), "ConstantPad2d(padding=(1, 0, 2, 3), value=-1.0)"),
    (nn.ConstantPad3d((1, 0, 0, 2, 1, 1), 0.5),
     "ConstantPad3d(padding=(1, 0, 0, 2, 1, 1), value=0.5)"),
    (nn.ZeroPad1d((2, 1)), "ZeroPad1d((2, 1))"),
    (nn.ZeroPad2d(1), "ZeroPad2d((1, 1, 1, 1))"),
    (nn.ZeroPad2d((1, 0, 2, 3)), "ZeroPad2d((1, 0, 2, 3))"),
    (nn.ZeroPad3d((1, 0, 0, 2, 1, 1)), "ZeroPad3d((1, 0, 0, 2, 1, 1))"),
    (nn.ReflectionPad1d(1), "ReflectionPad1d((1, 1))"),
    (nn.ReflectionPad2d((1, 0, 2, 1)), "ReflectionPad2d((1, 0, 2, 1))"),
    (nn.ReflectionPad3d((1, 0, 0, 2, 1, 1)), "ReflectionPad3d((1, 0, 0, 2, 1, 1))"),
    (nn.ReplicationPad1d((3, 1)), "ReplicationPad1d((3, 1))"),
    (nn.ReplicationPad2d(2), "ReplicationPad2d((2, 2, 2, 2))"),
    (nn.ReplicationPad3d((1, 0, 0, 2, 1, 1)), "ReplicationPad3d((1, 0, 0, 2, 1, 1))"),
    (nn.Upsample(size=(5, 7)), "Upsample(size=(5, 7), mode='nearest')"),
    (nn.Upsample(size=5), "Upsample(size=5, mode='nearest')"),
    (nn.Upsample(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')"),
    (nn.Upsample(scale_factor=(2, 1.5), mode="bilinear"),
     "Upsample(scale_factor=(2.0, 1.5), mode='bilinear')"),
    (nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True),
     "Upsample(size=(5, 7), mode='bilinear')"),
    (nn.UpsamplingNearest2d(scale_factor=2),
     "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"),
    (nn.UpsamplingNearest2d(size=(3, 5)), "UpsamplingNearest2d(size=(3, 5), mode='nearest')"),
    (nn.UpsamplingBilinear2d(size=(5, 7)), "UpsamplingBilinear2d(size=(5, 7), mode='bilinear')"),
    (nn.UpsamplingBilinear2d(scale_factor=2),
     "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')"),
    # the distances and losses print no arguments in PyTorch
    (nn.CosineSimilarity(dim=0, eps=1e-6), "CosineSimilarity()"),
    (nn.PairwiseDistance(p=1.0, keepdim=True), "PairwiseDistance()"),
    (nn.KLDivLoss(reduction="batchmean", log_target=True), "KLDivLoss()"),
    (nn.PoissonNLLLoss(log_input=False, full=True), "PoissonNLLLoss()"),
    (nn.CosineEmbeddingLoss(margin=0.3, reduction="sum"), "CosineEmbeddingLoss()"),
    (nn.MarginRankingLoss(margin=0.5), "MarginRankingLoss()"),
    (nn.HingeEmbeddingLoss(margin=2.0), "HingeEmbeddingLoss()"),
    (nn.TripletMarginLoss(margin=0.8, p=1.0, swap=True), "TripletMarginLoss()"),
    (nn.SoftMarginLoss(reduction="none"), "SoftMarginLoss()"),
    (nn.MultiLabelSoftMarginLoss(), "MultiLabelSoftMarginLoss()"),
]


def test_repr_matches_pytorch():
    for m, expected in REPRS:
        assert repr(m) == expected


def test_attributes_keep_pytorch_names():
    u = nn.Upsample(scale_factor=2)
    assert (u.size, u.scale_factor, u.mode, u.align_corners) == (None, 2.0, "nearest", None)
    b = nn.UpsamplingBilinear2d(size=(5, 7))
    assert (b.size, b.mode, b.align_corners) == ((5, 7), "bilinear", True)
    d = nn.PairwiseDistance(p=1.0, keepdim=True)
    assert (d.norm, d.eps, d.keepdim) == (1.0, 1e-6, True)
    c = nn.CosineSimilarity(dim=0, eps=1e-6)
    assert (c.dim, c.eps) == (0, 1e-6)
    t = nn.TripletMarginLoss(margin=0.8, p=1.0, swap=True)
    assert (t.margin, t.p, t.eps, t.swap, t.reduction) == (0.8, 1.0, 1e-6, True, "mean")
    assert nn.HingeEmbeddingLoss().margin == 1.0 and nn.MarginRankingLoss().margin == 0.0
    assert nn.ReflectionPad2d(1).padding == (1, 1, 1, 1)
    assert nn.ConstantPad1d(2, 1.5).value == 1.5


# ============================================================================= errors
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _errors():
    z = gpucore.zeros
    return [
        # GroupNorm: channels not divisible, input channels != num_channels, too few dims
        (lambda: nn.GroupNorm(4, 6), ValueError, "divisible"),
        (lambda: nn.GroupNorm(2, 6)(z(2, 4, 3)), gpucore.ShapeError, "weight"),
        (lambda: nn.GroupNorm(4, 8, affine=False)(z(2, 6, 3)), gpucore.ShapeError, "divisible"),
        (lambda: nn.GroupNorm(2, 6)(z(6)), gpucore.ShapeError, "dims"),
        # InstanceNorm2d
        (lambda: nn.InstanceNorm2d(3, affine=True)(z(2, 4, 3, 3)), gpucore.ShapeError,
         "num_features"),
        (lambda: nn.InstanceNorm2d(3)(z(2, 3)), gpucore.ShapeError, "3D or 4D"),
        (lambda: nn.InstanceNorm2d(3)(z(2, 3, 1, 1)), ValueError, "spatial element"),
        # activations
        (lambda: nn.PReLU(3)(z(2, 4, 5)), gpucore.ShapeError, "channel size = 4"),
        (lambda: nn.GLU(dim=1)(z(2, 3, 4)), gpucore.ShapeError, "even"),
        (lambda: nn.Hardtanh(3, -2), ValueError, "min_val"),  # PyTorch: an AssertionError
        (lambda: nn.CELU(alpha=0.0)(z(2)), ValueError, "alpha"),
        (lambda: nn.SiLU()(gpucore.tensor([1, 2])), gpucore.DTypeError, "silu"),
        # Dropout2d
        (lambda: nn.Dropout2d(1.5), ValueError, "probability"),
        (lambda: nn.Dropout2d()(z(4)), gpucore.ShapeError, "dropout2d"),
        # padding (PyTorch: bad tuples fail only in forward)
        (lambda: nn.ZeroPad2d((1, 2, 3)), ValueError, "4 ints"),
        (lambda: nn.ReflectionPad1d((1.5, 1)), ValueError, "2 ints"),
        (lambda: nn.ReflectionPad2d((3, 3, 0, 0))(z(1, 1, 3, 3)), ValueError, "less than"),
        (lambda: nn.ReflectionPad1d(1)(z(1, 1, 2, 3)), NotImplementedError, "4-D"),
        (lambda: nn.ConstantPad2d(1, 0.0)(z(3)), ValueError, "too large"),
        # Upsample
        (lambda: nn.UpsamplingBilinear2d(scale_factor=2)(z(1, 2, 3)), NotImplementedError,
         "4D"),
        (lambda: nn.Upsample(scale_factor=2, align_corners=True)(z(1, 1, 2, 2)), ValueError,
         "align_corners"),
        (lambda: nn.Upsample()(z(1, 1, 2, 2)), ValueError, "size or scale_factor"),
        (lambda: nn.Upsample(size=(2, 3, 4))(z(1, 1, 2, 2)), ValueError, "size"),
        # distances
        (lambda: nn.CosineSimilarity()(z(2, 3), z(2, 4)), gpucore.ShapeError, "broadcastable"),
        (lambda: nn.PairwiseDistance()(z(2, 3), z(2, 4)), gpucore.ShapeError, "broadcastable"),
        # losses: mismatched shapes
        (lambda: nn.KLDivLoss(reduction="sum")(z(2, 3), z(2, 4)), gpucore.ShapeError,
         "broadcastable"),
        (lambda: nn.PoissonNLLLoss()(z(2, 3), z(2, 4)), gpucore.ShapeError, "broadcastable"),
        (lambda: nn.CosineEmbeddingLoss()(z(3, 4), z(3, 5), z(3)), gpucore.ShapeError,
         "cosine_embedding_loss"),
        (lambda: nn.CosineEmbeddingLoss()(z(3, 4), z(3, 4), z(2)), gpucore.ShapeError,
         "target"),
        (lambda: nn.MarginRankingLoss()(z(3), z(4), z(3)), gpucore.ShapeError, "broadcastable"),
        (lambda: nn.MarginRankingLoss()(z(3), z(3, 1), z(3)), gpucore.ShapeError, "dims"),
        (lambda: nn.HingeEmbeddingLoss()(z(3), z(4)), gpucore.ShapeError, "broadcastable"),
        (lambda: nn.TripletMarginLoss()(z(3, 4), z(3, 5), z(3, 4)), gpucore.ShapeError,
         "broadcastable"),
        (lambda: nn.TripletMarginLoss()(z(3, 4), z(4), z(3, 4)), gpucore.ShapeError,
         "dimensions"),
        (lambda: nn.SoftMarginLoss()(z(3), z(4)), gpucore.ShapeError, "same shape"),
        (lambda: nn.MultiLabelSoftMarginLoss()(z(2, 3), z(2, 4)), gpucore.ShapeError,
         "same shape"),
        # PyTorch broadcasts a [3] target against a [2, 3] input here; gpucore asks for the
        # same shape
        (lambda: nn.SoftMarginLoss()(z(2, 3), z(3)), gpucore.ShapeError, "same shape"),
        (lambda: nn.MultiLabelSoftMarginLoss()(z(2, 3), z(3)), gpucore.ShapeError, "same shape"),
        (lambda: nn.MultiLabelSoftMarginLoss(weight=gpucore.ones(4))(z(2, 3), z(2, 3)),
         gpucore.ShapeError, "broadcastable"),
        # losses: bad arguments
        (lambda: nn.TripletMarginLoss(margin=0), ValueError, "margin"),
        (lambda: nn.KLDivLoss(reduction="avg"), ValueError, "reduction"),  # PyTorch: in forward
        (lambda: nn.SoftMarginLoss(reduction="avg"), ValueError, "reduction"),
        # PyTorch: still accepted, with a deprecation warning
        (lambda: nn.HingeEmbeddingLoss(size_average=True), TypeError, "deprecated"),
    ]


ERRORS = _errors()


@pytest.mark.parametrize("fn,exc,match", ERRORS, ids=[f"{e.__name__}-{m}" for _, e, m in ERRORS])
def test_errors(fn, exc, match):
    assert issubclass(gpucore.ShapeError, ValueError)
    with pytest.raises(exc, match=match):
        fn()


def test_warnings():
    with pytest.warns(UserWarning, match="num_features"):  # no per-channel state: goes on
        out = nn.InstanceNorm2d(3)(f64(INST[:, :2]))
    assert_close(out, np_instance_norm(INST[:, :2]), rtol=1e-10, atol=1e-12)
    with pytest.warns(FutureWarning, match="min_val"):
        m = nn.Hardtanh(min_value=-2.0)
    assert (m.min_val, m.max_val) == (-2.0, 1.0)


# ============================================================================= PyTorch
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_match_torch(case):
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


def test_running_stats_match_torch():
    torch = pytest.importorskip("torch")
    kw = {"momentum": 0.3, "affine": True, "track_running_stats": True}
    m, tm = nn.InstanceNorm2d(3, **kw).double(), torch.nn.InstanceNorm2d(3, **kw).double()
    m.load_state_dict({"weight": f64(IN_W), "bias": f64(IN_B)}, strict=False)
    tm.load_state_dict({"weight": torch.tensor(IN_W), "bias": torch.tensor(IN_B)}, strict=False)
    for step in range(3):
        if step == 2:
            m.eval()
            tm.eval()
        x = rand((2, 3, 3, 4), seed=50 + step)
        assert_close(m(f64(x)), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
        tsd = tm.state_dict()
        for k, v in m.state_dict().items():
            assert_close(v, tsd[k].numpy(), rtol=1e-5, atol=1e-6, what=k)


def test_dropout2d_matches_torch():
    # not the same random stream as PyTorch: the same semantics (whole channels, 1 / (1 - p))
    # and the same identity in eval mode
    torch = pytest.importorskip("torch")
    x = np.ones((4, 6, 2, 2))
    gpucore.manual_seed(0)
    torch.manual_seed(0)
    for y in (to_np(nn.Dropout2d(0.25)(f64(x))), torch.nn.Dropout2d(0.25)(torch.tensor(x)).numpy()):
        per_channel = y.reshape(4, 6, -1)
        assert (per_channel.min(-1) == per_channel.max(-1)).all()
        assert set(np.unique(y).round(6).tolist()) <= {0.0, round(1 / 0.75, 6)}
    m, tm = nn.Dropout2d(0.25).eval(), torch.nn.Dropout2d(0.25).eval()
    assert repr(m) == repr(tm)
    assert_close(m(f64(T4)), tm(torch.tensor(T4)).numpy(), rtol=0, atol=0)
