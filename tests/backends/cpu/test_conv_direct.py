"""The direct float32 convolution (cpu/conv_direct.c, micro-kernels isa/ukr_conv.h), forward and
backward: against a float64 numpy reference on geometries around every blocking edge, the same
bits as the im2col GEMM path where both run the GEMM micro-kernel's FMA chains over the same K
blocks (the forward and the weight gradient, more than 24 output channels), independent of the
thread count and of how the weight was packed, under every ISA this CPU supports (forced in
subprocesses), and the path rule (``_cpu.conv2d_direct``)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from conv_cases import (
    backward,
    conv_args,
    conv_geom,
    conv_inputs,
    conv_reference,
    conv_reference_backward,
    isa_run,
)

import gpucore
from gpucore import _cpu

# (n, c, h, w, o, kernel, stride, padding, dilation): output channels around the 16-wide panels
# (15, 17, 33) and the GEMM's small-m limit (24); pixel counts around the 6- and 4-pixel panels;
# c*kh*kw across a K block (3x3 x 120 = 1080 > kc); strides, asymmetric ones, dilation, padding
# wider than the kernel reaches, 1x1 with stride / padding (direct) and without (a plain GEMM).
GEOMS = {
    "tiny": (1, 1, 3, 3, 1, (3, 3), (1, 1), (1, 1), (1, 1)),
    "odd_all": (1, 3, 9, 11, 5, (3, 3), (1, 1), (1, 1), (1, 1)),
    "o15_l25": (2, 5, 5, 5, 15, (3, 3), (1, 1), (1, 1), (1, 1)),
    "o17_asym": (3, 4, 8, 7, 17, (3, 2), (2, 1), (1, 0), (1, 2)),
    "o33_stride2": (1, 7, 13, 6, 33, (5, 5), (2, 2), (2, 2), (1, 1)),
    "o48_k_blocks": (1, 120, 5, 6, 48, (3, 3), (1, 1), (1, 1), (1, 1)),
    "o40_dilated": (2, 6, 12, 10, 40, (3, 3), (1, 2), (3, 2), (2, 3)),
    "resnet_stem": (1, 3, 30, 29, 32, (7, 7), (2, 2), (3, 3), (1, 1)),
    "pointwise_s2": (2, 8, 10, 9, 26, (1, 1), (2, 2), (0, 0), (1, 1)),
    "pointwise_pad": (1, 8, 6, 6, 30, (1, 1), (1, 1), (1, 1), (1, 1)),
    "pointwise_gemm": (3, 16, 7, 5, 40, (1, 1), (1, 1), (0, 0), (1, 1)),
    "no_pad_7x7": (2, 9, 7, 7, 64, (3, 3), (1, 1), (0, 0), (1, 1)),
    # AVX-512's 14-pixel x 32-channel tile: pixel counts 13, 14, 15, 29 (3x3 without padding),
    # output channels 31, 32, 65; the digits CNN's 16 -> 32 layer (8x8, 64 pixels per image)
    "avx512_o31_l13": (2, 5, 3, 15, 31, (3, 3), (1, 1), (0, 0), (1, 1)),
    "avx512_o32_l14": (3, 6, 4, 9, 32, (3, 3), (1, 1), (0, 0), (1, 1)),
    "avx512_o65_l15": (1, 7, 5, 7, 65, (3, 3), (1, 1), (0, 0), (1, 1)),
    "avx512_o32_l29_s2": (2, 3, 5, 59, 32, (3, 3), (2, 2), (1, 1), (1, 1)),
    "digits_conv2": (3, 16, 8, 8, 32, (3, 3), (1, 1), (1, 1), (1, 1)),
}


def _geom(case):
    return conv_geom(GEOMS[case])


def _args(case):
    return conv_args(GEOMS[case])


def _inputs(case):
    """x, weight and bias (conv_inputs' residual left out)."""
    return conv_inputs(GEOMS[case], len(case))[:3]


def _reference(case, x, wt, b):
    """float64 conv2d, one shifted window product per kernel tap (no im2col)."""
    return conv_reference(GEOMS[case], x, wt, b)


def _reference_backward(case, x, wt, g):
    return conv_reference_backward(GEOMS[case], x, wt, g)


def _backward(case, x, wt, g):
    return backward(x, wt, g, _args(case))


def _grad_out(case):
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    return np.random.default_rng(7).standard_normal((n, o, oh, ow)).astype(np.float32)


def _forward(case, x, wt, b, w_arg=None):
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    out = np.full((n, o, oh, ow), np.nan, np.float32)
    _cpu.conv2d_forward(x, wt if w_arg is None else w_arg, b, out, *_args(case))
    return out


@pytest.fixture
def conv_path(monkeypatch):
    """Sets GPUCORE_CONV (read by the C side on every call) for the rest of the test."""
    return lambda mode: monkeypatch.setenv("GPUCORE_CONV", mode)


@pytest.mark.parametrize("case", GEOMS)
def test_direct_matches_float64_and_im2col_bits(case, conv_path):
    x, wt, b = _inputs(case)
    conv_path("direct")
    got = _forward(case, x, wt, b)
    ref = _reference(case, x, wt, b)
    err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
    assert err <= 2e-6, f"{case}: relative error {err:.3g}"
    conv_path("im2col")
    other = _forward(case, x, wt, b)
    if GEOMS[case][4] > 24:  # the GEMM's blocked path (not its small-m gemv one)
        assert np.array_equal(got, other), case


@pytest.mark.parametrize(
    "case",
    # batches whose images share pixel panels (pixels not a multiple of MR: conv_direct.c's
    # dconv_group), with padding, without, strided, over K blocks
    ["o33_stride2", "o48_k_blocks", "resnet_stem", "digits_conv2", "avx512_o31_l13",
     "avx512_o32_l29_s2", "o40_dilated", "o17_asym", "pointwise_s2", "o15_l25"],
)  # fmt: skip
def test_direct_bits_independent_of_threads_batch_and_packing(case, conv_path):
    conv_path("direct")
    x, wt, b = _inputs(case)
    before = gpucore.get_num_threads()
    try:
        runs = []
        for nt in (1, 2, 3):
            gpucore.set_num_threads(nt)
            runs.append(_forward(case, x, wt, b))
    finally:
        gpucore.set_num_threads(before)
    for r in runs[1:]:
        assert np.array_equal(r, runs[0])
    # image by image (a batch of one splits its pixels over threads, a batch does not)
    for i in range(x.shape[0]):
        one = np.empty_like(runs[0][i : i + 1])
        args = list(_args(case))
        args[0] = 1
        _cpu.conv2d_forward(x[i : i + 1].copy(), wt, b, one, *args)
        assert np.array_equal(one, runs[0][i : i + 1])
    # pre-packed weights: the direct kernel's own layout (swap 1) used in place, the other one
    # (swap 0) repacked: the same bits
    o, ck = wt.shape[0], wt[0].size
    for swap in (0, 1):
        pm = _cpu.gemm_pack(wt.reshape(-1), "a", o, ck, 0, swap)
        assert np.array_equal(_forward(case, x, wt, b, w_arg=pm), runs[0])


def _wtaps(taps, o):
    """Whether cpu/conv_wtaps.c's rule takes a stride-1 weight gradient of these taps."""
    lanes = {"avx2": 8, "avx512": 16}.get(_cpu.info()["isa"])
    return lanes is not None and (taps <= 16 or (taps <= 27 and o * taps * lanes * 4 <= 32768))


@pytest.mark.parametrize("case", GEOMS)
def test_direct_backward_matches_float64(case, conv_path):
    x, wt, _ = _inputs(case)
    g = _grad_out(case)
    conv_path("direct")
    got = _backward(case, x, wt, g)
    for name, a, r in zip(("gx", "gw", "gb"), got, _reference_backward(case, x, wt, g)):
        err = float(np.abs(a - r).max()) / max(1.0, float(np.abs(r).max()))
        assert err <= 2e-6, f"{case} {name}: relative error {err:.3g}"
    conv_path("im2col")
    other = _backward(case, x, wt, g)
    n, c, h, w, o, k, s, *_ = GEOMS[case]
    # the weight gradient: the GEMM's blocked path, same chains (not the few-taps kernel of a
    # stride-1 layer on AVX2 / AVX-512, cpu/conv_wtaps.c: its own lane sums)
    if o > 24 and not (s == (1, 1) and _wtaps(c * k[0] * k[1], o)):
        assert np.array_equal(got[1], other[1]), case


@pytest.mark.parametrize("case", ["o17_asym", "o48_k_blocks", "o40_dilated", "odd_all"])
def test_direct_backward_bits_independent_of_threads(case, conv_path):
    conv_path("direct")
    x, wt, _ = _inputs(case)
    x, g = np.concatenate([x] * 5), np.concatenate([_grad_out(case)] * 5)  # several chunks
    n, *rest = _args(case)
    before = gpucore.get_num_threads()
    try:
        runs = []
        for nt in (1, 2, 3):
            gpucore.set_num_threads(nt)
            out = [np.empty(x.shape, np.float32), np.empty(wt.shape, np.float32)]
            out.append(np.empty(wt.shape[0], np.float32))
            _cpu.conv2d_backward(x, wt, g, *out, 5 * n, *rest)
            runs.append(out)
    finally:
        gpucore.set_num_threads(before)
    for r in runs[1:]:
        for a, b in zip(r, runs[0]):
            assert np.array_equal(a, b)


def test_rule_and_bindings(conv_path):
    geo = (1, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 64)
    assert _cpu.conv2d_direct(*geo) is True
    conv_path(" IM2COL ")  # gpucore/config.py's spelling rule: case and spaces ignored
    assert _cpu.conv2d_direct(*geo) is False
    conv_path("auto")
    assert _cpu.conv2d_direct(*geo) is True
    # 1x1, stride 1, no padding: a plain GEMM on the image
    assert _cpu.conv2d_direct(1, 64, 56, 56, 1, 1, 1, 1, 0, 0, 1, 1, 64) is False
    # the forward's tile columns are output channels: half a panel or less runs im2col
    nr = _cpu.info()["gemm"]["float32"]["nr"]
    assert _cpu.conv2d_direct(1, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, nr // 2) is False
    assert _cpu.conv2d_direct(1, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, nr // 2 + 1) is True
    # ... unless each output has more than 32 taps (c * kh * kw): then the FMAs dominate
    assert _cpu.conv2d_direct(1, 3, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, nr // 2) is False  # 27 taps
    assert _cpu.conv2d_direct(1, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, nr // 2) is True  # 36 taps
    assert _cpu.conv2d_direct(1, 2, 8, 8, 4, 4, 1, 1, 1, 1, 1, 1, nr // 2) is False  # 32 taps
    assert _cpu.conv2d_direct(1, 2, 8, 8, 4, 4, 1, 1, 1, 1, 1, 1, nr // 2 + 1) is True
    conv_path("direct")  # forced: any channel count
    assert _cpu.conv2d_direct(1, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1) is True
    conv_path("auto")
    with pytest.raises(ValueError, match="conv2d_direct"):
        _cpu.conv2d_direct(1, 64, 2, 2, 5, 5, 1, 1, 0, 0, 1, 1, 64)  # no output pixels
    with pytest.raises(TypeError):
        _cpu.conv2d_direct(*geo[:-1])


def test_float64_keeps_the_im2col_path(conv_path):
    case = "o40_dilated"
    x, wt, b = (a.astype(np.float64) for a in _inputs(case))
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    outs = []
    for mode in ("direct", "im2col"):
        conv_path(mode)
        out = np.empty((n, o, oh, ow))
        _cpu.conv2d_forward(x, wt, b, out, *_args(case))
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], _reference(case, x, wt, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "case", ["o48_k_blocks", "avx512_o32_l14", "avx512_o31_l13", "digits_conv2", "resnet_stem"]
)
def test_backward_tile_store_paths_give_the_same_bits(case, conv_path, monkeypatch):
    """The backward's full tiles through the ISA's transposing store (the weight gradient's
    taps, the input gradient's pixels; acc + c over images and K blocks) and through the
    portable loop (GPUCORE_CONV_TILE_LOOP): the same bits."""
    conv_path("direct")
    x, wt, _ = _inputs(case)
    x, g = np.concatenate([x] * 5), np.concatenate([_grad_out(case)] * 5)  # several per chunk
    n, *rest = _args(case)
    outs = []
    for loop in (False, True):
        if loop:
            monkeypatch.setenv("GPUCORE_CONV_TILE_LOOP", "1")
        out = [np.full(x.shape, np.nan, np.float32), np.full(wt.shape, np.nan, np.float32)]
        out.append(np.full(wt.shape[0], np.nan, np.float32))
        _cpu.conv2d_backward(x, wt, g, *out, 5 * n, *rest)
        outs.append(out)
    for name, a, c in zip(("gx", "gw", "gb"), *outs):
        assert np.array_equal(a, c), f"{case} {name}"


@pytest.mark.parametrize(
    "case", ["odd_all", "o15_l25", "o40_dilated", "o48_k_blocks", "o33_stride2", "digits_conv2"]
)
def test_narrow_and_wide_backward_kernels_give_the_same_bits(case, conv_path, monkeypatch):
    """AVX-512's 16-column backward kernel (gc_isa.cukr16_f32, where 16-wide panels hold the
    channels in fewer tile cells: 3, 5, 15, 40, 48 of them) and the 32-wide one it replaces
    (GPUCORE_CONV_WIDE) run the same FMA chains over the same K blocks: the same bits for all
    three gradients (elsewhere both settings run one kernel)."""
    conv_path("direct")
    x, wt, _ = _inputs(case)
    g = _grad_out(case)
    narrow = _backward(case, x, wt, g)
    monkeypatch.setenv("GPUCORE_CONV_WIDE", "1")
    wide = _backward(case, x, wt, g)
    for name, a, b in zip(("gx", "gw", "gb"), narrow, wide):
        assert np.array_equal(a, b), f"{case} {name}"


_ISA_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np
    sys.path.insert(0, sys.argv[1])
    import test_conv_direct as t
    from gpucore import _cpu
    assert _cpu.info()["isa"] == sys.argv[2]
    res = {}
    for case in t.GEOMS:
        x, wt, b = t._inputs(case)
        res[case] = t._forward(case, x, wt, b)
        for name, a in zip(("gx", "gw", "gb"), t._backward(case, x, wt, t._grad_out(case))):
            res[case + "." + name] = a
    np.savez(sys.argv[3], **res)
    """
)


@pytest.mark.parametrize("isa", [i for i in _cpu.info()["available"]])
def test_every_isa_direct_kernel_matches_float64(isa, tmp_path):
    got = isa_run(_ISA_SCRIPT, __file__, isa, tmp_path, GPUCORE_CONV="direct")
    for case in GEOMS:
        x, wt, b = _inputs(case)
        refs = [_reference(case, x, wt, b), *_reference_backward(case, x, wt, _grad_out(case))]
        for name, ref in zip(("", ".gx", ".gw", ".gb"), refs):
            a = got[case + name]
            err = float(np.abs(a - ref).max()) / max(1.0, float(np.abs(ref).max()))
            assert err <= 2e-6, f"{isa} {case}{name}: relative error {err:.3g}"


@pytest.mark.parametrize("case", ["o48_k_blocks", "avx512_o32_l14", "digits_conv2", "o33_stride2"])
def test_tile_store_paths_give_the_same_bits(case, conv_path, monkeypatch):
    """The ISA's transposing store of full tiles (AVX-512: gc_isa.ctile_f32) and the portable
    loop (GPUCORE_CONV_TILE_LOOP): the same bits with bias, K blocks and the epilogue."""
    conv_path("direct")
    x, wt, b = _inputs(case)
    res = (
        np.random.default_rng(3).standard_normal(_forward(case, x, wt, b).shape).astype(np.float32)
    )
    outs = []
    for loop in (False, True):
        if loop:
            monkeypatch.setenv("GPUCORE_CONV_TILE_LOOP", "1")
        got = [_forward(case, x, wt, b), _forward(case, x, wt, None)]
        fused = np.empty_like(got[0])
        _cpu.conv2d_forward(x, wt, b, fused, *_args(case), res, _cpu.UNARY_RELU)
        outs.append([*got, fused])
    for a, c in zip(*outs):
        assert np.array_equal(a, c), case
    ref = np.maximum(_reference(case, x, wt, b) + res, 0)
    assert np.abs(outs[0][2] - ref).max() <= 2e-6 * max(1.0, np.abs(ref).max())
