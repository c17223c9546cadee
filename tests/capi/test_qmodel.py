"""Statically quantized models from C: gc_model_load runs a quantize_static'd MLP, CNN and
residual CNN (their int8 nodes: quantize_u8, dequantize_u8, qgemm, qconv2d, max_pool2d_u8) with
the compiled executor's bits, from 8 threads and through ctypes; files whose int8 node arguments
were tampered with (checksums updated) are refused with a message naming what is wrong, and
hostile files never crash (also under the sanitizers and valgrind)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpucore
from gpucore import capi, runtime
from gpucore.runtime import c_program

from .conftest import CTYPES_PRELUDE, NEEDS, run
from .test_model import _check_fuzz, hostile_files

pytestmark = [
    NEEDS,
    pytest.mark.skipif(not hasattr(gpucore._cpu, "qconv2d"), reason="no int8 kernels"),
]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from quantized_models import (  # noqa: E402
    QMODELS,
    program_nodes,
    program_words,
    quantized,
    tensor_bytes,
    with_program,
    with_tensor,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (model file, input file, the compiled executor's output)."""
    d = tmp_path_factory.mktemp("qmodels")
    out = {}
    for name in QMODELS:
        _, qm, x = quantized(name)
        path = d / f"{name}.gcm"
        qm.save(path)
        x.tofile(d / f"{name}.in")
        out[name] = (path, d / f"{name}.in", np.asarray(qm(gpucore.from_numpy(x)).numpy()))
    return out


@pytest.mark.parametrize("name", sorted(QMODELS))
def test_the_c_run_gives_the_compiled_executors_bits(programs, saved, name, tmp_path):
    path, inp, want = saved[name]
    kinds = {k for k, _, _ in program_nodes(program_words(path.read_bytes()))}
    assert QMODELS[name][2] <= kinds, kinds
    out = run(programs("model"), "run", path, inp, tmp_path / "out.bin")
    assert out.splitlines()[-1] == "ok"
    got = np.fromfile(tmp_path / "out.bin", np.float32).reshape(want.shape)
    np.testing.assert_array_equal(got, want)
    # and the Python loader still reads the file (it ignores the C section)
    x = np.fromfile(inp, np.float32).reshape(QMODELS[name][1])
    np.testing.assert_array_equal(runtime.load(path)(gpucore.from_numpy(x)).numpy(), want)


@pytest.mark.parametrize("name", sorted(QMODELS))
def test_eight_threads_run_one_int8_model(programs, saved, name):
    path, inp, _ = saved[name]
    assert run(programs("model"), "threads", path, inp, 8, 20).splitlines()[-1] == "ok"


CTYPES = (
    CTYPES_PRELUDE
    + """
lib.gc_model_load.restype = P
lib.gc_model_load.argtypes = [ctypes.c_char_p, P, ctypes.POINTER(Err)]
lib.gc_model_run_buffers.argtypes = [P, P, P, ctypes.c_int, P, P, ctypes.c_int,
                                     ctypes.POINTER(Err)]
lib.gc_model_free.argtypes = [P, ctypes.POINTER(Err)]
err = Err()
m = lib.gc_model_load(sys.argv[2].encode(), None, ctypes.byref(err))
assert m, err.message
x = np.load(sys.argv[3])
want = np.load(sys.argv[4])
y = np.empty_like(want)
ins, outs = (P * 1)(x.ctypes.data), (P * 1)(y.ctypes.data)
nin, nout = (ctypes.c_size_t * 1)(x.nbytes), (ctypes.c_size_t * 1)(y.nbytes)
for _ in range(3):
    assert lib.gc_model_run_buffers(m, ins, nin, 1, outs, nout, 1, ctypes.byref(err)) == 0
    assert np.array_equal(y, want)
assert lib.gc_model_free(m, ctypes.byref(err)) == 0
assert "gpucore" not in sys.modules
print("ctypes ok")
"""
)


def test_ctypes_runs_an_int8_model_without_gpucore(saved, tmp_path):
    path, inp, want = saved["qcnn"]
    np.save(tmp_path / "x.npy", np.fromfile(inp, np.float32).reshape(QMODELS["qcnn"][1]))
    np.save(tmp_path / "want.npy", want)
    (tmp_path / "ffi.py").write_text(textwrap.dedent(CTYPES))
    r = subprocess.run(
        [sys.executable, "-I", str(tmp_path / "ffi.py"), capi.get_library_path(), str(path)]
        + [str(tmp_path / "x.npy"), str(tmp_path / "want.npy")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0 and r.stdout == "ctypes ok\n", r.stderr


# ---------------------------------------------------------------------------- tampered files
def _arg(nodes, kind: str, i: int, nth: int = 0) -> int:
    """The word index of the tag of argument i of the nth node of this kind."""
    return [args for k, _, args in nodes if k == kind][nth][i][1]


def _float_bits(v: float) -> int:
    return struct.unpack("<q", struct.pack("<d", v))[0]


def tampered(saved, d: Path) -> list:
    """[(file, what the loader's message must say)]: one int8 node argument changed in each
    (the program's checksum updated, so only the node checks can refuse it)."""
    cnn, res = saved["qcnn"][0].read_bytes(), saved["qres"][0].read_bytes()
    words = program_words(cnn)
    nodes = program_nodes(words)
    q = c_program
    cases = []

    def edit(label, src, changes, msg):
        w = program_words(src)
        for at, v in changes:
            w[at] = v
        cases.append((label, with_program(src, w), msg))

    gemm_zp, conv_zp = _arg(nodes, "qgemm", 5), _arg(nodes, "qconv2d", 17)
    edit("a_zp", cnn, [(gemm_zp + 1, 256)], "qgemm: 'a_zero_point' must be an integer in [0, 255]")
    edit("conv_zp", cnn, [(conv_zp + 1, -1)], "'a_zero_point' must be an integer in [0, 255]")
    edit("relu", cnn, [(_arg(nodes, "qconv2d", 20) + 1, 2)], "'relu' must be an integer in [0, 1]")
    out_scale = _arg(nodes, "qconv2d", 21)
    for v in (0.0, -1.0, float("nan"), float("inf"), 1e-300):  # 1e-300: 0 as float32
        edit(f"out_scale{v}", cnn, [(out_scale + 1, _float_bits(v))], "'out_scale' must be finite")
    edit("a_scale_int", cnn, [(_arg(nodes, "qgemm", 4), q.INT), (_arg(nodes, "qgemm", 4) + 1, 0)],
         "'a_scale' must be finite and > 0")  # fmt: skip
    qp = _arg(nodes, "qconv2d", 1)
    edit("trans", cnn, [(qp + 5, 0)], "'packed' does not hold the weight")
    edit("k", cnn, [(qp + 3, int(words[qp + 3]) - 1)], "'packed' does not hold the weight")
    edit("n", cnn, [(qp + 4, int(words[qp + 4]) + 1)], "int8 weights outside their constant")
    edit("k_max", cnn, [(qp + 3, 65537)], "bad int8 weight k (at most 65536)")
    edit("w_off", cnn, [(qp + 2, 1)], "int8 weights outside their constant")
    scales = _arg(nodes, "qgemm", 6)  # w_scales: a float32 constant, as int8 weights
    edit("w_region", cnn, [(qp + 1, words[scales + 1])], "a constant that is not int8")
    edit("not_packed", cnn, [(qp, q.NONE)] + [(qp + j, q.NONE) for j in range(1, 6)], "")
    edit("scales_in_arena", cnn, [(scales + 1, -1), (scales + 2, 0)], "must be constants")
    edit("no_scales", cnn, [(scales, q.NONE)] + [(scales + j, q.NONE) for j in range(1, 7)], "")
    bias = _arg(nodes, "qgemm", 7)
    edit("short_bias", cnn, [(bias + 5, 3), (bias + 6, 4)], "'bias' holds 3 elements but 10")
    work = _arg(nodes, "qconv2d", 3)
    edit("work", cnn, [(work + 5, 100)], "'work' holds 100 elements but")
    edit("work_dtype", cnn, [(work + 3, 2)], "'work' must be a contiguous buffer of uint8")
    out = _arg(nodes, "qgemm", 2)
    edit("overlap", cnn, [(out + 2, words[_arg(nodes, "qgemm", 0) + 2])], "'out' overlaps 'a'")
    gemm_w = _arg(nodes, "qgemm", 1) + 1  # the region of its int8 weights
    edit("out_const", cnn, [(out + 1, words[gemm_w]), (out + 2, 0)], "'out' writes a constant")
    edit("out_dtype", cnn, [(out + 3, 0)], "'out' must be a contiguous buffer of int32 or float32")
    edit("a_dtype", cnn, [(_arg(nodes, "qgemm", 0) + 3, 0)], "buffer of uint8 or int8")
    edit("m", cnn, [(_arg(nodes, "qgemm", 3) + 1, 1000)], "'a' holds")
    geo = _arg(nodes, "qconv2d", 6)  # h
    edit("conv_h", cnn, [(geo + 1, 1000)], "'x' holds")
    edit("window", cnn, [(_arg(nodes, "qconv2d", 8) + 1, 99)], "larger than the padded input")
    pool = _arg(nodes, "max_pool2d_u8", 10)  # ph
    edit("pool_pad", cnn, [(pool + 1, 2)], "padding must be at most half the kernel")
    edit("pool_c", cnn, [(_arg(nodes, "max_pool2d_u8", 3) + 1, 17)], "'x' holds")
    qz = _arg(nodes, "quantize_u8", 2)
    edit("quant_n", cnn, [(qz + 1, int(words[qz + 1]) + 1)], "quantize_u8: 'x' holds")
    edit("quant_in", cnn, [(_arg(nodes, "quantize_u8", 0) + 3, 1)], "float32")
    gemm = [s for k, s, _ in nodes if k == "qgemm"][0]
    edit("kind", cnn, [(gemm, q.KINDS["qconv2d"])], "qconv2d: wrong argument count")
    rnodes = program_nodes(program_words(res))
    dq = _arg(rnodes, "dequantize_u8", 3)
    edit("dq_scale", res, [(dq + 1, _float_bits(float("nan")))], "dequantize_u8: 'scale'")
    edit("dq_zp", res, [(_arg(rnodes, "dequantize_u8", 4) + 1, 256)], "'zero_point' must be")
    # a saved weight scale of 0 or NaN, the file's checksums agreeing: the epilogue's factors
    names = tensor_bytes(cnn, "capi.names").split(b"\0")
    scale_name = names[int(words[scales + 1])].decode()
    good = np.frombuffer(tensor_bytes(cnn, scale_name), np.float32)
    for j, v in enumerate((0.0, np.nan, -1.0, np.inf)):
        bad = good.copy()
        bad[j] = v
        cases.append((f"scale{v}", with_tensor(cnn, scale_name, bad.tobytes()), "w_scales[j]"))
    return write_cases(d, cases)


def write_cases(d: Path, cases: list) -> list:
    """(label, file bytes, expected message) cases written as d/<label>.gcm: (path, message)."""
    files = []
    for label, data, msg in cases:
        p = d / f"{label}.gcm"
        p.write_bytes(data)
        files.append((p, msg))
    return files


def check_tampered(out: str, files: list) -> None:
    """Each file's line of the C fuzz runner is its load error, naming the expected message."""
    lines = out.splitlines()
    assert len(lines) == len(files), out
    for line, (path, msg) in zip(lines, files):
        assert line.startswith(f"GC_ERR_FORMAT gc_model_load: {path}: "), (path.name, line)
        assert msg in line, (path.name, msg, line)


@pytest.fixture(scope="module")
def tampered_files(saved, tmp_path_factory):
    return tampered(saved, tmp_path_factory.mktemp("tampered"))


def test_tampered_int8_arguments_are_refused(programs, tampered_files):
    out = run(programs("model"), "fuzz", *[p for p, _ in tampered_files])
    check_tampered(out, tampered_files)


@pytest.fixture(scope="module")
def hostile(saved, tmp_path_factory):
    return hostile_files(saved["qcnn"][0], tmp_path_factory.mktemp("qhostile"))


def test_hostile_int8_model_files(programs, hostile):
    _check_fuzz(run(programs("model"), "fuzz", *hostile), len(hostile))


def test_int8_models_under_asan_and_ubsan(programs, asan_lib, saved, tampered_files, hostile,
                                          tmp_path):  # fmt: skip
    exe = programs("model", "asan", asan_lib)
    for name in ("qcnn", "qres"):
        path, inp, want = saved[name]
        assert run(exe, "run", path, inp, tmp_path / "o.bin").splitlines()[-1] == "ok"
        # the portable int8 kernels give the same bits as every ISA's
        got = np.fromfile(tmp_path / "o.bin", np.float32).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
    assert run(exe, "threads", *saved["qmlp"][:2], 8, 5).splitlines()[-1] == "ok"
    check_tampered(run(exe, "fuzz", *[p for p, _ in tampered_files]), tampered_files)
    _check_fuzz(run(exe, "fuzz", *hostile), len(hostile))


def test_int8_models_under_valgrind(programs, saved, tampered_files, hostile):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    env = {"GPUCORE_NUM_THREADS": "2"}
    path, inp, _ = saved["qcnn"]
    assert run(programs("model"), "threads", path, inp, 3, 3, valgrind=True, env=env)
    path, inp, _ = saved["qres"]
    assert run(programs("model"), "run", path, inp, path.parent / "vg.bin", valgrind=True, env=env)
    out = run(programs("model"), "fuzz", *[p for p, _ in tampered_files], valgrind=True, env=env)
    check_tampered(out, tampered_files)
    some = hostile[-60:]  # a sample of the mutated programs (the int8 nodes come last)
    assert len(run(programs("model"), "fuzz", *some, valgrind=True, env=env).splitlines()) == 60
