"""The pointwise convolution's pixels x channels tiles (cpu/conv_pw.c's small-image mode, AVX-512's
7 x 64 tile in isa/avx512.c; GPUCORE_CONV=pointwise_t forces it where the ISA has it): against a
float64 numpy reference on geometries around its edges (pixels around multiples of 7 up to the
mode's 256, output channels around 32- and 64-channel blocks, K across blocks, strides,
batches), with every epilogue, NaN / inf, the same bits (NaN payloads and signs included) as
conv.c's GEMM path (more than 24 output channels), independent of the thread count (1, 2, 3, 8),
of batching and of the weight's packing, under every ISA this CPU supports (forced in
subprocesses), and the rule and runtime packing that send ResNet-50's 7 x 7 layers there."""

from __future__ import annotations

import numpy as np
import pytest
from conv_cases import close as _close
from conv_cases import (
    forward,
    pw_args,
    pw_geom,
    pw_inputs,
    pw_reference,
    same_bits_on_threads_and_images,
    same_bits_under_isa,
)
from conv_cases import has_pixel_tiles as _has_tiles

from gpucore import _cpu

# (n, c, h, w, o, stride): pixels 1, 8 (7 + 1), 25 (3 x 7 + 4), 27, 49, 112, 196, 256 (the
# mode's most); output channels 25, 31 (one part panel), 40, 64, 65 (64 + 1), 96 (64 + one
# 32-wide panel), 127, 200; c = 300 / 600 / 1030 across K blocks (kc 288 on AVX-512), strides
# 2 and (2, 1), batches.
GEOMS = {
    "one_pixel": (1, 5, 1, 1, 40, (1, 1)),
    "l8_k_blocks": (3, 300, 2, 4, 200, (1, 1)),
    "l25_o96": (2, 300, 5, 5, 96, (1, 1)),
    "l27_s21_o31": (1, 17, 6, 9, 31, (2, 1)),
    "l49_o65": (1, 40, 7, 7, 65, (1, 1)),
    "l49_s2": (2, 33, 13, 13, 70, (2, 2)),
    "l112_o127": (1, 600, 8, 14, 127, (1, 1)),
    "l196_k_blocks": (1, 1030, 14, 14, 40, (1, 1)),
    "l256_o64": (2, 40, 16, 16, 64, (1, 1)),
    "o25": (1, 64, 3, 3, 25, (1, 1)),
}


def _geom(case):
    return pw_geom(GEOMS[case])


def _args(case, n=None):
    return pw_args(GEOMS[case], n)


def _inputs(case):
    return pw_inputs(GEOMS[case], len(case) + 100)


def _reference(case, *a, **kw):
    return pw_reference(GEOMS[case], *a, **kw)


def _forward(case, x, wt, b, res=None, relu=False, w_arg=None, n=None):
    _, _, _, _, o, _, oh, ow = _geom(case)
    return forward(x, wt if w_arg is None else w_arg, b, o, oh, ow, _args(case, n), res, relu)


EPILOGUES = {"none": (False, False, False), "bias": (True, False, False),
             "res": (False, True, False), "bias_res_relu": (True, True, True)}  # fmt: skip


@pytest.mark.parametrize("epi", EPILOGUES)
@pytest.mark.parametrize("case", GEOMS)
def test_matches_float64_and_gemm_bits(case, epi, conv_path):
    x, wt, b, res = _inputs(case)
    use_b, use_res, relu = EPILOGUES[epi]
    b, res = (b if use_b else None), (res if use_res else None)
    conv_path("pointwise_t")
    if _has_tiles():
        assert _cpu.conv2d_pointwise(*_args(case)) == 2
    got = _forward(case, x, wt, b, res, relu)
    _close(got, _reference(case, x, wt, b, res, relu), f"{case} {epi}")
    conv_path("im2col")
    if GEOMS[case][4] > 24:  # the GEMM's blocked path (not its small-m gemv one)
        assert np.array_equal(got, _forward(case, x, wt, b, res, relu)), f"{case} {epi}"


def test_nan_inf_and_relu_signs(conv_path):
    """NaN / inf in the input and the residual reach the outputs they feed, as on the GEMM path;
    relu: (v <= 0) ? +0 : v, NaN kept, -0 -> +0."""
    case = "l49_s2"
    x, wt, b, res = _inputs(case)
    x[1, 5, 4, 6] = np.inf  # pixel (2, 3) of image 1: every channel's output there
    x[0, 7, 0, 0] = np.nan
    res[0, 3, 1, 2] = np.nan
    res[1, 30, 0, 4] = -np.inf
    conv_path("pointwise_t")
    got = _forward(case, x, wt, b, res, True)
    assert np.isnan(got[0, 3, 1, 2]) and got[1, 30, 0, 4] == 0.0
    assert np.isnan(got[0, :, 0, 0]).all()
    inf = got[1, :, 2, 3]
    assert ((inf == np.inf) | (inf == 0)).all() and (inf == np.inf).any()
    zero = _forward(case, np.ones_like(x), np.zeros_like(wt), None, -np.zeros_like(res), True)
    assert not np.signbit(zero).any() and not zero.any()
    conv_path("im2col")
    assert np.array_equal(_forward(case, x, wt, b, res, True).view(np.uint32), got.view(np.uint32))


def test_nan_bits_across_k_blocks_match_the_gemm(conv_path):
    """inf * 0 in the first K block (the default NaN, sign set) meeting an input's NaN (sign
    clear) in a later block: the sum keeps the later block's NaN, as the GEMM's acc + C."""
    c, o = 600, 64  # K blocks of 288 on AVX-512
    x = np.ones((1, c, 7, 7), np.float32)
    wt = np.ones((o, c, 1, 1), np.float32)
    x[0, 10, 0, 0], wt[:, 10] = np.inf, 0.0
    x[0, 500, 0, 0] = np.nan
    geo = (1, c, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, o)
    bits = {}
    for mode in ("pointwise_t", "auto", "pointwise", "im2col"):
        conv_path(mode)
        out = np.zeros((1, o, 7, 7), np.float32)
        _cpu.conv2d_forward(x, wt, None, out, *geo)
        bits[mode] = out.view(np.uint32)
        assert np.isnan(out[0, :, 0, 0]).all() and not np.isnan(out[0, :, 1:]).any()
    for mode in ("pointwise_t", "auto", "pointwise"):
        assert np.array_equal(bits[mode], bits["im2col"]), mode


@pytest.mark.parametrize("case", ["l8_k_blocks", "l25_o96", "l49_s2", "l112_o127", "l196_k_blocks"])
def test_bits_independent_of_threads_batch_and_packing(case, conv_path):
    conv_path("pointwise_t")
    x, wt, b, res = _inputs(case)

    def run(xs, rs, n):
        return _forward(case, xs, wt, b, rs, True, n=n)

    first = same_bits_on_threads_and_images(run, x, res)
    # pre-packed weights: the swapped layout read in place, the unswapped one left to the other
    # paths (the same bits with more than 24 output channels)
    o, c = wt.shape[:2]
    for swap in (1, 0):
        pm = _cpu.gemm_pack(wt.reshape(-1), "a", o, c, 0, swap)
        assert np.array_equal(_forward(case, x, wt, b, res, True, w_arg=pm), first), swap


def test_rule_and_runtime_packing(monkeypatch):
    """ResNet-50's 49- and 196-pixel 1x1 layers (K >= 256) take the pixels x channels tiles on
    AVX-512 and the runtime packs their weight swapped, odd multiples of 32 output channels do
    not; GPUCORE_CONV=pointwise_t stops at 256 pixels."""
    from gpucore.runtime.ir import packing

    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    layers = [(512, 7, 2048, 1), (2048, 7, 512, 1), (1024, 14, 2048, 2), (1024, 14, 256, 1),
              (1024, 14, 512, 1), (256, 14, 1024, 1), (512, 28, 1024, 2)]  # fmt: skip
    for c, h, o, s in layers:
        geo = (1, c, h, h, 1, 1, s, s, 0, 0, 1, 1, o)
        got = _cpu.conv2d_pointwise(*geo)
        assert isinstance(got, int)
        if _has_tiles():
            assert got == 2, (c, h, o, s)
        w = np.zeros((o, c, 1, 1), np.float32)
        w.flags.writeable = False
        pm = packing.conv_weight(w, ((h - 1) // s + 1) ** 2, geo)
        if got == 2:
            assert isinstance(pm, _cpu.PackedMatrix) and (pm.swap, pm.side) == (1, "a")
    # 196 pixels below K = 256 and 784 pixels: the channels x pixels tiles
    assert _cpu.conv2d_pointwise(1, 200, 14, 14, 1, 1, 1, 1, 0, 0, 1, 1, 1024) in (0, 1)
    assert _cpu.conv2d_pointwise(1, 512, 28, 28, 1, 1, 1, 1, 0, 0, 1, 1, 128) in (0, 1)
    # output channels filling 64-wide blocks poorly (the tile's last block would compute a
    # 32-wide panel twice): not taken
    for c, h, o in [(2048, 7, 32), (1024, 7, 96), (256, 7, 160), (1024, 14, 96)]:
        assert _cpu.conv2d_pointwise(1, c, h, h, 1, 1, 1, 1, 0, 0, 1, 1, o) in (0, 1), (c, h, o)
    monkeypatch.setenv("GPUCORE_CONV", "pointwise_t")
    many = _cpu.conv2d_pointwise(1, 16, 17, 17, 1, 1, 1, 1, 0, 0, 1, 1, 64)  # 289 pixels
    assert many == 1 or not _has_tiles()
    if _has_tiles():
        assert _cpu.conv2d_pointwise(1, 16, 16, 16, 1, 1, 1, 1, 0, 0, 1, 1, 64) == 2


@pytest.mark.parametrize("isa", [i for i in _cpu.info()["available"]])
def test_every_isa_matches_float64_and_gemm_bits(isa, tmp_path):
    """Under each ISA (AVX-512 through the pixels x channels tiles, the others through the
    pointwise path's channels x pixels ones): close to float64, the same bits on 1 and 8
    threads and as conv.c's GEMM path."""
    got = same_bits_under_isa(__file__, isa, tmp_path, "pointwise_t", "conv2d_pointwise", True)
    for case in GEOMS:
        x, wt, b, res = _inputs(case)
        _close(got[case], _reference(case, x, wt, b, res, True), f"{isa} {case}")
        _close(got[case + ".plain"], _reference(case, x, wt, None), f"{isa} {case} plain")
        want = 2 if isa == "avx512" else 0 if isa == "neon" else 1
        assert int(got[case + ".path"]) == want, (isa, case)
