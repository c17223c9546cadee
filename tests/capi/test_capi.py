"""The C API (gpucore.h, libgpucore): C programs built against the installed library, their
results compared with gpucore's Python ops; error paths, scopes and threads; the same programs
under AddressSanitizer + UndefinedBehaviorSanitizer and valgrind; the package's build helpers;
and a ctypes caller that never imports gpucore."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import capi

from .conftest import C_DIR, CC, CTYPES_PRELUDE, NEEDS, build_plain, run

pytestmark = NEEDS

PROGRAMS = ("ops", "errors", "scopes")


# ------------------------------------------------------------------------------ references
def inp(shape, seed, dt=np.float32):
    """tests/capi/c/ops.c's input(): ((i*7 + seed*13) % 23 - 11) / 4."""
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    return (((i * 7 + seed * 13) % 23 - 11) / 4.0).astype(dt).reshape(shape)


def g(x):
    return gpucore.from_numpy(np.ascontiguousarray(x))


def _expected() -> dict:
    f, d = np.float32, np.float64
    a, b, c = inp((2, 3, 4), 1), inp((3, 1), 2), inp((4,), 3)
    ad, bd = inp((2, 3, 4), 1, d), inp((3, 1), 2, d)
    at = a.transpose(2, 1, 0)
    ex = {}
    for name in ("add", "sub", "mul", "div", "maximum", "minimum"):
        fn = getattr(gpucore, name)
        ex[f"{name}_f32"] = fn(g(a), g(b))
        ex[f"{name}_f64"] = fn(g(ad), g(bd))
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        ex[name] = getattr(gpucore, name)(g(a), g(c))
    ex["pow"] = gpucore.pow(g(np.abs(a)), g(b))
    unary = {
        "relu": gpucore.relu,
        "sigmoid": gpucore.sigmoid,
        "tanh": gpucore.tanh,
        "gelu": F.gelu,
        "exp": gpucore.exp,
        "neg": gpucore.neg,
        "abs": gpucore.abs,
    }
    for name, fn in unary.items():
        ex[name] = fn(g(a))
        ex[f"{name}_t"] = fn(g(at))
    ex["relu_f64"] = gpucore.relu(g(ad))
    ex["log"] = gpucore.log(g(np.abs(a) + f(1)))
    ex["sqrt"] = gpucore.sqrt(g(np.abs(a)))
    ex["add_t"] = gpucore.add(g(at), g(at))
    mm = gpucore.matmul
    m34, m45 = inp((3, 4), 4), inp((4, 5), 5)
    ex["mm"] = mm(g(m34), g(m45))
    ex["mm_batch"] = mm(g(a), g(m45))
    ex["mm_bcast"] = mm(g(inp((2, 1, 3, 4), 6)), g(inp((3, 4, 5), 7)))
    ex["mm_vec_mat"] = mm(g(inp((4,), 8)), g(m45))
    ex["mm_mat_vec"] = mm(g(m45), g(inp((5,), 9)))
    ex["mm_dot"] = mm(g(inp((4,), 8)), g(inp((4,), 8)))
    ex["mm_trans"] = mm(g(m34), g(inp((5, 4), 10).T))
    ex["mm_strided"] = mm(g(inp((3, 4, 5), 7).transpose(2, 1, 0)), g(m34))
    ex["mm_f64"] = mm(g(inp((3, 4), 4, d)), g(inp((4, 5), 5, d)))
    ex["sum_all"] = gpucore.sum(g(a))
    ex["sum_1"] = gpucore.sum(g(a), dim=1)
    ex["sum_02_keep"] = gpucore.sum(g(a), dim=(0, 2), keepdim=True)
    ex["mean_neg"] = gpucore.mean(g(a), dim=-1)
    ex["mean_02"] = gpucore.mean(g(a), dim=(0, 2))
    ex["mean_t_1"] = gpucore.mean(g(at), dim=1)
    ex["sum_f64"] = gpucore.sum(g(ad), dim=1, keepdim=True)
    ex["softmax_last"] = gpucore.softmax(g(a), dim=-1)
    ex["softmax_0"] = gpucore.softmax(g(a), dim=0)
    ex["log_softmax_1"] = gpucore.log_softmax(g(a), dim=1)
    ex["log_softmax_t"] = gpucore.log_softmax(g(at), dim=2)
    x, w, bias = inp((2, 3, 7, 6), 11), inp((4, 3, 3, 2), 12), inp((4,), 13)
    ex["conv"] = F.conv2d(g(x), g(w), g(bias))
    ex["conv_geom"] = F.conv2d(g(x), g(w), None, stride=(2, 1), padding=(1, 0), dilation=(1, 2))
    ex["conv_f64"] = F.conv2d(
        g(inp((2, 3, 7, 6), 11, d)), g(inp((4, 3, 3, 2), 12, d)), None, 1, (1, 0)
    )
    ex["maxpool"] = F.max_pool2d(g(x), 3, 2, 1)
    ex["maxpool_k2"] = F.max_pool2d(g(x), 2)
    ex["avgpool"] = F.avg_pool2d(g(x), 3, 2, 1)
    ex["avgpool_k2"] = F.avg_pool2d(g(x), 2)
    ex["layer_norm"] = F.layer_norm(g(a), (4,), g(inp((4,), 14)), g(inp((4,), 15)), 1e-5)
    ex["layer_norm_2"] = F.layer_norm(g(a), (3, 4), None, None, 1e-5)
    for dt in gpucore.dtypes.ALL:
        full = np.full((2, 3), -2.5, np.float64)
        for name, v in (("full", full), ("ones", np.ones((2, 3))), ("zeros", np.zeros((2, 3)))):
            t = gpucore.from_numpy(v).to(dt)
            arr = t.numpy(force=True)  # bfloat16: as float32 (exact for these values)
            if dt.name == "bfloat16":
                arr = arr.astype(np.float32).view(np.uint32) >> 16  # ops.c prints the bits
            elif dt.name == "float16":
                arr = arr.view(np.uint16)
            ex[f"{name}_{dt.name}"] = (arr, dt.name)
    gpucore.manual_seed(7)
    ex["randn"] = gpucore.randn(2, 3)
    ex["randn_f64"] = (ex["randn"].numpy(), "float64")  # the float32 stream, widened
    ex["reshape"] = g(a).reshape(4, -1)
    ex["reshape_t"] = g(at).reshape(4, -1)
    ex["clone_t"] = g(at)
    ex["contiguous_t"] = g(at)
    ex["transpose"] = g(a).transpose(-1, 1)
    return ex


def parse(out: str) -> dict:
    res = {}
    for line in out.splitlines():
        if not line.startswith("case "):
            continue
        head, _, vals = line.partition(" : ")
        _, name, dtype, nd, *shape = head.split()
        assert len(shape) == int(nd), line
        v = np.array([float(s) for s in vals.split()], np.float64).reshape([int(s) for s in shape])
        res[name] = (v, dtype)
    return res


@pytest.fixture(scope="module")
def ops_out(programs):
    return run(programs("ops"))


def test_every_op_matches_gpucore_python(ops_out):
    got = parse(ops_out)
    want = _expected()
    assert set(got) == set(want), set(got) ^ set(want)
    assert ops_out.rstrip().endswith("done")
    for name, (v, dtype) in got.items():
        w = want[name]
        if isinstance(w, tuple):
            w, wdt = w
        else:
            wdt = w.dtype.name
            w = w.numpy()
        assert dtype == wdt, (name, dtype, wdt)
        w = np.asarray(w, np.float64)
        assert v.shape == w.shape, (name, v.shape, w.shape)
        tol = 1e-12 if dtype == "float64" else 2e-6
        np.testing.assert_allclose(v, w, rtol=tol, atol=tol, err_msg=name)


def test_error_paths(programs):
    out = run(programs("errors"))
    assert re.fullmatch(r"ok \d+\n", out), out


def test_scopes_and_threads(programs):
    out = run(programs("scopes"))
    assert re.fullmatch(r"ok \d+\n", out), out


# ------------------------------------------------------------------------------ sanitizers
@pytest.mark.parametrize("name", PROGRAMS)
def test_under_asan_and_ubsan(programs, asan_lib, name):
    out = run(programs(name, "asan", asan_lib))
    assert "FAIL" not in out


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
@pytest.mark.parametrize("name", PROGRAMS)
def test_under_valgrind(programs, name):
    out = run(programs(name), valgrind=True, env={"GPUCORE_NUM_THREADS": "2"})
    assert "FAIL" not in out


# ------------------------------------------------------------------------------ the package
def test_the_library_exports_exactly_the_header():
    header = open(os.path.join(gpucore.get_include(), "gpucore.h")).read()
    declared = set(re.findall(r"^GC_API\b[^;(]*?\b(gc_\w+)\s*\(", header, flags=re.M))
    nm = subprocess.run(
        ["nm", "-D", "--defined-only", capi.get_library_path()], capture_output=True, text=True
    )
    if nm.returncode != 0:
        pytest.skip("nm is not available")
    exported = {ln.split()[-1] for ln in nm.stdout.splitlines() if " T " in ln}
    assert exported == declared


def test_pkg_config_and_the_helpers(tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    assert gpucore.get_libraries() == ["gpucore"]
    assert os.path.isfile(os.path.join(gpucore.get_include(), "gpucore.h"))
    assert os.path.isfile(os.path.join(gpucore.get_library_dir(), "libgpucore.so"))
    env = dict(os.environ, PKG_CONFIG_PATH=gpucore.get_pkg_config_dir())
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "gpucore"], env=env, capture_output=True, text=True
    )
    assert flags.returncode == 0, flags.stderr
    version = subprocess.run(
        ["pkg-config", "--modversion", "gpucore"], env=env, capture_output=True, text=True
    )
    assert version.stdout.strip() == gpucore.__version__
    exe = tmp_path / "prog"
    r = subprocess.run(
        f"{CC} -std=c11 {C_DIR / 'errors.c'} {flags.stdout.strip()} -o {exe}",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert run(exe).startswith("ok ")
    cli = subprocess.run(
        [sys.executable, "-m", "gpucore.capi", "--pkg-config-path"], capture_output=True, text=True
    )
    assert cli.stdout.strip() == gpucore.get_pkg_config_dir() and cli.stderr == ""


CTYPES = (
    CTYPES_PRELUDE
    + """
lib.gc_version.restype = ctypes.c_char_p
lib.gc_tensor_from_buffer.restype = P
lib.gc_tensor_from_buffer.argtypes = [P, ctypes.c_size_t, P, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_int, P, P, ctypes.POINTER(Err)]
lib.gc_matmul.restype = P
lib.gc_matmul.argtypes = [P, P, ctypes.POINTER(Err)]
lib.gc_tensor_copy_to_buffer.argtypes = [P, P, ctypes.c_size_t, ctypes.POINTER(Err)]
lib.gc_tensor_free.argtypes = [P, ctypes.POINTER(Err)]
err = Err()
def tensor(x):
    shape = (ctypes.c_int64 * x.ndim)(*x.shape)
    t = lib.gc_tensor_from_buffer(x.ctypes.data, x.nbytes, shape, x.ndim, 7, 0, None, None,
                                  ctypes.byref(err))
    assert t and err.code == 0, err.message
    return t
rng = np.random.default_rng(0)
a = rng.standard_normal((5, 7)).astype(np.float32)
b = rng.standard_normal((7, 3)).astype(np.float32)
ta, tb = tensor(a), tensor(b)
tc = lib.gc_matmul(ta, tb, ctypes.byref(err))
out = np.empty((5, 3), np.float32)
assert lib.gc_tensor_copy_to_buffer(tc, out.ctypes.data, out.nbytes, ctypes.byref(err)) == 0
np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
assert lib.gc_matmul(ta, ta, ctypes.byref(err)) is None and err.code == -2, err.code
for t in (ta, tb, tc):
    assert lib.gc_tensor_free(t, ctypes.byref(err)) == 0
assert lib.gc_tensor_free(ta, ctypes.byref(err)) == -1
assert "gpucore" not in sys.modules
print("ctypes ok", lib.gc_version().decode())
"""
)


def test_ctypes_without_importing_gpucore(tmp_path):
    script = tmp_path / "ffi.py"
    script.write_text(textwrap.dedent(CTYPES))
    r = subprocess.run(
        [sys.executable, "-I", str(script), capi.get_library_path()],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ctypes ok ")


def test_a_program_built_as_the_readme_says(tmp_path):
    exe = build_plain(C_DIR / "scopes.c", tmp_path / "scopes")
    assert run(exe).startswith("ok ")


CPP = """
#include <gpucore.h>
#include <cstdio>
int main()
{
    gc_error e;
    const int64_t shape[2] = {2, 3};
    gc_tensor *t = gc_tensor_ones(shape, 2, GC_DTYPE_FLOAT32, GC_DEVICE_CPU, &e);
    gc_tensor *s = gc_sum(t, nullptr, 0, 0, &e);
    float v = 0;
    gc_tensor_copy_to_buffer(s, &v, sizeof v, &e);
    std::printf("%g %d\\n", v, GC_API_VERSION);
    gc_tensor_free(s, &e);
    return gc_tensor_free(t, &e);
}
"""


def test_the_header_compiles_as_cpp(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "t.cpp").write_text(CPP)
    d = gpucore.get_library_dir()
    r = subprocess.run(
        [cxx, "-std=c++11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", str(tmp_path / "t.cpp")]
        + [f"-I{gpucore.get_include()}", f"-L{d}", f"-Wl,-rpath,{d}", "-lgpucore"]
        + ["-o", str(tmp_path / "t")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert run(tmp_path / "t") == "6 100\n"


def test_enums_match_python():
    """gc_dtype follows gpucore.dtypes.ALL.  (The program's node kinds need no check: model.h
    and c_program.KINDS both read cpu/opcodes.def's GC_NODE_KIND table.)"""
    import ctypes

    lib = ctypes.CDLL(capi.get_library_path())
    lib.gc_dtype_name.restype = ctypes.c_char_p
    names = [lib.gc_dtype_name(i).decode() for i in range(len(gpucore.dtypes.ALL))]
    assert names == [d.name for d in gpucore.dtypes.ALL]
    assert lib.gc_dtype_name(len(names)) is None
