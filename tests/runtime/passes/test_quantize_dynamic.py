"""gpucore.runtime.passes.quantize.fuse_dynamic_quantized alone on graphs traced from ONNX
Runtime's dynamic-quantization form (dynamic_quantize_linear -> qmatmul_integer(a, w, zp) ->
to_dtype -> mul(a_scale * w_scales) [-> add(bias)]): one qlinear_dynamic, the same bits as the
graph before the pass (compiled and interpreted); the patterns it must leave alone."""

from __future__ import annotations

import numpy as np
import pytest
from pass_checks import traced
from runtime_models import run_graph

import gpucore
from gpucore.runtime.capture.trace import apply_runtime_op
from gpucore.runtime.passes.quantize import fuse_dynamic_quantized

F32 = np.float32
R = np.random.default_rng(4)
W = R.integers(-127, 128, (5, 12), dtype=np.int8)
WS = (R.random(5) * 0.01 + 1e-3).astype(F32)
BIAS = R.standard_normal(5).astype(F32)


def _dql(x):
    return [apply_runtime_op("dynamic_quantize_linear", [x], {"output_index": i}) for i in range(3)]


def _model(ws=WS, bias=BIAS, swap=False, extra_use=False):
    """ONNX Runtime's MatMulInteger -> Cast -> Mul [-> Add] on the dynamic quantization of x."""
    w = gpucore.from_numpy(W)

    def fn(x):
        y, s, z = _dql(x)
        acc = apply_runtime_op("qmatmul_integer", [y, w, z], {"a_zero_point": 0})
        scale = s * gpucore.from_numpy(ws)
        f = acc.to(gpucore.float32)
        out = scale * f if swap else f * scale
        if bias is not None:
            out = gpucore.from_numpy(bias) + out if swap else out + gpucore.from_numpy(bias)
        return (out, acc) if extra_use else out

    return fn


def _check(fn, fused: bool, shape=(3, 12)):
    x = R.standard_normal(shape).astype(F32)
    before = traced(fn, x)
    after = before.copy()
    assert fuse_dynamic_quantized(after) == fused
    after.validate()
    ops = after.op_counts()
    if fused:
        assert ops.get("qlinear_dynamic") == 1 and "qmatmul_integer" not in ops, ops
        assert "add" not in ops and "mul" not in ops, ops
    for xs in ([x], [x * 50], [-np.abs(x)], [np.zeros_like(x)]):
        want = run_graph(before, xs)
        got = run_graph(after, xs)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return after


@pytest.mark.parametrize("swap", [False, True], ids=["f_times_s", "s_times_f"])
def test_fuses_the_epilogue_with_its_bias(swap):
    _check(_model(swap=swap), fused=True)
    _check(_model(swap=swap), fused=True, shape=(2, 3, 12))  # a sequence: [B, T, K]


def test_fuses_without_bias_and_broadcasts_one_weight_scale():
    _check(_model(bias=None), fused=True)
    _check(_model(ws=WS[:1].copy(), bias=None), fused=True)  # per-tensor weight


def test_leaves_the_int32_sums_when_something_else_reads_them():
    _check(_model(extra_use=True), fused=False)


def test_nan_inputs_give_the_unfused_bits():
    fn = _model()
    x = R.standard_normal((3, 12)).astype(F32)
    before = traced(fn, x)
    after = before.copy()
    assert fuse_dynamic_quantized(after)
    x[1, 2] = np.nan
    for a, b in zip(run_graph(after, [x]), run_graph(before, [x])):
        assert a.tobytes() == b.tobytes()
