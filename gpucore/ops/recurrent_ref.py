"""float64 numpy references of the recurrent sequence ops (gpucore/ops/recurrent.py): the op
samples' ``ref`` and the tests' reference where PyTorch is missing.

``sequence_forward`` returns what ``rnn_sequence`` does: y [T + 1 (+1 LSTM), B, H] (outputs,
h_n, c_n) and the backward's records (activated gates, the state each step read, the extra
record); ``sequence_backward`` the gradients ``rnn_sequence_backward`` gives."""

from __future__ import annotations

import numpy as np

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _steps(t_len, reverse):
    return range(t_len - 1, -1, -1) if reverse else range(t_len)


def _rows(batch_sizes, t, b):
    return b if batch_sizes is None else int(batch_sizes[t])


def sequence_forward(xg, w_hh, b_hh, h0, c0, mode, reverse=False, batch_sizes=None):
    """The op's outputs (y, gates, hprev, extra) for one layer and direction."""
    t_len, b, gh = xg.shape
    h = h0.shape[-1]
    lstm = mode == "LSTM"
    e_w = {"LSTM": 2 * h, "GRU": h}.get(mode, 0)
    bias = b_hh if b_hh.size else np.zeros(gh)
    y = np.zeros((t_len + 1 + lstm, b, h))
    gates = np.zeros((t_len, b, gh))
    hprev = np.zeros((t_len, b, h))
    extra = np.zeros((t_len, b, e_w))
    hc = h0.astype(np.float64).copy()
    cc = c0.astype(np.float64).copy() if lstm else None
    for t in _steps(t_len, reverse):
        n = _rows(batch_sizes, t, b)
        hp = hc[:n]
        hprev[t, :n] = hp
        a = hp @ w_hh.T + bias
        x = xg[t, :n]
        if mode == "LSTM":
            i, f = _sig(x[:, :h] + a[:, :h]), _sig(x[:, h : 2 * h] + a[:, h : 2 * h])
            g, o = (
                np.tanh(x[:, 2 * h : 3 * h] + a[:, 2 * h : 3 * h]),
                _sig(x[:, 3 * h :] + a[:, 3 * h :]),
            )
            extra[t, :n, :h] = cc[:n]
            cc[:n] = f * cc[:n] + i * g
            th = np.tanh(cc[:n])
            extra[t, :n, h:] = th
            hc[:n] = o * th
            gates[t, :n] = np.concatenate([i, f, g, o], axis=1)
        elif mode == "GRU":
            r, z = _sig(x[:, :h] + a[:, :h]), _sig(x[:, h : 2 * h] + a[:, h : 2 * h])
            hn = a[:, 2 * h :]
            nn = np.tanh(x[:, 2 * h :] + r * hn)
            extra[t, :n] = hn
            hc[:n] = (1 - z) * nn + z * hp
            gates[t, :n] = np.concatenate([r, z, nn], axis=1)
        else:
            pre = x + a
            hc[:n] = np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)
            gates[t, :n] = hc[:n]
        y[t, :n] = hc[:n]
    y[t_len] = hc
    if lstm:
        y[t_len + 1] = cc
    return y, gates, hprev, extra


def sequence_backward(
    gy, gates, hprev, extra, w_hh, mode, reverse=False, batch_sizes=None, bias=True
):
    """Gradients (dxg, dw_hh, db_hh, dh0, dc0) of sequence_forward's y, from its records."""
    t_len, b, h = hprev.shape
    gh = gates.shape[-1]
    lstm = mode == "LSTM"
    dxg = np.zeros((t_len, b, gh))
    dhg = np.zeros((t_len, b, gh))
    dh = gy[t_len].copy()
    dc = gy[t_len + 1].copy() if lstm else None
    for t in reversed(list(_steps(t_len, reverse))):
        n = _rows(batch_sizes, t, b)
        dhv = dh[:n] + gy[t, :n]
        g = gates[t, :n]
        direct = 0.0
        if mode == "LSTM":
            i, f, gg, o = (g[:, k * h : (k + 1) * h] for k in range(4))
            cp, th = extra[t, :n, :h], extra[t, :n, h:]
            dcv = dc[:n] + dhv * o * (1 - th * th)
            d = np.concatenate(
                [dcv * gg * i * (1 - i), dcv * cp * f * (1 - f), dcv * i * (1 - gg * gg),
                 dhv * th * o * (1 - o)], axis=1,
            )  # fmt: skip
            dc[:n] = dcv * f
            dxg[t, :n] = dhg[t, :n] = d
        elif mode == "GRU":
            r, z, nn = g[:, :h], g[:, h : 2 * h], g[:, 2 * h :]
            dn = dhv * (1 - z) * (1 - nn * nn)
            dr = dn * extra[t, :n] * r * (1 - r)
            dz = dhv * (hprev[t, :n] - nn) * z * (1 - z)
            dxg[t, :n] = np.concatenate([dr, dz, dn], axis=1)
            dhg[t, :n] = np.concatenate([dr, dz, dn * r], axis=1)
            direct = dhv * z
        else:
            d = dhv * (1 - g * g) if mode == "RNN_TANH" else dhv * (g > 0)
            dxg[t, :n] = dhg[t, :n] = d
        dh[:n] = dhg[t, :n] @ w_hh + direct
    flat = dhg.reshape(-1, gh)
    dw = flat.T @ hprev.reshape(-1, h)
    db = flat.sum(axis=0) if bias else np.zeros(0)
    return dxg, dw, db, dh, dc if lstm else np.zeros(0)
