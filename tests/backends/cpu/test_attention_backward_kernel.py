"""_cpu.attention_forward (cpu/attention.c with the rows' logsumexp) and _cpu.attention_backward
(cpu/attention_backward.c, FlashAttention-2's backward) against an independent float64 numpy
reference, in float32 and float64: shapes around the tiles' edges (32 query rows, 64 keys),
Sq != Skv with causal, float and bool masks broadcast by zero strides, grouped-query heads,
strided views, fully masked rows (lse +inf, zero gradients), thread-count independence (bitwise),
and argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import _cpu as C

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 3e-5, np.float64: 1e-11}


def ref(q, k, v, mask, g, scale, causal, hg):
    """float64 (out, lse, dq, dk, dv); fully masked rows: out 0, lse +inf, no gradient."""
    q, k, v, g = (np.asarray(a, np.float64) for a in (q, k, v, g))
    kr, vr = np.repeat(k, hg, axis=1), np.repeat(v, hg, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, kr) * scale
    sq, skv = s.shape[-2:]
    if mask is not None:
        mask = np.broadcast_to(mask, s.shape)
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if causal:
        s = np.where(np.arange(skv)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    dead = mx == -np.inf
    e = np.exp(s - np.where(dead, 0.0, mx))
    tot = e.sum(axis=-1, keepdims=True)
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, tot))
    lse = np.where(dead, np.inf, mx + np.log(np.where(dead, 1.0, tot)))[..., 0]
    out = p @ vr
    dp = g @ vr.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ kr * scale
    b, hk = k.shape[:2]
    dk = (ds.swapaxes(-1, -2) @ q * scale).reshape(b, hk, hg, skv, -1).sum(2)
    dv = (p.swapaxes(-1, -2) @ g).reshape(b, hk, hg, skv, -1).sum(2)
    return out, lse, dq, dk, dv


def run(q, k, v, mask, g, scale, causal, hg):
    b, h, sq, _ = q.shape
    dt = q.dtype
    out = np.full((b, h, sq, v.shape[3]), np.nan, dt)
    lse = np.full((b, h, sq), np.nan, dt)
    C.attention_forward(q, k, v, mask, out, lse, scale, causal, hg)
    dq = np.full(q.shape, np.nan, dt)
    dk = np.full((b,) + k.shape[1:], np.nan, dt)
    dv = np.full((b,) + v.shape[1:], np.nan, dt)
    C.attention_backward(q, k, v, mask, out, g, lse, dq, dk, dv, scale, causal, hg)
    return out, lse, dq, dk, dv


def check(got, want, dt, what):
    for name, a, w in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        fin = np.isfinite(w)
        np.testing.assert_array_equal(np.isfinite(a), fin, err_msg=f"{what} {name}")
        np.testing.assert_array_equal(a[~fin], w[~fin], err_msg=f"{what} {name}")
        scale = max(1.0, float(np.abs(w[fin]).max()) if fin.any() else 1.0)
        err = float(np.abs(a[fin].astype(np.float64) - w[fin]).max()) / scale if fin.any() else 0
        assert err <= TOL[dt], f"{what} {name}: {err}"


def rand(r, shape, dt):
    return r.standard_normal(shape).astype(dt)


SHAPES = [  # B, H, Hk, Sq, Skv, D, Dv
    (1, 1, 1, 1, 1, 1, 1),
    (2, 3, 3, 5, 7, 4, 6),
    (1, 2, 2, 31, 63, 16, 8),
    (1, 2, 1, 33, 65, 8, 8),
    (2, 4, 2, 64, 64, 32, 32),
    (1, 1, 1, 97, 130, 24, 17),
    (1, 2, 2, 65, 31, 64, 64),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [0, 1])
def test_forward_lse_and_backward_match_float64(dt, shape, causal):
    b, h, hk, sq, skv, d, dv = shape
    hg = h // hk
    r = np.random.default_rng(sum(shape) + causal)
    q, k, v = (
        rand(r, (b, h, sq, d), dt),
        rand(r, (b, hk, skv, d), dt),
        rand(r, (b, hk, skv, dv), dt),
    )
    g = rand(r, (b, h, sq, dv), dt)
    masks = [
        None,
        rand(r, (sq, skv), dt),
        rand(r, (b, 1, sq, skv), dt),
        r.random((h, sq, skv)) > 0.3,
    ]
    for i, mask in enumerate(masks):
        scale = 0.7 / np.sqrt(d)
        want = ref(q, k, v, mask, g, scale, causal, hg)
        check(run(q, k, v, mask, g, scale, causal, hg), want, dt, f"{shape} mask {i}")


@pytest.mark.parametrize("dt", DTYPES)
def test_fully_masked_rows(dt):
    r = np.random.default_rng(3)
    q, k, v, g = (rand(r, (2, 2, 6, 8), dt) for _ in range(4))
    mask = r.random((2, 2, 6, 6)) > 0.4
    mask[:, :, 2] = False
    mask[1, 0, 4] = False
    got = run(q, k, v, mask, g, 0.3, 0, 1)
    out, lse, dq = got[:3]
    assert (
        np.all(out[:, :, 2] == 0) and np.all(np.isposinf(lse[:, :, 2])) and np.all(dq[:, :, 2] == 0)
    )
    check(got, ref(q, k, v, mask, g, 0.3, 0, 1), dt, "dead rows")
    fmask = np.where(mask, 0.0, -np.inf).astype(dt)  # the same as -inf floats
    check(run(q, k, v, fmask, g, 0.3, 0, 1), ref(q, k, v, mask, g, 0.3, 0, 1), dt, "float -inf")


@pytest.mark.parametrize("dt", DTYPES)
def test_strided_views(dt):
    r = np.random.default_rng(5)
    qkv = rand(r, (2, 40, 3, 2, 16), dt)  # [B, S, 3, H, D]: the heads of one projection
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    g = rand(r, (2, 40, 2, 16), dt).transpose(0, 2, 1, 3)
    kb = np.broadcast_to(rand(r, (1, 2, 40, 16), dt), (2, 2, 40, 16))  # batch stride 0
    for kk in (k, kb):
        want = ref(q, kk, v, None, g, 0.25, 1, 1)
        check(run(q, kk, v, None, g, 0.25, 1, 1), want, dt, "strided")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sq", [64, 45, 130])
def test_causal_skips_the_keys_past_each_block(dt, sq):
    """The causal backward leaves the keys past a query block's last row out of its products:
    the gradients are the same bits as with those keys kept (a lower-triangular bool mask,
    which multiplies their zero P and dS through), and an inf in a key no row sees changes
    nothing (0 * inf would be NaN)."""
    r = np.random.default_rng(sq)
    q, k, v, g = (rand(r, (2, 2, sq, 16), dt) for _ in range(4))
    tril = np.tri(sq, dtype=bool)
    out, lse = np.empty((2, 2, sq, 16), dt), np.empty((2, 2, sq), dt)
    C.attention_forward(q, k, v, None, out, lse, 0.3, 1, 1)

    def grads(mask, causal, kk):
        d = [np.full(q.shape, np.nan, dt) for _ in range(3)]
        C.attention_backward(q, kk, v, mask, out, g, lse, *d, 0.3, causal, 1)
        return d

    for a, b in zip(grads(None, 1, k), grads(tril, 0, k)):
        np.testing.assert_array_equal(a, b)
    k_inf = k.copy()
    k_inf[:, :, -1, 0] = np.inf  # the last key: only the last row sees it
    dq = grads(None, 1, k_inf)[0]
    assert np.isfinite(dq[:, :, : sq - 1 - (sq - 1) % 32]).all()


@pytest.mark.parametrize("hk", [4, 2])
def test_threads_bitwise(hk):
    r = np.random.default_rng(11)
    q, g = rand(r, (2, 4, 96, 32), np.float32), rand(r, (2, 4, 96, 32), np.float32)
    k, v = rand(r, (2, hk, 100, 32), np.float32), rand(r, (2, hk, 100, 32), np.float32)
    mask = r.random((96, 100)) > 0.2
    threads = C.info()["threads"]
    many = run(q, k, v, mask, g, 0.2, 1, 4 // hk)
    try:
        C.set_num_threads(1)
        one = run(q, k, v, mask, g, 0.2, 1, 4 // hk)
    finally:
        C.set_num_threads(threads)
    for a, b in zip(many, one):
        np.testing.assert_array_equal(a, b)


def test_errors():
    f = np.float32
    q, k, v = np.ones((1, 2, 3, 4), f), np.ones((1, 2, 5, 4), f), np.ones((1, 2, 5, 6), f)
    out, lse, g = np.empty((1, 2, 3, 6), f), np.empty((1, 2, 3), f), np.ones((1, 2, 3, 6), f)
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    C.attention_forward(q, k, v, None, out, lse, 0.5, 0, 1)
    C.attention_backward(q, k, v, None, out, g, lse, dq, dk, dv, 0.5, 0, 1)
    with pytest.raises(ValueError, match="'lse' has shape"):
        C.attention_forward(q, k, v, None, out, np.empty((1, 2, 4), f), 0.5, 0, 1)
    with pytest.raises(ValueError, match="'hg'"):
        C.attention_forward(q, k, v, None, out, lse, 0.5, 0, 3)
    q4, out4, lse4 = np.ones((1, 4, 3, 4), f), np.empty((1, 4, 3, 6), f), np.empty((1, 4, 3), f)
    with pytest.raises(ValueError, match="'k' has shape"):
        C.attention_forward(q4, k, v, None, out4, lse4, 0.5, 0, 4)
    with pytest.raises(ValueError, match="overlaps"):
        C.attention_forward(q, k, v, None, out, out.reshape(-1)[:6].reshape(1, 2, 3), 0.5, 0, 1)
    with pytest.raises(ValueError, match="'scale' must be finite"):
        C.attention_backward(q, k, v, None, out, g, lse, dq, dk, dv, float("inf"), 0, 1)
    with pytest.raises(ValueError, match="'dk' has shape"):
        C.attention_backward(
            q, k, v, None, out, g, lse, dq, np.empty((1, 2, 4, 4), f), dv, 0.5, 0, 1
        )
    with pytest.raises(ValueError, match="'g' has shape"):
        C.attention_backward(q, k, v, None, out, g[:, :, :2], lse, dq, dk, dv, 0.5, 0, 1)
    g2 = np.ones((1, 2, 3, 12), f)[..., ::2]
    with pytest.raises(ValueError, match="unit stride"):
        C.attention_backward(q, k, v, None, out, g2, lse, dq, dk, dv, 0.5, 0, 1)
    buf = np.empty(100, f)
    dk2, dv2 = buf[:40].reshape(1, 2, 5, 4), buf[20:80].reshape(1, 2, 5, 6)
    with pytest.raises(ValueError, match="overlaps"):
        C.attention_backward(q, k, v, None, out, g, lse, dq, dk2, dv2, 0.5, 0, 1)
    with pytest.raises(TypeError):
        C.attention_backward(q, k, v, None, out, g, lse.astype(np.float64), dq, dk, dv, 0.5, 0, 1)
    dvt = np.empty((1, 2, 6, 5), f).transpose(0, 1, 3, 2)
    with pytest.raises(ValueError, match="C-contiguous"):
        C.attention_backward(q, k, v, None, out, g, lse, dq, dk, dvt, 0.5, 0, 1)
    with pytest.raises(TypeError):
        C.attention_backward(q, k, v, None, out, g, lse, dq, dk, dv, 0.5, 0)
