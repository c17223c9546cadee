"""cpu/recurrent.c through its bindings (_cpu.rnn_forward / rnn_backward): sizes that take the
packed-weight GEMM paths (more than 16 rows, H above 24) against the float64 numpy reference,
packed batch sizes, and the bindings' argument checks."""

import numpy as np
import pytest

from gpucore import _cpu
from gpucore.ops import recurrent_ref as ref

MODES = {"RNN_TANH": _cpu.RNN_TANH, "RNN_RELU": _cpu.RNN_RELU, "LSTM": _cpu.RNN_LSTM}
MODES["GRU"] = _cpu.RNN_GRU


def _case(mode, t, b, h, dtype, seed=0):
    rng = np.random.default_rng(seed)
    gh = ref.GATES[mode] * h
    xg = rng.uniform(-1, 1, (t, b, gh)).astype(dtype)
    w = rng.uniform(-0.3, 0.3, (gh, h)).astype(dtype)
    bias = rng.uniform(-0.5, 0.5, gh).astype(dtype)
    h0 = rng.uniform(-1, 1, (b, h)).astype(dtype)
    c0 = rng.uniform(-1, 1, (b, h)).astype(dtype) if mode == "LSTM" else None
    return xg, w, bias, h0, c0


def _run(mode, xg, w, bias, h0, c0, reverse, bs, gy_seed=9):
    t, b, gh = xg.shape
    h = h0.shape[1]
    dt = xg.dtype
    e = {"LSTM": 2 * h, "GRU": h}.get(mode, 0)
    y = np.empty((t + 1 + (mode == "LSTM"), b, h), dt)
    gates, hprev, extra = np.empty((t, b, gh), dt), np.empty((t, b, h), dt), np.empty((t, b, e), dt)
    bsa = None if bs is None else np.asarray(bs, np.int64)
    _cpu.rnn_forward(
        xg, w, bias, h0, c0, bsa, y, gates, hprev, extra, MODES[mode], reverse, t, b, h
    )
    gy = np.random.default_rng(gy_seed).uniform(-1, 1, y.shape).astype(dt)
    dxg, dw, db, dh0 = np.empty_like(xg), np.empty_like(w), np.empty_like(bias), np.empty_like(h0)
    dc0 = np.empty_like(h0) if mode == "LSTM" else None
    _cpu.rnn_backward(
        gy, gates, hprev, extra, w, bsa, dxg, dw, db, dh0, dc0, MODES[mode], reverse, t, b, h
    )
    return (y, gates, hprev, extra), gy, (dxg, dw, db, dh0, dc0)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-11), (np.float32, 2e-5)])
@pytest.mark.parametrize("reverse,bs", [(0, None), (1, (20, 20, 17, 5, 1))])
def test_wide_batches_match_the_reference(mode, dtype, tol, reverse, bs):
    args = _case(mode, 5, 20, 32, dtype)
    fwd, gy, bwd = _run(mode, *args, reverse, bs)
    ref_args = [a.astype(np.float64) if a is not None else np.zeros(0) for a in args]
    want_fwd = ref.sequence_forward(*ref_args, mode, bool(reverse), bs)
    for k, (a, b) in enumerate(zip(fwd, want_fwd)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"forward {k}")
    want_bwd = ref.sequence_backward(
        gy.astype(np.float64), *want_fwd[1:], ref_args[1], mode, bool(reverse), bs
    )
    for k, (a, b) in enumerate(zip(bwd, want_bwd)):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=10 * tol, atol=10 * tol, err_msg=f"backward {k}")


def test_inactive_rows_keep_their_state_and_output_zero():
    xg, w, bias, h0, _ = _case("GRU", 3, 3, 4, np.float64)
    (y, *_), _, _ = _run("GRU", xg, w, bias, h0, None, 0, (3, 1, 0))
    assert not y[1, 1:].any() and not y[2].any()
    np.testing.assert_array_equal(y[3, 1], y[0, 1])  # row 1 ran one step: h_n is that output
    np.testing.assert_array_equal(y[1, 0], y[3, 0])


def test_argument_checks():
    xg, w, bias, h0, c0 = _case("LSTM", 2, 2, 3, np.float32)
    y = np.empty((4, 2, 3), np.float32)
    g, hp, ex = (
        np.empty((2, 2, 12), np.float32),
        np.empty((2, 2, 3), np.float32),
        np.empty((2, 2, 6), np.float32),
    )
    lstm = _cpu.RNN_LSTM
    with pytest.raises(ValueError, match="rnn_forward: unknown mode 7"):
        _cpu.rnn_forward(xg, w, bias, h0, c0, None, y, g, hp, ex, 7, 0, 2, 2, 3)
    with pytest.raises(ValueError, match="rnn_forward: 'y'"):
        _cpu.rnn_forward(xg, w, bias, h0, c0, None, y[:3], g, hp, ex, lstm, 0, 2, 2, 3)
    with pytest.raises(ValueError, match="rnn_forward: 'xg'"):
        _cpu.rnn_forward(xg, w, bias, h0, c0, None, y, g, hp, ex, lstm, 0, 3, 2, 3)
    with pytest.raises(TypeError, match="rnn_forward"):
        _cpu.rnn_forward(
            xg.astype(np.float64), w, bias, h0, c0, None, y, g, hp, ex, lstm, 0, 2, 2, 3
        )
    with pytest.raises(ValueError, match=r"batch_sizes\[1\] = 3 is outside \[0, B\]"):
        _cpu.rnn_forward(xg, w, bias, h0, c0, np.array([2, 3]), y, g, hp, ex, lstm, 0, 2, 2, 3)
    with pytest.raises(ValueError, match="c0 is for RNN_LSTM only"):
        _cpu.rnn_forward(
            xg[..., :9],
            w[:9],
            None,
            h0,
            c0,
            None,
            y[:3],
            g[..., :9],
            hp,
            ex[..., :3],
            _cpu.RNN_GRU,
            0,
            2,
            2,
            3,
        )
    alias = g.reshape(-1)[:12].reshape(2, 2, 3)  # hprev over the gates' memory
    with pytest.raises(ValueError, match="rnn_forward: 'hprev'.*'gates'|rnn_forward: 'gates'"):
        _cpu.rnn_forward(xg, w, bias, h0, c0, None, y, g, alias, ex, lstm, 0, 2, 2, 3)
    with pytest.raises(TypeError, match="rnn_backward: argument 'dc0'"):
        _cpu.rnn_backward(
            y, g, hp, ex, w, None, xg, w.copy(), bias.copy(), h0.copy(), None, lstm, 0, 2, 2, 3
        )
