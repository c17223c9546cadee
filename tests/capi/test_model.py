"""Deployed models from C: gc_model_load reads the runtime's saved file (its C section) and
gc_model_run gives the compiled executor's bits; 8 threads on one model; every error path;
hostile files (truncated, corrupted, mutated programs) give GC_ERR_FORMAT / GC_ERR_IO, never a
crash (checked under the sanitizers too)."""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import runtime

from .conftest import NEEDS, run

pytestmark = NEEDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_models import block, cnn, lm, mlp, rand, token_ids, unet  # noqa: E402


def wide_cnn():
    """Big enough that the compiled executor pre-packs its conv and linear weights."""
    gpucore.manual_seed(1)
    return gpucore.nn.Sequential(
        gpucore.nn.Conv2d(64, 32, 3, padding=1),
        gpucore.nn.ReLU(),
        gpucore.nn.MaxPool2d(2),
        gpucore.nn.Flatten(),
        gpucore.nn.Linear(32 * 4 * 4, 128),
    )


class Misc(gpucore.nn.Module):
    """The node kinds the nets above leave out: copy (a transposed view into softmax), softmax,
    log_softmax, where, comparisons, a product of two activations."""

    def forward(self, x):
        y = gpucore.softmax(x.transpose(0, 1), dim=-1)
        z = gpucore.where(y > 0.1, y, y * 2.0)
        return gpucore.matmul(z, z.transpose(0, 1)) + F.log_softmax(z, dim=0).sum()


class Classify(gpucore.nn.Module):
    """The predicted class of an MLP: argmax writes int64."""

    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        return self.net(x).argmax(-1)


MODELS = {
    "mlp": (lambda: mlp(), (4, 16)),
    "cnn": (lambda: cnn(), (2, 3, 16, 16)),
    "packed_mlp": (lambda: mlp(128), (32, 128)),  # pre-packed weights (gc_gemm_pack at load)
    # hidden activations kept transposed by the compiled executor (planner/layout.py); the C
    # section is written in the plain layout, the same bits
    "transposed_mlp": (lambda: mlp(300), (32, 300)),
    "packed_cnn": (wide_cnn, (32, 64, 8, 8)),
    "block": (lambda: block(), (2, 8, 16)),  # layer_norm, attention, GELU epilogues
    "causal_block": (lambda: block(causal=True), (2, 8, 16)),  # + a float mask
    "misc": (Misc, (6, 5)),
    "unet": (unet, (2, 3, 8, 8)),  # cat, gather (upsampling, padding), im2col, clamp, log1p
    "lm": (lm, (2, 8)),  # int64 token ids: embedding lookups through gather
    "classify": (Classify, (5, 16)),  # an int64 output: argmax
}


def _input(name, seed):
    shape = MODELS[name][1]
    return token_ids(*shape, seed=seed) if name == "lm" else rand(*shape, seed=seed)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (model file, input file, the compiled executor's output)."""
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, (make, _) in MODELS.items():
        x = _input(name, 3)
        cm = runtime.compile(make().eval(), gpucore.from_numpy(x))
        path = d / f"{name}.gcm"
        cm.save(path)
        x.tofile(d / f"{name}.in")
        out[name] = (path, d / f"{name}.in", np.asarray(cm(gpucore.from_numpy(x)).numpy()))
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_c_run_gives_the_compiled_executors_bits(programs, saved, name, tmp_path):
    path, inp, want = saved[name]
    res = tmp_path / "out.bin"
    out = run(programs("model"), "run", path, inp, res)
    assert out.splitlines()[-1] == "ok"
    dtype = "int64" if name == "lm" else "float32"
    assert f" {dtype} {' '.join(map(str, MODELS[name][1]))}\n" in out  # the input's spec
    got = np.fromfile(res, want.dtype).reshape(want.shape)
    np.testing.assert_array_equal(got, want)
    # the Python side still reads the file (it ignores the C section)
    back = runtime.load(path)
    x = np.fromfile(inp, dtype).reshape(MODELS[name][1])
    np.testing.assert_array_equal(back(gpucore.from_numpy(x)).numpy(), want)


def test_the_transposed_mlp_keeps_its_chain_transposed():
    """What transposed_mlp covers: a compiled executor whose hidden activations stay transposed
    (AVX-512's 14 x 32 tile runs those GEMMs swapped; other tiles may not)."""
    from gpucore import _cpu
    from gpucore.runtime.planner.layout import transposed

    make, shape = MODELS["transposed_mlp"]
    cm = runtime.compile(make().eval(), gpucore.from_numpy(rand(*shape, seed=3)), device="cpu")
    (ex,) = cm.executors()
    if _cpu.info()["gemm"]["float32"]["mr"] == 14:
        assert transposed(ex.plan)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_eight_threads_run_one_model(programs, saved, name):
    path, inp, _ = saved[name]
    out = run(programs("model"), "threads", path, inp, 8, 40)
    assert out.splitlines()[-1] == "ok", out


def test_a_token_outside_the_vocabulary_is_an_error(programs, saved, tmp_path):
    path = saved["lm"][0]
    ids = token_ids(2, 8)
    ids[0, 5] = 99
    ids.tofile(tmp_path / "bad.in")
    out = run(
        programs("model"), "run", path, tmp_path / "bad.in", tmp_path / "out.bin", check=False
    )
    assert "(gather): index 99 lies outside [0, 20)" in out, out


def test_model_error_paths(programs, saved):
    assert run(programs("model"), "errors", saved["mlp"][0]).splitlines()[-1] == "ok"


def test_a_model_c_cannot_run_has_no_section(programs, tmp_path):
    x = rand(2, 5)
    cm = runtime.compile(lambda t: gpucore.cumsum(t, 1), gpucore.from_numpy(x))
    cm(gpucore.from_numpy(x))
    assert cm.executors()[0].python_steps == 1  # cumsum runs from Python: no C section
    cm.save(tmp_path / "cumsum.gcm")
    gpucore.save({"a": gpucore.ones(3)}, tmp_path / "plain.safetensors")
    out = run(programs("model"), "fuzz", tmp_path / "cumsum.gcm", tmp_path / "plain.safetensors")
    lines = out.splitlines()
    assert all(ln.startswith("GC_ERR_FORMAT") and "no C program" in ln for ln in lines), out
    np.testing.assert_allclose(  # and Python still runs it
        runtime.load(tmp_path / "cumsum.gcm")(gpucore.from_numpy(x)).numpy(), x.cumsum(1), rtol=1e-6
    )


# ------------------------------------------------------------------------------ hostile files
def _program_span(data: bytes) -> tuple[int, int]:
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8 : 8 + n])
    b, e = head["capi.program"]["data_offsets"]
    return 8 + n + b, 8 + n + e


def hostile_files(src: Path, d: Path) -> list[Path]:
    data = src.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    files = {
        "empty": b"",
        "short": b"\x01\x02\x03",
        "huge_header": struct.pack("<Q", 1 << 62) + data[8:],
        "huge_arena": data,  # (set below)
        "header_past_end": struct.pack("<Q", len(data)) + data[8:],
        "not_json": data[:8] + b"x" * n + data[8 + n :],
        "truncated_header": data[: 8 + n // 2],
        "truncated_data": data[: len(data) - 5],
        "bad_escape": data.replace(b'"capi.program"', b'"capi.progr\\q"', 1),
        "deep": struct.pack("<Q", 4000) + b"[" * 4000 + data[8 + n :],
    }
    rng = np.random.default_rng(0)
    b, e = _program_span(data)
    words = np.frombuffer(data[b:e], np.int64)
    old_sum = hashlib.sha256(data[b:e]).hexdigest().encode()
    assert data[: 8 + n].count(old_sum) == 1

    def program(w: np.ndarray) -> bytes:
        """The file with program words w, its checksum updated (the loader checks the words
        themselves, not only the checksum)."""
        head = data[: 8 + n].replace(old_sum, hashlib.sha256(w.tobytes()).hexdigest().encode())
        return head + data[8 + n : b] + w.tobytes() + data[e:]

    flipped = bytearray(data)
    flipped[b + 5] ^= 0x40
    files["checksum"] = bytes(flipped)  # the data no longer matches gpucore.tensor_sha256
    w = words.copy()
    w[2] = 1 << 40  # an arena no machine has: the run reports GC_ERR_OUT_OF_MEMORY
    files["huge_arena"] = program(w)
    for i in range(len(words)):  # every word of the program, set to hostile values
        for j, v in enumerate((-1, int(rng.integers(-50, 5000)))):
            w = words.copy()
            w[i] = v
            files[f"word{i}_{j}"] = program(w)
    for k in range(20):  # random bytes anywhere in the header
        buf = bytearray(data)
        for pos in rng.integers(8, 8 + n, size=3):
            buf[pos] = int(rng.integers(0, 256))
        files[f"header{k}"] = bytes(buf)
    paths = []
    for name, content in files.items():
        p = d / f"{name}.gcm"
        p.write_bytes(content)
        paths.append(p)
    return paths + [d / "missing.gcm", d]


@pytest.fixture(scope="module")
def hostile(saved, tmp_path_factory):
    files = []
    for name in ("cnn", "packed_cnn", "causal_block", "misc"):
        files += hostile_files(saved[name][0], tmp_path_factory.mktemp(f"hostile_{name}"))
    return files


def _check_fuzz(out: str, n: int) -> None:
    lines = out.splitlines()
    assert len(lines) == n, out[-2000:]
    for ln in lines:
        assert ln.startswith(("GC_ERR_FORMAT gc_model_load: ", "GC_ERR_IO gc_model_load: ")) or (
            ln.startswith("loaded run=")
        ), ln
    assert sum(ln.startswith("GC_ERR_FORMAT") for ln in lines) > n // 3
    assert "loaded run=GC_ERR_OUT_OF_MEMORY" in lines  # huge_arena
    assert any("does not match its checksum" in ln for ln in lines)


def test_hostile_model_files(programs, hostile):
    _check_fuzz(run(programs("model"), "fuzz", *hostile), len(hostile))


def test_models_under_asan_and_ubsan(programs, asan_lib, saved, hostile, tmp_path):
    exe = programs("model", "asan", asan_lib)
    path, inp, want = saved["cnn"]
    assert run(exe, "run", path, inp, tmp_path / "o.bin").splitlines()[-1] == "ok"
    np.testing.assert_allclose(
        np.fromfile(tmp_path / "o.bin", np.float32).reshape(want.shape), want, rtol=1e-5, atol=1e-5
    )  # fmt: skip  (portable kernels here)
    assert run(exe, "threads", path, inp, 8, 10).splitlines()[-1] == "ok"
    assert run(exe, "errors", saved["mlp"][0]).splitlines()[-1] == "ok"
    _check_fuzz(run(exe, "fuzz", *hostile), len(hostile))


def test_models_under_valgrind(programs, saved, hostile):
    import shutil

    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    path, inp, _ = saved["mlp"]
    env = {"GPUCORE_NUM_THREADS": "2"}
    assert run(programs("model"), "threads", path, inp, 4, 5, valgrind=True, env=env)
    assert run(programs("model"), "errors", path, valgrind=True, env=env)
    path, inp, _ = saved["packed_cnn"]
    assert run(programs("model"), "run", path, inp, path.parent / "vg.bin", valgrind=True, env=env)
    some = hostile[:40] + hostile[-40:]  # the malformed headers and a sample of the programs
    out = run(programs("model"), "fuzz", *some, valgrind=True, env=env)
    assert len(out.splitlines()) == len(some)
