"""The bindings of cpu/grid_sample.c and cpu/ctc.c refuse calls that would read or write out
of bounds (short buffers, bad modes, lengths and labels outside their ranges, aliasing) with a
clear exception, and give the same results on one thread as on several."""

import numpy as np
import pytest

from gpucore import _cpu

F32 = np.float32


def _grid_call(**change):
    a = dict(
        x=np.zeros((2, 3, 4, 5), F32), grid=np.zeros((2, 6, 2), F32),
        out=np.zeros((2, 3, 6), F32), geom=(2, 3, 1, 4, 5, 6, 2),
        mode="bilinear", padding="zeros", align=False,
    )  # fmt: skip
    a.update(change)
    _cpu.grid_sample(a["x"], a["grid"], a["out"], *a["geom"], a["mode"], a["padding"], a["align"])


@pytest.mark.parametrize(
    "change,exc,match",
    [
        (dict(x=np.zeros((2, 3, 4, 4), F32)), ValueError, "x"),
        (dict(grid=np.zeros((2, 5, 2), F32)), ValueError, "grid"),
        (dict(out=np.zeros((2, 3, 5), F32)), ValueError, "out"),
        (dict(out=np.zeros((2, 3, 6))), TypeError, "out"),
        (dict(mode="area"), ValueError, "mode"),
        (dict(padding="wrap"), ValueError, "padding"),
        (dict(geom=(2, 3, 2, 4, 5, 6, 2)), ValueError, "d must be 1"),
        (dict(geom=(2, 3, 1, 4, 5, 6, 4)), ValueError, "nd"),
        (dict(mode="bicubic", geom=(2, 3, 1, 4, 5, 4, 3)), ValueError, "bicubic"),
        (dict(x=np.zeros((2, 3, 4, 5), F32)[:, :, :, ::-1]), ValueError, "contiguous"),
    ],
)
def test_grid_sample_refuses_bad_calls(change, exc, match):
    with pytest.raises(exc, match=match):
        _grid_call(**change)


def test_grid_sample_refuses_aliased_outputs():
    buf = np.zeros(200, F32)
    with pytest.raises(ValueError, match="share|overlap"):
        _cpu.grid_sample(buf[:120], buf[:24], buf[:36], 2, 3, 1, 4, 5, 6, 2, "bilinear", "zeros", 0)
    g, x, grid = np.zeros(36, F32), np.zeros(120, F32), np.zeros(24, F32)
    with pytest.raises(ValueError, match="share|overlap"):
        _cpu.grid_sample_backward(g, x, grid, x, None, 2, 3, 1, 4, 5, 6, 2, "nearest", "zeros", 0)


def _ctc_args(**change):
    t, n, c, s = 5, 2, 4, 2
    a = dict(
        lp=np.zeros((t, n, c), F32), tg=np.array([1, 2, 3], np.int64),
        off=np.array([0, 2], np.int64), il=np.array([5, 4], np.int64),
        tl=np.array([2, 1], np.int64), nll=np.zeros(n, F32),
        la=np.zeros((n, t, 2 * s + 1), F32), ints=(t, n, c, s, 0, 0),
    )  # fmt: skip
    a.update(change)
    return a


@pytest.mark.parametrize(
    "change,exc,match",
    [
        (dict(il=np.array([6, 4], np.int64)), ValueError, "input length"),
        (dict(tl=np.array([3, 1], np.int64)), ValueError, "target length"),
        (dict(off=np.array([0, 3], np.int64)), ValueError, "target length"),
        (dict(tg=np.array([1, 4, 3], np.int64)), IndexError, "not a class"),
        (dict(tg=np.array([1, -1, 3], np.int64)), IndexError, "not a class"),
        (dict(ints=(5, 2, 4, 2, 4, 0)), IndexError, "blank"),
        (dict(la=np.zeros((2, 5, 4), F32)), ValueError, "log_alpha"),
        (dict(lp=np.zeros((5, 2, 3), F32)), ValueError, "log_probs"),
        (dict(tg=np.array([1, 2, 3], np.int32)), TypeError, "targets"),
    ],
)
def test_ctc_refuses_bad_calls(change, exc, match):
    a = _ctc_args(**change)
    with pytest.raises(exc, match=match):
        _cpu.ctc_loss(a["lp"], a["tg"], a["off"], a["il"], a["tl"], a["nll"], a["la"], *a["ints"])
    with pytest.raises(exc, match=match):
        lb = a["la"].copy()
        _cpu.ctc_loss_backward(
            np.ones(2, F32), a["lp"], a["tg"], a["off"], a["il"], a["tl"], a["nll"], a["la"],
            lb, np.zeros_like(a["lp"]), *a["ints"],
        )  # fmt: skip


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4, 30, 40)).astype(F32)
    grid = rng.uniform(-1.2, 1.2, (8, 900, 2)).astype(F32)
    g = rng.standard_normal((8, 4, 900)).astype(F32)
    outs = []
    before = _cpu.info()["threads"]
    for threads in (1, 2):
        _cpu.set_num_threads(threads)
        out = np.zeros((8, 4, 900), F32)
        gx, gg = np.zeros_like(x), np.zeros_like(grid)
        _cpu.grid_sample(x, grid, out, 8, 4, 1, 30, 40, 900, 2, "bicubic", "reflection", 1)
        _cpu.grid_sample_backward(g, x, grid, gx, gg, 8, 4, 1, 30, 40, 900, 2, "bicubic",
                                  "reflection", 1)  # fmt: skip
        outs.append((out, gx, gg))
    _cpu.set_num_threads(before)
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
