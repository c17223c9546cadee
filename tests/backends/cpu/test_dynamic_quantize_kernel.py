"""dynamic_quantize_u8 (ONNX DynamicQuantizeLinear, cpu/qdynamic.c) bit for bit equal to ONNX's
reference evaluator (onnx.reference) under every instruction set of this CPU: random, constant,
all-zero, all-negative, all-positive, tiny (denormal) and huge ranges, halves that round to even,
NaN and infinities, sizes around every vector width and the threaded split; the empty input's
documented parameters; qgemm_dynamic (its zero point and scale read from buffers) equal to the
numpy int64 sums with the float32 epilogue; bad arguments raise."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
from cpu_isa_harness import ISAS, C, isa_pickles

F32 = np.float32
HERE = os.path.dirname(os.path.abspath(__file__))


def _cases() -> list:
    r = np.random.default_rng(7)
    nan, inf = F32(np.nan), F32(np.inf)
    cases = [r.standard_normal(n).astype(F32) * 3 for n in (1, 7, 8, 15, 16, 17, 33, 100, 1001)]
    cases += [
        r.standard_normal(25088).astype(F32),  # the MLP's first layer at batch 32
        r.standard_normal(1 << 21).astype(F32),  # large enough to split over threads
        np.full(37, 3.0, F32),
        np.full(37, -3.0, F32),
        np.zeros(19, F32),
        -np.abs(r.standard_normal(45)).astype(F32) - 1,  # all negative
        np.abs(r.standard_normal(45)).astype(F32) + 1,  # all positive
        np.array([1e-40, -1e-40, 3e-41, 0], F32),  # a denormal range
        np.array([1e-45, 0, 1e-45], F32),  # the scale underflows to 0
        np.array([3e38, -3e38, 1.0], F32),  # the range overflows to inf
        np.array([0.5, 1.5, 2.5, 3.5, 255.0, 0.0, -0.0], F32),  # scale 1: halves to even
        np.array([-255.0, -0.5, -1.5, -2.5, 0.0], F32),  # zero point 255
        np.array([1, inf, -2], F32),
        np.array([1, -inf, 2], F32),
        np.array([inf, -inf, 0], F32),
    ]
    for at in (0, 13, 39, 40):  # NaN in a vector body, the tail, and the last element
        x = r.standard_normal(41).astype(F32)
        x[at] = nan
        cases.append(x)
    big = r.standard_normal(1 << 21).astype(F32)
    big[(1 << 21) - 5] = nan  # in the last thread's part
    cases.append(big)
    return cases


CASES = _cases()


def run_kernel(x):
    y = np.full(x.size, 77, np.uint8)
    s, z = np.zeros(1, F32), np.full(1, 9, np.uint8)
    C.dynamic_quantize_u8(x, y, s, z, x.size)
    return y, s[0], z[0]


def onnx_reference(x):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as TP  # noqa: PLC0415
    from onnx import helper as h  # noqa: PLC0415
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    node = h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    outs = [("y", TP.UINT8), ("s", TP.FLOAT), ("z", TP.UINT8)]
    g = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("x", TP.FLOAT, None)],
        [h.make_tensor_value_info(n, t, None) for n, t in outs],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 11)], ir_version=onnx.IR_VERSION)
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(m).run(None, {"x": x})


def assert_same(got, want, label):
    y, s, z = got
    np.testing.assert_array_equal(y, want[0], err_msg=label)
    assert np.asarray(s, F32).tobytes() == np.asarray(want[1], F32).tobytes() or (
        np.isnan(s) and np.isnan(want[1])
    ), (label, s, want[1])
    assert z == want[2], (label, z, want[2])


@pytest.mark.parametrize("i", range(len(CASES)))
def test_equals_onnx_reference(i):
    x = CASES[i]
    assert_same(run_kernel(x), onnx_reference(x), f"case {i}")


def test_nan_and_infinity_follow_onnx_reference():
    """The decided behaviour, spelled out: a NaN anywhere gives scale NaN, zero point 255 and y
    all 0 (onnx.reference; ONNX Runtime's min / max skip NaN instead); +inf gives scale inf."""
    y, s, z = run_kernel(np.array([1.0, np.nan, -2.0], F32))
    assert np.isnan(s) and z == 255 and not y.any()
    y, s, z = run_kernel(np.array([1.0, np.inf, -2.0], F32))
    assert s == np.inf and z == 0 and not y.any()


def test_empty_input_is_the_range_of_zero():
    """onnx.reference raises on an empty x (numpy's max of nothing); the kernel takes the range
    [0, 0]: scale 1/255 as onnx.reference gives any constant-zero x, zero point 0."""
    y, s, z = run_kernel(np.zeros(0, F32))
    assert s == F32(1) / F32(255) and z == 0 and y.size == 0
    assert_same(run_kernel(np.zeros(3, F32)), onnx_reference(np.zeros(3, F32)), "zeros")


def test_outputs_may_be_left_out():
    x = CASES[7]
    y, s, z = run_kernel(x)
    only_y = np.zeros(x.size, np.uint8)
    C.dynamic_quantize_u8(x, only_y, None, None, x.size)
    sc, zp = np.zeros(1, F32), np.zeros(1, np.uint8)
    C.dynamic_quantize_u8(x, None, sc, None, x.size)
    C.dynamic_quantize_u8(x, None, None, zp, x.size)
    np.testing.assert_array_equal(only_y, y)
    assert sc[0] == s and zp[0] == z


def test_bad_arguments_raise():
    x, y = np.ones(8, F32), np.zeros(8, np.uint8)
    s, z = np.zeros(1, F32), np.zeros(1, np.uint8)
    with pytest.raises(TypeError, match="dynamic_quantize_u8: 'x' must be float32"):
        C.dynamic_quantize_u8(x.astype(np.float64), y, s, z, 8)
    with pytest.raises(TypeError, match="'zero_point' must be uint8"):
        C.dynamic_quantize_u8(x, y, s, s, 8)
    with pytest.raises(ValueError, match="'y'"):
        C.dynamic_quantize_u8(x, y[:4], s, z, 8)
    with pytest.raises(ValueError, match="'scale'"):
        C.dynamic_quantize_u8(x, y, s[:0], z, 8)
    with pytest.raises(ValueError, match="contiguous"):
        C.dynamic_quantize_u8(np.ones(16, F32)[::2], y, s, z, 8)
    with pytest.raises(ValueError, match="overlaps"):
        C.dynamic_quantize_u8(x, y, s, y[:1], 8)
    with pytest.raises(ValueError, match="'x'"):
        C.dynamic_quantize_u8(x, y, s, z, 9)


# ------------------------------------------------------------------------- qgemm_dynamic
def test_qgemm_dynamic_reads_its_parameters_when_it_runs():
    r = np.random.default_rng(3)
    m, n, k = 9, 21, 70
    a = r.integers(0, 256, (m, k), dtype=np.uint8)
    w = r.integers(-127, 128, (n, k), dtype=np.int8)
    pw = C.qgemm_pack(w, k, n, 1)
    ws, bias = (r.random(n) * 0.01 + 0.001).astype(F32), r.standard_normal(n).astype(F32)
    for zp, scale in ((0, 0.02), (131, 0.5), (255, 1e-3), (7, np.inf), (7, np.nan)):
        acc = (a.astype(np.int64) - zp) @ w.astype(np.int64).T
        z, sc = np.array([zp], np.uint8), np.array([scale], F32)
        i32 = np.zeros((m, n), np.int32)
        C.qgemm_dynamic(a, pw, i32, m, None, z, None, None, 0)
        np.testing.assert_array_equal(i32, acc)
        f32 = np.zeros((m, n), F32)
        C.qgemm_dynamic(a, pw, f32, m, sc, z, ws, bias, 0)
        with np.errstate(all="ignore"):
            want = acc.astype(np.int32).astype(F32) * (F32(scale) * ws) + bias
        np.testing.assert_array_equal(f32, want)


def test_qgemm_dynamic_bad_arguments_raise():
    a, w = np.zeros((2, 8), np.uint8), np.zeros((3, 8), np.int8)
    pw = C.qgemm_pack(w, 8, 3, 1)
    z, s, ws = np.zeros(1, np.uint8), np.ones(1, F32), np.ones(3, F32)
    i32, f32 = np.zeros((2, 3), np.int32), np.zeros((2, 3), F32)
    with pytest.raises(ValueError, match="int32 'out' takes no a_scale"):
        C.qgemm_dynamic(a, pw, i32, 2, s, z, None, None, 0)
    with pytest.raises(TypeError, match="'a_zero_point' must be uint8"):
        C.qgemm_dynamic(a, pw, i32, 2, None, s, None, None, 0)
    with pytest.raises(TypeError, match="'a_scale' must be float32"):
        C.qgemm_dynamic(a, pw, f32, 2, z, z, ws, None, 0)
    with pytest.raises(ValueError, match="'w_scales'"):
        C.qgemm_dynamic(a, pw, f32, 2, s, z, ws[:2], None, 0)
    with pytest.raises(ValueError, match="'a_zero_point'"):
        C.qgemm_dynamic(a, pw, i32, 2, None, z[:0], None, None, 0)
    with pytest.raises(ValueError, match="'out'"):
        C.qgemm_dynamic(a, pw, f32[:1], 2, s, z, ws, None, 0)
    with pytest.raises(TypeError, match="'out' must be int32"):
        C.qgemm_dynamic(a, pw, np.zeros((2, 3), np.uint8), 2, s, z, ws, None, 0)


# ------------------------------------------------------------------ every ISA of this CPU
ISA_SCRIPT = textwrap.dedent(
    """
    import pickle, sys
    sys.path.insert(0, sys.argv[2])
    import test_dynamic_quantize_kernel as T
    with open(sys.argv[1], "wb") as f:
        pickle.dump((T.C.info()["isa"], [T.run_kernel(x) for x in T.CASES]), f)
    """
)


@pytest.fixture(scope="module")
def isa_results(tmp_path_factory):
    return isa_pickles(tmp_path_factory.mktemp("dynq"), ISA_SCRIPT, HERE)


@pytest.mark.parametrize("isa", ISAS)
def test_every_isa_equals_onnx_reference(isa_results, isa):
    got_isa, outs = isa_results[isa]
    assert got_isa == isa
    for i, (x, got) in enumerate(zip(CASES, outs)):
        assert_same(got, onnx_reference(x), f"{isa} case {i}")
