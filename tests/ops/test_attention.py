"""The fused scaled_dot_product_attention op (gpucore/ops/attention.py) through
F.scaled_dot_product_attention, against torch 2.13's SDPA: outputs and gradients with bool /
float / broadcast masks, causal, scale, grouped-query heads, sequence lengths around the C
kernels' tile edges (32 query rows, 64 keys), Sq != Skv, fully masked rows (zeros, as torch);
that the fused forward and backward ops are what ran; gradcheck and double backward in float64;
the float mask's gradient; the composition fallbacks; and CPU / Vulkan agreement."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import dispatch
from gpucore.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

TOL = {"float32": 2e-5, "float64": 1e-10}
FWD, BWD = "scaled_dot_product_attention", "scaled_dot_product_attention_backward"


def _mask(kind, shape, rng):
    if kind is None:
        return None
    if kind == "float":
        return rng.standard_normal(shape)
    m = rng.random(shape) > 0.3
    if kind == "dead":  # whole rows masked out: zeros and zero gradients, as torch
        m[..., 0, :] = False
        m[..., -2, :] = False
    return m


def _run(lib, dtype, arrays, mask, **kw):
    """Output and q, k, v gradients of lib's SDPA (gpucore returns the ops that ran too)."""
    mod = torch if lib == "torch" else gpucore
    t = [mod.tensor(a.astype(dtype), requires_grad=True) for a in arrays[:3]]
    g = mod.tensor(arrays[3].astype(dtype))
    m = None
    if mask is not None:
        m = mod.tensor(mask if mask.dtype == bool else mask.astype(dtype))
    fn = (
        torch.nn.functional.scaled_dot_product_attention
        if lib == "torch"
        else F.scaled_dot_product_attention
    )
    if lib == "torch":
        out = fn(*t, attn_mask=m, **kw)
        out.backward(g)
        return [out.detach().numpy()] + [x.grad.numpy() for x in t], None
    with dispatch.trace_ops() as ran:
        out = fn(*t, attn_mask=m, **kw)
        out.backward(g)
    return [out.detach().numpy()] + [x.grad.numpy() for x in t], {op for op, _, _ in ran}


# (B, H, Hk, Sq, Skv, D, Dv, mask kind, mask shape, causal, scale, gqa)
CASES = [
    (2, 4, 4, 33, 33, 16, 16, None, None, False, None, False),
    (1, 2, 2, 64, 65, 8, 8, None, None, True, None, False),
    (1, 2, 2, 31, 97, 8, 12, "bool", (31, 97), False, 0.3, False),
    (2, 2, 2, 65, 63, 16, 16, "float", (2, 1, 65, 63), False, None, False),
    (1, 4, 2, 32, 64, 8, 8, None, None, True, None, True),
    (1, 6, 2, 17, 130, 16, 16, "bool", (6, 17, 130), False, 1.7, True),
    (2, 3, 3, 40, 29, 8, 8, "dead", (2, 3, 40, 29), False, None, False),
    (1, 2, 2, 29, 40, 8, 8, None, None, True, 0.5, False),  # causal with Skv > Sq
    (1, 1, 1, 1, 1, 4, 4, None, None, False, None, False),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fused_matches_torch(dtype, case):
    b, h, hk, sq, skv, d, dv, mkind, mshape, causal, scale, gqa = case
    rng = np.random.default_rng(sum(case[:7]))
    arrays = [
        rng.standard_normal((b, h, sq, d)),
        rng.standard_normal((b, hk, skv, d)),
        rng.standard_normal((b, hk, skv, dv)),
        rng.standard_normal((b, h, sq, dv)),
    ]
    mask = _mask(mkind, mshape, rng)
    kw = {"is_causal": causal, "scale": scale, "enable_gqa": gqa}
    ours, ran = _run("gpucore", dtype, arrays, mask, **kw)
    want, _ = _run("torch", dtype, arrays, mask, **kw)
    assert {FWD, BWD} <= ran, ran
    for name, a, w in zip(("out", "dq", "dk", "dv"), ours, want):
        np.testing.assert_allclose(a, w, rtol=TOL[dtype], atol=TOL[dtype], err_msg=name)
    if mkind == "dead":
        dead = ~mask.any(-1)
        assert np.all(ours[0][dead] == 0) and np.all(ours[1][dead] == 0)


def test_unbatched_and_extra_batch_dims_take_the_fused_op():
    rng = np.random.default_rng(4)
    for shape in ((7, 8), (3, 7, 8), (2, 3, 2, 7, 8)):
        arrays = [rng.standard_normal(shape) for _ in range(4)]
        mask = rng.random(shape[:-1] + (7,)) > 0.2
        ours, ran = _run("gpucore", "float64", arrays, mask)
        want, _ = _run("torch", "float64", arrays, mask)
        assert {FWD, BWD} <= ran
        for a, w in zip(ours, want):
            np.testing.assert_allclose(a, w, rtol=1e-10, atol=1e-10)


def _leaves(rng, *shapes):
    return [gpucore.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]


def test_gradcheck_and_double_backward_float64():
    rng = np.random.default_rng(5)
    q, k, v = _leaves(rng, (1, 4, 5, 3), (1, 2, 6, 3), (1, 2, 6, 2))
    keep = gpucore.tensor(rng.random((5, 6)) > 0.3)
    for kw in ({}, {"is_causal": True}, {"attn_mask": keep, "scale": 0.7}):

        def f(a, b, c, kw=kw):
            return F.scaled_dot_product_attention(a, b, c, enable_gqa=True, **kw)

        assert gradcheck(f, (q, k, v), atol=1e-6, rtol=1e-4)
        assert gradgradcheck(f, (q, k, v), atol=1e-6, rtol=1e-4)


def test_float_mask_gradient_matches_torch():
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((2, 2, 9, 5)) for _ in range(3)] + [
        rng.standard_normal((2, 2, 9, 5))
    ]
    arrays[1] = rng.standard_normal((2, 2, 11, 5))
    arrays[2] = rng.standard_normal((2, 2, 11, 5))
    mask = rng.standard_normal((2, 1, 9, 11))
    grads = []
    for mod, fn in (
        (gpucore, F.scaled_dot_product_attention),
        (torch, torch.nn.functional.scaled_dot_product_attention),
    ):
        t = [mod.tensor(a, requires_grad=True) for a in arrays[:3]]
        m = mod.tensor(mask, requires_grad=True)
        fn(*t, attn_mask=m).backward(mod.tensor(arrays[3]))
        grads.append([x.grad.numpy() for x in (*t, m)])
    for a, w in zip(*grads):
        np.testing.assert_allclose(a, w, rtol=1e-10, atol=1e-10)
    m = gpucore.tensor(mask, requires_grad=True)
    q = gpucore.tensor(arrays[0], requires_grad=True)
    kk, vv = gpucore.tensor(arrays[1]), gpucore.tensor(arrays[2])
    assert gradcheck(lambda a, b: F.scaled_dot_product_attention(a, kk, vv, attn_mask=b), (q, m))


def test_no_grad_forward_and_fallbacks():
    rng = np.random.default_rng(7)
    q, k, v = (
        gpucore.tensor(rng.standard_normal((1, 2, 9, 4)).astype(np.float32)) for _ in range(3)
    )
    with dispatch.trace_ops() as ran:
        F.scaled_dot_product_attention(q, k, v)
    assert FWD in {op for op, _, _ in ran}
    with dispatch.trace_ops() as ran:  # dropout: the composition (softmax, dropout, matmul)
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert FWD not in {op for op, _, _ in ran}
    with dispatch.trace_ops() as ran:  # empty key sequence: composed
        out = F.scaled_dot_product_attention(q, k[:, :, :0], v[:, :, :0])
    assert FWD not in {op for op, _, _ in ran} and out.shape == (1, 2, 9, 4)


def test_threads_bitwise():
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal((2, 4, 70, 16)) for _ in range(4)]
    threads = gpucore._cpu.info()["threads"]
    many, _ = _run("gpucore", "float32", arrays, None, is_causal=True)
    try:
        gpucore._cpu.set_num_threads(1)
        one, _ = _run("gpucore", "float32", arrays, None, is_causal=True)
    finally:
        gpucore._cpu.set_num_threads(threads)
    for a, b in zip(many, one):
        np.testing.assert_array_equal(a, b)


def test_vulkan_agrees_with_cpu(vulkan):
    """On Vulkan tensors the fused forward and backward ops run on the device (the attention
    shaders), with and without gradients, and agree with the CPU's fused ops."""
    rng = np.random.default_rng(9)
    arrays = [
        rng.standard_normal(s).astype(np.float32)
        for s in ((2, 4, 40, 16), (2, 2, 50, 16), (2, 2, 50, 8), (2, 4, 40, 8))
    ]
    mask = rng.random((40, 50)) > 0.2
    with gpucore.device_policy("cpu"):
        want, ran = _run("gpucore", "float32", arrays, mask, enable_gqa=True)
    assert {FWD, BWD} <= ran
    q, k, v = (gpucore.tensor(a).to("vulkan") for a in arrays[:3])
    m = gpucore.tensor(mask).to("vulkan")
    with dispatch.trace_ops() as ran, gpucore.no_grad():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    assert (FWD, "vulkan") in {(op, be) for op, be, _ in ran}
    np.testing.assert_allclose(out.cpu().numpy(), want[0], rtol=1e-4, atol=1e-5)
    q, k, v = (gpucore.tensor(a).to("vulkan").requires_grad_() for a in arrays[:3])
    with dispatch.trace_ops() as ran:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
        out.backward(gpucore.tensor(arrays[3]).to("vulkan"))
    assert {(FWD, "vulkan"), (BWD, "vulkan")} <= {(op, be) for op, be, _ in ran}
    for a, w in zip((out, q.grad, k.grad, v.grad), want):
        np.testing.assert_allclose(a.detach().cpu().numpy(), w, rtol=1e-4, atol=1e-5)
