"""The few-input-channels direct convolution (cpu/conv_c1.c, isa/ukr_c1.h: output pixels along the
vector lanes, every output channel's accumulators in registers; GPUCORE_CONV=direct_c1 forces it
where it applies): against a float64 reference on geometries around its edges (1 to 4 input
channels, output rows narrower than a vector, widths 1 to 40, rows as wide as the image or not,
strided rows, dilation, padding wider than the kernel, batch 1, output channels around the
kernel's channel blocks), with and without bias / residual / relu, NaN / inf, the same bits as
the im2col GEMM (its gemv path up to 24 output channels, its blocked tile beyond) and
conv_direct.c's tile, independent of the thread count (1, 2, 3, 8), under every ISA this CPU
supports (forced in subprocesses), through the Tensor API on non-contiguous inputs, the
conv-relu-max-pool call (each image pooled from the cache: the bits of conv2d_forward then
max_pool2d, indices included), and the rule that sends the training CNN's first layer there."""

from __future__ import annotations

import numpy as np
import pytest
from conv_cases import close as _close
from conv_cases import (
    conv_args,
    conv_geom,
    conv_inputs,
    conv_reference,
    forward,
    isa_run,
    same_bits_on_threads_and_images,
    same_bits_under_isa,
)

import gpucore
from gpucore import _cpu

# (n, c, h, w, o, (kh, kw), (sh, sw), (ph, pw), (dh, dw))
GEOMS = {
    "cnn_conv1": (64, 1, 28, 28, 16, (3, 3), (1, 1), (1, 1), (1, 1)),
    "rgb_o40": (3, 3, 13, 17, 40, (3, 3), (1, 1), (1, 1), (1, 1)),
    "valid_rows": (2, 2, 9, 21, 7, (3, 3), (1, 1), (0, 0), (1, 1)),  # ow = 19 != w
    "strided_rows": (3, 2, 11, 20, 5, (5, 3), (2, 1), (2, 1), (1, 2)),
    "c4_dilated": (2, 4, 12, 12, 33, (3, 3), (1, 1), (2, 2), (2, 2)),
    "width1": (2, 1, 5, 1, 3, (3, 3), (1, 1), (1, 1), (1, 1)),
    "batch1_rows": (1, 1, 40, 33, 20, (3, 3), (1, 1), (1, 1), (1, 1)),
    "pad_wide": (2, 1, 6, 6, 9, (3, 3), (1, 1), (3, 3), (1, 1)),  # ow = 10
    "k1_pad": (2, 3, 5, 7, 18, (1, 1), (1, 1), (1, 1), (1, 1)),
    "k8x8_o64": (1, 1, 9, 30, 64, (8, 8), (1, 1), (3, 4), (1, 1)),  # 64 taps
    # copies of 4 MB an image (4 channels x 5 columns): groups of rows within the L2
    "l2_rows": (2, 4, 224, 224, 8, (3, 5), (1, 1), (1, 2), (1, 1)),
}


def _geom(case, g=None):
    return conv_geom(GEOMS[case] if g is None else g)


def _args(case, n=None, g=None):
    return conv_args(GEOMS[case] if g is None else g, n)


def _inputs(case, g=None):
    return conv_inputs(GEOMS[case] if g is None else g, len(case) + 11)


def _reference(case, x, wt, b, res=None, relu=False, g=None):
    return conv_reference(GEOMS[case] if g is None else g, x, wt, b, res, relu)


def _forward(case, x, wt, b, res=None, relu=False, n=None, g=None):
    _, _, _, _, o, _, _, _, _, oh, ow = _geom(case, g)
    return forward(x, wt, b, o, oh, ow, _args(case, n, g), res, relu)


EPILOGUES = {"none": (False, False, False), "bias": (True, False, False),
             "bias_relu": (True, False, True), "bias_res_relu": (True, True, True)}  # fmt: skip


@pytest.mark.parametrize("epi", EPILOGUES)
@pytest.mark.parametrize("case", GEOMS)
def test_matches_float64_im2col_and_direct_bits(case, epi, monkeypatch):
    x, wt, b, res = _inputs(case)
    use_b, use_res, relu = EPILOGUES[epi]
    b, res = (b if use_b else None), (res if use_res else None)
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    assert _cpu.conv2d_c1(*_args(case)) is True
    got = _forward(case, x, wt, b, res, relu)
    _close(got, _reference(case, x, wt, b, res, relu), f"{case} {epi}")
    for other in ("im2col", "direct"):  # (the GEMM's gemv path up to 24 channels: same chains)
        monkeypatch.setenv("GPUCORE_CONV", other)
        want = _forward(case, x, wt, b, res, relu)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (case, epi, other)


@pytest.mark.parametrize("c", [1, 3])
def test_widths_1_to_40(c, monkeypatch):
    """Every output width from 1 to 40 (around the 4-, 8- and 16-lane vectors), same padding
    and valid: the same bits as im2col, close to float64."""
    for width in range(1, 41):
        for pad in (1, 0):
            if width + 2 * pad < 3:
                continue
            g = (2, c, 4, width, 11, (3, 3), (1, 1), (pad, pad), (1, 1))
            x, wt, b, res = _inputs("w", g)
            monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
            got = _forward("w", x, wt, b, res, True, g=g)
            _close(got, _reference("w", x, wt, b, res, True, g=g), f"width {width} pad {pad}")
            monkeypatch.setenv("GPUCORE_CONV", "im2col")
            assert np.array_equal(got, _forward("w", x, wt, b, res, True, g=g)), (width, pad)


def test_nan_inf_and_relu_signs(monkeypatch):
    case = "rgb_o40"
    x, wt, b, res = _inputs(case)
    x[1, 2, 6, 0] = np.nan  # outputs (5..7, 0..1) of image 1
    x[2, 0, 0, 16] = np.inf  # outputs (0..1, 15..16) of image 2: inf or NaN (inf - inf)
    res[0, 7, 0, 0] = np.inf
    res[0, 8, 1, 2] = -np.inf
    wt[5, 1, 1, 1] = np.inf  # channel 5: every output whose centre tap is nonzero
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    got = _forward(case, x, wt, b, res, True)
    assert np.isnan(got[1, :, 5:8, 0:2]).all()
    assert not np.isfinite(got[2, :, 0:2, 15:17]).all()
    assert got[0, 7, 0, 0] == np.inf and got[0, 8, 1, 2] == 0.0
    monkeypatch.setenv("GPUCORE_CONV", "im2col")
    want = _forward(case, x, wt, b, res, True)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got, want, equal_nan=True)
    # relu of zero sums and -0 residuals: +0, never -0
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    zero = _forward(case, np.ones_like(x), np.zeros_like(wt), None, -np.zeros_like(res), True)
    assert not np.signbit(zero).any() and not zero.any()
    # a missing bias adds -0 inside the kernel: sums of -0 products stay +0 as im2col's
    neg = _forward(case, -np.zeros_like(x), np.ones_like(wt), None)
    assert not np.signbit(neg).any() and not neg.any()


# Under the forced ISA, for each mode: conv2d_forward without bias of products that all round
# to -0 (1e-30 * -1e-30: an FMA chain from +0 gives -0), alone, with a -0 residual and with a
# +0 one, for 16 and 40 output channels (the GEMM's gemv path and its blocked tile), and the
# path probe's answer
_NEG_ZERO = """
import os, sys, numpy as np
from gpucore import _cpu
assert _cpu.info()["isa"] == sys.argv[2]
got = {}
for mode in ("direct_c1", "im2col"):
    os.environ["GPUCORE_CONV"] = mode
    for o in (16, 40):
        geo = (2, 1, 8, 21, 3, 3, 1, 1, 1, 1, 1, 1, o)
        got[f"{mode}.{o}.path"] = np.array(_cpu.conv2d_c1(*geo))
        x = np.full((2, 1, 8, 21), 1e-30, np.float32)
        w = np.full((o, 1, 3, 3), -1e-30, np.float32)
        for name, res in (("none", None), ("neg", -np.zeros((2, o, 8, 21), np.float32)),
                          ("pos", np.zeros((2, o, 8, 21), np.float32))):
            out = np.full((2, o, 8, 21), np.nan, np.float32)
            tail = () if res is None else (res, -1)
            _cpu.conv2d_forward(x, w, None, out, *geo, *tail)
            got[f"{mode}.{o}.{name}"] = out
np.savez(sys.argv[3], **got)
"""


@pytest.mark.parametrize("isa", [i for i in _cpu.info()["available"]])
def test_missing_bias_keeps_negative_zero_sums(isa, tmp_path):
    """Without bias, a sum whose products all round to -0 is -0 on the FMA ISAs (the im2col
    GEMM adds no bias): the kernel's missing bias (-0) keeps it, as im2col's, under every ISA,
    also plus a -0 residual (-0) and a +0 one (+0)."""
    got = isa_run(_NEG_ZERO, __file__, isa, tmp_path)
    for o in (16, 40):
        assert bool(got[f"direct_c1.{o}.path"]) is (isa != "neon"), (isa, o)
        assert not bool(got[f"im2col.{o}.path"]), (isa, o)
        for name in ("none", "neg", "pos"):
            c1, gemm = got[f"direct_c1.{o}.{name}"], got[f"im2col.{o}.{name}"]
            assert not c1.any(), (isa, o, name)
            assert np.array_equal(c1.view(np.uint32), gemm.view(np.uint32)), (isa, o, name)
        assert not np.signbit(got[f"direct_c1.{o}.pos"]).any(), (isa, o)
        if isa in ("avx512", "avx2"):  # FMA: every sum -0, and + -0 keeps it
            assert np.signbit(got[f"direct_c1.{o}.none"]).all(), (isa, o)
            assert np.signbit(got[f"direct_c1.{o}.neg"]).all(), (isa, o)


@pytest.mark.parametrize(
    "case", ["cnn_conv1", "strided_rows", "batch1_rows", "c4_dilated", "l2_rows"]
)
def test_bits_independent_of_threads_and_batch(case, monkeypatch):
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    x, wt, b, res = _inputs(case)

    def run(xs, rs, n):
        return _forward(case, xs, wt, b, rs, True, n=n)

    same_bits_on_threads_and_images(run, x, res)


def test_rule(monkeypatch):
    """The training CNN's first layer (and 3-channel stems of stride 1) take it wherever the
    ISA has the kernel (every x86 ISA); more channels, strided columns, more taps, a forced
    other path or a pre-packed weight do not."""
    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    has = _cpu.info()["isa"] != "neon"
    on = [
        (64, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 16),
        (64, 3, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 64),
        (1, 3, 224, 224, 3, 3, 1, 1, 1, 1, 1, 1, 64),
        (64, 4, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 128),
        (8, 1, 28, 28, 5, 5, 2, 1, 2, 2, 1, 1, 8),  # strided rows
    ]
    off = [
        (64, 5, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 16),  # 5 input channels
        (1, 3, 56, 56, 1, 1, 1, 1, 0, 0, 1, 1, 64),  # 1x1 without padding: conv_pw.c's rule
        (1, 3, 224, 224, 7, 7, 2, 2, 3, 3, 1, 1, 64),  # strided columns (ResNet's stem)
        (1, 2, 20, 20, 7, 7, 1, 1, 3, 3, 1, 1, 8),  # 98 taps
        (64, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 129),  # beyond the measured channels
    ]
    for g in on:
        assert _cpu.conv2d_c1(*g) is has, g
    for g in off:
        assert _cpu.conv2d_c1(*g) is False, g
    forcing = ("direct", "im2col", "direct_t", "direct_gw", "winograd", "pointwise", "pointwise_t")
    for mode in forcing:
        monkeypatch.setenv("GPUCORE_CONV", mode)
        assert _cpu.conv2d_c1(*on[0]) is False, mode
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    assert _cpu.conv2d_c1(*off[4]) is has
    assert _cpu.conv2d_c1(*off[1]) is has
    # a forced pointwise path runs conv_pw.c on a 1x1 layer of few input channels
    pw_geo = (2, 3, 9, 10, 1, 1, 1, 1, 0, 0, 1, 1, 32)
    for mode in ("pointwise", "pointwise_t"):
        monkeypatch.setenv("GPUCORE_CONV", mode)
        assert _cpu.conv2d_c1(*pw_geo) is False, mode
        assert _cpu.conv2d_pointwise(*pw_geo) != 0 or mode == "pointwise_t", mode
    # a pre-packed weight runs the other paths: the same bits
    monkeypatch.delenv("GPUCORE_CONV")
    case = "rgb_o40"
    x, wt, b, res = _inputs(case)
    plain = _forward(case, x, wt, b, res, True)
    o, ck = wt.shape[0], wt[0].size
    pm = _cpu.gemm_pack(wt.reshape(-1), "a", o, ck, 0, 1)
    _, _, _, _, _, _, _, _, _, oh, ow = _geom(case)
    assert np.array_equal(forward(x, pm, b, o, oh, ow, _args(case), res, True), plain)


def test_tensor_api_non_contiguous_and_fused_pool(monkeypatch):
    """F.conv2d on a transposed (non-contiguous) input, and nn.Sequential's fused
    Conv2d-ReLU-MaxPool2d: the float64 reference, the im2col path's bits."""
    import gpucore.nn as nn
    import gpucore.nn.functional as F

    r = np.random.default_rng(3)
    xa = r.standard_normal((5, 1, 26, 28)).astype(np.float32)
    wa = r.standard_normal((16, 1, 3, 3)).astype(np.float32)
    ba = r.standard_normal(16).astype(np.float32)
    xt = np.ascontiguousarray(xa.transpose(0, 1, 3, 2))
    g = (5, 1, 28, 26, 16, (3, 3), (1, 1), (1, 1), (1, 1))
    runs = {}
    for mode in ("direct_c1", "im2col"):
        monkeypatch.setenv("GPUCORE_CONV", mode)
        x = gpucore.tensor(xa).transpose(2, 3)
        runs[mode] = F.conv2d(x, gpucore.tensor(wa), gpucore.tensor(ba), padding=1).numpy()
    _close(runs["direct_c1"], _reference("t", xt, wa, ba, g=g), "F.conv2d")
    assert np.array_equal(runs["direct_c1"], runs["im2col"])
    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
    xs = gpucore.tensor(r.standard_normal((4, 1, 28, 28)).astype(np.float32))
    pooled = {}
    for mode in ("direct_c1", "im2col"):  # the fused pooled call, and the two calls
        monkeypatch.setenv("GPUCORE_CONV", mode)
        pooled[mode] = net(xs).detach().numpy()
    assert np.array_equal(pooled["direct_c1"], pooled["im2col"])
    conv = net[0]
    y = _reference(
        "t", xs.numpy(), conv.weight.detach().numpy(), conv.bias.detach().numpy(), relu=True,
        g=(4, 1, 28, 28, 16, (3, 3), (1, 1), (1, 1), (1, 1)),
    )  # fmt: skip
    want = y.reshape(4, 16, 14, 2, 14, 2).max(axis=(3, 5)).reshape(4, -1)
    _close(pooled["direct_c1"], want, "conv-relu-pool")


@pytest.mark.parametrize("isa", [i for i in _cpu.info()["available"]])
def test_every_isa_matches_float64_and_im2col_bits(isa, tmp_path):
    """Under each ISA: close to float64, the same bits on 1 and 8 threads and as the im2col
    GEMM (run in a second subprocess under that ISA, every channel count)."""
    (tmp_path / "c1").mkdir()
    (tmp_path / "gemm").mkdir()
    got = same_bits_under_isa(__file__, isa, tmp_path / "c1", "direct_c1", "conv2d_c1", True)
    gemm = same_bits_under_isa(__file__, isa, tmp_path / "gemm", "im2col", "conv2d_c1", True)
    for case in GEOMS:
        x, wt, b, res = _inputs(case)
        _close(got[case], _reference(case, x, wt, b, res, True), f"{isa} {case}")
        assert bool(got[case + ".path"]) is (isa != "neon"), (isa, case)
        assert not bool(gemm[case + ".path"]), (isa, case)
        for k in (case, case + ".plain"):
            assert np.array_equal(got[k].view(np.uint32), gemm[k].view(np.uint32)), (isa, k)


# (case, pool kernel, stride, padding): 2x2 / 2 (the CNN's), 3x3 / 2 with padding, 1x1 / 1
POOLS = [("cnn_conv1", 2, 2, 0), ("rgb_o40", 3, 2, 1), ("valid_rows", 2, 2, 0),
         ("strided_rows", 2, 1, 0), ("width1", 1, 1, 0), ("batch1_rows", 2, 2, 0)]  # fmt: skip


@pytest.mark.parametrize("case,k,s,pp", POOLS)
def test_conv_relu_max_pool_matches_the_two_calls(case, k, s, pp, monkeypatch):
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    x, wt, b, _ = _inputs(case)
    x[0, 0, 1, 0] = np.nan
    n, _, _, _, o, _, _, _, _, oh, ow = _geom(case)
    poh, pw_ = (oh + 2 * pp - k) // s + 1, (ow + 2 * pp - k) // s + 1
    pool = (k, k, s, s, pp, pp, 1, 1, poh, pw_)
    before = gpucore.get_num_threads()
    try:
        for bias in (b, None):
            y = _forward(case, x, wt, bias, None, True)
            v0 = np.empty((n, o, poh, pw_), np.float32)
            i0 = np.empty(v0.shape, np.int64)
            _cpu.max_pool2d(y, v0, i0, n * o, oh, ow, *pool)
            for nt in (1, 2, 3, 8):  # (fewer images than threads: declined, nothing written)
                gpucore.set_num_threads(nt)
                v1, i1 = np.full_like(v0, -7.0), np.full_like(i0, -7)
                took = _cpu.conv2d_relu_max_pool2d(x, wt, bias, v1, i1, *_args(case), *pool)
                assert took or (nt > n and (v1 == -7.0).all() and (i1 == -7).all()), nt
                if took:
                    assert np.array_equal(v1.view(np.uint32), v0.view(np.uint32)), nt
                    assert np.array_equal(i1, i0), nt
                v2 = np.full_like(v0, -7.0)  # values alone
                if _cpu.conv2d_relu_max_pool2d(x, wt, bias, v2, None, *_args(case), *pool):
                    assert np.array_equal(v2.view(np.uint32), v0.view(np.uint32)), nt
                else:
                    assert not took and (v2 == -7.0).all(), nt
    finally:
        gpucore.set_num_threads(before)


def test_conv_relu_max_pool_declines_elsewhere(monkeypatch):
    """False (nothing written) where conv_c1.c's path does not apply: more input channels, a
    forced other path, a packed weight, float64; bad buffers raise naming the op."""
    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    pool = (2, 2, 2, 2, 0, 0, 1, 1, 4, 4)
    x = np.ones((2, 5, 8, 8), np.float32)
    wt = np.ones((6, 5, 3, 3), np.float32)
    vals, idx = np.full((2, 6, 4, 4), -7.0, np.float32), np.zeros((2, 6, 4, 4), np.int64)
    geo = (2, 5, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 6)
    assert _cpu.conv2d_relu_max_pool2d(x, wt, None, vals, idx, *geo, *pool) is False
    x1, w1 = x[:, :1].copy(), wt[:, :1].copy()
    geo1 = (2, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 6)
    pm = _cpu.gemm_pack(w1.reshape(-1), "a", 6, 9, 0, 1)
    assert _cpu.conv2d_relu_max_pool2d(x1, pm, None, vals, idx, *geo1, *pool) is False
    v64 = vals.astype(np.float64)
    args64 = (x1.astype(np.float64), w1.astype(np.float64), None, v64, idx)
    assert _cpu.conv2d_relu_max_pool2d(*args64, *geo1, *pool) is False
    monkeypatch.setenv("GPUCORE_CONV", "im2col")
    assert _cpu.conv2d_relu_max_pool2d(x1, w1, None, vals, idx, *geo1, *pool) is False
    assert (vals == -7.0).all()
    monkeypatch.setenv("GPUCORE_CONV", "direct_c1")
    _declines_few_images_and_large_outputs()
    with pytest.raises(ValueError, match="conv2d_relu_max_pool2d"):
        _cpu.conv2d_relu_max_pool2d(x1, w1, None, vals[:1], idx, *geo1, *pool)
    with pytest.raises(TypeError, match="conv2d_relu_max_pool2d"):
        _cpu.conv2d_relu_max_pool2d(x1, w1, None, vals, idx.astype(np.int32), *geo1, *pool)


def _declines_few_images_and_large_outputs():
    """Units of whole images: fewer images than the threads the layer would use decline (the two
    calls run it on every thread), as does an image's output beyond half the L2 (not kept in
    cache); nothing written."""
    pool = (2, 2, 2, 2, 0, 0, 1, 1, 14, 14)
    x, w = np.ones((3, 1, 28, 28), np.float32), np.ones((64, 1, 3, 3), np.float32)
    geo = (3, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 64)
    before = gpucore.get_num_threads()
    try:
        for nt, took in ((1, True), (8, False)):  # 2.7 MFLOP: 8 threads' worth
            gpucore.set_num_threads(nt)
            vals = np.full((3, 64, 14, 14), -7.0, np.float32)
            assert _cpu.conv2d_relu_max_pool2d(x, w, None, vals, None, *geo, *pool) is took, nt
            assert (vals == 9.0).all() if took else (vals == -7.0).all(), nt
        gpucore.set_num_threads(1)
        side = 96  # 2.4 MB an image (more where the L2 is larger than 4 MB)
        while 64 * side * side * 4 <= _cpu.info()["caches"]["l2"] // 2:
            side *= 2
        big = (1, 1, side, side, 3, 3, 1, 1, 1, 1, 1, 1, 64)
        vals = np.full((1, 64, side // 2, side // 2), -7.0, np.float32)
        xb = np.ones((1, 1, side, side), np.float32)
        bp = (*pool[:8], side // 2, side // 2)
        assert _cpu.conv2d_relu_max_pool2d(xb, w, None, vals, None, *big, *bp) is False
        assert (vals == -7.0).all()
    finally:
        gpucore.set_num_threads(before)
