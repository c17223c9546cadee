"""gpucore.onnx.ops.attention: Attention (3-D and 4-D, masks, causal with a past, grouped
heads, softcap, the optional outputs), RotaryEmbedding against onnxruntime; SwiGLU against
ONNX's reference evaluator (onnxruntime does not know opset 28)."""

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from onnx_cases import NEWEST, check_op, helper, model, rand, run_gpucore

pytestmark = pytest.mark.skipif(NEWEST < 23, reason="onnxruntime without opset 23")
F32 = np.float32


def test_attention_4d_masks_and_causal():
    q, k, v = rand(2, 4, 3, 8), rand(2, 4, 5, 8, seed=1), rand(2, 4, 5, 8, seed=2)
    check_op("Attention", [q, k, v], opset=23)
    mask = rand(3, 5, seed=3) > 0
    mask[1] = False  # a fully masked row attends to nothing
    check_op("Attention", [q, k, v, mask], {"scale": 0.3}, opset=23, out=[F32])
    check_op("Attention", [q, k, v, rand(3, 5, seed=4)], {"softcap": 2.0}, opset=23)


def test_attention_3d_grouped_heads_past_and_outputs():
    q, k, v = rand(2, 3, 16), rand(2, 3, 8, seed=1), rand(2, 3, 8, seed=2)
    heads = {"q_num_heads": 4, "kv_num_heads": 2}
    check_op("Attention", [q, k, v], heads, opset=23)
    past = [rand(2, 2, 2, 4, seed=5), rand(2, 2, 2, 4, seed=6)]
    for mode in (0, 1, 3):  # (mode 2: onnxruntime writes -FLT_MAX where ONNX's reference -inf)
        check_op("Attention", [q, k, v, None, *past],
                 {**heads, "is_causal": 1, "qk_matmul_output_mode": mode}, opset=23,
                 out=[F32] * 4)  # fmt: skip


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved):
    x = rand(2, 3, 4, 8)  # [B, H, S, D]
    cos, sin = rand(6, 2, seed=1), rand(6, 2, seed=2)  # rotary dim 4: half rotated
    pos = np.array([[0, 2, 5, 1], [3, 3, 0, 4]], np.int64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": 4}
    check_op("RotaryEmbedding", [x, cos, sin, pos], attrs, opset=23, static=(1, 2))
    x3 = rand(2, 4, 12)  # [B, S, H * D], 3 heads of 4, the caches per position
    check_op("RotaryEmbedding", [x3, rand(2, 4, 2, seed=3), rand(2, 4, 2, seed=4)],
             {"interleaved": interleaved, "num_heads": 3}, opset=23)  # fmt: skip


def test_swiglu_against_the_reference():
    a, b = rand(3, 5), rand(3, 5, seed=1)
    m = model([helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.5)], {"a": a, "b": b},
              {"y": F32}, opset=28)  # fmt: skip
    (want,) = ReferenceEvaluator(m).run(None, {"a": a, "b": b})
    (got,) = run_gpucore(m, {"a": a, "b": b})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
