"""gpucore.runtime.passes.fuse: each pattern into its fused op, semantics unchanged, and the
sole-consumer rule respected."""

import math

import numpy as np
from pass_checks import check_same
from runtime_models import block, cnn, rand

import gpucore
import gpucore.nn.functional as F
from gpucore.runtime.passes import PIPELINE, optimize
from gpucore.runtime.passes.cleanup import constant_fold, eliminate_dead_code
from gpucore.runtime.passes.cleanup import eliminate_common_subexpressions as cse
from gpucore.runtime.passes.fuse import (
    fuse_attention,
    fuse_conv_affine,
    fuse_conv_epilogue,
    fuse_gelu_erf,
    fuse_gelu_tanh,
    fuse_gemm_epilogue,
    fuse_layer_norm,
    fuse_silu,
)
from gpucore.runtime.passes.matmul import absorb_transposes, fold_scalars, matmul_to_gemm
from gpucore.runtime.passes.views import compose_views, sink_views

GEMM = [compose_views, sink_views, matmul_to_gemm, absorb_transposes, fold_scalars]


def test_bias_and_activation_into_gemm():
    w, b = gpucore.tensor(rand(6, 4)), gpucore.tensor(rand(6))
    g = check_same(
        lambda x: F.gelu(x @ w.transpose(0, 1) + b),
        [rand(3, 4)],
        [*GEMM, constant_fold, fuse_gemm_epilogue, eliminate_dead_code],
    )
    assert g.op_counts() == {"gemm": 1}
    (gemm,) = g.order()
    assert gemm.attrs["act"] == "gelu" and len(gemm.inputs) == 3


def test_epilogue_needs_a_vector_bias_and_sole_consumer():
    w = gpucore.tensor(rand(4, 4))
    full = gpucore.tensor(rand(3, 4))

    def fn(x):
        y = x @ w
        return (y + full).relu(), y  # y is an output too: nothing fuses into its gemm

    g = check_same(fn, [rand(3, 4)], [*GEMM, fuse_gemm_epilogue, eliminate_dead_code])
    assert g.op_counts() == {"gemm": 1, "add": 1, "relu": 1}


def test_attention():
    g = check_same(block(16), [rand(2, 5, 16)], PIPELINE, rtol=1e-4, atol=1e-5)
    ops = g.op_counts()
    assert ops.get("attention") == 1 and "softmax" not in ops
    att = next(n for n in g.order() if n.op == "attention")
    assert att.attrs["scale"] == 0.5 and not att.attrs["causal"]
    assert att.attrs["heads_last"] and "clone" not in ops  # the heads merge without a copy


def test_causal_mask_becomes_a_flag_and_other_masks_an_input():
    g = check_same(block(16, causal=True), [rand(2, 5, 16)], PIPELINE, rtol=1e-4, atol=1e-5)
    att = next(n for n in g.order() if n.op == "attention")
    assert att.attrs["causal"] and len(att.inputs) == 3
    mask = gpucore.tensor(rand(5, 5))

    def masked(q, k, v):
        s = (q @ k.transpose(-2, -1)) * 0.25 + mask
        return F.softmax(s, dim=-1) @ v

    qkv = [rand(1, 2, 5, 4, seed=i) for i in range(3)]
    g = check_same(masked, qkv, [*GEMM, fuse_attention, eliminate_dead_code])
    (att,) = g.order()
    assert att.op == "attention" and len(att.inputs) == 4 and not att.attrs["causal"]


def test_layer_norm_forms():
    w, b = gpucore.tensor(rand(8)), gpucore.tensor(rand(8))

    def written_out(x):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / (var + 1e-6).sqrt() * w + b

    for fn in (lambda x: F.layer_norm(x, (8,), w, b), written_out, lambda x: F.layer_norm(x, (8,))):
        g = check_same(fn, [rand(3, 8)], [cse, fuse_layer_norm, eliminate_dead_code])
        assert g.op_counts() == {"layer_norm": 1}, g


def test_gelu_tanh_and_silu_subgraphs():
    def new_gelu(x):  # GPT-2's NewGELU, as written there
        return (
            0.5 * x * (1.0 + gpucore.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3.0))))
        )

    g = check_same(new_gelu, [rand(4, 6)], [fuse_gelu_tanh, eliminate_dead_code])
    assert g.op_counts() == {"gelu": 1} and g.order()[0].attrs["approximate"] == "tanh"
    g = check_same(lambda x: x * gpucore.sigmoid(x), [rand(5)], [fuse_silu, eliminate_dead_code])
    assert g.op_counts() == {"silu": 1}

    def shared(x):
        s = gpucore.sigmoid(x)
        return x * s, s  # the sigmoid is an output: not fused away

    g = check_same(shared, [rand(5)], [fuse_silu, eliminate_dead_code])
    assert "silu" not in g.op_counts()


def test_batch_norm_folds_into_the_convolution():
    m = cnn()
    x = rand(2, 3, 8, 8)
    g = check_same(m, [x], [constant_fold, fuse_conv_affine, eliminate_dead_code], rtol=1e-4)
    ops = g.op_counts()
    assert ops["conv2d"] == 2 and not {"sub", "mul", "div"} & set(ops)


def test_shortcut_add_and_relu_into_the_convolution():
    w1, w2 = gpucore.tensor(rand(4, 4, 3, 3)), gpucore.tensor(rand(4, 4, 1, 1))
    b1 = gpucore.tensor(rand(4))

    def basic_block(x):  # conv -> relu, then conv + shortcut -> relu, then a bare conv + add
        y = F.conv2d(x, w1, b1, padding=1).relu()
        z = (F.conv2d(y, w2) + x).relu()
        return x + F.conv2d(z, w2, stride=1)

    g = check_same(basic_block, [rand(2, 4, 6, 5)], [fuse_conv_epilogue, eliminate_dead_code])
    assert g.op_counts() == {"conv2d_act": 3}
    first, second, third = g.order()
    assert first.attrs["act"] == "relu" and not first.attrs["res"] and first.attrs["bias"]
    assert second.attrs["act"] == "relu" and second.attrs["res"] and not second.attrs["bias"]
    assert third.attrs["act"] is None and third.attrs["res"]
    assert second.inputs[-1] == g.inputs[0]  # the shortcut is the graph's input


def test_conv_epilogue_keeps_shared_and_broadcast_results():
    w = gpucore.tensor(rand(4, 4, 1, 1))
    per_channel = gpucore.tensor(rand(4, 1, 1))

    def fn(x):
        y = F.conv2d(x, w)
        return (y + x).relu(), y, F.conv2d(x, w) + per_channel  # y is an output; a broadcast add

    g = check_same(fn, [rand(1, 4, 3, 3)], [fuse_conv_epilogue, eliminate_dead_code])
    assert g.op_counts() == {"conv2d": 2, "add": 2, "relu": 1}


def test_pipeline_reaches_a_fixed_point():
    g = optimize(check_same(block(16), [rand(2, 5, 16)], []))
    assert not any(p(g) for p in PIPELINE)
    assert set(g.op_counts()) <= {"layer_norm", "gemm", "attention", "strided", "clone", "add"}
    np.testing.assert_equal(len(g.outputs), 1)


def test_gelu_tanh_written_as_flat_products_and_feeding_a_gemm():
    w = gpucore.tensor(rand(6, 6))

    def gpt2_mlp(x):  # the cube as x*x*x*c, the 0.5 last, the result into a matmul
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return ((x * (inner.tanh() + 1.0)) * 0.5) @ w

    g = check_same(gpt2_mlp, [rand(3, 6)], PIPELINE)
    assert "gelu" in g.op_counts() or any(n.attrs.get("act") == "gelu_tanh" for n in g.order())
    assert "tanh" not in g.op_counts()


def test_masked_fill_form_of_the_causal_mask():
    t = 5
    keep = gpucore.tensor(np.tril(np.ones((t, t), bool)))

    def masked_fill(q, k, v):
        s = (q @ k.transpose(-2, -1)) * 0.5
        s = gpucore.where(keep, s, gpucore.tensor(-np.inf))
        return F.softmax(s, dim=-1) @ v

    qkv = [rand(1, 2, t, 4, seed=i) for i in range(3)]
    g = check_same(masked_fill, qkv, PIPELINE)
    (att,) = [n for n in g.order() if n.op == "attention"]
    assert att.attrs["causal"] and len(att.inputs) == 3


def test_exact_gelu_written_out():
    forms = (  # torch.onnx's Div / Erf / Add / Mul, BERT's original, the halved x first
        lambda x: (x * (gpucore.erf(x / math.sqrt(2.0)) + 1.0)) * 0.5,
        lambda x: x * 0.5 * (1.0 + gpucore.erf(x / math.sqrt(2.0))),
        lambda x: 0.5 * (x * (1.0 + gpucore.erf(x * math.sqrt(0.5)))),
    )
    for fn in forms:
        g = check_same(fn, [rand(4, 6)], [fuse_gelu_erf, eliminate_dead_code])
        assert g.op_counts() == {"gelu": 1}
        assert g.order()[0].attrs["approximate"] == "none" and g.order()[0].inputs == ["x"]

    def shared(x):
        e = gpucore.erf(x / math.sqrt(2.0))
        return x * 0.5 * (1.0 + e), e  # the erf is an output: nothing fuses away

    def halved(x):  # erf(x / 2) is not GELU
        return x * 0.5 * (1.0 + gpucore.erf(x / 2.0))

    def other_x(x, y):  # the erf of y times x
        return x * 0.5 * (1.0 + gpucore.erf(y / math.sqrt(2.0)))

    for fn, xs in ((shared, [rand(3)]), (halved, [rand(3)]), (other_x, [rand(3), rand(3)])):
        g = check_same(fn, xs, [fuse_gelu_erf, eliminate_dead_code])
        assert "gelu" not in g.op_counts() and "erf" in g.op_counts(), fn.__name__


def test_batched_linear_bias_and_gelu_become_one_gemm():
    w1, b1 = gpucore.tensor(rand(16, 32)), gpucore.tensor(rand(32))
    w2, b2 = gpucore.tensor(rand(8, 32)), gpucore.tensor(rand(8))

    def ffn(x):  # a transformer's feed-forward on [batch, tokens, d], GELU spelled out
        h = x @ w1 + b1
        h = h * 0.5 * (1.0 + gpucore.erf(h / math.sqrt(2.0)))
        return F.linear(h, w2, b2).relu()

    g = check_same(ffn, [rand(2, 5, 16)], [optimize], rtol=1e-4, atol=1e-5)
    assert g.op_counts() == {"gemm": 2}
    first, second = g.order()
    assert first.attrs["act"] == "gelu" and len(first.inputs) == 3
    assert second.attrs["act"] == "relu" and len(second.inputs) == 3
    assert g.tensors[first.output].shape == (2, 5, 32)


def test_sequence_first_heads_merge_without_a_copy_at_batch_one():
    def seq_first(q, k, v):  # nn.MultiheadAttention's [S, B, H, D] merge (batch_first=False)
        o = F.softmax((q @ k.transpose(-2, -1)) * 0.5, dim=-1) @ v
        s, h, d = o.shape[2], o.shape[1], o.shape[3]
        return o.permute(2, 0, 1, 3).contiguous().reshape(s, o.shape[0], h * d)

    passes = [*GEMM, fuse_attention, compose_views, eliminate_dead_code]
    one = check_same(seq_first, [rand(1, 2, 5, 4, seed=i) for i in range(3)], passes)
    assert "clone" not in one.op_counts() and one.op_counts()["attention"] == 1
    assert next(n for n in one.order() if n.op == "attention").attrs["heads_last"]
    two = check_same(seq_first, [rand(2, 2, 5, 4, seed=i) for i in range(3)], passes)
    assert two.op_counts()["clone"] == 1  # [S, B, H, D] is not [B, S, H, D] at batch 2
    assert not next(n for n in two.order() if n.op == "attention").attrs["heads_last"]
