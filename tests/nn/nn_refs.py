"""The inputs and numpy float64 references shared by the topic files of tests/nn (``from nn_refs
import ...``; tests/nn/conftest.py puts this folder on sys.path): the arrays the module table
(nn_cases.py) feeds its modules, exact in float32 so that float32 and float64 runs see the same
values, and the formulas each module and loss is checked against, written here in numpy rather
than with gpucore's functional."""

import math

import numpy as np
from helpers import np_softmax, rand

import gpucore

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


def like(a, x):
    """A constant (no grad) holding ``a`` in x's dtype, for the non-differentiated arguments."""
    return gpucore.tensor(np.asarray(a, np.float64), dtype=x.dtype)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reduce(loss, reduction, denom=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (loss.size if denom is None else denom)


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


# regression losses and binary cross-entropy: their functional and their modules' tests share these
def np_smooth_l1(d, beta):
    ad = np.abs(d)
    return np.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta) if beta else ad


def np_huber(d, delta):
    ad = np.abs(d)
    return np.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))


def np_bce(x, t, w=None):
    with np.errstate(divide="ignore"):
        lx, l1x = np.maximum(np.log(x), -100), np.maximum(np.log(1 - x), -100)
    loss = -(t * lx + (1 - t) * l1x)
    return loss if w is None else loss * w


def np_bce_logits(x, t, w=None, pw=None):
    log_sig, log_1msig = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * log_sig + (1 - t) * log_1msig)
    return loss if w is None else loss * w
