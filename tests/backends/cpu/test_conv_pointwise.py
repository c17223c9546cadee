"""The pointwise float32 convolution (cpu/conv_pw.c, micro-kernels isa/ukr_pw.h): 1x1
convolutions without padding, any stride, with the bias / residual / ReLU epilogue in the tile's
registers.  Against a float64 numpy reference on geometries around the register tile's edges
(output channels and pixels just under and over MR / NR multiples, strides, K across blocks,
batches), the same bits as conv.c's GEMM path (GPUCORE_CONV=im2col) wherever that runs its
blocked kernel (more than 24 output channels), independent of the thread count, of batching and
of how the weight was packed, under every ISA this CPU supports (forced in subprocesses), the
path rule (``_cpu.conv2d_pointwise``) and the runtime's packing for it."""

from __future__ import annotations

import numpy as np
import pytest
from conv_cases import close as _close
from conv_cases import forward, pw_args, pw_geom, pw_inputs, pw_reference, same_bits_under_isa

import gpucore
from gpucore import _cpu

# (n, c, h, w, o, stride): output channels 1, 13, 15, 29, 33, 65 around 14- / 6- / 4-row panels,
# pixels 1, 35, 31, 33, 49 around 32- / 16- / 8-column panels, strides 2 and asymmetric ones,
# c = 300 / 600 across the K blocks (kc 288 on AVX-512), batches of 2 and 3, and last column
# panels narrower than a panel (AVX-512: 1-8 pixels through the 14 x 8 quarter-width tile,
# 9-16 the 14 x 16 half-width one, 17-24 both side by side).
GEOMS = {
    "one_pixel": (1, 5, 1, 1, 13, (1, 1)),
    "o1": (2, 7, 5, 7, 1, (1, 1)),
    "o15_l35": (1, 9, 5, 7, 15, (1, 1)),
    "o29_l31": (3, 17, 1, 31, 29, (1, 1)),
    "o33_l33_s2": (2, 6, 5, 21, 33, (2, 2)),
    "o65_l49": (1, 40, 7, 7, 65, (1, 1)),
    "k_blocks": (2, 300, 4, 9, 40, (1, 1)),
    "k_blocks3_s21": (1, 600, 8, 5, 30, (2, 1)),
    "strided_31": (2, 16, 10, 11, 48, (3, 2)),
    "resnet_down": (1, 64, 14, 14, 96, (2, 2)),
    "wide": (1, 8, 9, 130, 28, (1, 1)),
    # a last column panel narrower than a panel: 36 = 32 + 4 and 40 = 32 + 8 pixels (quarter),
    # 44 = 32 + 12 and 48 = 32 + 16 (half), 56 = 32 + 24 and 49 = 32 + 17 (half + quarter, the
    # second with residual lines at an odd offset), over K blocks, strided, and part-row panels
    "half_tail": (1, 20, 6, 6, 40, (1, 1)),
    "half_k_blocks": (2, 300, 4, 10, 33, (1, 1)),
    "half_only": (1, 300, 4, 11, 43, (1, 1)),
    "half_full": (2, 24, 6, 8, 30, (1, 1)),
    "half_quarter": (2, 600, 7, 8, 47, (1, 1)),
    "half_quarter_s2": (1, 40, 13, 13, 29, (2, 2)),
    "resnet_49": (1, 300, 7, 7, 50, (1, 1)),
}


def _geom(case):
    return pw_geom(GEOMS[case])


def _args(case, n=None):
    return pw_args(GEOMS[case], n)


def _inputs(case):
    return pw_inputs(GEOMS[case], len(case))


def _reference(case, *a, **kw):
    return pw_reference(GEOMS[case], *a, **kw)


def _forward(case, x, wt, b, res=None, relu=False, w_arg=None):
    _, _, _, _, o, _, oh, ow = _geom(case)
    return forward(x, wt if w_arg is None else w_arg, b, o, oh, ow, _args(case), res, relu)


EPILOGUES = {"bias": (True, False, False), "none": (False, False, False),
             "relu": (True, False, True), "res": (False, True, False),
             "bias_res_relu": (True, True, True)}  # fmt: skip


@pytest.mark.parametrize("epi", EPILOGUES)
@pytest.mark.parametrize("case", GEOMS)
def test_pointwise_matches_float64_and_gemm_bits(case, epi, conv_path):
    x, wt, b, res = _inputs(case)
    use_b, use_res, relu = EPILOGUES[epi]
    b, res = (b if use_b else None), (res if use_res else None)
    conv_path("pointwise")
    assert _cpu.conv2d_pointwise(*_args(case)) == 1
    got = _forward(case, x, wt, b, res, relu)
    _close(got, _reference(case, x, wt, b, res, relu), f"{case} {epi}")
    conv_path("im2col")
    other = _forward(case, x, wt, b, res, relu)
    if GEOMS[case][4] > 24:  # the GEMM's blocked path (not its small-m gemv one)
        assert np.array_equal(got, other), f"{case} {epi}"


def test_relu_keeps_nan_and_zeroes_negative_zero(conv_path):
    """The epilogue's relu is UNARY_RELU's: (v <= 0) ? 0 : v, NaN kept, -0 -> +0."""
    case = "o33_l33_s2"
    x, wt, b, res = _inputs(case)
    res[0, 3, 1, 2] = np.nan
    res[1, 30, 0, 4] = np.inf
    conv_path("pointwise")
    got = _forward(case, x, wt, None, res, True)
    assert np.isnan(got[0, 3, 1, 2]) and got[1, 30, 0, 4] == np.inf
    zero = _forward(case, x, np.zeros_like(wt), None, -np.zeros_like(res), True)
    assert not np.signbit(zero).any() and not zero.any()
    conv_path("im2col")
    assert np.array_equal(_forward(case, x, wt, None, res, True), got, equal_nan=True)


@pytest.mark.parametrize(
    "case",
    ["o29_l31", "o33_l33_s2", "k_blocks", "strided_31", "wide", "half_k_blocks", "half_only",
     "half_quarter", "half_quarter_s2"],
)  # fmt: skip
def test_bits_independent_of_threads_batch_and_packing(case, conv_path):
    conv_path("pointwise")
    x, wt, b, res = _inputs(case)
    before = gpucore.get_num_threads()
    try:
        runs = []
        for nt in (1, 2, 3):
            gpucore.set_num_threads(nt)
            runs.append(_forward(case, x, wt, b, res, True))
    finally:
        gpucore.set_num_threads(before)
    for r in runs[1:]:
        assert np.array_equal(r, runs[0])
    for i in range(x.shape[0]):  # image by image (one image splits its rows or columns)
        one = np.empty_like(runs[0][i : i + 1])
        _cpu.conv2d_forward(x[i : i + 1].copy(), wt, b, one, *_args(case, 1), res[i : i + 1].copy(),
                            _cpu.UNARY_RELU)  # fmt: skip
        assert np.array_equal(one, runs[0][i : i + 1])
    # pre-packed weights: the GEMM's unswapped layout read in place, a swapped one left to
    # conv.c's GEMM path (the same bits with more than 24 output channels)
    o, c = wt.shape[:2]
    for swap in (0, 1):
        pm = _cpu.gemm_pack(wt.reshape(-1), "a", o, c, 0, swap)
        got = _forward(case, x, wt, b, res, True, w_arg=pm)
        if swap == 0 or o > 24:
            assert np.array_equal(got, runs[0]), swap


def test_rule_and_binding(conv_path):
    g = _cpu.info()["gemm"]["float32"]
    avx512 = (g["mr"], g["nr"]) == (14, 32)
    # ResNet-50's 1x1 layers (one image): taken where the tile's rows and columns both fill (196
    # pixels: 196 of 200 columns with the half- and quarter-width tiles; 49: 7/8 of 56, and 196
    # with K >= 256, run by the pixels x channels tiles, 2: test_conv_pointwise_pixels.py)
    resnet = {(64, 56, 256, 1): 1, (128, 28, 512, 1): 1, (256, 14, 1024, 1): 2,
              (256, 56, 512, 2): 1, (512, 28, 1024, 2): 2, (256, 56, 64, 1): 1,
              (512, 28, 128, 1): 1, (1024, 14, 256, 1): 2, (1024, 14, 512, 1): 2,
              (512, 7, 2048, 1): 2, (2048, 7, 512, 1): 2, (1024, 14, 2048, 2): 2}  # fmt: skip
    for (c, h, o, s), want in resnet.items():
        got = _cpu.conv2d_pointwise(1, c, h, h, 1, 1, s, s, 0, 0, 1, 1, o)
        if avx512:
            assert got == want, (c, h, o, s)
        assert isinstance(got, int)
    on = (1, 64, 56, 56, 1, 1, 1, 1, 0, 0, 1, 1, 256)
    # not 1x1, padded: never
    assert _cpu.conv2d_pointwise(1, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 256) == 0
    assert _cpu.conv2d_pointwise(1, 64, 56, 56, 1, 1, 1, 1, 1, 1, 1, 1, 256) == 0
    conv_path("pointwise")
    assert _cpu.conv2d_pointwise(1, 3, 5, 5, 1, 1, 1, 1, 0, 0, 1, 1, 2) == 1
    assert _cpu.conv2d_pointwise(1, 64, 56, 56, 1, 1, 1, 1, 1, 1, 1, 1, 256) == 0
    for mode in (" IM2COL ", "direct"):
        conv_path(mode)
        assert _cpu.conv2d_pointwise(*on) == 0
    with pytest.raises(ValueError, match="conv2d_pointwise"):
        _cpu.conv2d_pointwise(1, 64, 2, 2, 5, 5, 1, 1, 0, 0, 1, 1, 64)  # no output pixels
    with pytest.raises(TypeError):
        _cpu.conv2d_pointwise(*on[:-1])


def test_rule_leaves_few_output_channels_to_the_gemm(monkeypatch):
    """Up to 24 output channels (gemm.c's GC_GEMV_MAX_M_N) the GEMM's small-m path is faster: the
    rule never takes them, on any ISA, and the results are the GEMM path's bits."""
    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    g = _cpu.info()["gemm"]["float32"]
    r = np.random.default_rng(5)
    x = r.standard_normal((1, 64, 12, 12)).astype(np.float32)
    for o in range(1, 25):
        assert _cpu.conv2d_pointwise(1, 64, 56, 56, 1, 1, 1, 1, 0, 0, 1, 1, o) == 0, o
        assert _cpu.conv2d_pointwise(1, 64, 12, 12, 1, 1, 2, 2, 0, 0, 1, 1, o) == 0, o
        wt = r.standard_normal((o, 64, 1, 1)).astype(np.float32)
        b = r.standard_normal(o).astype(np.float32)
        res = r.standard_normal((1, o, 12, 12)).astype(np.float32)
        geo = (1, 64, 12, 12, 1, 1, 1, 1, 0, 0, 1, 1, o)
        outs = []
        for mode in (None, "im2col"):
            if mode:
                monkeypatch.setenv("GPUCORE_CONV", mode)
            out = np.full((1, o, 12, 12), np.nan, np.float32)
            _cpu.conv2d_forward(x, wt, b, out, *geo, res, _cpu.UNARY_RELU)
            outs.append(out)
        monkeypatch.delenv("GPUCORE_CONV")
        assert np.array_equal(outs[0], outs[1]), o
    if (g["mr"], g["nr"]) == (14, 32):  # AVX-512: 25 channels and up fill the short-row kernels
        assert _cpu.conv2d_pointwise(1, 64, 56, 56, 1, 1, 1, 1, 0, 0, 1, 1, 25) == 1


def test_runtime_packs_the_unswapped_layout():
    from gpucore.runtime.ir import packing

    geo = (1, 64, 56, 56, 1, 1, 1, 1, 0, 0, 1, 1, 256)
    w = np.random.default_rng(0).standard_normal((256, 64, 1, 1)).astype(np.float32)
    w.flags.writeable = False
    got = packing.conv_weight(w, 56 * 56, geo)
    if _cpu.conv2d_pointwise(*geo) == 1:
        assert isinstance(got, _cpu.PackedMatrix) and (got.swap, got.side) == (0, "a")
        assert (got.rows, got.cols) == (256, 64)


@pytest.mark.parametrize("isa", [i for i in _cpu.info()["available"]])
def test_every_isa_matches_float64_and_gemm_bits(isa, tmp_path):
    """Under each ISA: close to float64, the same bits on 1 and 8 threads, and (more than 24
    output channels) the same bits as conv.c's GEMM path, GPUCORE_CONV=im2col."""
    got = same_bits_under_isa(__file__, isa, tmp_path, "pointwise", "conv2d_pointwise", True)
    for case in GEOMS:
        x, wt, b, res = _inputs(case)
        _close(got[case], _reference(case, x, wt, b, res, True), f"{isa} {case}")
        _close(got[case + ".plain"], _reference(case, x, wt, None), f"{isa} {case} plain")
        # every x86 ISA has the kernel (NEON does not: conv.c's GEMM path there)
        assert bool(got[case + ".path"]) is (isa != "neon")
