"""gpucore.onnx.rewrite: the exact-GELU pattern exporters write (Div/Erf/Add/Mul, in its usual
orders) becomes gpucore's gelu; a near miss stays Erf (a composition) and is still right."""

import math

import numpy as np
import pytest
from onnx import helper
from onnx_cases import assert_close, model, rand, run_gpucore, run_ort

import gpucore.onnx

F32 = np.float32


def _consts():
    return {
        "sqrt2": np.array(math.sqrt(2), F32),
        "rsqrt2": np.array(math.sqrt(0.5), F32),
        "one": np.array(1.0, F32),
        "half": np.array(0.5, F32),
        "near": np.array(1.5, F32),
    }


def _gelu_graph(form: str):
    mk = helper.make_node
    if form == "torch":  # (x * (1 + erf(x / sqrt 2))) * 0.5
        nodes = [mk("Div", ["x", "sqrt2"], ["d"]), mk("Erf", ["d"], ["e"]),
                 mk("Add", ["e", "one"], ["a"]), mk("Mul", ["x", "a"], ["m"]),
                 mk("Mul", ["m", "half"], ["y"])]  # fmt: skip
    elif form == "half_first":  # (x * 0.5) * (1 + erf(x * (1/sqrt 2)))
        nodes = [mk("Mul", ["x", "rsqrt2"], ["d"]), mk("Erf", ["d"], ["e"]),
                 mk("Add", ["one", "e"], ["a"]), mk("Mul", ["x", "half"], ["h"]),
                 mk("Mul", ["h", "a"], ["y"])]  # fmt: skip
    elif form == "half_inner":  # x * ((1 + erf(x / sqrt 2)) * 0.5)
        nodes = [mk("Div", ["x", "sqrt2"], ["d"]), mk("Erf", ["d"], ["e"]),
                 mk("Add", ["e", "one"], ["a"]), mk("Mul", ["a", "half"], ["m"]),
                 mk("Mul", ["x", "m"], ["y"])]  # fmt: skip
    else:  # near miss: x / 1.5
        nodes = [mk("Div", ["x", "near"], ["d"]), mk("Erf", ["d"], ["e"]),
                 mk("Add", ["e", "one"], ["a"]), mk("Mul", ["x", "a"], ["m"]),
                 mk("Mul", ["m", "half"], ["y"])]  # fmt: skip
    nodes.append(helper.make_node("Relu", ["y"], ["out"]))
    x = rand(3, 16, low=-4, high=4)
    return model(nodes, {"x": x}, {"out": F32}, _consts()), x


@pytest.mark.parametrize("form", ["torch", "half_first", "half_inner"])
def test_gelu_patterns_become_gelu(form):
    m, x = _gelu_graph(form)
    cm = gpucore.onnx.load(m, device="cpu", optimize=False)
    ops = [n.op for n in cm.graph.order()]
    assert ops.count("gelu") == 1 and "sign" not in ops, ops
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_a_near_miss_stays_erf():
    m, x = _gelu_graph("near")
    cm = gpucore.onnx.load(m, device="cpu", optimize=False)
    assert "gelu" not in [n.op for n in cm.graph.order()]
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_an_intermediate_read_elsewhere_blocks_the_rewrite():
    m, x = _gelu_graph("torch")
    m.graph.output.append(helper.make_tensor_value_info("e", 1, None))  # erf's output is used
    cm = gpucore.onnx.load(m, device="cpu", optimize=False)
    assert "gelu" not in [n.op for n in cm.graph.order()]
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def _feed_forward(gelu: str):
    """A transformer's MLP on [N, T, 16] as exporters write it: MatMul + Add(bias) -> GELU
    (torch's exact Div/Erf/Add/Mul, or the tanh form's Pow/Mul/Add/Tanh) -> MatMul + Add(bias)
    -> Relu, the weights initializers."""
    mk = helper.make_node
    if gelu == "exact":
        act = [mk("Div", ["h", "sqrt2"], ["d"]), mk("Erf", ["d"], ["e"]),
               mk("Add", ["e", "one"], ["a"]), mk("Mul", ["h", "a"], ["m"]),
               mk("Mul", ["m", "half"], ["g"])]  # fmt: skip
    else:
        act = [mk("Pow", ["h", "three"], ["p"]), mk("Mul", ["p", "c"], ["pc"]),
               mk("Add", ["h", "pc"], ["s"]), mk("Mul", ["s", "k"], ["i"]),
               mk("Tanh", ["i"], ["t"]), mk("Add", ["t", "one"], ["a"]),
               mk("Mul", ["h", "half"], ["hh"]), mk("Mul", ["hh", "a"], ["g"])]  # fmt: skip
    nodes = [mk("MatMul", ["x", "w1"], ["xw"]), mk("Add", ["xw", "b1"], ["h"]), *act,
             mk("MatMul", ["g", "w2"], ["gw"]), mk("Add", ["b2", "gw"], ["o"]),
             mk("Relu", ["o"], ["y"])]  # fmt: skip
    consts = dict(_consts(), three=np.array(3.0, F32), c=np.array(0.044715, F32),
                  k=np.array(math.sqrt(2 / math.pi), F32), w1=rand(16, 32, seed=1),
                  b1=rand(32, seed=2), w2=rand(32, 8, seed=3), b2=rand(8, seed=4))  # fmt: skip
    x = rand(2, 5, 16)
    m = model(nodes, {"x": x}, {"y": F32}, consts, input_shapes={"x": ["N", "T", 16]})
    return m, x


@pytest.mark.parametrize("gelu", ["exact", "tanh"])
def test_a_batched_feed_forward_is_two_gemms(gelu):
    m, x = _feed_forward(gelu)
    cm = gpucore.onnx.load(m, device="cpu")
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}), rtol=1e-5, atol=1e-5)
    plain = gpucore.onnx.load(m, device="cpu", optimize=False).graph.op_counts()
    assert plain["matmul"] == 2 and plain["add"] >= 2
    for ex in cm.executors():  # the load's example sizes and (2, 5)
        g = ex.plan.graph
        assert g.op_counts() == {"gemm": 2}  # the 3-D products with bias, GELU and ReLU fused
        first, second = g.order()
        assert first.attrs["act"] == ("gelu" if gelu == "exact" else "gelu_tanh")
        assert second.attrs["act"] == "relu" and len(first.inputs) == len(second.inputs) == 3
        assert len(g.tensors[first.output].shape) == 3


def test_a_batched_feed_forward_on_vulkan(vulkan):
    for gelu in ("exact", "tanh"):
        m, x = _feed_forward(gelu)
        got = run_gpucore(m, {"x": x}, device="vulkan")
        assert_close(got, run_ort(m, {"x": x}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mask", ["causal", "additive"])
def test_exported_attention_is_one_node(mask):
    """MatMul(q, Transpose(k)) -> Div(sqrt d) -> Add(mask) -> Softmax -> MatMul(v), as exporters
    write scaled dot-product attention, on [B, H, T, D]: one attention node (a causal mask of 0 /
    -inf becomes its flag, another one an input)."""
    mk = helper.make_node
    t, d = 6, 8
    keep = np.tril(np.ones((t, t), bool))
    m_val = np.where(keep, 0.0, -np.inf) if mask == "causal" else rand(t, t, seed=5)
    nodes = [mk("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             mk("MatMul", ["q", "kt"], ["s"]), mk("Div", ["s", "scale"], ["sd"]),
             mk("Add", ["sd", "mask"], ["sm"]), mk("Softmax", ["sm"], ["p"], axis=-1),
             mk("MatMul", ["p", "v"], ["y"])]  # fmt: skip
    feeds = {n: rand(2, 3, t, d, seed=i) for i, n in enumerate("qkv")}
    inits = {"scale": np.array(math.sqrt(d), F32), "mask": m_val.astype(F32)}
    m = model(nodes, feeds, {"y": F32}, inits)
    cm = gpucore.onnx.load(m, device="cpu")
    assert_close(cm.run_arrays([feeds[n] for n in cm.input_names]), run_ort(m, feeds),
                 rtol=1e-5, atol=1e-6)  # fmt: skip
    (ex,) = cm.executors()
    ops = ex.plan.graph.op_counts()
    assert ops.get("attention") == 1 and not {"softmax", "gemm", "add", "div"} & set(ops), ops
    att = next(n for n in ex.plan.graph.order() if n.op == "attention")
    assert att.attrs["causal"] == (mask == "causal") and len(att.inputs) == (
        3 if mask == "causal" else 4
    )
    assert att.attrs["scale"] == pytest.approx(1 / math.sqrt(d))
