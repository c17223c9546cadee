"""The bfloat16 GEMM (cpu/gemm_bf16.c, AVX-512 BF16) and its wiring (bf16 matmul / linear /
conv2d on the CPU): bit for bit against a numpy emulation of vdpbf16ps's documented arithmetic,
within a derived bound of a float64 reference, the same bits on 1 and 2 threads, NaN / inf, the
denormal flushing, the float32 fallback under GPUCORE_CPU_ISA=avx2, and autocast's Linear
against PyTorch. Skipped where the CPU has no AVX-512 BF16 (the fallback is then all there is)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpucore as gc
from gpucore import _cpu as C
from gpucore import dtypes as D

needs_bf16 = pytest.mark.skipif(
    C.gemm_bf16_kernel() is None, reason="no AVX-512 BF16 on this CPU (float32 fallback only)"
)
pytestmark = needs_bf16

U32 = 2.0**-24  # float32's unit roundoff
U16 = 2.0**-8  # bfloat16's


def bf16(x) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return D.f32_to_bf16(x).reshape(x.shape)


def f32(h: np.ndarray) -> np.ndarray:
    return D.bf16_to_f32(h).reshape(h.shape)


def rand_bf16(rng, *shape, scale=1.0):
    return bf16(rng.standard_normal(shape) * scale)


def emulate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """vdpbf16ps's chain in numpy float32 (the Intel SDM's pseudo-code, which Zen 4 follows: per
    pair of k the odd product is added first, then the even one, each sum rounded to nearest
    even; products of bf16 values are exact in float32). Valid where no denormal occurs."""
    A, B = f32(a), f32(b)
    k = A.shape[1]
    if k % 2:
        A = np.concatenate([A, np.zeros((A.shape[0], 1), np.float32)], 1)
        B = np.concatenate([B, np.zeros((1, B.shape[1]), np.float32)], 0)
    c = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for q in range(0, A.shape[1], 2):
        c = c + A[:, q + 1 : q + 2] * B[q + 1]
        c = c + A[:, q : q + 1] * B[q]
    return c


def emulate_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The small-m form (m <= 8, B stored n x k): per element 16 lanes, lane l the vdpbf16ps
    chain over the pairs q = l, l + 16, ... (each 32 elements of k one step, zeros past k), then
    the lanes added (l, l + 8), (l, l + 4), (l, l + 2), (0, 1)."""
    A, W = f32(a), np.ascontiguousarray(f32(b).T)
    kk = -(-A.shape[1] // 32) * 32
    A = np.pad(A, ((0, 0), (0, kk - A.shape[1])))
    W = np.pad(W, ((0, 0), (0, kk - W.shape[1])))
    lanes = np.zeros((A.shape[0], W.shape[0], 16), np.float32)
    for p in range(0, kk, 32):
        ae, ao = A[:, p : p + 32 : 2], A[:, p + 1 : p + 32 : 2]
        we, wo = W[:, p : p + 32 : 2], W[:, p + 1 : p + 32 : 2]
        lanes = lanes + ao[:, None, :] * wo[None, :, :]
        lanes = lanes + ae[:, None, :] * we[None, :, :]
    v = lanes[..., :8] + lanes[..., 8:]
    v = v[..., :4] + v[..., 4:]
    v = v[..., :2] + v[..., 2:]
    return v[..., 0] + v[..., 1]


DOT_M = 8  # gemm_bf16.h's GC_BF16_DOT_M


def emulated(a, b, tb):
    """What gemm_bf16 computes for op(A) = a, op(B) = b (A row-major; B stored n x k if tb)."""
    return emulate_dot(a, b) if tb and a.shape[0] <= DOT_M else emulate(a, b)


def bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|float32 sum - exact| <= gamma_k * (|A| @ |B|) for any order of k float32 additions of
    exact products, gamma_k = k u / (1 - k u)."""
    k = a.shape[1]
    g = k * U32 / (1 - k * U32)
    return g * (np.abs(f32(a).astype(np.float64)) @ np.abs(f32(b).astype(np.float64)))


def ref64(a, b):
    with np.errstate(invalid="ignore"):  # inf * 0 in the NaN test
        return f32(a).astype(np.float64) @ f32(b).astype(np.float64)


def run(a, b, out_dtype=np.float32, ta=0, tb=0, bias=None, bias_rows=0):
    """gemm_bf16 of op(a) @ op(b) for plain 2-D operands (a, b given as op(A), op(B))."""
    m, k = a.shape
    n = b.shape[1]
    abuf = np.ascontiguousarray(a.T if ta else a)
    bbuf = np.ascontiguousarray(b.T if tb else b)
    c = np.full((m, n), 7, out_dtype)
    C.gemm_bf16(abuf, bbuf, c, 1, m, n, k, ta, tb, 0, 0, 0, bias, bias_rows)
    return c


# m around the tile's 14 rows and the unit's 112; n around 32 columns and 256; k around one
# pair, the 256-pair K block (512), odd k (the last pair padded with zero)
SHAPES = [
    (1, 1, 1),
    (1, 5, 31),
    (8, 67, 33),
    (9, 70, 300),
    (1, 1, 2),
    (2, 3, 3),
    (13, 31, 5),
    (14, 32, 64),
    (15, 33, 511),
    (14, 256, 512),
    (29, 257, 513),
    (112, 64, 1024),
    (113, 95, 1025),
    (3, 300, 1537),
]


@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_float32_sums_are_the_emulated_vdpbf16ps_chain_bitwise(m, n, k, tb):
    """tb = 1: B stored n x k (a Linear weight), packed 16 x 16 words at a time on AVX-512, or
    read in place by the small-m form (m <= 8)."""
    rng = np.random.default_rng(m * 1000 + n + k)
    a, b = rand_bf16(rng, m, k), rand_bf16(rng, k, n)
    got = run(a, b, tb=tb)
    np.testing.assert_array_equal(got.view(np.uint32), emulated(a, b, tb).view(np.uint32))
    assert np.all(np.abs(got - ref64(a, b)) <= bound(a, b))


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
def test_transposed_operands_give_the_same_bits(ta, tb):
    rng = np.random.default_rng(5)
    a, b = rand_bf16(rng, 45, 71), rand_bf16(rng, 71, 39)
    np.testing.assert_array_equal(run(a, b, ta=ta, tb=tb), run(a, b))


def test_bf16_output_is_the_float32_sum_plus_bias_rounded_once_to_nearest_even():
    rng = np.random.default_rng(6)
    a, b = rand_bf16(rng, 37, 300), rand_bf16(rng, 300, 70)
    bias_c = rng.standard_normal(70).astype(np.float32)
    bias_r = rng.standard_normal(37).astype(np.float32)
    s = run(a, b)
    for bias, rows, want in (
        (None, 0, s),
        (bias_c, 0, s + bias_c),
        (bias_r, 1, s + bias_r[:, None]),
    ):
        np.testing.assert_array_equal(run(a, b, np.float32, bias=bias, bias_rows=rows), want)
        got = run(a, b, np.uint16, bias=bias, bias_rows=rows)
        np.testing.assert_array_equal(got, D.f32_to_bf16(want).reshape(want.shape))
    # ties go to even: sums exactly halfway between two bf16 values
    a = bf16([[1.0, 2.0**-8], [1.0, 3 * 2.0**-8]])
    b = bf16([[1.0], [1.0]])
    np.testing.assert_array_equal(f32(run(a, b, np.uint16))[:, 0], [1.0, 1.0 + 2.0**-6])


def test_batches_with_strides_and_broadcast_operands():
    rng = np.random.default_rng(7)
    batch, m, n, k = 5, 20, 40, 33
    a = rand_bf16(rng, batch, m, k)
    b = rand_bf16(rng, k, n)  # stride 0: one B for every item
    c = np.empty((batch, m, n), np.float32)
    C.gemm_bf16(
        a.reshape(-1), b.reshape(-1), c.reshape(-1), batch, m, n, k, 0, 0, m * k, 0, m * n, None, 0
    )
    for i in range(batch):
        np.testing.assert_array_equal(c[i], run(a[i], b))
    bb = rand_bf16(rng, batch, n, k)  # per-item B stored n x k
    C.gemm_bf16(
        a[0].reshape(-1),
        bb.reshape(-1),
        c.reshape(-1),
        batch,
        m,
        n,
        k,
        0,
        1,
        0,
        n * k,
        m * n,
        None,
        0,
    )
    for i in range(batch):
        np.testing.assert_array_equal(c[i], run(a[0], bb[i].T.copy()))


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(8)
    a, b = rand_bf16(rng, 300, 1100), rand_bf16(rng, 1100, 520)
    s, w = rand_bf16(rng, 5, 2000), rand_bf16(rng, 2000, 1500)  # the small-m form
    # under two units per thread: 2 threads re-split the rows (100 x 100: 1 block of 112 rows on
    # one thread, 4 of 28 on two; 150 x 300: 2 blocks of 84, then 4 of 42); k large enough that
    # the product gets 2 threads
    p, q = rand_bf16(rng, 100, 1000), rand_bf16(rng, 1000, 100)
    r, t7 = rand_bf16(rng, 150, 1001), rand_bf16(rng, 1001, 300)
    xc, wc = rand_bf16(rng, 2, 16, 20, 20), rand_bf16(rng, 24, 16, 3, 3)  # conv2d_bf16
    threads = C.info()["threads"]
    try:
        outs = []
        for t in (1, 2):
            C.set_num_threads(t)
            outs.append(
                [run(a, b, np.uint16), run(a, b), run(s, w, tb=1), run(s, w, tb=0)]
                + [run(p, q), run(p, q, tb=1), run(r, t7, np.uint16), run(r, t7, ta=1)]
            )
            yc = np.empty((2, 24, 20, 20), np.uint16)
            C.conv2d_bf16(xc, wc, None, yc, 2, 16, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 24)
            outs[-1].append(yc)
    finally:
        C.set_num_threads(threads)
    for x, y in zip(*outs):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("tb", [0, 1])
def test_nan_and_inf_propagate_as_in_the_float64_reference(tb):
    rng = np.random.default_rng(9)
    a, b = rand_bf16(rng, 20, 9), rand_bf16(rng, 9, 40)
    a[3, 4] = bf16(np.nan)
    a[5, 0] = bf16(np.inf)
    b[2, 7] = bf16(-np.inf)
    b[:, 11] = 0  # inf * 0 in row 5: NaN
    a[8, 2] = 0
    ref = ref64(a, b)
    for rows in (slice(0, 20), slice(3, 9)):  # the blocked form and (tb = 1) the small-m one
        for out in (np.float32, np.uint16):
            got = run(a[rows], b, out, tb=tb)
            got = f32(got) if out is np.uint16 else got
            r = ref[rows]
            np.testing.assert_array_equal(np.isnan(got), np.isnan(r))
            inf = np.isinf(r)
            np.testing.assert_array_equal(got[inf], r[inf])


def test_denormals_are_flushed_where_the_float32_path_keeps_them():
    """vdpbf16ps treats denormal inputs as zero and flushes denormal products and sums: a
    product or sum below 2^-126 in magnitude is 0 here, where SGEMM keeps it (gradual underflow)."""
    one = bf16([[1.0]])
    tiny = bf16([[2.0**-130]])  # a bf16 denormal
    assert run(tiny, one)[0, 0] == 0.0 and f32(tiny)[0, 0] * 1.0 != 0.0
    small = bf16([[2.0**-70]])  # normal, but the product 2^-140 is a float32 denormal
    assert run(small, small)[0, 0] == 0.0
    # a bias makes no sum denormal that the instruction would see: it is added after it, and
    # the final rounding of a denormal float32 to bf16 is exact (no flushing)
    got = run(one * 0, one, np.uint16, bias=np.array([2.0**-130], np.float32))
    assert f32(got)[0, 0] == np.float32(2.0**-130)


@pytest.mark.parametrize("m", [3, 20])  # the small-m form (with tb) and the blocked one
def test_k_zero_gives_the_bias_alone(m):
    z = np.zeros((m, 0), np.uint16)
    bias = np.arange(5, dtype=np.float32)
    for tb in (0, 1):
        np.testing.assert_array_equal(
            run(z, np.zeros((0, 5), np.uint16), tb=tb, bias=bias), np.broadcast_to(bias, (m, 5))
        )


def test_bad_arguments_raise_clear_errors():
    a = np.zeros(6, np.uint16)
    c = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="gemm_bf16: 'a' must be uint16"):
        C.gemm_bf16(a.astype(np.float32), a, c, 1, 2, 2, 3, 0, 0, 0, 0, 0, None, 0)
    with pytest.raises(TypeError, match="'c' must be float32"):
        C.gemm_bf16(a, a, c.astype(np.float64), 1, 2, 2, 3, 0, 0, 0, 0, 0, None, 0)
    with pytest.raises(ValueError, match="'b' holds 6 elements but 8"):
        C.gemm_bf16(np.zeros(8, np.uint16), a, c, 1, 2, 2, 4, 0, 0, 0, 0, 0, None, 0)
    with pytest.raises(ValueError, match="bias"):
        C.gemm_bf16(a, a, c, 1, 2, 2, 3, 0, 0, 0, 0, 0, np.zeros(1, np.float32), 0)


# ----------------------------------------------------------------------------- the wiring
def _tensors(rng, *shape):
    return gc.tensor(f32(rand_bf16(rng, *shape))).to(gc.bfloat16)


def _within(out: gc.Tensor, ref: np.ndarray, s: np.ndarray) -> None:
    """A bf16 result of float32 sums: |out - ref| <= bound + one bf16 rounding."""
    o = out.float().numpy().astype(np.float64)
    assert np.all(np.abs(o - ref) <= s + U16 * (np.abs(ref) + s)), np.abs(o - ref).max()


def test_matmul_mm_bmm_linear_and_conv2d_of_bf16_tensors_use_it():
    rng = np.random.default_rng(10)
    x, w = _tensors(rng, 33, 70), _tensors(rng, 70, 45)
    xn, wn = bf16(x.float().numpy()), bf16(w.float().numpy())
    y = x @ w
    assert y.dtype is gc.bfloat16
    np.testing.assert_array_equal(y.float().numpy(), f32(run(xn, wn, np.uint16)))
    np.testing.assert_array_equal(gc.mm(x, w).float().numpy(), y.float().numpy())
    np.testing.assert_array_equal(
        (w.mT @ x.mT).float().numpy(), f32(run(wn.T.copy(), xn.T.copy(), np.uint16))
    )
    xb, wb = _tensors(rng, 3, 16, 40), _tensors(rng, 3, 40, 24)
    yb = gc.bmm(xb, wb)
    for i in range(3):
        np.testing.assert_array_equal(yb[i].float().numpy(), (xb[i] @ wb[i]).float().numpy())
    lw, lb = _tensors(rng, 45, 70), _tensors(rng, 45)
    yl = gc.nn.functional.linear(x, lw, lb)
    want = run(xn, bf16(lw.float().numpy()).T.copy()) + lb.float().numpy()
    np.testing.assert_array_equal(yl.float().numpy(), f32(bf16(want)))
    xi, wi, bi = _tensors(rng, 2, 5, 11, 9), _tensors(rng, 7, 5, 3, 3), _tensors(rng, 7)
    geo = dict(stride=(2, 1), padding=1, dilation=(1, 2))
    yc = gc.nn.functional.conv2d(xi, wi, bi, **geo)  # whichever path the rule picks
    conv64 = gc.nn.functional.conv2d
    ref = conv64(xi.double(), wi.double(), bi.double(), **geo).numpy()
    k = 5 * 9
    s = conv64(xi.double().abs(), wi.double().abs(), **geo).numpy() * (k * U32 / (1 - k * U32))
    _within(yc, ref, s)


FALLBACK = textwrap.dedent(
    """
    import sys
    import numpy as np
    import gpucore as gc
    from gpucore import _cpu as C
    assert C.gemm_bf16_kernel() is None, C.gemm_bf16_kernel()
    try:
        C.gemm_bf16(*[np.zeros(1, np.uint16)] * 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, None, 0)
        raise SystemExit("gemm_bf16 ran without a kernel")
    except RuntimeError as e:
        assert "no bfloat16 GEMM kernel" in str(e)
    d = np.load(sys.argv[1])
    t = lambda k: gc.tensor(d[k]).to(gc.bfloat16)
    y = t("a") @ t("b")
    yl = gc.nn.functional.linear(t("a"), t("w"), t("bias"))
    np.savez(sys.argv[2], y=y.float().numpy(), yl=yl.float().numpy())
    """
)


@pytest.mark.skipif("avx2" not in C.info()["available"], reason="no AVX2 to force")
def test_forced_avx2_keeps_the_float32_path_within_the_bound(tmp_path):
    rng = np.random.default_rng(11)
    a, b, w = rand_bf16(rng, 50, 900), rand_bf16(rng, 900, 60), rand_bf16(rng, 60, 900)
    bias = rand_bf16(rng, 60)
    np.savez(tmp_path / "in.npz", a=f32(a), b=f32(b), w=f32(w), bias=f32(bias))
    script = tmp_path / "fallback.py"
    script.write_text(FALLBACK)
    env = dict(os.environ, GPUCORE_CPU_ISA="avx2")
    r = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out.npz")
    for fb, ref, s, native in (
        (got["y"], ref64(a, b), bound(a, b), run(a, b, np.uint16)),
        (
            got["yl"],
            ref64(a, w.T.copy()) + f32(bias),
            bound(a, w.T.copy()),
            run(a, w.T.copy(), np.uint16, bias=f32(bias)),
        ),
    ):
        for o in (fb.astype(np.float64), f32(native).astype(np.float64)):
            assert np.all(np.abs(o - ref) <= s + U16 * (np.abs(ref) + s))


def test_autocast_linear_forward_and_backward_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    x = rng.standard_normal((48, 200)).astype(np.float32)
    w = (rng.standard_normal((96, 200)) * 0.1).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    g = rng.standard_normal((48, 96)).astype(np.float32)
    res = []
    for L in (torch, gc):
        lin = L.nn.Linear(200, 96)
        with L.no_grad():
            lin.weight.copy_(L.tensor(w))
            lin.bias.copy_(L.tensor(b))
        xt = L.tensor(x, requires_grad=True)
        with L.autocast("cpu", dtype=L.bfloat16):
            y = lin(xt)
        assert str(y.dtype).endswith("bfloat16")
        y.backward(L.tensor(g).to(L.bfloat16))
        res.append(
            [
                y.detach().float().numpy(),
                xt.grad.numpy(),
                lin.weight.grad.numpy(),
                lin.bias.grad.numpy(),
            ]
        )
    xq, wq, gq = (f32(bf16(v)).astype(np.float64) for v in (x, w, g))
    refs = [xq @ wq.T + f32(bf16(b)), gq @ wq, gq.T @ xq, gq.sum(0)]
    sums = [
        np.abs(xq) @ np.abs(wq.T) + np.abs(b),
        np.abs(gq) @ np.abs(wq),
        np.abs(gq.T) @ np.abs(xq),
        np.abs(gq).sum(0),
    ]
    for (t, o), ref, s in zip(zip(*res), refs, sums):
        # each within one bf16 rounding (plus float32 sums) of the exact result of bf16 inputs,
        # so within two of each other
        tol = 2 * U16 * np.abs(ref) + 1e-6 * s
        assert np.all(np.abs(o - ref) <= tol)
        assert np.all(np.abs(t - ref) <= tol)


def _col(x: np.ndarray, kh, kw, stride, padding, dilation) -> np.ndarray:
    """The column matrix [n*oh*ow, kh*kw*c] of x (numpy): a pixel's taps in (ky, kx, c) order,
    zero padding."""
    n, c, h, w = x.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((n, oh, ow, kh, kw, c), x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            ys = slice(ky * dh, ky * dh + sh * (oh - 1) + 1, sh)
            xs = slice(kx * dw, kx * dw + sw * (ow - 1) + 1, sw)
            cols[:, :, :, ky, kx] = xp[:, :, ys, xs].transpose(0, 2, 3, 1)
    return cols.reshape(n * oh * ow, kh * kw * c), oh, ow


@pytest.mark.parametrize(
    "xs, ws, geo",
    [
        ((2, 5, 11, 9), (7, 5, 3, 3), dict(stride=(2, 1), padding=(1, 1), dilation=(1, 2))),
        ((3, 4, 8, 8), (6, 4, 1, 1), dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1))),
        ((1, 3, 20, 17), (5, 3, 7, 7), dict(stride=(2, 2), padding=(3, 3), dilation=(1, 1))),
        # chunks of <= 4 MiB of column matrix: 1728 pixels x 2304 taps in 2 of 864
        ((3, 256, 24, 24), (9, 256, 3, 3), dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1))),
        ((2, 4, 9, 10), (3, 4, 3, 2), dict(stride=(1, 2), padding=(2, 0), dilation=(2, 3))),
    ],
)
@pytest.mark.parametrize("native", [True, False])
def test_conv2d_bf16_takes_the_gemm_or_the_widened_path(monkeypatch, xs, ws, geo, native):
    """bf16 conv2d with the rule forced each way: the native path calls _cpu.conv2d_bf16 and
    gives exactly gemm_bf16's bits of the column matrix times the weight (+ bias per channel,
    rounded once); the fallback never calls it and gives the widened float32 conv rounded
    once."""
    from gpucore.backends.cpu.kernels import nn as N  # noqa: PLC0415

    rng = np.random.default_rng(12)
    x, w, b = rand_bf16(rng, *xs), rand_bf16(rng, *ws, scale=0.3), rand_bf16(rng, ws[0])
    calls = []
    real = C.conv2d_bf16
    monkeypatch.setattr(N, "_bf16_conv_native", lambda *a: native)
    monkeypatch.setattr(C, "conv2d_bf16", lambda *a: calls.append(1) or real(*a))
    t = [gc.tensor(f32(v)).to(gc.bfloat16) for v in (x, w, b)]
    y = gc.nn.functional.conv2d(*t, **geo)
    assert len(calls) == (1 if native else 0)
    got = y.float().numpy()
    if native:
        col, oh, ow = _col(x, *ws[2:], geo["stride"], geo["padding"], geo["dilation"])
        c = np.empty((col.shape[0], ws[0]), np.uint16)
        wt = w.transpose(0, 2, 3, 1).reshape(ws[0], -1).copy()  # [o, kh*kw*c], the taps' order
        C.gemm_bf16(col.copy(), wt, c, 1, col.shape[0], ws[0], col.shape[1], 0, 1, 0, 0, 0,
                    f32(b), 0)  # fmt: skip
        want = f32(c).reshape(xs[0], oh, ow, ws[0]).transpose(0, 3, 1, 2)
    else:
        f = [gc.tensor(f32(v)) for v in (x, w, b)]
        want = f32(bf16(gc.nn.functional.conv2d(*f, **geo).numpy()))
    np.testing.assert_array_equal(got, want)


def test_batched_b_is_packed_a_group_at_a_time():
    """sb != 0 with n = 1 (each item padded to a 32-column panel): items in groups of <= 4 MiB
    of packed B (16 here, k = 4096), every item's bits as its own product."""
    rng = np.random.default_rng(13)
    batch, m, k = 40, 20, 4096
    a, b = rand_bf16(rng, batch, m, k), rand_bf16(rng, batch, k, 1)
    c = np.empty((batch, m, 1), np.uint16)
    C.gemm_bf16(a, b, c, batch, m, 1, k, 0, 0, m * k, k, m, None, 0)
    for i in (0, 15, 16, 17, 39):
        np.testing.assert_array_equal(c[i], run(a[i], b[i], np.uint16))


MEMORY = textwrap.dedent(
    """
    import sys
    import numpy as np
    from gpucore import _cpu as C
    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
    if sys.argv[1] == "batch":  # 64 items of n = 1: 16 MiB of packed B at once before
        a = np.ones((64, 16, 4096), np.uint16); b = np.ones((64, 4096, 1), np.uint16)
        c = np.ones((64, 16, 1), np.float32)
        args = (a, b, c, 64, 16, 1, 4096, 0, 0, 16 * 4096, 4096, 16, None, 0)
    else:  # one 12 MiB packed B
        a = np.ones((16, 2048), np.uint16); b = np.ones((2048, 3072), np.uint16)
        c = np.ones((16, 3072), np.float32)
        args = (a, b, c, 1, 16, 3072, 2048, 0, 0, 0, 0, 0, None, 0)
    C.gemm_bf16(a[:1], b[:1], c, 1, 1, 1, 1, 0, 0, 0, 0, 0, None, 0)  # warm the pool
    r0 = rss()
    C.gemm_bf16(*args)
    print(rss() - r0)
    """
)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("case, most_mib", [("batch", 6), ("big", 2)])
def test_the_packed_b_kept_between_calls_is_bounded(case, most_mib):
    """A batch's packed B is built a group (<= 4 MiB, kept for the next call) at a time, and a
    block above 8 MiB is freed after its call rather than kept: a fresh process's resident
    memory stays within that after a 64-item n = 1 batch (16 MiB packed at once, and kept,
    before) or a 12 MiB weight (kept before)."""
    out = subprocess.run([sys.executable, "-c", MEMORY, case], capture_output=True, text=True,
                         timeout=300, check=True)  # fmt: skip
    assert float(out.stdout) <= most_mib, out.stdout
