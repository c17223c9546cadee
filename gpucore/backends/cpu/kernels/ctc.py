"""ctc_nll kernels (gpucore/ops/ctc.py): the alpha and beta recursions in C (cpu/ctc.c), one
sequence per thread."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import _c, kernel


def _ints(lp_shape, blank, max_target, zero_infinity):
    t, n, c = lp_shape
    return t, n, c, max_target, blank, bool(zero_infinity)


@kernel("ctc_nll")
def _ctc_nll(outs, lp, targets, offsets, il, tl, blank, max_target, zero_infinity):
    nll, log_alpha = outs
    if nll.size == 0:
        log_alpha[...] = -np.inf
        return
    _cpu.ctc_loss(
        _c(lp),
        _c(targets),
        _c(offsets),
        _c(il),
        _c(tl),
        nll,
        log_alpha,
        *_ints(lp.shape, blank, max_target, zero_infinity),
    )


@kernel("ctc_nll_backward")
def _ctc_nll_backward(
    out, g, lp, targets, offsets, il, tl, nll, log_alpha, blank, max_target, zero_infinity
):
    if out.size == 0:
        return
    log_beta = np.empty_like(log_alpha)  # scratch of the beta recursion
    _cpu.ctc_loss_backward(
        _c(g),
        _c(lp),
        _c(targets),
        _c(offsets),
        _c(il),
        _c(tl),
        _c(nll),
        _c(log_alpha),
        log_beta,
        out,
        *_ints(lp.shape, blank, max_target, zero_infinity),
    )
