"""qgemm_pack / qgemm, the int8 GEMM: every output form (int32, float32, requantized uint8 /
int8) bit for bit equal to a numpy int64 reference with the documented float32 epilogue, under
every instruction set of this CPU (and NEON under qemu-aarch64), on shapes around every edge of
the blocking (tile rows and columns, units, K blocks, K not a multiple of 4 or 8), zero points,
int8 activations, weights holding -128, saturation; and bad arguments raise."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

import numpy as np
import pytest
from cpu_isa_harness import ISAS, C, isa_pickles

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
F32 = np.float32


# ------------------------------------------------------------------------------ the reference
def ref_qgemm(a, w, trans, a_zp, w_scale, bias, relu, kind, a_scale=0.02, out_scale=1.0, out_zp=0):
    """numpy: int64 sums, then the epilogue of cpu/README.md in float32, one rounding per op."""
    b = (w.T if trans else w).astype(np.int64)
    c = (a.astype(np.int64) - a_zp) @ b
    assert np.abs(c).max(initial=0) < 2**31
    c = c.astype(np.int32)
    if kind == "i":
        return c
    s = F32(a_scale) * w_scale
    if kind == "f":
        v = c.astype(F32) * s
        if bias is not None:
            v = v + bias
        return np.where(v < 0, F32(0), v) if relu else v
    v = c.astype(F32) * (s / F32(out_scale))
    if bias is not None:
        v = v + bias / F32(out_scale)
    t = np.rint(v) + F32(out_zp)
    lo, hi = (0, 255) if kind == "B" else (-128, 127)
    lo = max(lo, out_zp) if relu else lo
    return np.clip(t, F32(lo), F32(hi)).astype(np.uint8 if kind == "B" else np.int8)


KINDS = {"i": np.int32, "f": np.float32, "B": np.uint8, "b": np.int8}


def make_case(seed, m, n, k, kind, trans=1, a_signed=False, a_zp=None, full=False, bias=True):
    """Inputs of one call (a dict, numpy arrays and scalars)."""
    r = np.random.default_rng(seed)
    lo = -128 if full else -127
    w = r.integers(lo, 128, (n, k) if trans else (k, n), dtype=np.int8)
    if full:
        w.flat[r.integers(0, w.size)] = -128
    a = r.integers(-128, 128, (m, k)).astype(np.int8 if a_signed else np.int16)
    if not a_signed:
        a = (a + 128).astype(np.uint8)
    if a_zp is None:
        a_zp = int(r.integers(-128, 128)) if a_signed else int(r.integers(0, 256))
    ws = (r.random(n) * 0.02 + 0.001).astype(F32)
    bv = (r.standard_normal(n) * 3).astype(F32) if bias and kind != "i" else None
    # the output scale puts the typical output across the 8-bit range (and some past it)
    out_scale = float(0.02 * 0.011 * np.sqrt(k) * 110 / 60)
    out_zp = int(r.integers(0, 256)) if kind == "B" else int(r.integers(-128, 128))
    relu = int(kind != "i" and seed % 2 == 1)
    return dict(a=a, w=w, trans=trans, a_zp=a_zp, ws=ws, bias=bv, relu=relu, kind=kind,
                out_scale=out_scale, out_zp=out_zp)  # fmt: skip


def run_case(c, cpu=C):
    k, n = c["w"].shape[::-1] if c["trans"] else c["w"].shape
    m = c["a"].shape[0]
    p = cpu.qgemm_pack(c["w"], k, n, c["trans"])
    out = np.empty((m, n), KINDS[c["kind"]])
    ws = None if c["kind"] == "i" else c["ws"]
    cpu.qgemm(c["a"], p, out, m, 0.02, c["a_zp"], ws, c["bias"], c["relu"], c["out_scale"],
              c["out_zp"])  # fmt: skip
    return out


def want(c):
    return ref_qgemm(c["a"], c["w"], c["trans"], c["a_zp"], c["ws"], c["bias"], c["relu"],
                     c["kind"], 0.02, c["out_scale"], c["out_zp"])  # fmt: skip


# (m, n, k) around the tiles of every ISA (rows 4 / 6, columns 16 / 64), the units (96 rows,
# 256 columns), the K blocks (1024 on VNNI here, 2048 on AVX2 / scalar) and K % 8
SHAPES = [(1, 1, 1), (1, 2048, 33), (2, 17, 3), (3, 64, 4), (5, 65, 5), (6, 63, 7), (7, 16, 8),
          (4, 15, 9), (13, 130, 31), (97, 40, 64), (96, 257, 12), (40, 70, 255), (9, 129, 256),
          (11, 66, 257), (7, 33, 263), (193, 9, 45), (25, 300, 520), (3, 20, 1025),
          (2, 5, 1030), (70, 70, 70), (1, 100, 2049), (3, 70, 4100)]  # fmt: skip


def cases():
    """Every shape in every output form, cycling the layout, signedness, zero points, -128."""
    out = []
    for i, (m, n, k) in enumerate(SHAPES):
        for j, kind in enumerate("ifBb"):
            s = 4 * i + j
            signed = s % 3 == 2
            zp = [None, 0, 128 if not signed else -128, 255 if not signed else 127][s % 4]
            out.append(make_case(s, m, n, k, kind, trans=(s // 2) % 2, a_signed=signed,
                                 a_zp=zp, full=s % 5 == 0, bias=s % 7 != 3))  # fmt: skip
    return out


CASES = cases()


def test_every_form_matches_numpy_reference():
    for i, c in enumerate(CASES):
        got, ref = run_case(c), want(c)
        assert got.dtype == ref.dtype and np.array_equal(got, ref), (i, SHAPES[i // 4], c["kind"])


def test_results_do_not_depend_on_thread_count():
    """Two threads split the rows finer (256 rows: 4 blocks of 64 instead of 96 + 96 + 64)."""
    threads = C.info()["threads"]
    for c in (make_case(3, 200, 600, 300, "f"), make_case(5, 256, 256, 256, "B")):
        try:
            C.set_num_threads(1)
            one = run_case(c)
            C.set_num_threads(2)
            two = run_case(c)
        finally:
            C.set_num_threads(threads)
        assert np.array_equal(one, two) and np.array_equal(one, want(c))


def test_extremes_do_not_overflow():
    """k at its limit with the largest products (255 * -128): the int32 sum is exact."""
    k = 65536
    a = np.full((2, k), 255, np.uint8)
    a[1] = 0
    w = np.full((3, k), -128, np.int8)
    w[1] = 127
    p = C.qgemm_pack(w, k, 3, 1)
    assert p.full_range
    out = np.empty((2, 3), np.int32)
    C.qgemm(a, p, out, 2, 1.0, 0, None, None, 0, 1.0, 0)
    assert np.array_equal(out, ref_qgemm(a, w, 1, 0, None, None, 0, "i"))
    C.qgemm(a, p, out, 2, 1.0, 255, None, None, 0, 1.0, 0)  # (0 - 255) * -128 * k
    assert out[1, 0] == 255 * 128 * k and out[0, 0] == 0
    with pytest.raises(ValueError, match="exceeds"):
        C.qgemm_pack(np.zeros(3 * (k + 1), np.int8), k + 1, 3, 1)


def test_int32_bias_joins_the_sums():
    """An int32 bias (ONNX's quantized bias of QLinearConv / QGemm) is added to the exact sums
    before the float32 epilogue: float32(c + bias) * s, as ONNX Runtime requantizes; every
    output form but int32, both activation types, zero points, both weight layouts."""
    for i, (m, n, k) in enumerate(SHAPES[:14]):
        for kind in "fBb":
            c = make_case(100 + i, m, n, k, kind, trans=i % 2, a_signed=i % 3 == 1, bias=False)
            ib = np.random.default_rng(i).integers(-(2**20), 2**20, n).astype(np.int32)
            p = C.qgemm_pack(c["w"], k, n, c["trans"])
            out = np.empty((m, n), KINDS[kind])
            C.qgemm(c["a"], p, out, m, 0.02, c["a_zp"], c["ws"], ib, c["relu"], c["out_scale"],
                    c["out_zp"])  # fmt: skip
            b = (c["w"].T if c["trans"] else c["w"]).astype(np.int64)
            acc = ((c["a"].astype(np.int64) - c["a_zp"]) @ b + ib).astype(np.int32)
            s = F32(0.02) * c["ws"]
            if kind == "f":
                v = acc.astype(F32) * s
                want = np.where(v < 0, F32(0), v) if c["relu"] else v
            else:
                t = np.rint(acc.astype(F32) * (s / F32(c["out_scale"]))) + F32(c["out_zp"])
                lo, hi = (0, 255) if kind == "B" else (-128, 127)
                lo = max(lo, c["out_zp"]) if c["relu"] else lo
                want = np.clip(t, F32(lo), F32(hi)).astype(out.dtype)
            np.testing.assert_array_equal(out, want, err_msg=f"{(m, n, k)} {kind}")
    p = C.qgemm_pack(np.ones((4, 3), np.int8), 3, 4, 1)
    with pytest.raises(TypeError, match="bias"):  # neither float32 nor int32
        C.qgemm(np.ones((2, 3), np.uint8), p, np.empty((2, 4), np.float32), 2, 0.1, 0,
                np.ones(4, np.float32), np.ones(4, np.int64), 0, 1.0, 0)  # fmt: skip
    with pytest.raises(ValueError, match="bias"):  # too short
        C.qgemm(np.ones((2, 3), np.uint8), p, np.empty((2, 4), np.float32), 2, 0.1, 0,
                np.ones(4, np.float32), np.ones(3, np.int32), 0, 1.0, 0)  # fmt: skip


def test_requantization_saturates_and_rounds_half_to_even():
    # sums of 1 * w give exactly w; out_scale 2 puts w / 2 on the .5 ties
    k, n = 1, 8
    w = np.array([[-128, -127, -5, -3, -1, 1, 3, 5]], np.int8)  # k x n
    a = np.ones((1, k), np.uint8)
    p = C.qgemm_pack(w, k, n, 0)
    ws = np.ones(n, F32)
    for kind, zp, want_row in (
        ("b", 0, [-64, -64, -2, -2, 0, 0, 2, 2]),
        ("B", 3, [0, 0, 1, 1, 3, 3, 5, 5]),
        ("b", 126, [62, 62, 124, 124, 126, 126, 127, 127]),
    ):
        out = np.empty((1, n), KINDS[kind])
        C.qgemm(a, p, out, 1, 0.5, 0, ws, None, 0, 1.0, zp)
        assert out.tolist() == [want_row], kind
    out = np.empty((1, n), np.uint8)
    C.qgemm(a, p, out, 1, 100.0, 0, ws, None, 1, 1.0, 7)  # relu: clipped at the zero point
    assert out.tolist() == [[7, 7, 7, 7, 7, 107, 255, 255]]


def test_packed_matrix_attributes():
    w = np.arange(-60, 60, dtype=np.int8).reshape(10, 12)
    p = C.qgemm_pack(w, 12, 10, 1)
    assert (p.k, p.n, p.trans, p.isa, p.full_range) == (12, 10, 1, C.info()["isa"], False)
    assert p.kernel.startswith("qgemm_") and p.width >= 16 and p.kc % 8 == 0 and p.nbytes > 0
    assert "QPackedMatrix" in repr(p)
    e = C.qgemm_pack(np.zeros(0, np.int8), 0, 0, 0)  # empty: k = 0 gives zeros
    out = np.ones((2, 0), np.float32)
    C.qgemm(np.zeros(0, np.uint8), e, out, 2, 1.0, 0, np.zeros(0, F32), None, 0, 1.0, 0)
    p0 = C.qgemm_pack(np.zeros(0, np.int8), 0, 3, 1)
    out = np.ones((2, 3), np.int32)
    C.qgemm(np.zeros(0, np.uint8), p0, out, 2, 1.0, 5, None, None, 0, 1.0, 0)
    assert not out.any()


def test_bad_arguments_raise():
    w = np.ones((4, 8), np.int8)
    p = C.qgemm_pack(w, 8, 4, 1)
    a = np.ones((3, 8), np.uint8)
    ws = np.ones(4, F32)
    out = np.empty((3, 4), F32)
    ok = (a, p, out, 3, 0.5, 1, ws, None, 0, 1.0, 0)

    def call(**kw):
        names = ["a", "p", "out", "m", "a_scale", "a_zp", "ws", "bias", "relu", "os", "ozp"]
        args = list(ok)
        for key, v in kw.items():
            args[names.index(key)] = v
        C.qgemm(*args)

    call()
    bad = [
        (TypeError, dict(a=a.astype(np.int16))),
        (TypeError, dict(a=[1, 2, 3])),
        (TypeError, dict(p=w)),
        (TypeError, dict(out=np.empty((3, 4), np.float64))),
        (TypeError, dict(ws=ws.astype(np.float64))),
        (TypeError, dict(a_scale="x")),
        (ValueError, dict(m=4)),
        (ValueError, dict(m=-1)),
        (ValueError, dict(out=np.empty((3, 3), F32))),
        (ValueError, dict(out=np.empty((4, 3), F32)[:, :2])),
        (ValueError, dict(out=np.empty((3, 4), F32)[::-1])),
        (ValueError, dict(a_zp=256)),
        (ValueError, dict(a_zp=-1)),
        (ValueError, dict(a=a.view(np.int8), a_zp=128)),
        (ValueError, dict(a_scale=0.0)),
        (ValueError, dict(a_scale=float("nan"))),
        (ValueError, dict(a_scale=1e39)),
        (ValueError, dict(ws=np.ones(3, F32))),
        (ValueError, dict(ws=np.array([1, 1, 0, 1], F32))),
        (ValueError, dict(ws=np.full(4, 1e38, F32), a_scale=10.0)),
        (ValueError, dict(bias=np.array([0, np.inf, 0, 0], F32))),
        (ValueError, dict(relu=2)),
        (ValueError, dict(out=np.empty((3, 4), np.uint8), os=0.0)),
        (ValueError, dict(out=np.empty((3, 4), np.uint8), ozp=256)),
        (ValueError, dict(out=np.empty((3, 4), np.int8), ozp=128)),
        (ValueError, dict(out=np.empty((3, 4), np.int32), relu=1, ws=None)),
        (ValueError, dict(out=np.empty((3, 4), np.int32), bias=ws, ws=None)),
    ]
    for exc, kw in bad:
        with pytest.raises(exc):
            call(**kw)
    buf = np.zeros(64, np.uint8)  # out overlapping a
    with pytest.raises(ValueError, match="overlaps"):
        C.qgemm(buf[:24], p, buf[8:20], 3, 0.5, 1, ws, None, 0, 1.0, 0)
    ro = np.empty((3, 4), F32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        call(out=ro)
    with pytest.raises(TypeError):
        C.qgemm(*ok[:10])
    with pytest.raises(TypeError):
        C.qgemm_pack(w.astype(np.uint8), 8, 4, 1)
    with pytest.raises(ValueError):
        C.qgemm_pack(w, 8, 5, 1)
    with pytest.raises(ValueError):
        C.qgemm_pack(w[:, ::2], 4, 4, 1)
    with pytest.raises(ValueError):
        C.qgemm_pack(w, 8, 4, 2)
    with pytest.raises(ValueError):
        C.qgemm_pack(w, -1, 4, 1)


# ------------------------------------------------------------------ every ISA of this CPU
ISA_SCRIPT = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    import test_qgemm as T
    C = T.C
    outs = [T.run_case(c, C) for c in T.CASES]
    kernel = C.qgemm_pack(np.zeros(1, np.int8), 1, 1, 1).kernel
    with open(sys.argv[1], "wb") as f:
        pickle.dump((C.info()["isa"], kernel, outs), f)
    """
)


@pytest.fixture(scope="module")
def isa_results(tmp_path_factory):
    here = os.path.dirname(os.path.abspath(__file__))
    return isa_pickles(tmp_path_factory.mktemp("qgemm"), ISA_SCRIPT, here)


@pytest.mark.parametrize("isa", ISAS)
def test_every_isa_matches_reference_bitwise(isa_results, isa):
    got_isa, kernel, outs = isa_results[isa]
    assert got_isa == isa and kernel.startswith("qgemm_")
    for i, (c, got) in enumerate(zip(CASES, outs)):
        ref = want(c)
        assert got.dtype == ref.dtype and np.array_equal(got, ref), (isa, kernel, i, c["kind"])
    scalar = isa_results["scalar"][2]
    assert all(np.array_equal(x, y) for x, y in zip(outs, scalar))


def test_vnni_kernel_where_the_cpu_has_it(isa_results):
    info = "/proc/cpuinfo"
    has_vnni = os.path.exists(info) and "avx512_vnni" in open(info).read()
    if "avx512" in isa_results:
        assert ("vnni" in isa_results["avx512"][1]) == has_vnni
    if "avx2" in isa_results:
        assert isa_results["avx2"][1] == "qgemm_avx2_u8s8_4x16"


# ------------------------------------------------------------------ NEON under qemu-aarch64
NEON_DRIVER = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "isa.h"
#include "kernels.h"

static unsigned long long st = 88172645463325252ull;
static unsigned rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (unsigned)st; }

/* one call under the named ISA: packs w and runs qgemm into out */
static void run(const char *isa, const uint8_t *a, const int8_t *w, ptrdiff_t m, ptrdiff_t n,
                ptrdiff_t k, int trans, const gc_qargs *q, void *out)
{
    char err[256];
    if (gc_cpu_init(isa, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(2); }
    gc_qpacked p;
    if (gc_qgemm_pack_init(&p, k, n, trans)) exit(3);
    if (posix_memalign((void **)&p.data, 64, p.bytes ? p.bytes : 64)) exit(4);
    gc_qgemm_pack(w, &p);
    if (gc_qgemm(a, m, k, &p, out, n, q)) exit(5);
    free(p.data);
}

int main(void)
{
    static const int dims[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 97, 130};
    int cases = 0, bad = 0;
    for (int t = 0; t < 160; t++) {
        const int big = t % 9 == 8; /* past the K block (2048 here) */
        const ptrdiff_t m = dims[rnd() % (big ? 8 : 17)], n = dims[rnd() % (big ? 10 : 17)];
        const ptrdiff_t k = big ? 2049 + rnd() % 9 : dims[rnd() % 17] * (1 + t % 3);
        const int trans = t & 1, mode = (t >> 1) & 3;
        gc_qargs q = {.mode = mode, .relu = mode && (t & 8), .a_signed = (t % 3) == 1};
        q.a_zp = q.a_signed ? (int)(rnd() % 256) - 128 : (int)(rnd() % 256);
        q.out_zp = mode == GC_QOUT_U8 ? (int)(rnd() % 256) : (int)(rnd() % 256) - 128;
        q.a_scale = 0.02f;
        q.out_scale = 0.05f * (float)k;
        uint8_t *a = malloc(m * k);
        int8_t *w = malloc(n * k);
        float *ws = malloc(4 * n), *bias = malloc(4 * n);
        for (ptrdiff_t i = 0; i < m * k; i++) a[i] = (uint8_t)rnd();
        for (ptrdiff_t i = 0; i < n * k; i++) w[i] = (int8_t)rnd();
        for (ptrdiff_t j = 0; j < n; j++) {
            ws[j] = 0.001f + (float)(rnd() % 1000) * 1e-5f;
            bias[j] = (float)((int)(rnd() % 2001) - 1000) * 0.01f;
        }
        q.w_scale = ws;
        q.bias = t % 5 ? bias : NULL;
        int32_t *o1 = malloc(4 * m * n), *o2 = malloc(4 * m * n);
        run("scalar", a, w, m, n, k, trans, &q, o1);
        run("neon", a, w, m, n, k, trans, &q, o2);
        const size_t bytes = (size_t)(m * n) * (mode >= GC_QOUT_U8 ? 1 : 4);
        if (memcmp(o1, o2, bytes)) {
            bad++;
            fprintf(stderr, "MISMATCH m=%td n=%td k=%td mode %d\n", m, n, k, mode);
        }
        if (mode == GC_QOUT_I32)
            for (ptrdiff_t i = 0; i < m; i++)
                for (ptrdiff_t j = 0; j < n; j++) {
                    long long s = 0;
                    for (ptrdiff_t p = 0; p < k; p++) {
                        const int av = q.a_signed ? (int8_t)a[i * k + p] : a[i * k + p];
                        s += (long long)(av - q.a_zp) * (trans ? w[j * k + p] : w[p * n + j]);
                    }
                    if (s != o2[i * n + j]) {
                        bad++;
                        fprintf(stderr, "WRONG SUM m=%td n=%td k=%td\n", m, n, k);
                        i = m;
                        break;
                    }
                }
        cases++;
        free(a); free(w); free(ws); free(bias); free(o1); free(o2);
    }
    printf("qgemm_neon_check: %d cases, %d mismatches\n", cases, bad);
    return bad != 0;
}
"""


def _arm64_tools():
    cc, qemu = (
        os.environ.get("CC_ARM64", "aarch64-linux-gnu-gcc"),
        os.environ.get("QEMU_ARM64", "qemu-aarch64"),
    )
    if not (shutil.which(cc) and shutil.which(qemu)):
        return None
    libc = subprocess.run([cc, "-print-file-name=libc.a"], capture_output=True, text=True)
    return (cc, qemu) if os.path.isabs(libc.stdout.strip()) else None


@pytest.mark.skipif(_arm64_tools() is None, reason="arm64 cross toolchain / qemu-aarch64 missing")
def test_neon_kernel_matches_scalar_under_qemu(tmp_path):
    cc, qemu = _arm64_tools()
    drv = tmp_path / "qgemm_neon_check.c"
    drv.write_text(NEON_DRIVER)
    cpu = os.path.join(ROOT, "cpu")
    files = [os.path.join(cpu, f) for f in sorted(os.listdir(cpu)) if f.endswith(".c")]
    files = [f for f in files if "Python.h" not in open(f).read()]
    files += [os.path.join(cpu, "isa", "scalar.c"), os.path.join(cpu, "isa", "neon.c"), str(drv)]
    flags = ["-std=c11", "-O2", "-fno-math-errno", "-pthread", "-DGC_NEON_ISA=1", "-I" + cpu]
    procs = [subprocess.Popen([cc, *flags, "-c", f, "-o", str(tmp_path / f"{i}.o")],
                              stderr=subprocess.PIPE, text=True)
             for i, f in enumerate(files)]  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    exe = tmp_path / "check"
    objs = [str(tmp_path / f"{i}.o") for i in range(len(files))]
    subprocess.run([cc, "-static", "-pthread", "-o", str(exe), *objs, "-lm"], check=True)
    r = subprocess.run([qemu, str(exe)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    assert "160 cases, 0 mismatches" in r.stdout
