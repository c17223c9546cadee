"""Recurrent layers' fused sequence op: ``rnn_sequence`` runs one layer of an RNN (tanh/relu),
LSTM or GRU in one direction over the whole sequence, and ``rnn_sequence_backward`` is its
backward; each is one call of a C kernel that loops over time (cpu/recurrent.c).

The op takes the input projection of every step (``xg = x W_ih^T + b_ih``, one GEMM the caller
makes with ``linear``, whose autograd then gives dW_ih, db_ih and dx from one GEMM each) and adds
``h W_hh^T + b_hh`` per step. Its first output packs the step outputs, h_n and (LSTM) c_n into
one tensor ``y [T + 1 (+1), B, H]``, the differentiable one (the registry differentiates an op's
first output; the module slices it); the others are the records its backward reads.

``run_direction`` picks the path: the fused op on host tensors, or ``sequence_composed`` (matmul,
sigmoid, tanh, mul, add per step) for Vulkan tensors and the LSTM's projection (``proj_size``),
so both backends give the same values. A backward that must itself be differentiable
(``create_graph=True``) recomputes the composition and differentiates it.

kernels: backends/cpu/kernels/recurrent.py (cpu/recurrent.c); no Vulkan kernel (composition).
"""

from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import _state as _grad_state
from ..tensor import Tensor
from . import recurrent_ref as ref
from .joining import cat, stack
from .registry import apply, defop
from .samples import Sample, uniform

GATES = ref.GATES


def _extra_width(mode: str, h: int) -> int:
    return {"LSTM": 2 * h, "GRU": h}.get(mode, 0)


def _infer(xg, w_hh, b_hh, h0, c0, mode, reverse, batch_sizes):
    t, b, gh = xg.shape
    h = h0.shape[-1]
    dt = xg.dtype
    return [
        ((t + 1 + (mode == "LSTM"), b, h), dt),
        ((t, b, gh), dt),
        ((t, b, h), dt),
        ((t, b, _extra_width(mode, h)), dt),
    ]


def _backward(ctx, g):
    xg, w_hh, b_hh, h0, c0, gates, hprev, extra = ctx.saved
    a = ctx.attrs
    if _grad_state.enabled:  # create_graph: a differentiable backward
        return _backward_composed(ctx, g, (xg, w_hh, b_hh, h0, c0))
    has_b = b_hh.numel() > 0
    dxg, dw, db, dh0, dc0 = apply(
        RNN_SEQUENCE_BACKWARD, g, gates, hprev, extra, w_hh, bias=has_b, **a
    )
    return dxg, dw, db if has_b else None, dh0, dc0 if a["mode"] == "LSTM" else None


def _backward_composed(ctx, g, inputs):
    from ..autograd import grad  # the engine imports the ops: a late import

    a = ctx.attrs
    need = [t for t, n in zip(inputs, ctx.needs_input_grad) if n]
    out, hn, cn = sequence_composed(*inputs, **a)
    parts = [out, hn.unsqueeze(0)] + ([cn.unsqueeze(0)] if a["mode"] == "LSTM" else [])
    got = iter(grad(cat(parts, 0), need, g, create_graph=True, allow_unused=True))
    return tuple(next(got) if n else None for n in ctx.needs_input_grad)


def _bwd_infer(gy, gates, hprev, extra, w_hh, mode, reverse, batch_sizes, bias):
    t, b, h = hprev.shape
    gh = gates.shape[-1]
    dt = gy.dtype
    return [
        ((t, b, gh), dt),
        (tuple(w_hh.shape), dt),
        ((gh if bias else 0,), dt),
        ((b, h), dt),
        ((b, h) if mode == "LSTM" else (0,), dt),
    ]


# ----------------------------------------------------------------------------- samples
# (mode, T, B, H, reverse, batch_sizes, bias)
_CASES = [
    ("LSTM", 3, 2, 3, False, None, True),
    ("LSTM", 4, 3, 2, True, (3, 2, 2, 1), True),
    ("GRU", 3, 2, 3, False, None, True),
    ("GRU", 4, 3, 2, True, (3, 3, 1, 1), False),
    ("RNN_TANH", 3, 2, 3, True, None, True),
    ("RNN_RELU", 4, 3, 3, False, (3, 2, 1, 1), True),
]


def _sample_inputs(mode, t, b, h, bias, seed):
    gh = GATES[mode] * h
    return (
        uniform(t, b, gh, seed=seed),
        uniform(gh, h, seed=seed + 1, low=-0.8, high=0.8),
        uniform(gh, seed=seed + 2) if bias else np.zeros(0),
        uniform(b, h, seed=seed + 3, low=-1, high=1),
        uniform(b, h, seed=seed + 4) if mode == "LSTM" else np.zeros(0),
    )


def _fwd_samples():
    out = []
    for k, (mode, t, b, h, rev, bs, bias) in enumerate(_CASES):
        ins = _sample_inputs(mode, t, b, h, bias, 10 * k)
        # relu's kink: finite differences are meaningless next to 0, so no gradient check there
        out.append(
            Sample(
                *ins,
                mode=mode,
                reverse=rev,
                batch_sizes=bs,
                ref=ref.sequence_forward,
                grad=mode != "RNN_RELU",
            )
        )
    return out


def _bwd_samples():
    out = []
    for k, (mode, t, b, h, rev, bs, bias) in enumerate(_CASES):
        ins = _sample_inputs(mode, t, b, h, bias, 10 * k)
        y, gates, hprev, extra = ref.sequence_forward(*ins, mode, rev, bs)
        gy = uniform(*y.shape, seed=10 * k + 7)
        out.append(
            Sample(
                gy,
                gates,
                hprev,
                extra,
                ins[1],
                mode=mode,
                reverse=rev,
                batch_sizes=bs,
                bias=bias,
                ref=ref.sequence_backward,
            )
        )
    return out


RNN_SEQUENCE_BACKWARD = defop(
    "rnn_sequence_backward",
    infer=_bwd_infer,
    samples=_bwd_samples,
)
RNN_SEQUENCE = defop(
    "rnn_sequence",
    infer=_infer,
    save_inputs=(0, 1, 2, 3, 4),
    save_outputs=(1, 2, 3),
    backward=_backward,
    samples=_fwd_samples,
)


# ----------------------------------------------------------------------------- composition
def _cell_step(mode, x, hp, cp, w_hh, b_hh, w_hr):
    """One step on the active rows: x [n, G*H] the input projection, hp / cp the state."""
    a = hp.matmul(w_hh.t())
    if b_hh is not None:
        a = a + b_hh
    h = w_hh.shape[0] // GATES[mode]
    if mode == "LSTM":
        s = x + a
        i, f = s[:, :h].sigmoid(), s[:, h : 2 * h].sigmoid()
        g, o = s[:, 2 * h : 3 * h].tanh(), s[:, 3 * h :].sigmoid()
        c = f * cp + i * g
        hn = o * c.tanh()
        return (hn if w_hr is None else hn.matmul(w_hr.t())), c
    if mode == "GRU":
        r = (x[:, :h] + a[:, :h]).sigmoid()
        z = (x[:, h : 2 * h] + a[:, h : 2 * h]).sigmoid()
        n = (x[:, 2 * h :] + r * a[:, 2 * h :]).tanh()
        return n + z * (hp - n), None
    s = x + a
    return (s.tanh() if mode == "RNN_TANH" else s.relu()), None


def sequence_composed(
    xg: Tensor,
    w_hh: Tensor,
    b_hh: Tensor | None,
    h0: Tensor,
    c0: Tensor | None,
    mode: str,
    reverse: bool = False,
    batch_sizes=None,
    w_hr: Tensor | None = None,
):
    """``rnn_sequence`` as a composition of ops: (outputs [T, B, H_out], h_n, c_n or None).
    b_hh / c0 may be None or size-0 placeholders; w_hr is the LSTM's projection."""
    if b_hh is not None and b_hh.numel() == 0:
        b_hh = None
    if mode != "LSTM":
        c0 = None
    t_len, b = xg.shape[0], xg.shape[1]
    h, c = h0, c0
    outs = [None] * t_len
    for t in range(t_len - 1, -1, -1) if reverse else range(t_len):
        n = b if batch_sizes is None else int(batch_sizes[t])
        if n == b:
            h, c = _cell_step(mode, xg[t], h, c, w_hh, b_hh, w_hr)
            outs[t] = h
            continue
        hn, cn = _cell_step(mode, xg[t, :n], h[:n], None if c is None else c[:n], w_hh, b_hh, w_hr)
        h = cat([hn, h[n:]], 0)
        c = None if c is None else cat([cn, c[n:]], 0)
        outs[t] = cat([hn, hn.new_zeros((b - n, hn.shape[1]))], 0) if n else h.new_zeros(h.shape)
    if not outs:
        return h0.new_zeros((0, b, h0.shape[-1])), h, c
    return stack(outs, 0), h, c


def run_direction(
    mode: str,
    xg: Tensor,
    w_hh: Tensor,
    b_hh: Tensor | None,
    h0: Tensor,
    c0: Tensor | None,
    reverse: bool = False,
    batch_sizes=None,
    w_hr: Tensor | None = None,
):
    """One layer, one direction: (outputs [T, B, H_out], h_n, c_n or None) for the input
    projection ``xg`` [T, B, G*H]: the fused op on host tensors, the composition on Vulkan
    ones and for the LSTM's projection."""
    bs = None if batch_sizes is None else tuple(int(v) for v in batch_sizes)
    if w_hr is not None or any(t is not None and t.is_vulkan for t in (xg, w_hh, h0)):
        return sequence_composed(xg, w_hh, b_hh, h0, c0, mode, reverse, bs, w_hr)
    empty = xg.new_zeros((0,))
    y, *_ = apply(
        RNN_SEQUENCE,
        xg,
        w_hh,
        empty if b_hh is None else b_hh,
        h0,
        c0 if mode == "LSTM" else empty,
        mode=mode,
        reverse=bool(reverse),
        batch_sizes=bs,
    )
    t = xg.shape[0]
    return y[:t], y[t], (y[t + 1] if mode == "LSTM" else None)
