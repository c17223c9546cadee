"""gpucore.onnx.rewrite: the exact-GELU pattern exporters write (Div/Erf/Add/Mul, in its usual
orders) becomes gpucore's gelu; a near miss stays Erf (a composition) and is still right."""

import math

import numpy as np
import pytest
from onnx import helper
from onnx_cases import assert_close, model, rand, run_ort

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
