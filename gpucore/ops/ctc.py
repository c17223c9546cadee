"""ctc_nll (PyTorch's _ctc_loss: the CTC negative log-likelihood of each sequence) and its
backward, ctc_nll_backward.

ctc_nll(log_probs [T, N, C], targets (int64, flat), offsets, input_lengths, target_lengths (int64
[N] each)) with attrs blank, max_target (the longest target, S) and zero_infinity returns nll [N]
(+inf where no alignment exists, whatever zero_infinity: F.ctc_loss zeroes those) and log_alpha
[N, T, 2 S + 1] (the forward recursion, saved for the backward). Sequence b's labels are
targets[offsets[b] : offsets[b] + target_lengths[b]] (padded and concatenated targets both map to
this).

ctc_nll_backward gives the gradient with respect to log_probs as PyTorch's ctc_loss_backward
does: ``(exp(lp) - exp(log(sum of alpha beta over label c) + nll - lp)) * grad``, which is the true
derivative plus exp(lp), the term that vanishes when log_probs are a log_softmax (its gradient
sums to zero over the classes); zeros for steps past a sequence's input length and, with
zero_infinity, for sequences of infinite loss. Double backward raises, as in PyTorch.

kernels: backends/cpu/kernels/ctc.py (cpu/ctc.c). Device tensors run on the host (a sequential
recursion): gpucore.nn.functional.ctc moves them.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from .registry import apply, defop
from .samples import Sample, uniform


def _infer(lp, targets, offsets, il, tl, blank, max_target, zero_infinity):
    if lp.ndim != 3 or not lp.dtype.is_floating_point:
        raise ShapeError(f"ctc_nll: log_probs must be a float [T, N, C] tensor, got {lp}")
    t, n, c = lp.shape
    for name, v in (("targets", targets), ("offsets", offsets), ("il", il), ("tl", tl)):
        if v.dtype is not D.int64 or v.ndim != 1:
            raise DTypeError(f"ctc_nll: {name} must be a 1-D int64 tensor, got {v.dtype}")
    if any(v.shape[0] != n for v in (offsets, il, tl)):
        raise ShapeError(f"ctc_nll: offsets and lengths must have N={n} entries")
    return [((n,), lp.dtype), ((n, t, 2 * max_target + 1), lp.dtype)]


def _attrs(a: dict) -> dict:
    return {k: a[k] for k in ("blank", "max_target", "zero_infinity")}


def _bwd(ctx, g, *_):
    lp, targets, offsets, il, tl, nll, log_alpha = ctx.saved
    grad = apply(
        CTC_NLL_BACKWARD,
        g.contiguous(),
        lp,
        targets,
        offsets,
        il,
        tl,
        nll,
        log_alpha,
        **_attrs(ctx.attrs),
    )
    return (grad, None, None, None, None)


# ----------------------------------------------------------------------------- reference
def np_ctc_nll(lp, targets, offsets, il, tl, blank, **_):
    """float64 by brute force: -log of the summed probability of every path of length il[b]
    that collapses (repeats merged, blanks dropped) to the target."""
    n = lp.shape[1]
    out = np.zeros(n)
    for b in range(n):
        want = tuple(targets[offsets[b] : offsets[b] + tl[b]])
        total = 0.0
        for path in itertools.product(range(lp.shape[2]), repeat=int(il[b])):
            lab = [k for i, k in enumerate(path) if k != blank and (i == 0 or path[i - 1] != k)]
            if tuple(lab) == want:
                total += np.exp(sum(lp[t, b, k] for t, k in enumerate(path)))
        out[b] = -np.log(total) if total > 0 else np.inf
    return out


def _np_backward(g, lp, targets, offsets, il, tl, nll, log_alpha, blank, zero_infinity, **_):
    """PyTorch's gradient: central differences of the brute-force nll, plus exp(lp) on each
    sequence's first il[b] steps, times g (zeros for an infinite loss with zero_infinity)."""
    grad = np.zeros_like(lp)
    h = 1e-6
    for idx in np.ndindex(*lp.shape):
        b = idx[1]
        if idx[0] >= il[b] or (zero_infinity and np.isinf(nll[b])):
            continue
        d = np.zeros_like(lp)
        d[idx] = h
        hi = np_ctc_nll(lp + d, targets, offsets, il, tl, blank)[b]
        lo = np_ctc_nll(lp - d, targets, offsets, il, tl, blank)[b]
        grad[idx] = ((hi - lo) / (2 * h) + np.exp(lp[idx])) * g[b]
    return grad


# (T, N, C, target lengths, input lengths, blank, concatenated)
_CASES = [
    (4, 2, 3, (2, 1), (4, 3), 0, False),
    (5, 1, 3, (2,), (5,), 2, True),
    (4, 2, 3, (1, 0), (4, 2), 0, True),
    (3, 2, 3, (2, 2), (3, 3), 0, False),  # repeated labels need a blank between them
]


def _case(i, T, N, C, tls, ils, blank, concat):
    rng = np.random.default_rng(i)
    logits = uniform(T, N, C, seed=i)
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = [c for c in range(C) if c != blank]
    s = max(max(tls), 1)
    tg = [rng.choice(labels, size=k) for k in tls]
    if i == 3:
        tg = [np.array([labels[0], labels[0]]), np.array([labels[1], labels[0]])]
    if concat:
        targets = np.concatenate(tg).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(tls)[:-1]]).astype(np.int64)
    else:
        pad = np.zeros((N, s), np.int64)
        for b, t in enumerate(tg):
            pad[b, : len(t)] = t
        targets, offsets = pad.reshape(-1), np.arange(N, dtype=np.int64) * s
    il, tl = np.array(ils, np.int64), np.array(tls, np.int64)
    return lp, targets, offsets, il, tl, {"blank": blank, "max_target": s, "zero_infinity": False}


def _samples(backward=False):
    out = []
    for i, case in enumerate(_CASES):
        lp, targets, offsets, il, tl, attrs = _case(i, *case)
        if not backward:
            out.append(Sample(lp, targets, offsets, il, tl, ref=_ref_forward, grad=False, **attrs))
            continue
        nll = np_ctc_nll(lp, targets, offsets, il, tl, attrs["blank"])
        la = np.zeros((lp.shape[1], lp.shape[0], 2 * attrs["max_target"] + 1))
        la = _np_log_alpha(lp, targets, offsets, il, tl, attrs["blank"], la)
        g = uniform(lp.shape[1], seed=i + 30)
        out.append(
            Sample(
                g,
                lp,
                targets,
                offsets,
                il,
                tl,
                nll,
                la,
                ref=_np_backward,
                grad=False,
                atol=1e-4,
                tol64=(1e-7, 1e-6),
                **attrs,
            )
        )
    return out


def _np_log_alpha(lp, targets, offsets, il, tl, blank, la):
    """log_alpha by the textbook recursion in float64 (-inf past the lengths)."""
    la[...] = -np.inf
    for b in range(lp.shape[1]):
        ext = [blank]
        for k in targets[offsets[b] : offsets[b] + tl[b]]:
            ext += [k, blank]
        if il[b] == 0:
            continue
        la[b, 0, 0] = lp[0, b, blank]
        if len(ext) > 1:
            la[b, 0, 1] = lp[0, b, ext[1]]
        for t in range(1, il[b]):
            for s in range(len(ext)):
                terms = [la[b, t - 1, s]]
                if s > 0:
                    terms.append(la[b, t - 1, s - 1])
                if s > 1 and ext[s] != ext[s - 2]:
                    terms.append(la[b, t - 1, s - 2])
                la[b, t, s] = np.logaddexp.reduce(terms) + lp[t, b, ext[s]]
    return la


def _ref_forward(lp, targets, offsets, il, tl, blank, max_target, zero_infinity):
    la = np.zeros((lp.shape[1], lp.shape[0], 2 * max_target + 1))
    return np_ctc_nll(lp, targets, offsets, il, tl, blank), _np_log_alpha(
        lp, targets, offsets, il, tl, blank, la
    )


CTC_NLL = defop(
    "ctc_nll",
    infer=_infer,
    save_inputs=(0, 1, 2, 3, 4),
    save_outputs=(0, 1),
    backward=_bwd,
    samples=_samples,
)


def _backward_infer(g, lp, *rest, **attrs):
    if tuple(g.shape) != (lp.shape[1],):
        raise ShapeError(f"ctc_nll_backward: grad {tuple(g.shape)} must be ({lp.shape[1]},)")
    return (tuple(lp.shape), lp.dtype)


def _no_double_backward(ctx, *grads):
    raise NotImplementedError(
        "ctc_nll_backward: double backward of ctc_loss is not implemented (nor in PyTorch)"
    )


CTC_NLL_BACKWARD = defop(
    "ctc_nll_backward",
    infer=_backward_infer,
    backward=_no_double_backward,
    samples=lambda: _samples(backward=True),
)


def ctc_nll(log_probs, targets, offsets, il, tl, blank: int, max_target: int, zero_inf: bool):
    """(nll [N], log_alpha) of the fused op on host tensors (gpucore.nn.functional.ctc_loss
    validates the arguments)."""
    return apply(
        CTC_NLL,
        log_probs.contiguous(),
        targets,
        offsets,
        il,
        tl,
        blank=int(blank),
        max_target=int(max_target),
        zero_infinity=bool(zero_inf),
    )
