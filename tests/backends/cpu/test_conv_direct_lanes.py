"""The direct convolution with output channels along the vector lanes (cpu/conv_direct_lanes.c: the
pointwise path's 7 x 64 pixels x channels tile reading a padded image's taps; AVX-512;
GPUCORE_CONV=direct_t forces it where the ISA has it): against a float64 reference on geometries
around its edges (output rows of 1 to 256 pixels around multiples of 7, output channels around
32- and 64-channel blocks, K across blocks, strides 1 / 2, dilation, padding, batches), with
every epilogue and NaN / inf, the same bits (NaN payloads and signs included) as conv_direct.c's
tile and the im2col GEMM (more than 24 output channels), independent of the thread count (1, 2,
3, 8), under every ISA this CPU supports (forced in subprocesses), and the rule that sends
ResNet-50's 7 x 7 3x3 layers there."""

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
    same_bits_on_threads_and_images,
    same_bits_under_isa,
)
from conv_cases import has_pixel_tiles as _has_tiles

from gpucore import _cpu

# (n, c, h, w, o, (kh, kw), (sh, sw), (ph, pw), (dh, dw)): output rows of 7, 15 (7 + 7 + 1),
# 256, 3; output channels 31, 40, 64, 65, 96; K = c * kh * kw of 27 to 2700 (kc 288 on AVX-512)
GEOMS = {
    "k3_7x7_o65": (1, 40, 7, 7, 65, (3, 3), (1, 1), (1, 1), (1, 1)),
    "k3s2_k_blocks": (1, 300, 13, 13, 96, (3, 3), (2, 2), (1, 1), (1, 1)),
    "stem_like": (1, 3, 30, 30, 64, (7, 7), (2, 2), (3, 3), (1, 1)),
    "k53_dil_s12": (2, 6, 12, 11, 31, (5, 3), (1, 2), (2, 1), (2, 1)),
    "no_pad_batch": (2, 17, 9, 9, 40, (3, 3), (1, 1), (0, 0), (1, 1)),
    "row256": (1, 2, 1, 258, 33, (1, 3), (1, 1), (0, 0), (1, 1)),
    "tiny": (1, 5, 3, 3, 25, (3, 3), (1, 1), (1, 1), (1, 1)),
}


def _geom(case):
    return conv_geom(GEOMS[case])


def _args(case, n=None):
    return conv_args(GEOMS[case], n)


def _inputs(case):
    return conv_inputs(GEOMS[case], len(case) + 7)


def _reference(case, x, wt, b, res=None, relu=False):
    return conv_reference(GEOMS[case], x, wt, b, res, relu)


def _forward(case, x, wt, b, res=None, relu=False, w_arg=None, n=None):
    _, _, _, _, o, _, _, _, _, oh, ow = _geom(case)
    return forward(x, wt if w_arg is None else w_arg, b, o, oh, ow, _args(case, n), res, relu)


EPILOGUES = {"none": (False, False, False), "bias": (True, False, False),
             "bias_res_relu": (True, True, True)}  # fmt: skip


@pytest.mark.parametrize("epi", EPILOGUES)
@pytest.mark.parametrize("case", GEOMS)
def test_matches_float64_direct_and_gemm_bits(case, epi, monkeypatch):
    x, wt, b, res = _inputs(case)
    use_b, use_res, relu = EPILOGUES[epi]
    b, res = (b if use_b else None), (res if use_res else None)
    monkeypatch.setenv("GPUCORE_CONV", "direct_t")
    if _has_tiles():
        assert _cpu.conv2d_direct_lanes(*_args(case)) is True
    got = _forward(case, x, wt, b, res, relu)
    _close(got, _reference(case, x, wt, b, res, relu), f"{case} {epi}")
    for other in ("direct", "im2col"):
        monkeypatch.setenv("GPUCORE_CONV", other)
        if GEOMS[case][4] > 24:
            assert np.array_equal(got, _forward(case, x, wt, b, res, relu)), (case, epi, other)


def test_nan_inf_and_relu_signs(monkeypatch):
    case = "k3_7x7_o65"
    x, wt, b, res = _inputs(case)
    x[0, 3, 6, 6] = np.nan  # the corner pixel's 3x3 neighbourhood: outputs (5..6, 5..6)
    res[0, 7, 0, 0] = np.inf
    res[0, 8, 1, 2] = -np.inf
    monkeypatch.setenv("GPUCORE_CONV", "direct_t")
    got = _forward(case, x, wt, b, res, True)
    assert np.isnan(got[0, :, 5:, 5:]).all() and not np.isnan(got[0, :, :5]).any()
    assert got[0, 7, 0, 0] == np.inf and got[0, 8, 1, 2] == 0.0
    zero = _forward(case, np.ones_like(x), np.zeros_like(wt), None, -np.zeros_like(res), True)
    assert not np.signbit(zero).any() and not zero.any()
    monkeypatch.setenv("GPUCORE_CONV", "direct")
    assert np.array_equal(_forward(case, x, wt, b, res, True).view(np.uint32), got.view(np.uint32))


def test_nan_bits_across_k_blocks_match_direct_and_gemm(monkeypatch):
    """inf * 0 in the first K block (the default NaN, sign set) meeting an input's NaN (sign
    clear) in a later block: the sum keeps the later block's NaN, as the im2col GEMM."""
    c, o = 64, 64  # K = 576: blocks of 288 on AVX-512, channels 0-31 and 32-63
    x = np.ones((1, c, 7, 7), np.float32)
    wt = np.ones((o, c, 3, 3), np.float32)
    x[0, 2, 0, 0], wt[:, 2, 1, 1] = np.inf, 0.0
    x[0, 60, 0, 0] = np.nan
    geo = (1, c, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, o)
    bits = {}
    for mode in ("direct_t", "auto", "im2col"):
        monkeypatch.setenv("GPUCORE_CONV", mode)
        out = np.zeros((1, o, 7, 7), np.float32)
        _cpu.conv2d_forward(x, wt, None, out, *geo)
        bits[mode] = out.view(np.uint32)
        assert np.isnan(out[0, :, 0, 0]).all()
    # (conv_direct.c's own tile keeps the earlier NaN at channels 15, 31, 47, 63: left for it)
    for mode in ("direct_t", "auto"):
        assert np.array_equal(bits[mode], bits["im2col"]), mode


@pytest.mark.parametrize("case", ["k3s2_k_blocks", "stem_like", "k53_dil_s12", "no_pad_batch"])
def test_bits_independent_of_threads_batch_and_packing(case, monkeypatch):
    monkeypatch.setenv("GPUCORE_CONV", "direct_t")
    x, wt, b, res = _inputs(case)

    def run(xs, rs, n):
        return _forward(case, xs, wt, b, rs, True, n=n)

    first = same_bits_on_threads_and_images(run, x, res)
    # pre-packed: the direct path's swapped layout read in place, another one repacked
    o, ck = wt.shape[0], wt[0].size
    for swap in (1, 0):
        pm = _cpu.gemm_pack(wt.reshape(-1), "a", o, ck, 0, swap)
        assert np.array_equal(_forward(case, x, wt, b, res, True, w_arg=pm), first), swap


def test_rule(monkeypatch):
    """ResNet-50's 3x3 layers on 7 x 7 outputs (batch 1) take it on AVX-512; its stem and the
    layers whose pixels fill the direct tile's 14-pixel rows do not."""
    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    on = [
        (1, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 512),
        (1, 512, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 512),
    ]
    off = [
        (1, 3, 224, 224, 7, 7, 2, 2, 3, 3, 1, 1, 64),
        (1, 128, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 128),
        (4, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 512),
        (1, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 40),
        # odd multiples of 32 output channels: the last 64-wide block half used
        (1, 64, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 32),
        (1, 128, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 96),
        (1, 64, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 160),
    ]
    for g in on:
        assert _cpu.conv2d_direct_lanes(*g) is _has_tiles(), g
    for g in off:
        assert _cpu.conv2d_direct_lanes(*g) is False, g
    for mode in ("direct", "im2col"):
        monkeypatch.setenv("GPUCORE_CONV", mode)
        assert _cpu.conv2d_direct_lanes(*on[0]) is False
    # direct_t forces the tile where it applies and Winograd off, as direct does
    wg = (1, 64, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 64)
    monkeypatch.setenv("GPUCORE_CONV", "direct_t")
    assert not _cpu.conv2d_winograd(*wg)
    assert _cpu.conv2d_direct_lanes(*wg) is _has_tiles()
    assert _cpu.conv2d_direct_lanes(*off[2]) is _has_tiles()  # batch 4


@pytest.mark.parametrize("isa", [i for i in _cpu.info()["available"]])
def test_every_isa_matches_float64_and_gemm_bits(isa, tmp_path):
    """Under each ISA (AVX-512 through this path, the others through conv_direct.c's tile):
    close to float64, the same bits on 1 and 8 threads and as the im2col GEMM."""
    got = same_bits_under_isa(__file__, isa, tmp_path, "direct_t", "conv2d_direct_lanes", False)
    for case in GEOMS:
        x, wt, b, res = _inputs(case)
        _close(got[case], _reference(case, x, wt, b, res, True), f"{isa} {case}")
        assert bool(got[case + ".path"]) is (isa == "avx512"), (isa, case)
