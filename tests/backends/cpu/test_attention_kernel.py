"""_cpu.attention (cpu/attention.c): both algorithms against an independent float64 numpy
reference and each other, in float32 and float64: odd shapes, Sq != Skv with causal, float and
bool masks broadcast by zero strides, strided / permuted / negative-stride / broadcast views of
q, k, v and out, decoding (one query row), long key ranges (several tiled key blocks, and per
block packing), fully masked rows (0, as PyTorch's SDPA: checked against torch when installed),
NaN / inf scores, thread-count independence, and argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from gpucore import _cpu as C

DTYPES = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.float64: 1e-12}
ALGOS = [0, 1, 2]


def ref_attention(q, k, v, mask, scale, causal):
    """float64 softmax(q k^T scale + mask) v; rows whose scores are all -inf give 0."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    sq, skv = s.shape[-2:]
    if mask is not None:
        mask = np.broadcast_to(mask, s.shape)
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if causal:
        s = np.where(np.arange(skv)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        mx = s.max(axis=-1, keepdims=True) if skv else np.full(s.shape[:-1] + (1,), -np.inf)
        dead = mx == -np.inf
        p = np.exp(s - np.where(dead, 0.0, mx))
        p = p / np.where(dead, 1.0, p.sum(axis=-1, keepdims=True))
        out = np.einsum("bhij,bhjd->bhid", p, v)
    return np.where(dead, 0.0, out)


def run(q, k, v, mask, scale, causal, algo, out=None):
    if out is None:
        out = np.full(q.shape[:3] + (v.shape[3],), np.nan, q.dtype)
    C.attention(q, k, v, mask, out, scale, causal, algo)
    return out


def check(out, ref, dt):
    scale = max(1.0, float(np.nanmax(np.abs(ref))) if ref.size else 1.0)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    err = np.nanmax(np.abs(out.astype(np.float64) - ref)) / scale if ref.size else 0.0
    assert err <= TOL[dt], err


def rand(r, shape, dt):
    return r.standard_normal(shape).astype(dt)


SHAPES = [  # B, H, Sq, Skv, D, Dv
    (1, 1, 1, 1, 1, 1),
    (2, 3, 5, 7, 4, 6),
    (1, 2, 33, 300, 16, 8),
    (2, 1, 70, 40, 5, 3),
    (1, 2, 9, 9, 64, 64),
    (1, 1, 129, 517, 24, 17),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_matches_float64(dt, shape, causal):
    B, H, Sq, Skv, D, Dv = shape
    r = np.random.default_rng(sum(shape) + causal)
    q, k, v = rand(r, (B, H, Sq, D), dt), rand(r, (B, H, Skv, D), dt), rand(r, (B, H, Skv, Dv), dt)
    masks = [
        None,
        rand(r, (Sq, Skv), dt),
        rand(r, (B, 1, Sq, Skv), dt),
        rand(r, (Skv,), dt),
        r.random((B, H, Sq, Skv)) > 0.3,
        r.random((1, H, 1, Skv)) > 0.2,
    ]
    scale = 1.0 / np.sqrt(D)
    for mask in masks:
        ref = ref_attention(q, k, v, mask, scale, causal)
        outs = [run(q, k, v, mask, scale, causal, algo) for algo in ALGOS]
        for out in outs:
            check(out, ref, dt)
        np.testing.assert_allclose(outs[1], outs[2], rtol=TOL[dt], atol=TOL[dt])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sq,skv", [(3, 11), (11, 3), (1, 600), (600, 1), (40, 1000)])
def test_causal_unequal_lengths(dt, sq, skv):
    """Top-left aligned: query i attends keys j <= i whatever Sq and Skv."""
    r = np.random.default_rng(sq * 7 + skv)
    q, k, v = rand(r, (1, 2, sq, 8), dt), rand(r, (1, 2, skv, 8), dt), rand(r, (1, 2, skv, 5), dt)
    ref = ref_attention(q, k, v, None, 0.4, 1)
    for algo in ALGOS:
        check(run(q, k, v, None, 0.4, 1, algo), ref, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("algo", ALGOS)
def test_strided_permuted_and_broadcast_views(dt, algo):
    r = np.random.default_rng(5)
    B, S, H, D, Skv, Dv = 2, 13, 3, 8, 21, 6
    # q from a [B, S, H, D] buffer permuted to [B, H, S, D]; k with D stride 2; v reversed along
    # Skv and strided along Dv; out a permuted view of a [B, S, H, Dv] buffer
    q = rand(r, (B, S, H, D), dt).transpose(0, 2, 1, 3)
    k = rand(r, (B, H, Skv, 2 * D), dt)[..., ::2]
    v = rand(r, (B, H, Skv, 3 * Dv), dt)[:, :, ::-1, ::3]
    out_buf = np.full((B, S, H, Dv), np.nan, dt)
    out = out_buf.transpose(0, 2, 1, 3)
    mask = rand(r, (S, Skv), dt).T.copy().T  # a transposed (column-major) float mask
    ref = ref_attention(q, k, v, mask, 0.3, 0)
    C.attention(q, k, v, mask, out, 0.3, 0, algo)
    check(out, ref, dt)
    # k and v shared by the heads (B, H of 1; and zero strides through broadcast_to), q rows
    # all alike (zero stride along Sq)
    k1, v1 = rand(r, (B, 1, Skv, D), dt), rand(r, (1, 1, Skv, Dv), dt)
    kb = np.broadcast_to(k1, (B, H, Skv, D))
    q0 = np.broadcast_to(rand(r, (B, H, 1, D), dt), (B, H, S, D))
    for kk, vv in ((k1, v1), (kb, np.broadcast_to(v1, (B, H, Skv, Dv)))):
        got = run(q0, kk, vv, None, 0.5, 1, algo)
        check(got, ref_attention(q0, np.broadcast_to(kk, kb.shape), vv, None, 0.5, 1), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_decoding_and_few_rows(dt):
    """One query row against a long cache (gemv over K's rows in place), and 3 rows with K not
    contiguous along D (K^T packed)."""
    r = np.random.default_rng(6)
    k = rand(r, (2, 4, 700, 32), dt)
    v = rand(r, (2, 4, 700, 32), dt)
    for sq, kk in ((1, k), (3, k), (3, np.asfortranarray(k))):
        q = rand(r, (2, 4, sq, 32), dt)
        ref = ref_attention(q, kk, v, None, 0.2, 0)
        outs = [run(q, kk, v, None, 0.2, 0, algo) for algo in ALGOS]
        for out in outs:
            check(out, ref, dt)


def test_tiled_blocks_packed_per_block():
    """K^T of a head above the per-thread cache (4 MB): the tiled algorithm packs per key block;
    V strided along Dv is packed too."""
    r = np.random.default_rng(7)
    skv = 8300
    q = rand(r, (1, 1, 5, 64), np.float64)
    k = rand(r, (1, 1, skv, 64), np.float64)
    v = rand(r, (1, 1, skv, 16), np.float64)[..., ::2]
    mask = r.random((5, skv)) > 0.5
    for causal in (0, 1):
        ref = ref_attention(q, k, v, mask, 0.125, causal)
        for algo in ALGOS:
            check(run(q, k, v, mask, 0.125, causal, algo), ref, np.float64)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("algo", ALGOS)
def test_fully_masked_rows_give_zero(dt, algo):
    r = np.random.default_rng(8)
    q, k, v = rand(r, (2, 2, 6, 4), dt), rand(r, (2, 2, 300, 4), dt), rand(r, (2, 2, 300, 3), dt)
    bmask = r.random((2, 2, 6, 300)) > 0.5
    bmask[0, 1, 2] = False
    bmask[1, :, 5] = False
    fmask = np.where(bmask, 0.0, -np.inf).astype(dt)
    for mask in (bmask, fmask):
        out = run(q, k, v, mask, 0.5, 0, algo)
        check(out, ref_attention(q, k, v, mask, 0.5, 0), dt)
        assert np.all(out[0, 1, 2] == 0) and np.all(out[1, :, 5] == 0)
    # no key at all
    out = run(q, k[:, :, :0], v[:, :, :0], None, 0.5, 0, algo)
    assert np.all(out == 0)


@pytest.mark.parametrize("algo", ALGOS)
def test_nan_and_inf_scores(algo):
    r = np.random.default_rng(9)
    q, k, v = rand(r, (1, 1, 4, 4), np.float32), rand(r, (1, 1, 5, 4), np.float32), None
    v = rand(r, (1, 1, 5, 2), np.float32)
    q[0, 0, 1, 2] = np.nan
    mask = np.zeros((4, 5), np.float32)
    mask[2, 3] = np.inf
    mask[3] = -np.inf
    out = run(q, k, v, mask, 1.0, 0, algo)
    assert np.isnan(out[0, 0, 1]).all() and np.isnan(out[0, 0, 2]).all()
    assert np.all(out[0, 0, 3] == 0) and np.isfinite(out[0, 0, 0]).all()
    check(out, ref_attention(q, k, v, mask, 1.0, 0), np.float32)


@pytest.mark.parametrize("dt", DTYPES)
def test_matches_torch_sdpa(dt):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    r = np.random.default_rng(10)
    q, k, v = rand(r, (2, 3, 7, 8), dt), rand(r, (2, 3, 9, 8), dt), rand(r, (2, 3, 9, 5), dt)
    bmask = r.random((2, 1, 7, 9)) > 0.4
    bmask[1, 0, 3] = False  # a fully masked row
    fmask = rand(r, (7, 9), dt)
    fmask[4] = -np.inf
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def ctx():
            return sdpa_kernel(SDPBackend.MATH)
    except ImportError:  # pragma: no cover - older torch
        import contextlib

        ctx = contextlib.nullcontext
    for mask, causal in ((None, 0), (None, 1), (bmask, 0), (fmask, 0)):
        with ctx():
            want = F.scaled_dot_product_attention(
                tq,
                tk,
                tv,
                attn_mask=None if mask is None else torch.from_numpy(mask),
                is_causal=bool(causal),
            ).numpy()
        for algo in ALGOS:
            got = run(q, k, v, mask, 1.0 / np.sqrt(8), causal, algo)
            np.testing.assert_allclose(
                got, want, rtol=1e-5, atol=1e-5 if dt == np.float32 else 1e-12
            )


def test_threads_bitwise():
    r = np.random.default_rng(11)
    q, k, v = (rand(r, (2, 4, 96, 32), np.float32) for _ in range(3))
    threads = C.info()["threads"]
    for algo in ALGOS:
        many = run(q, k, v, None, 0.2, 1, algo)
        try:
            C.set_num_threads(1)
            one = run(q, k, v, None, 0.2, 1, algo)
        finally:
            C.set_num_threads(threads)
        np.testing.assert_array_equal(many, one)


def test_attention_errors():
    f = np.float32
    q, k, v = np.ones((1, 2, 3, 4), f), np.ones((1, 2, 5, 4), f), np.ones((1, 2, 5, 6), f)
    out = np.empty((1, 2, 3, 6), f)
    A = C.attention
    with pytest.raises(ValueError, match="attention: 'out' must be 4-d"):
        A(q, k, v, None, out[0], 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'q' must be 4-d"):
        A(q[0], k, v, None, out, 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'k' has shape \\(1, 2, 5, 3\\)"):
        A(q, np.ones((1, 2, 5, 3), f), v, None, out, 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'v' has shape"):
        A(q, k, np.ones((1, 2, 4, 6), f), None, out, 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'q' has shape"):
        A(np.ones((1, 3, 3, 4), f), k, v, None, out, 1.0, 0, 0)
    with pytest.raises(TypeError, match="attention: 'k' must be float32"):
        A(q, k.astype(np.float64), v, None, out, 1.0, 0, 0)
    with pytest.raises(TypeError, match="attention: 'q' must be float32"):
        A(q.astype(np.int32), k, v, None, out, 1.0, 0, 0)
    with pytest.raises(TypeError, match="attention: 'mask' must be bool or float32"):
        A(q, k, v, np.zeros((3, 5)), out, 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'mask' of shape \\(4, 5\\) does not"):
        A(q, k, v, np.zeros((4, 5), f), out, 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'mask' has 5 dims"):
        A(q, k, v, np.zeros((1, 1, 2, 3, 5), f), out, 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'algo' must be 0"):
        A(q, k, v, None, out, 1.0, 0, 3)
    with pytest.raises(ValueError, match="attention: 'causal' must be 0 or 1"):
        A(q, k, v, None, out, 1.0, 2, 0)
    with pytest.raises(ValueError, match="attention: 'scale' must be finite"):
        A(q, k, v, None, out, float("inf"), 0, 0)
    with pytest.raises(ValueError, match="attention: 'out' overlaps 'v'"):
        vv = np.ones((1, 2, 5, 6), f)
        A(q, k, vv, None, vv[:, :, :3], 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: 'out' overlaps 'mask'"):
        buf = np.zeros(64, f)
        A(q, k, v, buf[:15].reshape(3, 5), buf[10:46].reshape(1, 2, 3, 6), 1.0, 0, 0)
    with pytest.raises(ValueError, match="attention: the elements of 'out' must not overlap"):
        base = np.empty(12, f)
        A(q, k, v, None, as_strided(base, (1, 2, 3, 6), (0, 4, 4, 4)), 1.0, 0, 0)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty_like(out)
        ro.flags.writeable = False
        A(q, k, v, None, ro, 1.0, 0, 0)
    with pytest.raises(TypeError, match="exactly 8"):
        A(q, k, v, None, out, 1.0, 0)
    # nothing to write: fine
    A(q[:, :, :0], k, v, None, out[:, :, :0], 1.0, 0, 0)
