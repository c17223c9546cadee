"""scaled_dot_product_attention and MultiheadAttention against PyTorch (same inputs and weights:
outputs and gradients within 1e-5 in float32, 1e-10 in float64), a float64 gradcheck of the
composition with masks, causal and GQA, and argument errors."""

import numpy as np
import pytest
from helpers import check_grad

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F

torch = pytest.importorskip("torch")

TOL = {"float32": 1e-5, "float64": 1e-10}


def _pair(a: np.ndarray, dtype: str, grad: bool = True):
    """The same array as a gpucore and a torch tensor (floats as dtype)."""
    if a.dtype.kind == "f":
        a = a.astype(dtype)
    g = gpucore.tensor(a, requires_grad=grad and a.dtype.kind == "f")
    t = torch.tensor(a, requires_grad=grad and a.dtype.kind == "f")
    return g, t


def _close(ours, theirs, tol, what=""):
    a = ours.detach().numpy() if isinstance(ours, gpucore.Tensor) else np.asarray(ours)
    b = theirs.detach().numpy()
    assert a.shape == b.shape, what
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _mask(kind: str, shape: tuple, rng) -> np.ndarray | None:
    if kind == "bool":
        m = rng.random(shape) > 0.3
        m[..., 1, :] = False  # one fully masked row: zeros and zero gradients, as PyTorch
        return m
    if kind == "float":
        return rng.standard_normal(shape)
    return None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "mask,causal,gqa,scale",
    [
        (None, False, False, None),
        (None, True, False, None),
        ("bool", False, False, None),
        ("float", False, False, 0.3),
        (None, True, True, None),
        ("bool", False, True, 0.5),
    ],
)
def test_sdpa_matches_torch(dtype, mask, causal, gqa, scale):
    rng = np.random.default_rng(0)
    hk = 2 if gqa else 4
    q = rng.standard_normal((2, 4, 5, 8))
    k = rng.standard_normal((2, hk, 6, 8))
    v = rng.standard_normal((2, hk, 6, 3))
    m = _mask(mask, (5, 6), rng)
    ours = [_pair(a, dtype) for a in (q, k, v)]
    kw = {"is_causal": causal, "scale": scale, "enable_gqa": gqa}
    mo, mt = (None, None) if m is None else _pair(m, dtype, grad=False)
    out = F.scaled_dot_product_attention(*(o[0] for o in ours), attn_mask=mo, **kw)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(o[1] for o in ours), attn_mask=mt, **kw
    )
    tol = TOL[dtype]
    _close(out, ref, tol, "output")
    g = rng.standard_normal(ref.shape).astype(dtype)
    out.backward(gpucore.tensor(g))
    ref.backward(torch.tensor(g))
    for name, (a, b) in zip("qkv", ours):
        _close(a.grad, b.grad, tol, f"grad of {name}")


def test_sdpa_unbatched_and_broadcast_mask():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s) for s in ((3, 4), (5, 4), (5, 2)))
    m = rng.random((2, 1, 3, 5)) > 0.2
    out = F.scaled_dot_product_attention(*(gpucore.tensor(a) for a in (q, k, v)))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)))
    _close(out, ref, 1e-10)
    qb = np.broadcast_to(q, (2, 3, 3, 4)).copy()
    args = (qb, np.broadcast_to(k, (2, 3, 5, 4)).copy(), np.broadcast_to(v, (2, 3, 5, 2)).copy())
    out = F.scaled_dot_product_attention(*map(gpucore.tensor, args), gpucore.tensor(m))
    ref = torch.nn.functional.scaled_dot_product_attention(
        *map(torch.tensor, args), torch.tensor(m)
    )
    _close(out, ref, 1e-10)


def test_sdpa_gradcheck_float64():
    rng = np.random.default_rng(2)
    q, k, v = (
        rng.standard_normal((1, 2, 3, 4)),
        rng.standard_normal((1, 2, 4, 4)),
        rng.standard_normal((1, 2, 4, 3)),
    )
    keep = gpucore.tensor(rng.random((3, 4)) > 0.4)
    bias = gpucore.tensor(rng.standard_normal((3, 4)))
    check_grad(F.scaled_dot_product_attention, q, k, v)
    check_grad(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v)
    check_grad(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=keep), q, k, v)
    check_grad(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=bias), q, k, v)
    q4 = rng.standard_normal((1, 4, 3, 4))
    check_grad(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, enable_gqa=True), q4, k, v)


def test_sdpa_dropout_uses_gpucore_stream():
    q = gpucore.ones(1, 1, 4, 2)
    v = gpucore.arange(8, dtype=gpucore.float32).reshape(1, 1, 4, 2)
    gpucore.manual_seed(3)
    a = F.scaled_dot_product_attention(q, q, v, dropout_p=0.5)
    gpucore.manual_seed(3)
    b = F.scaled_dot_product_attention(q, q, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), F.scaled_dot_product_attention(q, q, v).numpy())


def test_sdpa_bad_arguments():
    q, k, v = gpucore.zeros(2, 3, 4), gpucore.zeros(2, 5, 4), gpucore.zeros(2, 5, 6)
    with pytest.raises(gpucore.ShapeError, match="last dim"):
        F.scaled_dot_product_attention(q, gpucore.zeros(2, 5, 3), v)
    with pytest.raises(gpucore.ShapeError, match="sequence length"):
        F.scaled_dot_product_attention(q, k, gpucore.zeros(2, 4, 6))
    with pytest.raises(gpucore.ShapeError, match="number of dims"):
        F.scaled_dot_product_attention(q, k.reshape(10, 4), v)
    with pytest.raises(gpucore.ShapeError, match="multiple"):
        F.scaled_dot_product_attention(
            gpucore.zeros(1, 3, 2, 4),
            gpucore.zeros(1, 2, 2, 4),
            gpucore.zeros(1, 2, 2, 4),
            enable_gqa=True,
        )
    with pytest.raises(ValueError, match="not both"):
        F.scaled_dot_product_attention(
            q, k, v, attn_mask=gpucore.ones(3, 5, dtype=gpucore.bool), is_causal=True
        )
    with pytest.raises(gpucore.ShapeError, match="attn_mask of shape"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=gpucore.ones(5, 3, dtype=gpucore.bool))
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(gpucore.DTypeError, match="dtype"):
        F.scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(gpucore.DTypeError, match="attn_mask"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=gpucore.ones(3, 5, dtype=gpucore.int64))


# ----------------------------------------------------------------------------- MultiheadAttention
def _copy_weights(ours: gpucore.nn.Module, theirs) -> None:
    ours.load_state_dict(
        {k: gpucore.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )


def _mha_pair(dtype, **kw):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(**kw).to(getattr(torch, dtype)).eval()
    ours = nn.MultiheadAttention(**kw).to(getattr(gpucore, dtype)).eval()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    _copy_weights(ours, theirs)
    return ours, theirs


MHA_CASES = [
    ({}, {}),
    ({"batch_first": True}, {"average_attn_weights": False}),
    ({"kdim": 6, "vdim": 5}, {"need_weights": False}),
    ({"bias": False, "add_bias_kv": True}, {"attn_mask": "bool"}),
    ({"add_zero_attn": True}, {"key_padding_mask": True, "attn_mask": "float"}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"key_padding_mask": True, "attn_mask": "3d"}),
    ({}, {"attn_mask": "causal", "is_causal": True, "need_weights": False}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ctor,call", MHA_CASES)
@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
def test_multihead_attention_matches_torch(dtype, ctor, call):
    e, h, n, lq, s = 8, 2, 3, 4, 5
    kw = {"embed_dim": e, "num_heads": h, **ctor}
    ours, theirs = _mha_pair(dtype, **kw)
    rng = np.random.default_rng(4)
    bf = ctor.get("batch_first", False)
    shape = (lambda L, d: (n, L, d)) if bf else (lambda L, d: (L, n, d))
    arrays = [
        rng.standard_normal(shape(lq, e)),
        rng.standard_normal(shape(s, ctor.get("kdim", e))),
        rng.standard_normal(shape(s, ctor.get("vdim", e))),
    ]
    ins = [_pair(a, dtype) for a in arrays]
    ok, tk = {}, {}
    for name in ("need_weights", "average_attn_weights", "is_causal"):
        if name in call:
            ok[name] = tk[name] = call[name]
    m = call.get("attn_mask")
    if m is not None:
        arr = {
            "bool": rng.random((lq, s)) > 0.3,
            "float": rng.standard_normal((lq, s)),
            "3d": rng.standard_normal((n * h, lq, s)),
            "causal": np.triu(np.full((lq, s), -np.inf), 1),
        }[m]
        ok["attn_mask"], tk["attn_mask"] = _pair(arr, dtype, grad=False)
    if call.get("key_padding_mask"):
        kpm = np.zeros((n, s), bool)
        kpm[0, -2:] = True
        ok["key_padding_mask"], tk["key_padding_mask"] = _pair(kpm, dtype, grad=False)
    out, w = ours(*(i[0] for i in ins), **ok)
    ref, rw = theirs(*(i[1] for i in ins), **tk)
    tol = TOL[dtype]
    _close(out, ref, tol, "output")
    if rw is None:
        assert w is None
    else:
        _close(w, rw, tol, "weights")
    g = rng.standard_normal(ref.shape).astype(dtype)
    out.backward(gpucore.tensor(g))
    ref.backward(torch.tensor(g))
    for i, (a, b) in enumerate(ins):
        _close(a.grad, b.grad, tol, f"grad of input {i}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, tol, f"grad of {name}")


def test_multihead_attention_unbatched_and_errors():
    ours, theirs = _mha_pair("float64", embed_dim=4, num_heads=2)
    x = np.random.default_rng(5).standard_normal((3, 4))
    out, w = ours(*(gpucore.tensor(x),) * 3)
    ref, rw = theirs(*(torch.tensor(x),) * 3)
    _close(out, ref, 1e-10)
    _close(w, rw, 1e-10)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(gpucore.ShapeError, match="features"):
        ours(
            gpucore.zeros(3, 2, 5, dtype=gpucore.float64),
            *(gpucore.zeros(3, 2, 4, dtype=gpucore.float64),) * 2,
        )
    q = gpucore.zeros(3, 2, 4, dtype=gpucore.float64)
    with pytest.raises(gpucore.ShapeError, match="attn_mask"):
        ours(q, q, q, attn_mask=gpucore.zeros(2, 2, dtype=gpucore.float64))
    with pytest.raises(gpucore.ShapeError, match="key_padding_mask"):
        ours(q, q, q, key_padding_mask=gpucore.zeros(3, 3, dtype=gpucore.bool))
