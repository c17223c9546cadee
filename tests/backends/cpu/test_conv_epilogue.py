"""conv2d_forward's fused epilogue (``res``, ``act``: cpu/kernels.h's gc_epi, run in the GEMM's
row panels, the direct kernel's pixel chunks and Winograd's output rows): the bits of the
unfused ``conv2d_forward`` -> add -> relu on every path (the 1x1 GEMM in its normal, swapped and
row-split modes and on its small-m path, im2col + GEMM, direct, Winograd), under every packing,
thread count and ISA this CPU supports (forced in subprocesses); against a float64 reference;
bad arguments."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from conv_cases import isa_run

import gpucore
from gpucore import _cpu

# (n, c, h, w, o, k, stride, padding): 1x1 stride-1 GEMMs (normal; 49 pixels, swapped by a
# swap-1 pack; narrow N, the row-split mode; o <= 24, the small-m path), strided 1x1 (im2col
# with a virtual pack), 3x3 stride 1 (Winograd where the rule says so), stride 2 and a 7x7
# stem (direct), odd sizes at every edge
GEOMS = {
    "gemm_56": (1, 16, 12, 12, 40, 1, 1, 0),
    "gemm_7x7": (1, 48, 7, 7, 70, 1, 1, 0),
    "gemm_wide_k": (1, 600, 5, 5, 33, 1, 1, 0),
    "gemm_small_o": (2, 9, 5, 6, 7, 1, 1, 0),
    "pointwise_s2": (1, 24, 9, 9, 37, 1, 2, 0),
    "winograd": (1, 32, 12, 12, 32, 3, 1, 1),
    "odd_3x3": (2, 5, 7, 9, 19, 3, 1, 1),
    "strided_3x3": (1, 20, 13, 11, 35, 3, 2, 1),
    "stem_7x7": (1, 3, 23, 21, 26, 7, 2, 3),
}


def _geom(case):
    n, c, h, w, o, k, s, p = GEOMS[case]
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return (n, c, h, w, k, k, s, s, p, p, 1, 1, o), (n, o, oh, ow)


def _inputs(case, dtype=np.float32):
    (n, c, h, w, k, _, _, _, _, _, _, _, o), oshape = _geom(case)
    rng = np.random.default_rng(len(case))
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    res = rng.standard_normal(oshape).astype(dtype)
    return x, wt, b, res


def _weights(case, wt):
    """The weight as an array and as every packing conv2d_forward takes for this geometry."""
    geo, _ = _geom(case)
    o, ck = wt.shape[0], wt[0].size
    out = {"array": wt}
    ro = wt.copy()
    ro.setflags(write=False)
    for swap in (0, 1):
        out[f"swap{swap}"] = _cpu.gemm_pack(ro.reshape(-1), "a", o, ck, 0, swap)
    if wt.dtype == np.float32 and geo[4:8] == (3, 3, 1, 1):
        out["winograd"] = _cpu.gemm_pack(ro.reshape(-1), "a", o, ck, 0, 2)
    return out


def _unfused(x, w, b, res, act, geo, oshape):
    y = np.empty(oshape, x.dtype)
    _cpu.conv2d_forward(x, w, b, y, *geo)
    if res is not None:
        y = y + res
    if act >= 0:
        y = np.where(y <= 0, y.dtype.type(0), y)
    return y


def _fused(x, w, b, res, act, geo, oshape):
    y = np.full(oshape, np.nan, x.dtype)
    _cpu.conv2d_forward(x, w, b, y, *geo, res, act)
    return y


def _reference(x, wt, b, res, act, geo):
    """float64: the direct sum, + bias, + res, relu."""
    n, c, h, w, k, _, s, _, p, _, _, _, o = geo
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(k):
        for j in range(k):
            win = xp[:, :, i : i + s * (oh - 1) + 1 : s, j : j + s * (ow - 1) + 1 : s]
            y += np.einsum("nchw,oc->nohw", win, wt[:, :, i, j].astype(np.float64))
    y += b.reshape(1, -1, 1, 1)
    if res is not None:
        y += res
    return np.maximum(y, 0.0) if act >= 0 else y


EPILOGUES = [("res_relu", True, True), ("res", True, False), ("relu", False, True)]


@pytest.mark.parametrize("case", list(GEOMS))
@pytest.mark.parametrize("epi", EPILOGUES, ids=[e[0] for e in EPILOGUES])
def test_fused_bits_equal_unfused(case, epi, monkeypatch):
    _, with_res, relu = epi
    geo, oshape = _geom(case)
    x, wt, b, res = _inputs(case)
    res = res if with_res else None
    act = _cpu.UNARY_RELU if relu else -1
    before = gpucore.get_num_threads()
    for mode in ("auto", "im2col"):  # im2col: the GEMM paths for every geometry
        monkeypatch.setenv("GPUCORE_CONV", mode)
        for name, w in _weights(case, wt).items():
            for threads in (1, 2):
                gpucore.set_num_threads(threads)
                try:
                    got = _fused(x, w, b, res, act, geo, oshape)
                    want = _unfused(x, w, b, res, act, geo, oshape)
                finally:
                    gpucore.set_num_threads(before)
                assert np.array_equal(got, want), f"{case} {mode} {name} {threads} threads"
        np.testing.assert_allclose(got, _reference(x, wt, b, res, act, geo), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("case", ["gemm_56", "strided_3x3", "gemm_small_o"])
def test_float64_and_no_bias(case):
    geo, oshape = _geom(case)
    x, wt, b, res = _inputs(case, np.float64)
    got = _fused(x, wt, b, res, _cpu.UNARY_RELU, geo, oshape)
    assert np.array_equal(got, _unfused(x, wt, b, res, _cpu.UNARY_RELU, geo, oshape))
    np.testing.assert_allclose(got, _reference(x, wt, b, res, 0, geo), rtol=1e-12, atol=1e-12)
    got = _fused(x, wt, None, None, -1, geo, oshape)  # the epilogue arguments given empty
    want = _unfused(x, wt, None, None, -1, geo, oshape)
    assert np.array_equal(got, want)


def test_bad_arguments():
    geo, oshape = _geom("gemm_56")
    x, wt, b, res = _inputs("gemm_56")
    out = np.empty(oshape, np.float32)
    with pytest.raises(ValueError, match="act"):
        _cpu.conv2d_forward(x, wt, b, out, *geo, res, _cpu.UNARY_SIGMOID)
    with pytest.raises(ValueError, match="res"):
        _cpu.conv2d_forward(x, wt, b, out, *geo, res.reshape(-1)[:-1], -1)
    with pytest.raises(ValueError):  # res is out: the tiles would overwrite it before use
        _cpu.conv2d_forward(x, wt, b, out, *geo, out, -1)
    with pytest.raises(TypeError):
        _cpu.conv2d_forward(x, wt, b, out, *geo, res.astype(np.float64), -1)
    with pytest.raises(TypeError):  # 18 arguments: res without act
        _cpu.conv2d_forward(x, wt, b, out, *geo, res)


_ISA_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np
    sys.path.insert(0, sys.argv[1])
    import test_conv_epilogue as t
    from gpucore import _cpu
    assert _cpu.info()["isa"] == sys.argv[2]
    out = {}
    for case in t.GEOMS:
        geo, oshape = t._geom(case)
        x, wt, b, res = t._inputs(case)
        for name, w in t._weights(case, wt).items():
            got = t._fused(x, w, b, res, _cpu.UNARY_RELU, geo, oshape)
            assert np.array_equal(got, t._unfused(x, w, b, res, _cpu.UNARY_RELU, geo, oshape))
            out[case + "." + name] = got
    np.savez(sys.argv[3], **out)
    """
)


@pytest.mark.parametrize("isa", list(_cpu.info()["available"]))
def test_every_isa_matches_unfused_and_float64(isa, tmp_path):
    got = isa_run(_ISA_SCRIPT, __file__, isa, tmp_path)
    for case in GEOMS:
        geo, _ = _geom(case)
        x, wt, b, res = _inputs(case)
        ref = _reference(x, wt, b, res, 0, geo)
        for name in _weights(case, wt):
            a = got[case + "." + name]
            err = float(np.abs(a - ref).max()) / max(1.0, float(np.abs(ref).max()))
            assert err <= 2e-5, f"{isa} {case} {name}: relative error {err:.3g}"
