"""F.multi_head_attention_forward against torch.nn.functional.multi_head_attention_forward
with the same weights: packed and separate projections, bias_k / bias_v, add_zero_attn,
static_k / static_v, bool / float / 3-D masks, key padding, need_weights and per-head weights,
the is_causal hint, unbatched inputs; outputs and the gradients of inputs and weights; a float64
gradcheck; errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck

E, H, N, L, S = 8, 2, 3, 4, 5


def _weights(rng, separate: bool, kdim: int, vdim: int, bias_kv: bool):
    w = {
        "in_proj_weight": None if separate else rng.standard_normal((3 * E, E)) * 0.4,
        "in_proj_bias": rng.standard_normal(3 * E) * 0.1,
        "bias_k": rng.standard_normal((1, 1, E)) if bias_kv else None,
        "bias_v": rng.standard_normal((1, 1, E)) if bias_kv else None,
        "out_proj_weight": rng.standard_normal((E, E)) * 0.4,
        "out_proj_bias": rng.standard_normal(E) * 0.1,
    }
    if separate:
        w["q_proj_weight"] = rng.standard_normal((E, E)) * 0.4
        w["k_proj_weight"] = rng.standard_normal((E, kdim)) * 0.4
        w["v_proj_weight"] = rng.standard_normal((E, vdim)) * 0.4
    return w


CASES = [
    {},
    {"need_weights": False},
    {"average_attn_weights": False},
    {"separate": True, "kdim": 6, "vdim": 5},
    {"bias_kv": True, "attn_mask": "bool"},
    {"add_zero_attn": True, "key_padding_mask": True, "attn_mask": "float"},
    {"bias_kv": True, "add_zero_attn": True, "key_padding_mask": True, "attn_mask": "3d"},
    {"attn_mask": "causal", "is_causal": True, "need_weights": False, "self": True},
    {"attn_mask": "causal", "is_causal": True, "self": True},
    {"static": True},
    {"unbatched": True},
    {"self": True, "key_padding_mask": True},
]


def _run(m, q, k, v, w, case, masks, static):
    return m.nn.functional.multi_head_attention_forward(
        q, k, v, E, H, w["in_proj_weight"], w["in_proj_bias"], w["bias_k"], w["bias_v"],
        case.get("add_zero_attn", False), 0.3, w["out_proj_weight"], w["out_proj_bias"],
        training=False, key_padding_mask=masks.get("kpm"),
        need_weights=case.get("need_weights", True), attn_mask=masks.get("attn"),
        use_separate_proj_weight=case.get("separate", False),
        q_proj_weight=w.get("q_proj_weight"), k_proj_weight=w.get("k_proj_weight"),
        v_proj_weight=w.get("v_proj_weight"), static_k=static[0], static_v=static[1],
        average_attn_weights=case.get("average_attn_weights", True),
        is_causal=case.get("is_causal", False),
    )  # fmt: skip


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("case", CASES, ids=[str(sorted(c)) for c in CASES])
def test_multi_head_attention_forward_as_torch(case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    kdim, vdim = case.get("kdim", E), case.get("vdim", E)
    w_np = _weights(rng, case.get("separate", False), kdim, vdim, case.get("bias_kv", False))
    lead = () if case.get("unbatched") else (N,)
    n = 1 if case.get("unbatched") else N

    def shape(length, d):
        return (length, *lead, d)

    q_np = rng.standard_normal(shape(L, E))
    s = L if case.get("self") else S
    k_np = q_np if case.get("self") else rng.standard_normal(shape(S, kdim))
    v_np = q_np if case.get("self") else rng.standard_normal(shape(S, vdim))
    masks_np = {}
    if case.get("attn_mask") == "bool":
        masks_np["attn"] = rng.random((L, s)) > 0.7
    elif case.get("attn_mask") == "float":
        masks_np["attn"] = rng.standard_normal((L, s))
    elif case.get("attn_mask") == "3d":
        masks_np["attn"] = rng.standard_normal((n * H, L, s))
    elif case.get("attn_mask") == "causal":
        masks_np["attn"] = np.triu(np.full((L, s), -np.inf), 1)
    if case.get("key_padding_mask"):
        kpm = np.zeros((n, s), bool)
        kpm[0, -2:] = True
        masks_np["kpm"] = kpm
    static_np = (None, None)
    if case.get("static"):
        static_np = tuple(rng.standard_normal((n * H, 6, E // H)) for _ in range(2))

    results, grads = [], []
    for m in (gpucore, torch):
        w = {k: None if a is None else m.tensor(a, requires_grad=True) for k, a in w_np.items()}
        q = m.tensor(q_np, requires_grad=True)
        k = q if case.get("self") else m.tensor(k_np, requires_grad=True)
        v = q if case.get("self") else m.tensor(v_np, requires_grad=True)
        masks = {key: m.tensor(a) for key, a in masks_np.items()}
        static = tuple(None if a is None else m.tensor(a, requires_grad=True) for a in static_np)
        out, attw = _run(m, q, k, v, w, case, masks, static)
        (out * m.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))).sum().backward()
        results.append((out, attw))
        leaves = [q, k, v, *w.values(), *static]
        grads.append([None if t is None or t.grad is None else t.grad.numpy() for t in leaves])
    (out, attw), (tout, tattw) = results
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-9, atol=1e-10)
    if tattw is None:
        assert attw is None
    else:
        np.testing.assert_allclose(attw.detach().numpy(), tattw.detach().numpy(), atol=1e-10)
    for i, (a, b) in enumerate(zip(*grads)):
        if b is None:
            assert a is None or not np.any(a), i
        else:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10, err_msg=f"leaf {i}")


def test_multi_head_attention_forward_gradcheck():
    rng = np.random.default_rng(8)
    w = {
        k: None if a is None else gpucore.tensor(a)
        for k, a in _weights(rng, False, E, E, True).items()
    }
    q = gpucore.tensor(rng.standard_normal((3, 2, E)), requires_grad=True)
    kv = gpucore.tensor(rng.standard_normal((4, 2, E)), requires_grad=True)
    win = gpucore.tensor(w["in_proj_weight"].numpy(), requires_grad=True)
    mask = gpucore.tensor(rng.random((3, 4)) > 0.7)

    def f(q, kv, win):
        return F.multi_head_attention_forward(
            q, kv, kv, E, H, win, w["in_proj_bias"], w["bias_k"], w["bias_v"], True, 0.0,
            w["out_proj_weight"], w["out_proj_bias"], attn_mask=mask,
        )[0]  # fmt: skip

    assert gradcheck(f, (q, kv, win), atol=1e-6, rtol=1e-4)


def test_multi_head_attention_forward_errors():
    q = gpucore.zeros(3, 2, E, dtype=gpucore.float64)
    wi, wo = (
        gpucore.zeros(3 * E, E, dtype=gpucore.float64),
        gpucore.zeros(E, E, dtype=gpucore.float64),
    )
    args = (wi, None, None, None, False, 0.0, wo, None)
    with pytest.raises(ValueError, match="is_causal"):
        F.multi_head_attention_forward(q, q, q, E, H, *args, is_causal=True)
    with pytest.raises(gpucore.ShapeError, match="embedding dimension"):
        F.multi_head_attention_forward(q, q, q, E + 1, H, *args)
    with pytest.raises(ValueError, match="in_proj_weight"):
        F.multi_head_attention_forward(q, q, q, E, H, None, *args[1:])
    with pytest.raises(ValueError, match="q_proj_weight"):
        F.multi_head_attention_forward(q, q, q, E, H, *args, use_separate_proj_weight=True)
    with pytest.raises(gpucore.ShapeError, match="attn_mask"):
        F.multi_head_attention_forward(q, q, q, E, H, *args, attn_mask=gpucore.zeros(2, 2))
    with pytest.raises(gpucore.ShapeError, match="static_k"):
        F.multi_head_attention_forward(q, q, q, E, H, *args, static_k=gpucore.zeros(3, 3, 4))
    with pytest.raises(ValueError, match="divisible"):
        F.multi_head_attention_forward(q, q, q, E, 3, *args)
    bad_bias = gpucore.zeros(5, dtype=gpucore.float64)
    with pytest.raises(gpucore.ShapeError, match="in_proj_bias"):
        F.multi_head_attention_forward(q, q, q, E, H, wi, bad_bias, *args[2:])
    with pytest.raises(TypeError, match="out_proj_weight"):
        F.multi_head_attention_forward(q, q, q, E, H, *args[:6], lambda t: t, None)


def test_multi_head_attention_forward_on_vulkan_agrees_with_the_cpu(vulkan):
    rng = np.random.default_rng(9)
    w = _weights(rng, False, E, E, True)
    q, kv = rng.standard_normal((L, N, E)), rng.standard_normal((S, N, E))
    mask = rng.random((L, S)) > 0.7
    outs = []
    for device in ("cpu", "vulkan"):

        def dev(a, device=device):
            return None if a is None else gpucore.tensor(np.asarray(a, np.float32), device=device)

        out, attw = F.multi_head_attention_forward(
            dev(q), dev(kv), dev(kv), E, H, dev(w["in_proj_weight"]), dev(w["in_proj_bias"]),
            dev(w["bias_k"]), dev(w["bias_v"]), True, 0.0, dev(w["out_proj_weight"]),
            dev(w["out_proj_bias"]), attn_mask=gpucore.tensor(mask, device=device),
        )  # fmt: skip
        outs.append((out.cpu().numpy(), attw.cpu().numpy()))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-5)
