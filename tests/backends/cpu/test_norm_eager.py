"""Eager rms_norm / group_norm (cpu/norm.c norm_rows_forward / norm_rows_backward) and batch_norm
(cpu/norm_batch.c batch_norm_forward / batch_norm_backward) kernels: values, statistics, running
statistics and gradients against float64 numpy on odd sizes, every weight / bias combination;
the same bits for any thread count and under every ISA; bad calls raise."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from cpu_isa_harness import ISAS, C

CHUNK = 64  # gpucore/backends/cpu/kernels/norm.py's rows per gradient block


def rows_ref(x, w, b, g, groups, eps, rms):
    """float64 (out, mean, rstd, gx, gw, gb) of a row norm of x [N, C, inner] in groups."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    n, c, inner = x.shape
    xg = x.reshape(n, groups, -1)
    mean = np.zeros((n, groups, 1)) if rms else xg.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((xg - mean) ** 2).mean(-1, keepdims=True) + eps)
    xh = ((xg - mean) * rstd).reshape(x.shape)
    wv = (w if w is not None else np.ones(c))[None, :, None]
    bv = (b if b is not None else np.zeros(c))[None, :, None]
    out = xh * wv + bv
    gh = (g * wv).reshape(n, groups, -1)
    xhg = xh.reshape(n, groups, -1)
    a = 0 if rms else gh.mean(-1, keepdims=True)
    gx = (rstd * (gh - a - xhg * (gh * xhg).mean(-1, keepdims=True))).reshape(x.shape)
    return out, mean.ravel(), rstd.ravel(), gx, (g * xh).sum((0, 2)), g.sum((0, 2))


def rows_run(x, w, b, g, groups, eps, rms):
    n, c, inner = x.shape
    rows, dt = n * groups, x.dtype
    out, mean, rstd = np.empty_like(x), np.empty(rows, dt), np.empty(rows, dt)
    C.norm_rows_forward(
        x, w, b, out, None if rms else mean, rstd, rows, groups, c // groups, inner, eps, rms
    )
    gx, gw, gb = np.empty_like(x), np.empty(c, dt), np.empty(c, dt)
    part = np.empty(max(1, -(-rows // CHUNK) * 2 * c))
    C.norm_rows_backward(
        x,
        w,
        None if rms else mean,
        rstd,
        g,
        gx,
        gw,
        gb,
        part,
        rows,
        groups,
        c // groups,
        inner,
        CHUNK,
        rms,
    )
    return out, (np.zeros(rows, dt) if rms else mean), rstd, gx, gw, gb


def bn_ref(x, w, b, g, rm, rv, eps, momentum, training):
    """float64 (out, mean, rstd, running_mean, running_var, gx, gw, gb) of batch_norm."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    n, c, inner = x.shape
    cnt = n * inner
    if training:
        mean, var = x.mean((0, 2)), x.var((0, 2))
        rm = (1 - momentum) * rm + momentum * mean
        rv = (1 - momentum) * rv + momentum * var * cnt / (cnt - 1)
    else:
        mean, var = rm.astype(np.float64), rv.astype(np.float64)
    rstd = 1 / np.sqrt(var + eps)
    xh = (x - mean[:, None]) * rstd[:, None]
    wv = w if w is not None else np.ones(c)
    out = xh * wv[:, None] + (b[:, None] if b is not None else 0)
    gw, gb = (g * xh).sum((0, 2)), g.sum((0, 2))
    sc = (rstd * wv)[:, None]
    gx = sc * (g - gb[:, None] / cnt - xh * gw[:, None] / cnt) if training else sc * g
    return out, mean, rstd, rm, rv, gx, gw, gb


def bn_run(x, w, b, g, rm, rv, eps, momentum, training):
    n, c, inner = x.shape
    dt = x.dtype
    rm, rv = rm.astype(dt), rv.astype(dt)
    out, mean, rstd = np.empty_like(x), np.empty(c, dt), np.empty(c, dt)
    C.batch_norm_forward(x, w, b, out, mean, rstd, rm, rv, n, c, inner, eps, momentum, training)
    gx, gw, gb = np.empty_like(x), np.empty(c, dt), np.empty(c, dt)
    C.batch_norm_backward(x, w, mean, rstd, g, gx, gw, gb, n, c, inner, training)
    return out, mean, rstd, rm, rv, gx, gw, gb


def data(shape, dt, seed):
    r = np.random.default_rng(seed)
    x = (r.standard_normal(shape) * 2 + 3).astype(dt)
    c = shape[1]
    w, b = r.standard_normal(c).astype(dt), r.standard_normal(c).astype(dt)
    return x, w, b, r.standard_normal(shape).astype(dt)


def close(got, want, dt, count):
    tol = 3e-5 if dt == np.float32 else 1e-11
    for a, e in zip(got, want):
        scale = 1 + np.abs(e).max()
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * scale * max(1, count) ** 0.5)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, groups",
    [((1, 1, 1), 1), ((3, 6, 7), 3), ((2, 4, 9), 1), ((70, 2, 5), 2), ((5, 12, 1), 4)],
)
@pytest.mark.parametrize("rms", [0, 1])
def test_rows_against_float64(shape, groups, rms, dt):
    x, w, b, g = data(shape, dt, seed=sum(shape) + groups)
    for wi, bi in ((w, b), (w, None), (None, b), (None, None)):
        if rms and bi is not None:
            continue
        got = rows_run(x, wi, bi, g, groups, 1e-5, rms)
        close(got, rows_ref(x, wi, bi, g, groups, 1e-5, rms), dt, shape[0])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 1, 1), (3, 5, 7), (1, 3, 17), (33, 2, 1), (4, 6, 65)])
@pytest.mark.parametrize("training", [0, 1])
def test_batch_against_float64(shape, training, dt):
    x, w, b, g = data(shape, dt, seed=sum(shape) + training)
    r = np.random.default_rng(7)
    rm, rv = r.standard_normal(shape[1]), r.uniform(0.5, 2, shape[1])
    for wi, bi in ((w, b), (w, None), (None, b), (None, None)):
        for momentum in (0.1, 1.0):
            got = bn_run(x, wi, bi, g, rm, rv, 1e-3, momentum, training)
            want = bn_ref(x, wi, bi, g, rm.astype(dt), rv.astype(dt), 1e-3, momentum, training)
            close(got, want, dt, shape[0] * shape[2])


def test_batch_running_stats_optional():
    x, w, b, g = data((4, 3, 5), np.float32, seed=3)
    out, mean, rstd = np.empty_like(x), np.empty(3, np.float32), np.empty(3, np.float32)
    rv = np.ones(3, np.float32)
    C.batch_norm_forward(x, w, b, out, mean, rstd, None, rv, 4, 3, 5, 1e-5, 0.5, 1)
    want = bn_ref(x, w, b, g, np.zeros(3), np.ones(3), 1e-5, 0.5, True)
    np.testing.assert_allclose(out, want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rv, want[4], rtol=1e-6)


def _all(x, w, b, g):
    rm, rv = np.linspace(-1, 1, x.shape[1]), np.linspace(0.5, 2, x.shape[1])
    res = list(rows_run(x, w, b, g, 4, 1e-5, 0)) + list(rows_run(x, w, None, g, 2, 1e-5, 1))
    for training in (0, 1):
        res += list(bn_run(x, w, b, g, rm, rv, 1e-5, 0.1, training))
    return res


def test_threads_and_isas_bitwise(tmp_path):
    """Split over the pool (64 x 64 x 256 and 64 x 16 x 1024) or not, under every ISA: the same
    bits."""
    x, w, b, g = data((64, 64, 256), np.float32, seed=1)
    many = _all(x, w, b, g)
    threads = C.info()["threads"]
    try:
        for nt in (1, 3):
            C.set_num_threads(nt)
            for a, e in zip(_all(x, w, b, g), many):
                np.testing.assert_array_equal(a, e)
    finally:
        C.set_num_threads(threads)
    np.savez(tmp_path / "in.npz", x=x, w=w, b=b, g=g)
    here = os.path.dirname(os.path.abspath(__file__))
    script = (
        "import sys, numpy as np\n"
        f"sys.path[:0] = [{here!r}, {os.path.dirname(os.path.dirname(here))!r}]\n"
        "import test_norm_eager as T\n"
        "d = np.load(sys.argv[1])\n"
        "res = T._all(d['x'], d['w'], d['b'], d['g'])\n"
        "np.savez(sys.argv[2], *res)\n"
    )
    for isa in ISAS:
        out = tmp_path / f"{isa}.npz"
        env = dict(os.environ, GPUCORE_CPU_ISA=isa)
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "in.npz"), str(out)], env=env, check=True
        )
        got = np.load(out)
        for i, a in enumerate(many):
            np.testing.assert_array_equal(got[f"arr_{i}"], a, err_msg=f"{isa} output {i}")


def test_bad_calls_raise():
    x = np.zeros((4, 6), np.float32)
    c6 = np.zeros(6, np.float32)
    out, m, s = np.empty_like(x), np.empty(6, np.float32), np.empty(6, np.float32)
    with pytest.raises(ValueError, match="running_mean and running_var"):
        C.batch_norm_forward(x, None, None, out, m, s, None, None, 4, 6, 1, 1e-5, 0.1, 0)
    with pytest.raises(ValueError, match="more than 1 value"):
        C.batch_norm_forward(x[:1], None, None, out[:1], m, s, None, None, 1, 6, 1, 1e-5, 0.1, 1)
    with pytest.raises(ValueError, match="x"):  # x too small for n * c * inner
        C.batch_norm_forward(x, None, None, out, m, s, None, None, 4, 6, 2, 1e-5, 0.1, 1)
    with pytest.raises(ValueError, match="running_var"):  # running stats too short
        C.batch_norm_forward(x, None, None, out, m, s, c6, c6[:3], 4, 6, 1, 1e-5, 0.1, 1)
    with pytest.raises(ValueError):  # out overlapping x
        C.batch_norm_forward(x, None, None, x, m, s, None, None, 4, 6, 1, 1e-5, 0.1, 1)
    with pytest.raises(ValueError, match="eps"):
        C.batch_norm_forward(x, None, None, out, m, s, None, None, 4, 6, 1, -1.0, 0.1, 1)
    with pytest.raises(TypeError):
        C.batch_norm_forward(
            x, c6.astype(np.float64), None, out, m, s, None, None, 4, 6, 1, 1e-5, 0.1, 1
        )
    with pytest.raises(ValueError, match="gx"):
        C.batch_norm_backward(x, None, m, s, x, x, None, None, 4, 6, 1, 1)
    with pytest.raises(TypeError, match="mean"):  # needed unless rms
        C.norm_rows_backward(x, None, None, s[:4], x, out, None, None, None, 4, 1, 6, 1, 64, 0)
    with pytest.raises(ValueError, match="groups"):
        C.norm_rows_forward(x, None, None, out, None, None, 4, 3, 2, 1, 1e-5, 0)
