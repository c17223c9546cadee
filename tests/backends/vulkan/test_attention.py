"""The fused scaled_dot_product_attention ops on Vulkan (kernels/attention.py: the forward shader
attention.comp with each row's logsumexp, grouped-query heads and bool masks; the
FlashAttention-2 backward attention_backward.comp) against the C kernels on the same float32
inputs: Sq != Skv, D != Dv, D up to 128, sizes off the 64-row workgroups, causal, bool and float
masks broadcast, grouped-query heads, fully masked rows; the gradients of
F.scaled_dot_product_attention on Vulkan tensors against the composition of differentiable ops
(ops/attention.attention_grads) and float64 finite differences; and a training step of a tiny
causal transformer on Vulkan against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import dispatch, nn
from gpucore.autograd import gradcheck
from gpucore.backends.vulkan.kernels import attention as VA
from gpucore.backends.vulkan.kernels import fused as VF
from gpucore.ops.attention import SDPA, SDPA_BACKWARD, attention_grads
from gpucore.ops.registry import apply

FWD, BWD = "scaled_dot_product_attention", "scaled_dot_product_attention_backward"
RTOL, ATOL = 1e-4, 1e-5

# (B, H, Hk, Sq, Skv, D, Dv, mask kind, mask shape, causal)
CASES = [
    (1, 2, 2, 5, 7, 4, 6, None, None, False),
    (2, 2, 2, 70, 45, 16, 16, None, None, True),  # past one 64-row workgroup, Sq > Skv
    (1, 4, 2, 33, 67, 8, 5, "bool", (1, 4, 33, 67), True),  # grouped-query heads
    (2, 3, 1, 9, 12, 32, 24, "float", (12,), False),  # a float mask broadcast over rows
    (2, 2, 2, 6, 10, 128, 100, "bool", (2, 1, 6, 10), False),  # D up to 128
    (2, 2, 1, 11, 8, 20, 64, "dead", (2, 1, 11, 8), True),  # fully masked rows, GQA
    (1, 1, 1, 3, 130, 64, 64, "float", (3, 130), True),
]


@pytest.fixture(params=["shuffle", "plain"])
def way(request, monkeypatch):
    """The shaders' two ways of reading the walked rows (subgroup shuffles where the device
    has them, else every invocation loads them)."""
    monkeypatch.setattr(VF, "SHUFFLE", request.param == "shuffle")
    monkeypatch.setattr(VA, "SHUFFLE", request.param == "shuffle")
    return request.param


def _case(case, seed):
    b, h, hk, sq, skv, d, dv, kind, mshape, causal = case
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, hk, skv, d)).astype(np.float32)
    v = rng.standard_normal((b, hk, skv, dv)).astype(np.float32)
    mask = None
    if kind == "float":
        mask = rng.standard_normal(mshape).astype(np.float32)
    elif kind is not None:
        mask = rng.random(mshape) > 0.3
        if kind == "dead":
            mask[..., 1, :] = False
            mask[..., -1, :] = False
    scale = 1.3 / np.sqrt(d)
    return q, k, v, mask, float(scale), causal


def _on(device, arrays):
    return [None if a is None else gpucore.tensor(a).to(device) for a in arrays]


def _forward(device, q, k, v, mask, scale, causal):
    ins = [t for t in _on(device, (q, k, v, mask)) if t is not None]
    with dispatch.trace_ops() as ran, gpucore.no_grad():
        out, lse = apply(SDPA, *ins, scale=scale, causal=causal, with_lse=True)
    return out.cpu().numpy(), lse.cpu().numpy(), {(op, be) for op, be, _ in ran}


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_forward_with_lse_matches_cpu(vulkan, way, case):
    q, k, v, mask, scale, causal = _case(case, 1)
    with gpucore.device_policy("cpu"):
        want_out, want_lse, _ = _forward("cpu", q, k, v, mask, scale, causal)
    out, lse, ran = _forward("vulkan", q, k, v, mask, scale, causal)
    assert (FWD, "vulkan") in ran
    np.testing.assert_allclose(out, want_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(np.isinf(lse), np.isinf(want_lse))
    np.testing.assert_allclose(lse, want_lse, rtol=RTOL, atol=ATOL)
    if case[7] == "dead":
        assert np.isposinf(lse[..., 1]).all() and (out[:, :, 1] == 0).all()


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_backward_matches_cpu(vulkan, way, case):
    q, k, v, mask, scale, causal = _case(case, 2)
    with gpucore.device_policy("cpu"):
        out, lse, _ = _forward("cpu", q, k, v, mask, scale, causal)
    g = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    results = {}
    for device in ("cpu", "vulkan"):
        ins = [t for t in _on(device, (q, k, v, out, g, lse, mask)) if t is not None]
        with gpucore.device_policy(device), dispatch.trace_ops() as ran:
            grads = apply(SDPA_BACKWARD, *ins, scale=scale, causal=causal)
        assert (BWD, device) in {(op, be) for op, be, _ in ran}
        results[device] = [t.cpu().numpy() for t in grads]
    for got, want in zip(results["vulkan"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    if case[7] == "dead":  # fully masked rows: zero dq
        assert (results["vulkan"][0][:, :, 1] == 0).all()


def test_backward_past_128_columns_runs_the_c_kernel(vulkan):
    """D > 128 exceeds the backward shader's register rows: the op runs the C kernel on the
    tensors' host copies and still gives its gradients."""
    q, k, v, mask, scale, causal = _case((1, 2, 1, 4, 5, 130, 8, "bool", (4, 5), False), 7)
    out, lse, ran = _forward("vulkan", q, k, v, mask, scale, causal)
    assert (FWD, "vulkan") in ran
    g = np.ones(out.shape, np.float32)
    results = {}
    for device in ("cpu", "vulkan"):
        ins = [t for t in _on(device, (q, k, v, out, g, lse, mask)) if t is not None]
        with gpucore.device_policy(device), dispatch.trace_ops() as ran:
            grads = apply(SDPA_BACKWARD, *ins, scale=scale, causal=causal)
        assert {be for op, be, _ in ran if op == BWD} == {"cpu"}
        results[device] = [t.cpu().numpy() for t in grads]
    for got, want in zip(results["vulkan"], results["cpu"]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[5]], ids=["gqa", "float", "dead"])
def test_training_gradients_match_the_composition(vulkan, case):
    """F.scaled_dot_product_attention on Vulkan tensors with gradients runs both fused ops on
    the device; its gradients equal attention_grads (the composition, also on the device)."""
    q, k, v, mask, scale, causal = _case(case, 4)
    if mask is not None and causal:  # F takes one of them: the causal mask folded in
        mask, causal = mask & np.tri(*mask.shape[-2:], dtype=bool), False
    hg = q.shape[1] // k.shape[1]
    g = np.random.default_rng(5).standard_normal(q.shape[:3] + v.shape[3:]).astype(np.float32)
    tq, tk, tv = (t.requires_grad_() for t in _on("vulkan", (q, k, v)))
    tm, tg = _on("vulkan", (mask, g))
    with dispatch.trace_ops() as ran:
        out = F.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=tm, is_causal=causal, scale=scale, enable_gqa=hg > 1
        )
        out.backward(tg)
    assert {(FWD, "vulkan"), (BWD, "vulkan")} <= {(op, be) for op, be, _ in ran}
    with gpucore.no_grad():
        want = attention_grads(tq, tk, tv, tm, tg, scale, causal, (True, True, True))
    for got, w in zip((tq.grad, tk.grad, tv.grad), want[:3]):
        assert got.device.type == "vulkan"
        np.testing.assert_allclose(got.cpu().numpy(), w.cpu().numpy(), rtol=RTOL, atol=ATOL)


def test_gradients_match_finite_differences(vulkan):
    """The Vulkan gradients of a small causal, masked, grouped-query case against float64
    central differences of the CPU op (gradcheck), within float32 rounding."""
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal(s) for s in ((1, 4, 5, 3), (1, 2, 7, 3), (1, 2, 7, 2)))
    mask = (rng.random((5, 7)) > 0.2) & np.tri(5, 7, dtype=bool)  # masked and causal
    w = rng.standard_normal((1, 4, 5, 2))

    def loss(device, a, b, c):
        m = gpucore.tensor(mask).to(device)
        o = F.scaled_dot_product_attention(a, b, c, attn_mask=m, enable_gqa=True)
        return (o * gpucore.tensor(w.astype(o.dtype.np)).to(device)).sum()

    t64 = [gpucore.tensor(a, requires_grad=True) for a in (q, k, v)]
    with gpucore.device_policy("cpu"):
        assert gradcheck(lambda a, b, c: loss("cpu", a, b, c), tuple(t64))
        loss("cpu", *t64).backward()
    t32 = [t.requires_grad_() for t in _on("vulkan", [a.astype(np.float32) for a in (q, k, v)])]
    loss("vulkan", *t32).backward()
    for a, b in zip(t32, t64):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


class TinyCausalLM(nn.Module):
    """Embedding, one pre-norm causal self-attention block with grouped-query heads, a head."""

    def __init__(self, vocab=11, dim=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.emb = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.hd)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        b, s = idx.shape
        x = self.emb(idx)
        h = self.norm(x)
        q = self.q(h).reshape(b, s, self.heads, self.hd).transpose(1, 2)
        kv = self.kv(h).reshape(b, s, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, kv[0], kv[1], is_causal=True, enable_gqa=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, -1))
        return self.head(x)


def _train_step(device, idx, y):
    gpucore.manual_seed(21)
    with gpucore.device_policy("cpu"):
        model = TinyCausalLM()
    if device != "cpu":
        model = model.to(device)
    # SGD: the update is linear in the gradients (Adam's first step, lr * sign(g), would turn
    # float32 rounding of near-zero gradients into differences of order lr)
    opt = gpucore.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ti, ty = _on(device, (idx, y))
    history = []
    with gpucore.device_policy(device), dispatch.trace_ops() as ran:
        for _ in range(2):
            opt.zero_grad()
            logits = model(ti)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ty.reshape(-1))
            loss.backward()
            history.append([loss.item()] + [p.grad.cpu().numpy() for p in model.parameters()])
            opt.step()
    history.append([0.0] + [p.detach().cpu().numpy() for p in model.parameters()])
    return history, {(op, be) for op, be, _ in ran}


def test_tiny_causal_transformer_steps_match_cpu(vulkan):
    rng = np.random.default_rng(8)
    idx = rng.integers(0, 11, (3, 37)).astype(np.int64)
    y = rng.integers(0, 11, (3, 37)).astype(np.int64)
    want, _ = _train_step("cpu", idx, y)
    got, ran = _train_step("vulkan", idx, y)
    assert {(FWD, "vulkan"), (BWD, "vulkan")} <= ran
    for step, (g, w) in enumerate(zip(got, want)):  # loss and gradients per step, then weights
        assert abs(g[0] - w[0]) <= 1e-4 * abs(w[0]), step
        for a, b in zip(g[1:], w[1:]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"step {step}")
