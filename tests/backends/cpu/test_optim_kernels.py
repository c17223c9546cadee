"""The fused optimizer kernels of gpucore._cpu (cpu/optim.c: sgd_step, adam_step, rmsprop_step)
against the float64 references of tests/optim_ref.py, in float32 and float64, on sizes around
the vector width and above the threading grain; argument checks."""

from __future__ import annotations

import numpy as np
import optim_ref as ref
import pytest

from gpucore import _cpu as C

FLOATS = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}
SIZES = [1, 15, 17, 1000]


def data(n, dtype, steps=3, seed=0):
    rng = np.random.default_rng(seed + n)
    p = rng.standard_normal(n)
    grads = [rng.standard_normal(n) for _ in range(steps)]
    return p.astype(dtype), [g.astype(dtype) for g in grads]


def as64(arrays):
    return [a.astype(np.float64) for a in arrays]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(lr=0.1),
        dict(lr=0.1, momentum=0.9, dampening=0.25),
        dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
        dict(lr=0.05, momentum=0.8, maximize=True),
    ],
)
def test_sgd_step(dtype, n, kw):
    p, grads = data(n, dtype)
    want, st = ref.sgd(p.astype(np.float64), as64(grads), **kw)
    momentum = kw.get("momentum", 0.0)
    buf = np.zeros(n, dtype) if momentum else None
    for i, g in enumerate(grads):
        C.sgd_step(
            p,
            g,
            buf,
            kw["lr"],
            momentum,
            kw.get("dampening", 0.0),
            kw.get("weight_decay", 0.0),
            int(kw.get("nesterov", False)),
            int(kw.get("maximize", False)),
            int(i == 0),
        )
        np.testing.assert_allclose(p, want[i], **TOL[dtype])
    if momentum:
        np.testing.assert_allclose(buf, st["momentum_buffer"], **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(lr=0.01),
        dict(lr=0.01, betas=(0.3, 0.8), eps=1e-4, weight_decay=0.1),
        dict(lr=0.01, amsgrad=True, maximize=True),
        dict(lr=0.02, weight_decay=0.2, decoupled=True),
        dict(lr=0.02, weight_decay=0.2, decoupled=True, amsgrad=True),
    ],
)
def test_adam_step(dtype, n, kw):
    p, grads = data(n, dtype)
    want, st = ref.adam(p.astype(np.float64), as64(grads), **kw)
    b1, b2 = kw.get("betas", (0.9, 0.999))
    m, v = np.zeros(n, dtype), np.zeros(n, dtype)
    vmax = np.zeros(n, dtype) if kw.get("amsgrad") else None
    for t, g in enumerate(grads, 1):
        C.adam_step(
            p,
            g,
            m,
            v,
            vmax,
            t,
            kw["lr"],
            b1,
            b2,
            kw.get("eps", 1e-8),
            kw.get("weight_decay", 0.0),
            int(kw.get("decoupled", False)),
            int(kw.get("maximize", False)),
        )
        np.testing.assert_allclose(p, want[t - 1], **TOL[dtype])
    np.testing.assert_allclose(m, st["exp_avg"], **TOL[dtype])
    np.testing.assert_allclose(v, st["exp_avg_sq"], **TOL[dtype])
    if vmax is not None:
        np.testing.assert_allclose(vmax, st["max_exp_avg_sq"], **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(lr=0.01),
        dict(lr=0.01, alpha=0.3, eps=1e-4, weight_decay=0.1),
        dict(lr=0.01, momentum=0.9),
        dict(lr=0.01, centered=True, maximize=True),
        dict(lr=0.01, centered=True, momentum=0.7, weight_decay=0.05),
    ],
)
def test_rmsprop_step(dtype, n, kw):
    p, grads = data(n, dtype)
    want, st = ref.rmsprop(p.astype(np.float64), as64(grads), **kw)
    momentum = kw.get("momentum", 0.0)
    sq = np.zeros(n, dtype)
    gavg = np.zeros(n, dtype) if kw.get("centered") else None
    buf = np.zeros(n, dtype) if momentum else None
    for i, g in enumerate(grads):
        C.rmsprop_step(
            p,
            g,
            sq,
            gavg,
            buf,
            kw["lr"],
            kw.get("alpha", 0.99),
            kw.get("eps", 1e-8),
            kw.get("weight_decay", 0.0),
            momentum,
            int(kw.get("maximize", False)),
        )
        np.testing.assert_allclose(p, want[i], **TOL[dtype])
    np.testing.assert_allclose(sq, st["square_avg"], **TOL[dtype])
    if gavg is not None:
        np.testing.assert_allclose(gavg, st["grad_avg"], **TOL[dtype])
    if buf is not None:
        np.testing.assert_allclose(buf, st["momentum_buffer"], **TOL[dtype])


def test_multidimensional_buffers():
    p, grads = data(24, np.float64)
    p2 = p.reshape(2, 3, 4).copy()
    m, v = np.zeros((2, 3, 4)), np.zeros((2, 3, 4))
    C.adam_step(p2, grads[0].reshape(2, 3, 4), m, v, None, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0)
    want, _ = ref.adam(p, grads[:1], lr=0.1)
    np.testing.assert_allclose(p2.reshape(-1), want[0], rtol=1e-12)


def test_threaded_updates_equal_the_single_threaded_ones():
    n = 400_003  # above the grain of 64K elements per thread
    threads = C.info()["threads"]
    results = []
    for nt in (1, max(threads, 2)):
        C.set_num_threads(nt)
        try:
            p, grads = data(n, np.float32, steps=2)
            m, v, vmax = (np.zeros(n, np.float32) for _ in range(3))
            sq, gavg, buf, sbuf = (np.zeros(n, np.float32) for _ in range(4))
            q, r = p.copy(), p.copy()
            for t, g in enumerate(grads, 1):
                C.adam_step(p, g, m, v, vmax, t, 0.01, 0.9, 0.999, 1e-8, 0.1, 1, 0)
                C.rmsprop_step(q, g, sq, gavg, buf, 0.01, 0.99, 1e-8, 0.0, 0.9, 0)
                C.sgd_step(r, g, sbuf, 0.1, 0.9, 0.0, 0.0, 1, 0, int(t == 1))
            results.append((p, m, v, vmax, q, sq, gavg, buf, r, sbuf))
        finally:
            C.set_num_threads(threads)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_empty_buffers():
    e = np.zeros(0, np.float32)
    C.sgd_step(e, e.copy(), None, 0.1, 0.0, 0.0, 0.0, 0, 0, 1)
    C.adam_step(
        e,
        np.zeros(0, np.float32),
        np.zeros(0, np.float32),
        np.zeros(0, np.float32),
        None,
        1,
        0.1,
        0.9,
        0.999,
        1e-8,
        0.0,
        0,
        0,
    )


def _adam_args(n=4, dtype=np.float32):
    return [np.zeros(n, dtype) for _ in range(4)]


def test_argument_checks():
    p, g, m, v = _adam_args()
    hp = (1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0)
    with pytest.raises(TypeError, match="format"):
        C.adam_step(p, g.astype(np.float64), m, v, None, *hp)
    with pytest.raises(TypeError, match="float32"):
        C.adam_step(p.astype(np.int32), g, m, v, None, *hp)
    with pytest.raises(ValueError, match="holds 3 elements but 'param' holds 4"):
        C.adam_step(p, g, m[:3], v, None, *hp)
    with pytest.raises(ValueError, match="share memory"):
        C.adam_step(p, p, m, v, None, *hp)
    with pytest.raises(ValueError, match="share memory"):
        C.adam_step(p, g, m, m, None, *hp)
    with pytest.raises(TypeError, match="got None"):
        C.adam_step(p, g, None, v, None, *hp)
    ro = p.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        C.adam_step(ro, g, m, v, None, *hp)
    with pytest.raises(ValueError, match="read-only"):
        C.adam_step(p, g, m, ro, None, *hp)
    C.adam_step(p, ro, m, v, None, *hp)  # grad is only read
    big = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        C.adam_step(big[::2], g, m, v, None, *hp)
    with pytest.raises(ValueError, match="'step' must be >= 1"):
        C.adam_step(p, g, m, v, None, 0, *hp[1:])
    with pytest.raises(ValueError, match="betas"):
        C.adam_step(p, g, m, v, None, 1, 0.1, 1.0, 0.999, 1e-8, 0.0, 0, 0)
    with pytest.raises(ValueError, match="'lr' must be a finite number"):
        C.adam_step(p, g, m, v, None, 1, float("nan"), 0.9, 0.999, 1e-8, 0.0, 0, 0)
    with pytest.raises(ValueError, match="'lr' must be a finite number"):
        C.sgd_step(p, g, None, -0.1, 0.0, 0.0, 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="momentum_buffer"):
        C.sgd_step(p, g, None, 0.1, 0.9, 0.0, 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="momentum_buffer"):
        C.rmsprop_step(p, g, m, None, None, 0.1, 0.99, 1e-8, 0.0, 0.9, 0)
    with pytest.raises(ValueError, match="'maximize' must be 0 or 1"):
        C.sgd_step(p, g, None, 0.1, 0.0, 0.0, 0.0, 0, 2, 0)
    with pytest.raises(TypeError, match="takes exactly 10"):
        C.sgd_step(p, g, None, 0.1)
