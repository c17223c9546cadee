"""conv2d_backward's per-gradient path choice (cpu/conv.c, rules in cpu/conv_direct.c's
gc_conv2d_direct_backward_use): the weight and bias gradients and the input gradient each take
the direct kernel or the im2col GEMM by their own rule, in one call.  Checked on the train.py
CNN's layers (1 -> 16 on 28x28: few taps, the weight gradient by the few-taps kernel on AVX2 /
AVX-512, else by GEMM; 16 -> 32 on 14x14) and
on channel counts around the rules' edges: against float64, bit for bit against each path forced
alone (GPUCORE_CONV) for the gradient it takes, the bias gradient the same bits on both paths,
one thread against two, and under every ISA this CPU has (a subprocess each)."""

from __future__ import annotations

import numpy as np
import pytest
from conv_cases import backward as _backward
from conv_cases import conv_args, conv_reference_backward, isa_run

import gpucore
from gpucore import _cpu

# (n, c, hw, o): the CNN's two layers (small batches), then input channels around half an AVX2
# (16) and an AVX-512 (32) panel, and 27 taps (3 -> 16)
CASES = {
    "cnn_conv1": (3, 1, 28, 16),
    "cnn_conv2": (3, 16, 14, 32),
    "c8": (2, 8, 12, 32),
    "c9": (2, 9, 10, 24),
    "c17": (2, 17, 9, 32),
    "taps27": (2, 3, 11, 16),
}


def _inputs(case):
    n, c, hw, o = CASES[case]
    r = np.random.default_rng(n * 100 + c)
    x = r.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (r.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    g = r.standard_normal((n, o, hw, hw)).astype(np.float32)
    return x, w, g


def _geom(case):
    """The conv_cases geometry: 3x3, stride 1, padding 1."""
    n, c, hw, o = CASES[case]
    return (n, c, hw, hw, o, (3, 3), (1, 1), (1, 1), (1, 1))


def _geo(case):
    return conv_args(_geom(case))


def _has_direct():
    """Whether this ISA has the direct kernel (ResNet's 64-channel 3x3 runs it when it does)."""
    return _cpu.conv2d_direct(1, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 64)


@pytest.fixture
def conv_path(monkeypatch):
    return lambda mode: monkeypatch.setenv("GPUCORE_CONV", mode)


@pytest.mark.parametrize("case", CASES)
def test_matches_float64_and_each_forced_path(case, conv_path):
    x, w, g = _inputs(case)
    geo = _geo(case)
    conv_path("auto")
    auto = _backward(x, w, g, geo)
    for name, a, r in zip(("gx", "gw", "gb"), auto, conv_reference_backward(_geom(case), x, w, g)):
        err = float(np.abs(a - r).max()) / max(1.0, float(np.abs(r).max()))
        assert err <= 2e-6, f"{case} {name}: relative error {err:.3g}"
    conv_path("im2col")
    im2col = _backward(x, w, g, geo)
    conv_path("direct")
    direct = _backward(x, w, g, geo)
    conv_path("auto")
    if not _has_direct():  # no direct kernel on this ISA: one path
        assert all(np.array_equal(a, b) for a, b in zip(auto, im2col))
        return
    # each gradient has the bits of one forced path; the bias sum is the same on both
    assert any(np.array_equal(auto[0], p[0]) for p in (im2col, direct)), case
    assert any(np.array_equal(auto[1], p[1]) for p in (im2col, direct)), case
    assert np.array_equal(auto[2], im2col[2]) and np.array_equal(auto[2], direct[2])


def test_rules_on_the_cnn_layers(conv_path):
    """Which path each gradient takes (seen through the bits of the forced paths)."""
    conv_path("auto")
    if not _has_direct():
        pytest.skip("no direct kernel on this ISA")
    info = _cpu.info()
    nr = info["gemm"]["float32"]["nr"]

    def gx_rule(c):
        """Whether the input gradient of c input channels runs direct: AVX-512's 16-column
        kernel for up to 16 channels, with a full panel of them; else more than half a panel
        of the GEMM's NR."""
        if info["isa"] == "avx512" and nr > 16 and c <= 16:
            return c >= 16
        return 2 * c > nr

    # 9 taps at stride 1: AVX2's and AVX-512's few-taps kernel (a direct path, cpu/conv_wtaps.c),
    # else the GEMM's dot products
    wtaps = info["isa"] in ("avx2", "avx512")
    for case, gw_direct, gx_direct in (
        ("cnn_conv1", wtaps, None),
        ("cnn_conv2", True, gx_rule(16)),
        ("c17", True, gx_rule(17)),
        ("c9", True, gx_rule(9)),
        ("c8", True, False),
    ):
        x, w, g = _inputs(case)
        geo = _geo(case)
        conv_path("auto")
        auto = _backward(x, w, g, geo)
        conv_path("direct")
        direct = _backward(x, w, g, geo)
        conv_path("im2col")
        im2col = _backward(x, w, g, geo)
        want = direct if gw_direct else im2col
        assert np.array_equal(auto[1], want[1]), case
        if gx_direct is not None and not np.array_equal(direct[0], im2col[0]):
            assert np.array_equal(auto[0], (direct if gx_direct else im2col)[0]), case


@pytest.mark.parametrize("case", ["cnn_conv1", "cnn_conv2", "c17"])
def test_bits_independent_of_threads(case, conv_path):
    conv_path("auto")
    x, w, g = _inputs(case)
    x, g = np.concatenate([x] * 6), np.concatenate([g] * 6)  # several chunks of images
    n, *rest = _geo(case)
    before = gpucore.get_num_threads()
    try:
        runs = []
        for nt in (1, 2):
            gpucore.set_num_threads(nt)
            runs.append(_backward(x, w, g, (6 * n, *rest)))
    finally:
        gpucore.set_num_threads(before)
    for a, b in zip(*runs):
        assert a.tobytes() == b.tobytes()


_ISA_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_conv_backward_split as t
from gpucore import _cpu
assert _cpu.info()["isa"] == sys.argv[2]
out = {}
for case in t.CASES:
    x, w, g = t._inputs(case)
    for k, a in zip(("gx", "gw", "gb"), t._backward(x, w, g, t._geo(case))):
        out[case + "." + k] = a
np.savez(sys.argv[3], **out)
"""


@pytest.mark.parametrize("isa", list(_cpu.info()["available"]))
def test_every_isa_matches_float64(isa, tmp_path):
    got = isa_run(_ISA_SCRIPT, __file__, isa, tmp_path, GPUCORE_CONV="auto")  # the rules
    for case in CASES:
        x, w, g = _inputs(case)
        for name, r in zip(("gx", "gw", "gb"), conv_reference_backward(_geom(case), x, w, g)):
            a = got[case + "." + name]
            err = float(np.abs(a - r).max()) / max(1.0, float(np.abs(r).max()))
            assert err <= 2e-6, f"{isa} {case} {name}: relative error {err:.3g}"
