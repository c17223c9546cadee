"""The few-taps weight gradient (cpu/conv_wtaps.c, kernel isa/conv_wtaps.h on AVX2 and
AVX-512): conv2d_backward's weight and bias gradients of stride-1 layers with at most 16 taps
(c * kh * kw; up to 27 with few output channels) against a float64 reference, on geometries
around every blocking edge (output channels around the register tiles of 2 and 4, taps around
the blocks of 5, pixel counts around the 8- and 16-lane vectors, batches around the 4-image
chunks), with padding (wider than the kernel's reach, asymmetric, none) and dilation; the bias
gradient bit for bit the other paths'; the rule (taps, accumulators, the pixel minimum, the
scratch cap against a large dilation); bits independent of the thread count; inf and NaN where
float64 has them; every ISA this CPU supports in a subprocess.  Most geometries are below the
rule's pixel minimum: GPUCORE_CONV=direct runs the kernel there, direct_gw the older direct
tile (conv_direct_backward.c) that the kernel displaced."""

from __future__ import annotations

import numpy as np
import pytest
from conv_cases import backward, isa_run

import gpucore
from gpucore import _cpu

# name: (n, c, h, w, o, (kh, kw), (ph, pw), (dh, dw))
GEOMS = {
    "cnn_conv1": (5, 1, 28, 28, 16, (3, 3), (1, 1), (1, 1)),
    "o1_l1": (1, 1, 1, 1, 1, (1, 1), (0, 0), (1, 1)),
    "o3_l7": (2, 1, 1, 7, 3, (1, 3), (0, 1), (1, 1)),
    "o5_l15_t6": (3, 2, 3, 5, 5, (1, 3), (0, 1), (1, 1)),
    "o7_l16_t9": (4, 1, 4, 4, 7, (3, 3), (1, 1), (1, 1)),
    "o9_l17_t10": (9, 10, 1, 17, 9, (1, 1), (0, 0), (1, 1)),
    "o17_l48_t16": (2, 1, 3, 11, 17, (4, 4), (2, 2), (1, 1)),
    "t15_asym": (3, 1, 9, 6, 4, (5, 3), (2, 0), (1, 1)),
    "t8_dilated": (2, 2, 11, 10, 6, (2, 2), (1, 3), (2, 3)),
    "pad_beyond_reach": (2, 1, 5, 4, 8, (3, 3), (4, 3), (1, 1)),
    "no_pad": (3, 1, 12, 9, 12, (3, 3), (0, 0), (1, 1)),
    "t16_pointwise": (2, 16, 5, 7, 30, (1, 1), (0, 0), (1, 1)),
    "t18": (3, 2, 7, 6, 9, (3, 3), (1, 1), (1, 1)),
    "t27_rgb": (5, 3, 9, 10, 16, (3, 3), (1, 1), (1, 1)),
}


def _out_hw(case):
    n, c, h, w, o, k, p, d = GEOMS[case]
    return h + 2 * p[0] - d[0] * (k[0] - 1), w + 2 * p[1] - d[1] * (k[1] - 1)


def _geo(case):
    n, c, h, w, o, k, p, d = GEOMS[case]
    return (n, c, h, w, *k, 1, 1, *p, *d, o)


def _inputs(case):
    n, c, h, w, o, k, p, d = GEOMS[case]
    oh, ow = _out_hw(case)
    r = np.random.default_rng(sum(map(ord, case)))
    x = r.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (r.standard_normal((o, c, *k)) / np.sqrt(c * k[0] * k[1])).astype(np.float32)
    return x, wt, r.standard_normal((n, o, oh, ow)).astype(np.float32)


def _reference(case, x, g):
    """float64 (gw, gb) of the stride-1 conv2d, one shifted window per kernel tap."""
    n, c, h, w, o, k, p, d = GEOMS[case]
    oh, ow = _out_hw(case)
    xp = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    xp[:, :, p[0] : p[0] + h, p[1] : p[1] + w] = x
    g64 = g.astype(np.float64)
    gw = np.zeros((o, c, *k))
    for ki in range(k[0]):
        for kj in range(k[1]):
            win = xp[:, :, ki * d[0] : ki * d[0] + oh, kj * d[1] : kj * d[1] + ow]
            gw[:, :, ki, kj] = np.einsum("nohw,nchw->oc", g64, win)
    return gw, g64.sum((0, 2, 3))


def _backward(case, x, wt, g, gx=False):
    return backward(x, wt, g, _geo(case), gx)


def _has_kernel():
    return _cpu.info()["isa"] in ("avx2", "avx512")


def _close(a, r, what):
    err = float(np.abs(a - r).max()) / max(1.0, float(np.abs(r).max()))
    assert err <= 2e-6, f"{what}: relative error {err:.3g}"


@pytest.mark.parametrize("case", GEOMS)
def test_matches_float64(case, conv_path):
    x, wt, g = _inputs(case)
    gw_ref, gb_ref = _reference(case, x, g)
    for mode in ("auto", "direct", "direct_gw"):
        conv_path(mode)
        _, gw, gb = _backward(case, x, wt, g)
        _close(gw, gw_ref, f"{case} {mode} gw")
        _close(gb, gb_ref, f"{case} {mode} gb")


@pytest.mark.parametrize("case", ["cnn_conv1", "o9_l17_t10", "t8_dilated", "o17_l48_t16"])
def test_bias_bits_and_the_input_gradient_beside_it(case, conv_path):
    """The bias gradient rides in gc_conv_rowsum's lanes: the bits of the GEMM path's; the input
    gradient of the same call (another path) is unchanged by it."""
    x, wt, g = _inputs(case)
    conv_path("direct")  # the kernel below the pixel minimum too
    auto = _backward(case, x, wt, g, gx=True)
    conv_path("im2col")
    im2col = _backward(case, x, wt, g, gx=True)
    assert np.array_equal(auto[2], im2col[2]), case
    conv_path("direct")
    gx_alone = np.full(x.shape, np.nan, np.float32)
    _cpu.conv2d_backward(x, wt, g, gx_alone, None, None, *_geo(case))
    assert np.array_equal(auto[0], gx_alone), case
    _close(auto[1], _reference(case, x, g)[0], case)


@pytest.mark.parametrize(
    ("c", "k", "o", "taken"), [(3, 3, 16, True), (3, 3, 64, False), (1, 4, 64, True)]
)
def test_the_rule_by_taps_and_accumulators(c, k, o, taken, conv_path):
    """27 taps take the kernel while the accumulators (o * taps vectors) fit 32 KiB, 16 taps
    always; seen through the bits: with more than 24 output channels the other direct path's
    weight gradient has the GEMM's (forced im2col's) bits, the kernel's lane sums do not."""
    if not _has_kernel():
        pytest.skip("no few-taps kernel on this ISA")
    r = np.random.default_rng(5)
    geo = (2, c, 9, 9, k, k, 1, 1, 1, 1, 1, 1, o)
    oh = 9 + 2 - k + 1
    x, w = r.standard_normal((2, c, 9, 9), np.float32), r.standard_normal((o, c, k, k), "f")
    g = r.standard_normal((2, o, oh, oh), np.float32)
    runs = {}
    for mode in ("auto", "im2col"):
        conv_path(mode)
        runs[mode] = np.empty_like(w)
        _cpu.conv2d_backward(x, w, g, None, runs[mode], None, *geo)
    assert np.array_equal(runs["auto"], runs["im2col"]) != taken


def test_the_rule_takes_the_cnn_layer(conv_path):
    """Where the kernel exists the CNN's 1 -> 16 weight gradient has other bits than the GEMM
    path's (forced by GPUCORE_CONV=im2col), and GPUCORE_CONV=direct's bits; stride 2 stays."""
    if not _has_kernel():
        pytest.skip("no few-taps kernel on this ISA")
    x, wt, g = _inputs("cnn_conv1")
    runs = {}
    for mode in ("auto", "direct", "im2col", "direct_gw"):
        conv_path(mode)
        runs[mode] = _backward("cnn_conv1", x, wt, g)[1]
    assert np.array_equal(runs["auto"], runs["direct"])
    assert not np.array_equal(runs["auto"], runs["im2col"])
    assert not np.array_equal(runs["auto"], runs["direct_gw"])  # the older tile, not the kernel
    n, c, h, w, o = 2, 1, 9, 9, 16  # stride 2: the GEMM path (the same bits as forced im2col)
    geo = (n, c, h, w, 3, 3, 2, 2, 1, 1, 1, 1, o)
    r = np.random.default_rng(3)
    xs, ws = r.standard_normal((n, c, h, w), np.float32), r.standard_normal((o, c, 3, 3), "f")
    gs = r.standard_normal((n, o, 5, 5), np.float32)
    outs = []
    for mode in ("auto", "im2col"):
        conv_path(mode)
        outs.append(np.empty_like(ws))
        _cpu.conv2d_backward(xs, ws, gs, None, outs[-1], None, *geo)
    assert np.array_equal(*outs)


def _taken(geo, x, w, g, conv_path, mode="auto"):
    """Whether the kernel ran, seen through the bits: elsewhere these few-taps weight gradients
    are the GEMM path's (forced im2col's) bits, the kernel's lane sums not."""
    runs = []
    for m in (mode, "im2col"):
        conv_path(m)
        runs.append(np.full(w.shape, np.nan, np.float32))
        _cpu.conv2d_backward(x, w, g, None, runs[-1], None, *geo)
    return not np.array_equal(*runs), runs[0]


@pytest.mark.parametrize(
    ("n", "c", "h", "o", "k", "pad", "taken"),
    [
        (2, 16, 4, 32, 1, 0, False),  # 16 pixels
        (2, 16, 10, 32, 1, 0, False),  # a 1x1 without padding: 100 < 128 pixels
        (2, 16, 12, 32, 1, 0, True),
        (2, 1, 6, 32, 3, 1, False),  # 36 pixels
        (2, 1, 8, 32, 3, 1, True),  # 64
        (2, 4, 9, 32, 2, 0, True),
    ],
)
def test_the_rule_by_pixels(n, c, h, o, k, pad, taken, conv_path):
    """Small images go to the GEMM path (below 64 output pixels, 128 for a 1x1 without padding);
    GPUCORE_CONV=direct keeps the kernel there."""
    if not _has_kernel():
        pytest.skip("no few-taps kernel on this ISA")
    r = np.random.default_rng(7)
    oh = h + 2 * pad - k + 1
    geo = (n, c, h, h, k, k, 1, 1, pad, pad, 1, 1, o)
    x, w = r.standard_normal((n, c, h, h), np.float32), r.standard_normal((o, c, k, k), "f")
    g = r.standard_normal((n, o, oh, oh), np.float32)
    assert _taken(geo, x, w, g, conv_path)[0] == taken
    assert _taken(geo, x, w, g, conv_path, "direct")[0]


@pytest.mark.parametrize(
    ("h", "dh", "ph", "taken"),
    [(100, 20, 0, True), (100, 90, 0, False), (2, 250000, 125000, False)],
)
def test_a_large_dilation_takes_the_gemm_path(h, dh, ph, taken, conv_path):
    """The shifted copies hold every padded row (oh + dh (kh - 1)): past twice im2col's column
    buffer (kh rows per output row) the GEMM path takes the layer, under direct too, with the
    right gradient (float64 from the taps' rows alone: no padded image); 2 x 200 with dilation
    250000 was 225 MB of copies."""
    if not _has_kernel():
        pytest.skip("no few-taps kernel on this ISA")
    n, c, w, o, kh = 2, 1, 50, 32, 2  # more than 24 channels: direct's tile has im2col's bits
    oh = h + 2 * ph - dh * (kh - 1)
    geo = (n, c, h, w, kh, 1, 1, 1, ph, 0, dh, 1, o)
    r = np.random.default_rng(11)
    x, wt = r.standard_normal((n, c, h, w), np.float32), r.standard_normal((o, c, kh, 1), "f")
    g = r.standard_normal((n, o, oh, w), np.float32)
    ref = np.zeros((o, c, kh, 1))
    for ki in range(kh):
        rows = np.arange(oh) + ki * dh - ph  # the input row of each output row
        ok = (rows >= 0) & (rows < h)
        win = x[:, :, rows[ok], :].astype(np.float64)
        ref[:, :, ki, 0] = np.einsum("nohw,nchw->oc", g[:, :, ok, :].astype(np.float64), win)
    for mode in ("auto", "direct"):
        used, gw = _taken(geo, x, wt, g, conv_path, mode)
        assert used == taken, mode
        _close(gw, ref, f"dilation {dh} {mode}")


@pytest.mark.parametrize("case", ["cnn_conv1", "o9_l17_t10", "o17_l48_t16"])
def test_bits_independent_of_threads(case, conv_path):
    conv_path("direct")
    x, wt, g = _inputs(case)
    x, g = np.concatenate([x] * 5), np.concatenate([g] * 5)  # several 4-image chunks
    n, *rest = _geo(case)
    before = gpucore.get_num_threads()
    try:
        runs = []
        for nt in (1, 2, 3):
            gpucore.set_num_threads(nt)
            gw, gb = np.empty_like(wt), np.empty(wt.shape[0], np.float32)
            _cpu.conv2d_backward(x, wt, g, None, gw, gb, 5 * n, *rest)
            runs.append((gw, gb))
    finally:
        gpucore.set_num_threads(before)
    for gw, gb in runs[1:]:
        assert gw.tobytes() == runs[0][0].tobytes() and gb.tobytes() == runs[0][1].tobytes()


def test_inf_and_nan_where_float64_has_them(conv_path):
    conv_path("direct")
    case = "o7_l16_t9"
    x, wt, g = _inputs(case)
    x[0, 0, 3, 3] = np.inf  # read by the taps that reach the corner pixel only
    g[2, 4, 0, 0] = np.nan  # channel 4's gradients
    _, gw, gb = _backward(case, x, wt, g)
    with np.errstate(invalid="ignore"):
        gw_ref, gb_ref = _reference(case, x, g)
    for a, r in ((gw, gw_ref), (gb, gb_ref)):
        assert np.array_equal(np.isnan(a), np.isnan(r))
        assert np.array_equal(np.isposinf(a), np.isposinf(r))
        assert np.array_equal(np.isneginf(a), np.isneginf(r))
        fin = np.isfinite(r)
        if fin.any():
            _close(a[fin], r[fin], case)


_ISA_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_conv_wtaps as t
from gpucore import _cpu
assert _cpu.info()["isa"] == sys.argv[2]
out = {}
for case in t.GEOMS:
    x, wt, g = t._inputs(case)
    _, out[case + ".gw"], out[case + ".gb"] = t._backward(case, x, wt, g)
np.savez(sys.argv[3], **out)
"""


@pytest.mark.parametrize("isa", list(_cpu.info()["available"]))
def test_every_isa_matches_float64(isa, tmp_path):
    got = isa_run(_ISA_SCRIPT, __file__, isa, tmp_path, GPUCORE_CONV="direct")  # the kernel on each
    for case in GEOMS:
        x, _, g = _inputs(case)
        gw_ref, gb_ref = _reference(case, x, g)
        _close(got[case + ".gw"], gw_ref, f"{isa} {case} gw")
        _close(got[case + ".gb"], gb_ref, f"{isa} {case} gb")
