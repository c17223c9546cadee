"""Recurrent kernels (gpucore/ops/recurrent.py): one layer and one direction of an RNN, LSTM or
GRU over the whole sequence, forward and backward, each one call of cpu/recurrent.c."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import _c, kernel

MODES = {"RNN_TANH": _cpu.RNN_TANH, "RNN_RELU": _cpu.RNN_RELU, "LSTM": _cpu.RNN_LSTM}
MODES["GRU"] = _cpu.RNN_GRU


def _opt(a):
    """A size-0 placeholder input (no bias, no c0) is None to the C side."""
    return _c(a) if a.size else None


def _sizes(batch_sizes):
    return None if batch_sizes is None else np.asarray(batch_sizes, dtype=np.int64)


@kernel("rnn_sequence")
def _rnn_sequence(outs, xg, w_hh, b_hh, h0, c0, mode, reverse, batch_sizes):
    y, gates, hprev, extra = outs
    t, b, _ = xg.shape
    _cpu.rnn_forward(
        _c(xg), _c(w_hh), _opt(b_hh), _c(h0), _opt(c0), _sizes(batch_sizes),
        y, gates, hprev, extra, MODES[mode], int(reverse), t, b, h0.shape[-1],
    )  # fmt: skip


@kernel("rnn_sequence_backward")
def _rnn_sequence_backward(outs, gy, gates, hprev, extra, w_hh, mode, reverse, batch_sizes, bias):
    dxg, dw_hh, db_hh, dh0, dc0 = outs
    t, b, h = hprev.shape
    _cpu.rnn_backward(
        _c(gy), _c(gates), _c(hprev), _c(extra), _c(w_hh), _sizes(batch_sizes),
        dxg, dw_hh, db_hh if db_hh.size else None, dh0, dc0 if dc0.size else None,
        MODES[mode], int(reverse), t, b, h,
    )  # fmt: skip
