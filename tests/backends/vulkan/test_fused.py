"""The runtime's fused-op shaders (kernels/fused.py: shaders/layer_norm.comp, attention.comp)
against the float64 numpy references of gpucore/runtime/ir/fused.py."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore.backends.vulkan.kernels import fused as F
from gpucore.errors import ShapeError
from gpucore.runtime.ir.fused import _att_eval, _ln_eval

RNG = np.random.default_rng(20261201)


def rand(*shape, loc=0.0):
    return (RNG.standard_normal(shape) + loc).astype(np.float32)


def dev(be, a: np.ndarray) -> np.ndarray:
    return be.upload(np.ascontiguousarray(a, np.float32), None)


def host(be, arr: np.ndarray) -> np.ndarray:
    return np.array(be.host_view(arr), dtype=np.float64)


def close(got, want):
    # atol: entries near zero (means of v, centred rows) carry float32 rounding of their terms
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- layer norm
def _ln_ref(x, w, b, n, eps):
    attrs = {"n": n, "eps": eps, "has_weight": w is not None, "has_bias": b is not None}
    arrays = [x.astype(np.float64)] + [t for t in (w, b) if t is not None]
    return _ln_eval(arrays, attrs)


@pytest.fixture(params=[None, 1, 8])
def lanes(request, monkeypatch):
    """Lanes per layer-norm row: the device's choice, or forced (8: the shared-memory combine)."""
    monkeypatch.setattr(F, "LN_LANES", request.param)
    return request.param


def dev_misaligned(be, a: np.ndarray) -> np.ndarray:
    """A device array holding ``a`` that starts one float into its allocation (scalar loads)."""
    flat = np.concatenate([np.zeros(1, np.float32), a.reshape(-1)])
    return dev(be, flat)[1:].reshape(a.shape)


@pytest.mark.parametrize("n", [1, 3, 17, 64, 200, 1000])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm(vulkan, lanes, n, affine):
    shape = (3, 7, n) if n < 1000 else (5, n)
    x = rand(*shape, loc=2.0)
    w = rand(n) if affine in ("both", "weight") else None
    b = rand(n) if affine in ("both", "bias") else None
    out = vulkan.empty_array(shape, np.float32)
    dw = dev(vulkan, w) if w is not None else None
    db = dev(vulkan, b) if b is not None else None
    F.layer_norm(vulkan, out, dev(vulkan, x), dw, db, n, 1e-5)
    close(host(vulkan, out), _ln_ref(x, w, b, n, 1e-5))


@pytest.mark.parametrize("n", [17, 1000])
def test_layer_norm_in_place_and_far_from_zero(vulkan, lanes, n):
    # rows centred at 300: a one-pass sum of squares would cancel, two passes do not
    x = rand(40, n, loc=300.0)
    w, b = rand(n), rand(n)
    dx = dev(vulkan, x)
    F.layer_norm(vulkan, dx, dx, dev(vulkan, w), dev(vulkan, b), n, 1e-5)
    close(host(vulkan, dx), _ln_ref(x, w, b, n, 1e-5))


def test_layer_norm_misaligned_rows(vulkan, lanes):
    x, w = rand(9, 64), rand(64)
    out = vulkan.empty_array(x.shape, np.float32)
    F.layer_norm(vulkan, out, dev_misaligned(vulkan, x), dev(vulkan, w), None, 64, 1e-5)
    close(host(vulkan, out), _ln_ref(x, w, None, 64, 1e-5))


def test_layer_norm_many_rows_and_eps(vulkan):
    x = rand(3000, 24)
    x[5] = 1.5  # a constant row: var 0, the output is the bias
    out = vulkan.empty_array(x.shape, np.float32)
    F.layer_norm(vulkan, out, dev(vulkan, x), None, None, 24, 0.1)
    close(host(vulkan, out), _ln_ref(x, None, None, 24, 0.1))


def test_layer_norm_refuses_bad_shapes(vulkan):
    x = dev(vulkan, rand(4, 6))
    with pytest.raises(ShapeError, match="weight has 5"):
        F.layer_norm(vulkan, x, x, dev(vulkan, rand(5)), None, 6, 1e-5)
    with pytest.raises(ShapeError, match="whole rows"):
        F.layer_norm(vulkan, x, x, None, None, 5, 1e-5)


# ------------------------------------------------------------------------------ attention
def _att_ref(q, k, v, mask, scale, causal):
    arrays = [np.asarray(a, np.float64) for a in (q, k, v)]
    if mask is not None:
        arrays.append(np.asarray(mask, np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return _att_eval(arrays, {"scale": scale, "causal": causal})


@pytest.fixture(params=["shuffle", "plain"])
def way(request, monkeypatch):
    """attention.comp's two ways of reading k and v (the shuffle one where the device has it)."""
    monkeypatch.setattr(F, "SHUFFLE", request.param == "shuffle")
    return request.param


def _qkv(be, b, s, h, d, misalign=False):
    """q, k, v as permuted device views of one [B, S, 3 * H * D] buffer (the qkv projection
    layout) and their host values; misalign: the buffer starts one float into its allocation
    (rows not 16-byte aligned: scalar loads)."""
    buf = rand(b, s, 3 * h * d)
    dbuf = dev_misaligned(be, buf) if misalign else dev(be, buf)
    views = []
    for i in range(3):
        part = slice(i * h * d, (i + 1) * h * d)
        views.append(
            (
                dbuf[:, :, part].reshape(b, s, h, d).transpose(0, 2, 1, 3),
                buf[:, :, part].reshape(b, s, h, d).transpose(0, 2, 1, 3),
            )
        )
    return views


@pytest.mark.parametrize("d,misalign", [(1, False), (8, False), (8, True), (64, False)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_qkv_views(vulkan, way, d, misalign, causal):
    b, s, h = 2, 13, 3
    (dq, q), (dk, k), (dv, v) = _qkv(vulkan, b, s, h, d, misalign)
    out = vulkan.empty_array((b, h, s, d), np.float32)
    scale = 1 / np.sqrt(d)
    F.attention(vulkan, out, dq, dk, dv, None, scale, causal)
    close(host(vulkan, out), _att_ref(q, k, v, None, scale, causal))
    # heads last: out written as [B, S, H, D] through a permuted view (the merged heads)
    merged = vulkan.empty_array((b, s, h, d), np.float32)
    F.attention(vulkan, merged.transpose(0, 2, 1, 3), dq, dk, dv, None, scale, causal)
    want = _att_ref(q, k, v, None, scale, causal).transpose(0, 2, 1, 3)
    close(host(vulkan, merged), want)


@pytest.mark.parametrize(
    "sq,skv,d,dv,mask_shape,causal",
    [
        (5, 300, 8, 8, "qk", False),
        (37, 300, 64, 64, "b11k", False),
        (300, 40, 8, 8, None, True),  # Sq > Skv: later rows see every key
        (70, 9, 12, 4, "qk", True),  # Skv not a multiple of a key block
        (6, 150, 64, 24, "qk", True),
        (4, 20, 130, 200, "b11k", False),  # D and Dv past one register row (chunks)
    ],
)
def test_attention_shapes_and_masks(vulkan, way, sq, skv, d, dv, mask_shape, causal):
    b, h = 2, 2
    q = rand(b, sq, h, d).transpose(0, 2, 1, 3)
    kv = rand(b, skv, h, d + dv)
    k = kv[..., :d].transpose(0, 2, 1, 3)
    v = kv[..., d:].transpose(0, 2, 1, 3)
    mask = dmask = None
    if mask_shape == "qk":
        mask = rand(sq, skv)
        mask[RNG.random((sq, skv)) < 0.2] = -np.inf
        dmask = dev(vulkan, mask)
    elif mask_shape == "b11k":
        mask = rand(b, 1, 1, skv)
        mask[0, 0, 0, :3] = -np.inf
        dmask = dev(vulkan, mask)
    dq = dev(vulkan, q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    dkv = dev(vulkan, kv)
    dk = dkv[..., :d].transpose(0, 2, 1, 3)
    dvv = dkv[..., d:].transpose(0, 2, 1, 3)
    out = vulkan.empty_array((b, h, sq, dv), np.float32)
    scale = 1 / np.sqrt(d)
    F.attention(vulkan, out, dq, dk, dvv, dmask, scale, causal)
    close(host(vulkan, out), _att_ref(q, k, v, mask, scale, causal))


def test_attention_fully_masked_row_is_zero(vulkan, way):
    b, h, sq, skv, d = 1, 2, 4, 33, 8
    q, k, v = rand(b, h, sq, d), rand(b, h, skv, d), rand(b, h, skv, d)
    mask = np.zeros((sq, skv), np.float32)
    mask[2] = -np.inf  # query 2 may attend to nothing
    mask[1, 5:] = -np.inf
    out = vulkan.empty_array((b, h, sq, d), np.float32)
    F.attention(vulkan, out, dev(vulkan, q), dev(vulkan, k), dev(vulkan, v),
                dev(vulkan, mask), 0.3, False)  # fmt: skip
    got = host(vulkan, out)
    assert (got[:, :, 2] == 0).all()  # as the C kernel and PyTorch's SDPA
    assert not np.isnan(got).any()
    close(got, _att_ref(q, k, v, mask, 0.3, False))


def test_attention_nan_score_fills_its_row(vulkan, way):
    q, k, v = rand(1, 1, 3, 4), rand(1, 1, 40, 4), rand(1, 1, 40, 4)
    k[0, 0, 25, 1] = np.nan  # every query's score with key 25
    out = vulkan.empty_array((1, 1, 3, 4), np.float32)
    F.attention(vulkan, out, dev(vulkan, q), dev(vulkan, k), dev(vulkan, v), None, 0.5, False)
    assert np.isnan(host(vulkan, out)).all()


def test_attention_refuses_mismatched_shapes(vulkan):
    q = dev(vulkan, rand(1, 2, 3, 4))
    k = dev(vulkan, rand(1, 2, 5, 4))
    out = vulkan.empty_array((1, 2, 3, 4), np.float32)
    with pytest.raises(ShapeError, match="do not match"):
        F.attention(vulkan, out, q, k, dev(vulkan, rand(1, 2, 6, 4)), None, 1.0, False)
    with pytest.raises(ShapeError, match="does not broadcast"):
        F.attention(vulkan, out, q, k, k, dev(vulkan, rand(3, 4)), 1.0, False)
