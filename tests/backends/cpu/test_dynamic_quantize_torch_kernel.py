"""dynamic_quantize_torch_u8 (cpu/qdynamic.c: PyTorch's quantize_dynamic activation parameters
and rounding over the range pass of DynamicQuantizeLinear) bit for bit equal to a numpy float32
reference of gpucore's eager dynamic quantized Linear (``kernels.activation_qparams`` and
``qtensor.quantize_array``) on sizes around every vector width, the threaded split, constant,
all-negative, tiny and huge ranges, ties; inf and NaN give the documented scale NaN, zero point
0; quantize_u8 (the same vectorized loop, isa/quant.h) equal to the reference under every
instruction set of this CPU; the relu epilogue of qgemm_dynamic maps -0.0 to +0.0 and keeps NaN,
as gpucore's relu."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_isa_harness import ISAS, C, run_in_subprocess

from gpucore import dtypes as D
from gpucore.quantization.kernels import activation_qparams
from gpucore.quantization.qtensor import quantize_array

F32 = np.float32


def _cases() -> list:
    r = np.random.default_rng(8)
    cases = [r.standard_normal(n).astype(F32) * 3 for n in (1, 7, 8, 15, 16, 17, 33, 100, 1001)]
    cases += [
        r.standard_normal(25088).astype(F32),  # the MLP's first layer at batch 32
        r.standard_normal(1 << 21).astype(F32) * 40,  # large enough to split over threads
        np.full(37, 3.0, F32),
        np.full(37, -3.0, F32),
        np.zeros(19, F32),
        -np.abs(r.standard_normal(45)).astype(F32) - 1,  # all negative: zero point 255
        np.abs(r.standard_normal(45)).astype(F32) + 1,  # all positive: zero point 0
        np.array([1e-40, -1e-40, 3e-41, 0], F32),  # a denormal range: the eps floor
        np.array([3e38, -3e38, 1.0], F32),  # the range overflows float32: refused, scale NaN
        np.array([0.5, 1.5, 2.5, 3.5, 255.0, 0.0, -0.0], F32),  # scale 1: halves to even
        np.array([-255.0, -0.5, -1.5, -2.5, 0.0], F32),
        np.array([1, np.inf, -2], F32),
    ]
    for at in (0, 13, 40):  # NaN in a vector body, the tail, and the last element
        x = r.standard_normal(41).astype(F32)
        x[at] = np.nan
        cases.append(x)
    return cases


CASES = _cases()


def run_kernel(x):
    y = np.full(x.size, 77, np.uint8)
    s, z = np.zeros(1, F32), np.full(1, 9, np.uint8)
    C.dynamic_quantize_torch_u8(x, y, s, z, x.size)
    return y, s[0], z[0]


def reference(x):
    """(y, scale, zero point) as the eager layer computes them; None where it refuses x."""
    try:
        scale, zp = (
            activation_qparams(x.min(), x.max()) if x.size else (float(np.finfo(F32).eps), 0)
        )
    except ValueError:  # inf or NaN
        return None
    return quantize_array(x, scale, zp, D.quint8), F32(scale), zp


@pytest.mark.parametrize("i", range(len(CASES)))
def test_equals_the_eager_layers_quantization(i):
    x = CASES[i]
    y, s, z = run_kernel(x)
    want = reference(x)
    if want is None:  # the documented scale NaN, zero point 0, and every y 255 (NaN saturates)
        assert np.isnan(s) and z == 0, (i, s, z)
        assert (y == 255).all(), (i, y)
        return
    np.testing.assert_array_equal(y, want[0], err_msg=f"case {i}")
    assert s.tobytes() == want[1].tobytes() and z == want[2], (i, s, want[1], z, want[2])


def test_parameters_spelled_out():
    """The eps floor of a constant-zero input, zero point 255 of an all-negative one, the
    rounding of x * (1 / scale) + zp half to even, and the empty input."""
    y, s, z = run_kernel(np.zeros(5, F32))
    assert s == np.finfo(F32).eps and z == 0 and not y.any()
    y, s, z = run_kernel(np.array([-255.0, -1.0], F32))
    assert s == 1.0 and z == 255 and list(y) == [0, 254]
    y, s, z = run_kernel(np.array([0.5, 1.5, 2.5, 255.0], F32))
    assert s == 1.0 and z == 0 and list(y) == [0, 2, 2, 255]
    y, s, z = run_kernel(np.zeros(0, F32))
    assert s == np.finfo(F32).eps and z == 0 and y.size == 0
    for bad in (np.nan, np.inf, -np.inf):
        y, s, z = run_kernel(np.array([1.0, bad, -2.0], F32))
        assert np.isnan(s) and z == 0 and list(y) == [255, 255, 255]
    y, s, z = run_kernel(np.array([3e38, -3e38], F32))  # finite, but max - min overflows
    assert np.isnan(s) and z == 0 and list(y) == [255, 255]


def test_outputs_may_be_left_out_and_bad_arguments_raise():
    x = CASES[7]
    y, s, z = run_kernel(x)
    sc, zp = np.zeros(1, F32), np.zeros(1, np.uint8)
    C.dynamic_quantize_torch_u8(x, None, sc, zp, x.size)
    assert sc[0] == s and zp[0] == z
    with pytest.raises(TypeError, match="dynamic_quantize_torch_u8: 'x' must be float32"):
        C.dynamic_quantize_torch_u8(x.astype(np.float64), y, sc, zp, x.size)
    with pytest.raises(ValueError, match="dynamic_quantize_torch_u8: 'y'"):
        C.dynamic_quantize_torch_u8(x, y[:1], sc, zp, x.size)


def test_qgemm_dynamic_relu_gives_positive_zero_and_keeps_nan():
    """float32(c) * tiny scale underflows to -0.0 for c < 0: relu makes it +0.0 (gpucore's relu
    and numpy's maximum do); a NaN scale stays NaN (as relu(NaN))."""
    r = np.random.default_rng(2)
    m, n, k = 3, 10, 24
    a = r.integers(0, 256, (m, k), dtype=np.uint8)
    w = r.integers(-127, 128, (n, k), dtype=np.int8)
    pw = C.qgemm_pack(w, k, n, 1)
    z, ws = np.array([128], np.uint8), np.full(n, 1e-30, F32)
    for scale in (1e-30, 0.01, np.nan):
        sc = np.array([scale], F32)
        plain, fused = np.zeros((m, n), F32), np.zeros((m, n), F32)
        C.qgemm_dynamic(a, pw, plain, m, sc, z, ws, None, 0)
        C.qgemm_dynamic(a, pw, fused, m, sc, z, ws, None, 1)
        if scale == 1e-30:  # the products underflow: -0.0 where c < 0
            assert (np.signbit(plain) & (plain == 0)).any()
        want = np.maximum(plain, F32(0))
        assert fused.tobytes() == want.tobytes(), scale
        assert not np.signbit(fused[fused == 0]).any()


@pytest.mark.parametrize("isa", ISAS)
def test_quantize_u8_is_the_reference_under_every_isa(isa, tmp_path):
    """isa/quant.h's loop at each ISA's width (and the baseline's) gives quantize_array's bits:
    halves to even, saturation, +-inf, -0.0, NaN -> 255, zero points 0 and 255, every tail
    length, and x * (1 / scale) + zp rounded twice, never as one FMA (-51.3749962 at scale
    0.75, zero point 131: 62; a fused multiply-add gives 63)."""
    r = np.random.default_rng(6)
    x = (r.standard_normal(1000) * 90).astype(F32)
    head = [0.5, 1.5, 2.5, -0.5, 254.5, 255.5, 300.0, -300.0, np.nan, np.inf, -np.inf, -0.0]
    x[: len(head) + 1] = [*head, -51.3749962]
    x[500:520] = x[:20]  # the special values in a vector body too
    np.save(tmp_path / "x.npy", x)
    sizes, params = (1, 7, 8, 9, 12, 13, 15, 16, 17, 31, 33, 64, 1000), ((0.75, 131), (0.5, 0))
    params += ((0.5, 255), (2.0, 0), (2.0, 255))
    code = (
        "import numpy as np\n"
        f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
        "outs = []\n"
        f"for s, z in {params!r}:\n"
        f"    for n in {sizes!r}:\n"
        "        q = np.zeros(n, np.uint8)\n"
        "        C.quantize_u8(x[:n], q, n, s, z)\n"
        "        outs.append(q)\n"
        f"np.save({str(tmp_path / 'q.npy')!r}, np.concatenate(outs))\n"
        "print(C.info()['isa'])\n"
    )
    res = run_in_subprocess(code, GPUCORE_CPU_ISA=isa)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == isa
    want = [quantize_array(x[:n], s, z, D.quint8) for s, z in params for n in sizes]
    got = np.load(tmp_path / "q.npy")
    np.testing.assert_array_equal(got, np.concatenate(want))
    at = sum(sizes[:-1]) + 12  # x[12] in the n = 1000 call at scale 0.75, zero point 131
    assert got[at] == want[len(sizes) - 1][12] == 62


_HARNESS = r"""
#include <stddef.h>
#include <stdint.h>
#include "quant.h"
#include "qgemm.h"
void NAME(const float *x, uint8_t *q, ptrdiff_t n, const int32_t *acc, const gc_qepi *e,
          float *o)
{
    qq_torch_u8(x, q, n, 0.75f, 131);
    qepi_row(acc, n, e, 0, o);
}
"""

_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "isa.h"
void f_fma(const float *, uint8_t *, ptrdiff_t, const int32_t *, const gc_qepi *, float *);
void f_base(const float *, uint8_t *, ptrdiff_t, const int32_t *, const gc_qepi *, float *);
enum { N = 1 << 16 };
static float x[N], s[N], b[N], o1[N], o2[N];
static int32_t acc[N], cs[N];
static uint8_t q1[N], q2[N];
int main(void)
{
    uint32_t r = 1;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * 400.0f;
        acc[i] = (int32_t)(r % 200001u) - 100000;
        s[i] = (float)(r >> 9) * 1e-10f;
        b[i] = (float)(r >> 12) / 1048576.0f - 0.5f;
    }
    x[0] = -51.3749962f;
    gc_qepi e;
    memset(&e, 0, sizeof e);
    e.mode = GC_QOUT_F32;
    e.colsum = cs;
    e.scale = s;
    e.bias = b;
    f_fma(x, q1, N, acc, &e, o1);
    f_base(x, q2, N, acc, &e, o2);
    printf("%d %d %d\n", q1[0], memcmp(q1, q2, N) != 0, memcmp(o1, o2, sizeof o1) != 0);
    return 0;
}
"""


def test_no_fma_contraction_under_clang(tmp_path):
    """clang contracts ``a * b + c`` within one expression into an FMA by default (GCC does not
    under -std=c11): isa/quant.h's quantize loop and isa/qgemm.h's float epilogue built by clang
    with -mavx2 -mfma must give the baseline build's bits (-51.3749962 at scale 0.75, zero point
    131: 62, not the fused 63)."""
    import pathlib  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    clang = shutil.which("clang")
    if clang is None or "avx2" not in ISAS:
        pytest.skip("needs clang and an AVX2 + FMA CPU")
    cpu = pathlib.Path(__file__).resolve().parents[3] / "cpu"
    (tmp_path / "h.c").write_text(_HARNESS)
    (tmp_path / "main.c").write_text(_MAIN)
    inc = [f"-I{cpu}", f"-I{cpu / 'isa'}"]
    cc = [clang, "-std=c11", "-O2", *inc]
    for name, flags in (("f_fma", ["-mavx2", "-mfma"]), ("f_base", [])):
        out = str(tmp_path / f"{name}.o")
        src = str(tmp_path / "h.c")
        subprocess.run([*cc, *flags, f"-DNAME={name}", "-c", src, "-o", out], check=True)
    exe = str(tmp_path / "t")
    objs = [str(tmp_path / "main.c"), str(tmp_path / "f_fma.o"), str(tmp_path / "f_base.o")]
    subprocess.run([*cc, *objs, "-lm", "-o", exe], check=True)
    res = subprocess.run([exe], capture_output=True, text=True, check=True)
    assert res.stdout.split() == ["62", "0", "0"], res.stdout
