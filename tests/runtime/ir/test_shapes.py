"""gpucore.runtime.ir.shapes: declared output shapes re-derived from the ops' own rules."""

import pytest
from runtime_models import block, cnn, rand

import gpucore
from gpucore.runtime.capture.trace import trace
from gpucore.runtime.ir.graph import GraphError
from gpucore.runtime.ir.shapes import check_shapes
from gpucore.runtime.passes import optimize


def test_captured_and_optimized_graphs_are_consistent():
    for model, shape in ((block(16), (2, 5, 16)), (cnn(), (1, 3, 8, 8))):
        g = trace(model, [gpucore.tensor(rand(*shape))])
        check_shapes(g)
        check_shapes(optimize(g))  # fused ops (gemm, attention, layer norm) included


def test_a_wrong_claim_names_the_node():
    g = trace(block(16), [gpucore.tensor(rand(2, 5, 16))])
    node = g.order()[3]
    g.tensors[node.output].shape = (2, 5, 17)
    with pytest.raises(GraphError, match=f"node {node.output} .*declares"):
        check_shapes(g)
    g = optimize(trace(block(16), [gpucore.tensor(rand(2, 5, 16))]))
    gemm = next(n for n in g.order() if n.op == "gemm")
    gemm.attrs["trans_b"] = not gemm.attrs["trans_b"]
    with pytest.raises(GraphError, match="gemm"):
        check_shapes(g)
