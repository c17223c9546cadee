"""ONNX Runtime's INT8 models from C: the CNN and MLP quantized by ``quantize_static`` (QDQ and
QOperator, uint8 and int8 activations; tests/onnx/ort_quantized.py), imported with
gpucore.onnx.load and saved, run by gc_model_load / gc_model_run with the compiled executor's
bits (which are ONNX Runtime's). Their C programs hold quantize_linear_u8 (ONNX's
QuantizeLinear rounding) and qgemm / qconv2d nodes with ONNX's int32 bias; files whose
quantize_linear_u8 node or int32 bias was tampered with (checksums updated) are refused with a
message naming the node, also under the sanitizers. Their ``quantize_dynamic`` forms run as
dynamic_quantize_u8 and qgemm_dynamic nodes (tampered ones refused likewise)."""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import gpucore
from gpucore.runtime import c_program

from .conftest import NEEDS, run
from .test_model import _check_fuzz, hostile_files
from .test_qmodel import check_tampered, write_cases

pytestmark = [
    NEEDS,
    pytest.mark.skipif(not hasattr(gpucore._cpu, "qconv2d"), reason="no int8 kernels"),
]

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "runtime"))
sys.path.insert(0, str(TESTS / "onnx"))
from ort_quantized import float_out, model_input, quantized, run_ort  # noqa: E402
from quantized_models import program_nodes, program_words, with_program  # noqa: E402

import gpucore.onnx as gx  # noqa: E402
from gpucore.onnx.importer import EXAMPLE_SIZE  # noqa: E402

CASES = [
    (n, f, a) for n in ("cnn", "mlp") for f in ("QDQ", "QOperator") for a in ("QUInt8", "QInt8")
]
CASES.append(("mlp", "QOperator", "float_out"))  # the last QGemm's float32 epilogue (int32 bias)
INT32 = c_program.DTYPE_CODE[np.dtype(np.int32)]


def _biases(nodes) -> list:
    """The word index of each bias buffer argument (qgemm's 7th, qconv2d's 19th)."""
    out = []
    for kind, _, args in nodes:
        if kind in ("qgemm", "qconv2d"):
            tag, at = args[7 if kind == "qgemm" else 19]
            if tag == c_program.BUF:
                out.append(at)
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(name, fmt, act) -> (model file, input file, the compiled executor's output)."""
    d = tmp_path_factory.mktemp("onnx_qmodels")
    out = {}
    for name, fmt, act in CASES:
        if act == "float_out":
            src = float_out(quantized(d, name, fmt, "QInt8"))
        else:
            src = quantized(d, name, fmt, act)
        cm = gx.load(src)
        assert all(ex.python_steps == 0 for ex in cm.executors())
        x = model_input(name, EXAMPLE_SIZE)  # C runs the dynamic batch "N" at the example's size
        want = cm(gpucore.from_numpy(x)).numpy()
        np.testing.assert_array_equal(want, run_ort(src, x))
        path = d / f"{name}_{fmt}_{act}.gcm"
        cm.save(path)
        x.tofile(d / f"{name}_{fmt}_{act}.in")
        out[name, fmt, act] = (path, d / f"{name}_{fmt}_{act}.in", want)
    return out


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_the_c_run_gives_the_compiled_executors_bits(programs, saved, case, tmp_path):
    path, inp, want = saved[case]
    words = program_words(path.read_bytes())  # (a KeyError: no C section was written)
    nodes = program_nodes(words)
    kinds = {k for k, _, _ in nodes}
    assert {"quantize_linear_u8", "qgemm"} <= kinds, kinds
    assert case[0] != "cnn" or {"qconv2d", "max_pool2d_u8"} <= kinds, kinds
    biases = [words[t + 3] for t in _biases(nodes)]
    assert biases and set(biases) == {INT32}, biases  # ONNX's int32 biases, kept as int32
    if case[2] == "float_out":  # the last qgemm writes float32 (its float epilogue)
        last = [args for k, _, args in nodes if k == "qgemm"][-1]
        assert words[last[2][1] + 3] == c_program.DTYPE_CODE[np.dtype(np.float32)]
    out = run(programs("model"), "run", path, inp, tmp_path / "out.bin")
    assert out.splitlines()[-1] == "ok"
    got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def test_eight_threads_run_one_onnx_int8_model(programs, saved):
    path, inp, _ = saved["cnn", "QOperator", "QInt8"]
    assert run(programs("model"), "threads", path, inp, 8, 10).splitlines()[-1] == "ok"


# ---------------------------------------------------------------------------- tampered files
def _float_bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", v))[0]


def tampered(saved, d: Path) -> list:
    """[(file, what the loader's message must say)]: one argument of a quantize_linear_u8 node
    or of an int32 bias changed in each (the program's checksum updated)."""
    src = saved["cnn", "QOperator", "QUInt8"][0].read_bytes()
    words = program_words(src)
    nodes = program_nodes(words)
    ql = [args for k, _, args in nodes if k == "quantize_linear_u8"][0]
    x, n, scale, zp = ql[0][1], ql[2][1], ql[3][1], ql[4][1]
    bias = _biases(nodes)[0]
    bias_kind = [k for k, _, args in nodes if bias in {at for _, at in args}][0]
    cases = []

    def edit(label, changes, msg):
        w = words.copy()
        for at, v in changes:
            w[at] = v
        cases.append((label, with_program(src, w), msg))

    kind = "quantize_linear_u8: "
    for v in (0.0, -1.0, float("nan"), float("inf"), 1e-300):  # 1e-300: 0 as float32
        edit(f"scale{v}", [(scale + 1, _float_bits(v))], kind + "'scale' must be finite and > 0")
    edit("zp", [(zp + 1, 256)], kind + "'zero_point' must be an integer in [0, 255]")
    edit("zp_neg", [(zp + 1, -1)], kind + "'zero_point' must be an integer in [0, 255]")
    edit("n", [(n + 1, int(words[n + 1]) + 1)], kind + "'x' holds")
    edit("x_dtype", [(x + 3, INT32)], kind + "'x' must be a contiguous buffer of float32")
    edit(
        "out_dtype",
        [(ql[1][1] + 3, c_program.DTYPE_CODE[np.dtype(np.int8)])],
        kind + "'out' must be a contiguous buffer of uint8",
    )
    edit("args", [(ql[0][1] - 1, 4)], "quantize_linear_u8: wrong argument count")
    edit("reach", [(x + 2, 1 << 40)], "buffer outside its region")
    # an int32 bias: its length, dtype, and place (a constant)
    edit("bias_short", [(bias + 5, 3), (bias + 6, 4)], "'bias' holds 3 elements but")
    int64 = [(bias + 3, c_program.DTYPE_CODE[np.dtype(np.int64)]), (bias + 5, 4), (bias + 6, 8)]
    edit("bias_dtype", int64, "'bias' must be a contiguous buffer of float32 or int32")
    a = nodes[[k for k, _, _ in nodes].index(bias_kind)][2][0][1]  # its input, in the arena
    edit("bias_in_arena", [(bias + 1, -1), (bias + 2, words[a + 2])], "must be constants")
    return write_cases(d, cases)


@pytest.fixture(scope="module")
def tampered_files(saved, tmp_path_factory):
    return tampered(saved, tmp_path_factory.mktemp("onnx_tampered"))


def test_tampered_quantize_linear_and_int32_bias_are_refused(programs, tampered_files):
    check_tampered(run(programs("model"), "fuzz", *[p for p, _ in tampered_files]), tampered_files)


@pytest.fixture(scope="module")
def hostile(saved, tmp_path_factory):
    return hostile_files(saved["cnn", "QOperator", "QUInt8"][0], tmp_path_factory.mktemp("oh"))


def test_hostile_onnx_int8_model_files(programs, hostile):
    _check_fuzz(run(programs("model"), "fuzz", *hostile), len(hostile))


def test_onnx_int8_models_under_asan_and_ubsan(programs, asan_lib, saved, tampered_files, hostile,
                                               tmp_path):  # fmt: skip
    exe = programs("model", "asan", asan_lib)
    for case in (("cnn", "QOperator", "QInt8"), ("mlp", "QDQ", "QUInt8"), CASES[-1]):
        path, inp, want = saved[case]
        assert run(exe, "run", path, inp, tmp_path / "o.bin").splitlines()[-1] == "ok"
        got = np.fromfile(tmp_path / "o.bin", np.float32).reshape(want.shape)
        np.testing.assert_array_equal(got, want)  # the portable int8 kernels: the same bits
    check_tampered(run(exe, "fuzz", *[p for p, _ in tampered_files]), tampered_files)
    _check_fuzz(run(exe, "fuzz", *hostile), len(hostile))


def test_onnx_int8_models_under_valgrind(programs, saved, tampered_files):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    env = {"GPUCORE_NUM_THREADS": "2"}
    for case in (("cnn", "QOperator", "QInt8"), CASES[-1]):
        path, inp, want = saved[case]
        out = path.parent / "vg.bin"
        assert run(programs("model"), "run", path, inp, out, valgrind=True, env=env)
        np.testing.assert_array_equal(np.fromfile(out, np.float32).reshape(want.shape), want)
    out = run(programs("model"), "fuzz", *[p for p, _ in tampered_files], valgrind=True, env=env)
    check_tampered(out, tampered_files)


# ------------------------------------------------- ONNX Runtime's quantize_dynamic, from C
@pytest.fixture(scope="module", params=["mlp", "cnn"])
def dynamic(request, tmp_path_factory):
    """ONNX Runtime's dynamically quantized MLP and CNN (DynamicQuantizeLinear -> MatMulInteger /
    ConvInteger -> Cast -> Mul), saved: (model file, input file, the compiled executor's
    output)."""
    import onnx  # noqa: PLC0415
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415
    from onnxruntime import quantization as quant  # noqa: PLC0415
    from ort_quantized import MODELS  # noqa: PLC0415

    d = tmp_path_factory.mktemp(f"onnx_dynamic_{request.param}")
    build, _ = MODELS[request.param]
    src, dst = str(d / "f.onnx"), str(d / "dyn.onnx")
    onnx.save(build(np.random.default_rng(1)), src)
    quant.quantize_dynamic(src, dst, weight_type=quant.QuantType.QInt8, per_channel=True)
    cm = gx.load(dst)
    x = model_input(request.param, EXAMPLE_SIZE)
    want = cm(gpucore.from_numpy(x)).numpy()
    np.testing.assert_array_equal(want, ReferenceEvaluator(dst).run(None, {"x": x})[0])
    assert all(ex.python_steps == 0 for ex in cm.executors())  # the casts are C nodes
    cm.save(d / "dyn.gcm")
    x.tofile(d / "dyn.in")
    return d / "dyn.gcm", d / "dyn.in", want


def test_dynamic_quantization_runs_from_c(programs, dynamic, tmp_path):
    path, inp, want = dynamic
    kinds = {k for k, _, _ in program_nodes(program_words(path.read_bytes()))}
    assert {"dynamic_quantize_u8", "qgemm_dynamic"} <= kinds and "reduce" not in kinds, kinds
    assert "cnn" not in path.parent.name or {"qconv2d", "cast"} <= kinds, kinds
    out = run(programs("model"), "run", path, inp, tmp_path / "out.bin")
    assert out.splitlines()[-1] == "ok"
    got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def test_compiled_quantize_dynamic_model_runs_from_c(programs, tmp_path):
    """gpucore's own quantize_dynamic MLP, compiled (one float-input qlinear_dynamic per Linear:
    dynamic_quantize_torch_u8 + qgemm_dynamic with the ReLU in its epilogue), saved and run by
    gc_model_load / gc_model_run: the eager model's bits."""
    from gpucore import nn  # noqa: PLC0415
    from gpucore.quantization import quantize_dynamic  # noqa: PLC0415

    gpucore.manual_seed(5)
    q = quantize_dynamic(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 6)), {nn.Linear})
    x = np.random.default_rng(2).standard_normal((3, 20)).astype(np.float32) * 4
    cm = gpucore.compile(q, (gpucore.from_numpy(x),), device="cpu")
    cm.save(tmp_path / "q.gcm")
    x.tofile(tmp_path / "q.in")
    kinds = [k for k, _, _ in program_nodes(program_words((tmp_path / "q.gcm").read_bytes()))]
    assert kinds.count("dynamic_quantize_torch_u8") == 2 and kinds.count("qgemm_dynamic") == 2
    out = run(programs("model"), "run", tmp_path / "q.gcm", tmp_path / "q.in", tmp_path / "o.bin")
    assert out.splitlines()[-1] == "ok"
    with gpucore.no_grad():
        want = q(gpucore.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.fromfile(tmp_path / "o.bin", np.float32).reshape(3, 6), want)


# the CNN: the MLP's MatMulInteger -> Cast -> Mul runs as one qgemm_dynamic, with no cast node
@pytest.mark.parametrize("dynamic", ["cnn"], indirect=True)
def test_tampered_cast_nodes_are_refused(programs, dynamic, tmp_path):
    src = dynamic[0].read_bytes()
    words = program_words(src)
    casts = [args for k, _, args in program_nodes(words) if k == "cast"]
    assert casts
    wide = {c_program.DTYPE_CODE[np.dtype(t)] for t in (np.int32, np.float32, np.float64)}
    # a dst of 1 dim or more whose items are wider than float16's (its strides stay valid)
    cast = [a for a in casts if words[a[1][1] + 4] >= 1 and words[a[1][1] + 3] in wide][0]
    s, d = cast[0][1], cast[1][1]
    f16 = c_program.DTYPE_CODE[np.dtype(np.float16)]
    size = next(d + 5 + j for j in range(int(words[d + 4])) if words[d + 5 + j] > 1)  # smaller
    cases = []
    for label, changes, msg in [
        ("f16", [(d + 3, f16)], "cast between different shapes or unsupported dtypes"),
        ("shape", [(size, int(words[size]) - 1)], "cast between different shapes"),
        ("overlap", [(d + 1, words[s + 1]), (d + 2, words[s + 2])], "overlapping buffers"),
    ]:
        w = words.copy()
        for at, v in changes:
            w[at] = v
        cases.append((label, with_program(src, w), msg))
    files = write_cases(tmp_path, cases)
    check_tampered(run(programs("model"), "fuzz", *[p for p, _ in files]), files)


def test_tampered_dynamic_quantization_nodes_are_refused(programs, dynamic, tmp_path):
    """dynamic_quantize_u8 and qgemm_dynamic nodes with a wrong dtype, size or overlap are
    refused at load, naming the node and the argument."""
    src = dynamic[0].read_bytes()
    words = program_words(src)
    nodes = program_nodes(words)
    dq = next(args for k, _, args in nodes if k == "dynamic_quantize_u8" and args[1][0] == 3)
    sc = next(args for k, _, args in nodes if k == "dynamic_quantize_u8" and args[2][0] == 3)
    qg = next(args for k, _, args in nodes if k == "qgemm_dynamic")
    i8 = c_program.DTYPE_CODE[np.dtype(np.int8)]  # (uint8's item size: the strides stay valid)
    x, y, s = dq[0][1], dq[1][1], sc[2][1]
    cases = []
    for label, changes, msg in [
        ("y_dtype", [(y + 3, i8)], "dynamic_quantize_u8: 'y' must be a contiguous buffer of uint8"),
        ("n", [(dq[4][1] + 1, int(words[dq[4][1] + 1]) + 1)], "dynamic_quantize_u8: 'x' holds"),
        ("scale_on_x", [(s + 1, words[x + 1]), (s + 2, words[x + 2])], "'scale' overlaps 'x'"),
        ("zp_dtype", [(qg[5][1] + 3, i8)], "qgemm_dynamic: 'a_zero_point' must be a contiguous"),
        ("m", [(qg[3][1] + 1, int(words[qg[3][1] + 1]) + 1)], "qgemm_dynamic: 'a' holds"),
    ]:
        w = words.copy()
        for at, v in changes:
            w[at] = v
        cases.append((label, with_program(src, w), msg))
    files = write_cases(tmp_path, cases)
    check_tampered(run(programs("model"), "fuzz", *[p for p, _ in files]), files)
