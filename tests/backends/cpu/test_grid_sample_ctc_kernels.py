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


_CTC_RACE = """
import threading
import numpy as np
from gpucore import _cpu

_cpu.set_num_threads(1)  # the sequences one after another: later ones read after the scribble
t, n, c, s = 300, 32, 20, 10
rng = np.random.default_rng(1)
lp = np.log(rng.dirichlet(np.ones(c), (t, n))).astype(np.float32)
tg0 = rng.integers(1, c, n * s).astype(np.int64)
off0 = np.arange(0, n * s, s, dtype=np.int64)
il, tl, off, tg = np.full(n, t, np.int64), np.full(n, s, np.int64), off0.copy(), tg0.copy()
la = np.zeros((n, t, 2 * s + 1), np.float32)
ref = np.zeros(n, np.float32)
_cpu.ctc_loss(lp, tg, off, il, tl, ref, la, t, n, c, s, 0, 0)
go, done = threading.Event(), threading.Event()

def scribble():  # runs once the binding releases the GIL: lengths and labels far out of range
    while go.wait() and not done.is_set():
        go.clear()
        il[:] = 1 << 40
        tl[:] = 1 << 40
        off[:] = -(1 << 40)
        tg[:] = 1 << 40

th = threading.Thread(target=scribble)
th.start()
try:
    for _ in range(20):
        il[:], tl[:], off[:], tg[:] = t, s, off0, tg0
        nll = np.zeros(n, np.float32)
        go.set()
        _cpu.ctc_loss(lp, tg, off, il, tl, nll, la, t, n, c, s, 0, 0)
        assert np.array_equal(nll, ref), (nll, ref)
finally:
    done.set()
    go.set()
    th.join()
print("done")
"""


def test_ctc_lengths_changed_by_another_thread_do_not_reach_the_kernel():
    # The binding checks private copies of targets / offsets / lengths and passes those to the
    # kernel, which runs without the GIL: another thread changing the caller's arrays then
    # either fails the check or has no effect, never an out-of-bounds read.
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _CTC_RACE], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0 and "done" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])


_GRID_UBSAN = r"""
#include <stdio.h>
#include "isa.h"
#include "kernels.h"
void gc_parallel_range(ptrdiff_t n, ptrdiff_t align, double cost_ns, gc_range_fn fn, void *ctx)
{
    (void)align;
    (void)cost_ns;
    fn(ctx, 0, n);
}
int main(void)
{
    static float x[20000];
    float grid[9] = {0.1f, 0.2f, 9.9e14f, 0.1f, 9.9e14f, 0.3f, -9.9e14f, 0.0f, -9.9e14f}, out[3];
    for (int m = 0; m < 2; m++) { /* bilinear, nearest */
        gc_grid p = {1, 1, 2, 100, 100, 3, 3, m, GC_GRID_ZEROS, 0};
        gc_grid_sample_f32(x, grid, out, &p);
    }
    puts("done");
    return 0;
}
"""


def test_grid_sample_far_points_form_no_overflowing_offsets(tmp_path):
    # z = 9.9e14 along a plane stride of 100 * 100: the offset 9.9e18 would overflow ptrdiff_t
    # (undefined behaviour, which -fsanitize=signed-integer-overflow turns into a failure).
    import os
    import shutil
    import subprocess

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not available")
    cpu = os.path.join(os.path.dirname(__file__), "..", "..", "..", "cpu")
    (tmp_path / "main.c").write_text(_GRID_UBSAN)
    exe = tmp_path / "a.out"
    flags = ["-std=c11", "-O1", "-fsanitize=signed-integer-overflow", "-fno-sanitize-recover=all"]
    subprocess.run([gcc, *flags, "-I" + cpu, os.path.join(cpu, "grid_sample.c"),
                    str(tmp_path / "main.c"), "-lm", "-o", str(exe)], check=True)  # fmt: skip
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-2000:]
