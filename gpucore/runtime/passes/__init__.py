"""Graph optimisation passes: each a ``(Graph) -> bool`` function (True when it changed the
graph), tested alone in tests/runtime/passes/. ``optimize`` runs the default pipeline to a
fixed point.

Order matters in one place: the GEMM absorptions run before constant folding, which would
otherwise materialise a transposed weight and hide the pattern (the runtime seed's lesson);
for the same reason constant folding leaves the dequantized int8 weights of gemm / conv2d nodes
with a dequantized input to ``fuse_quantized`` (passes/quantize.py).
"""

from __future__ import annotations

from ..ir.graph import Graph
from .cleanup import constant_fold, eliminate_common_subexpressions, eliminate_dead_code
from .dynamic_linear import fuse_dynamic_linear_relu, fuse_traced_dynamic_linear
from .fuse import (
    fuse_attention,
    fuse_conv_affine,
    fuse_conv_epilogue,
    fuse_gelu_erf,
    fuse_gelu_tanh,
    fuse_gemm_epilogue,
    fuse_layer_norm,
    fuse_silu,
)
from .matmul import absorb_transposes, batch_gemm_rows, fold_scalars, matmul_to_gemm
from .primitives import split_clamp
from .quantize import (
    QUANT_PIPELINE,
    fuse_quantized,
    pool_uint8,
    remove_qdq_pairs,
    sink_dequantize,
)
from .views import compose_views, sink_views

PIPELINE = (
    # first: a traced quantize_dynamic Linear's activation quantization, before the passes
    # below reshape the ops it matches (split_clamp, fold_scalars, CSE)
    fuse_traced_dynamic_linear,
    eliminate_dead_code,
    compose_views,
    sink_views,
    matmul_to_gemm,
    absorb_transposes,
    batch_gemm_rows,
    fuse_gelu_tanh,  # before fold_scalars, which would take its 0.5 into the next gemm
    fuse_gelu_erf,
    fold_scalars,
    constant_fold,
    eliminate_common_subexpressions,
    fuse_conv_affine,
    fuse_layer_norm,
    fuse_silu,
    fuse_attention,
    fuse_gemm_epilogue,
    split_clamp,
    # the QDQ form an ONNX model brings (gpucore.onnx: QuantizeLinear / DequantizeLinear / QLinear*)
    # onto the int8 ops: no-ops on graphs without quantize nodes (ends with eliminate_dead_code)
    *QUANT_PIPELINE,
    fuse_dynamic_linear_relu,  # after sink_views moved the Linear's reshape below the relu
    # last: the int8 fusions above match conv2d -> relu first
    fuse_conv_epilogue,
)


# The float passes before static quantization inserts its quantize / dequantize pairs (which
# look for bare conv2d nodes): all but the convolution epilogue.
FLOAT_PIPELINE = tuple(p for p in PIPELINE if p is not fuse_conv_epilogue)

# The Vulkan executor's pipeline: SiLU, whose fused op has a C kernel but no shader yet, is left
# out (its primitive ops run as shaders); layer norm and attention have their own shaders
# (gpucore/backends/vulkan/kernels/fused.py), the int8 ops theirs (executors/vulkan_quant.py:
# the QDQ form, ONNX dynamic quantization and PyTorch's dynamic quantized Linear fuse as on the
# CPU); the convolution epilogue has no shader (the conv, add and relu run as their own).
VULKAN_PIPELINE = tuple(p for p in PIPELINE if p not in (fuse_silu, fuse_conv_epilogue))
# On devices without shaderFloat64 the float-input qlinear_dynamic (PyTorch's activation
# quantization, whose divisions the shader rounds through float64 residuals) is not made: the
# traced primitives run as shaders there.
VULKAN_PIPELINE_NO_FLOAT64 = tuple(
    p for p in VULKAN_PIPELINE if p is not fuse_traced_dynamic_linear
)


def vulkan_pipeline(float64: bool) -> tuple:
    """The Vulkan executor's passes for a device with (``float64``) or without shaderFloat64."""
    return VULKAN_PIPELINE if float64 else VULKAN_PIPELINE_NO_FLOAT64


def optimize(graph: Graph, passes=PIPELINE, max_rounds: int = 8) -> Graph:
    """Run ``passes`` in order, repeatedly, until none changes the graph; returns the graph."""
    for _ in range(max_rounds):
        changed = False
        for p in passes:
            changed |= bool(p(graph))
        if not changed:
            break
    graph.validate()
    return graph
