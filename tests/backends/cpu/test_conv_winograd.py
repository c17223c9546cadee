"""The Winograd F(4x4, 3x3) float32 convolution (cpu/conv_winograd.c): against a float64 numpy
reference on odd sizes, padding 0 / 1 / 2, channel counts off the vector and panel widths and
batches > 1; the weight transformed per call or pre-packed (``gemm_pack(..., swap=2)``) giving
the same bits; independent of the thread count; its error on ResNet-sized layers; NaN / inf; the
path rule (``_cpu.conv2d_winograd``) and the bad calls around the packed weight."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from gpucore import _cpu

# (n, c, h, w, o, ph, pw): partial tiles at the right / bottom edges (odd sizes), outputs smaller
# than one tile, channels off the 8-wide vectors and the 6 x 16 register tile, several K blocks
# (c > kc = 680 on AVX2), batches whose tile rows span images.
GEOMS = {
    "tiny": (1, 1, 3, 3, 1, 0, 0),
    "odd": (1, 3, 9, 11, 5, 1, 1),
    "no_pad": (2, 5, 7, 10, 7, 0, 0),
    "pad2_rect": (1, 17, 13, 6, 19, 2, 1),
    "batch3": (3, 8, 4, 4, 24, 1, 1),
    "channels_33": (2, 33, 15, 17, 33, 1, 1),
    "k_blocks": (1, 700, 6, 5, 9, 1, 1),
    "wide": (1, 4, 5, 300, 3, 1, 1),
}


def _out_hw(h, w, ph, pw):
    return h + 2 * ph - 2, w + 2 * pw - 2


def _ref(x, w, b, ph, pw):
    """float64 conv2d (stride 1, 3x3) by shifted products."""
    n, c, h, wd = x.shape
    oh, ow = _out_hw(h, wd, ph, pw)
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph : ph + h, pw : pw + wd] = x
    out = np.zeros((n, w.shape[0], oh, ow))
    w64 = w.astype(np.float64)
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i : i + oh, j : j + ow], w64[:, :, i, j])
    return out + (0.0 if b is None else b.astype(np.float64)[None, :, None, None])


def _inputs(g, seed=0):
    n, c, h, w, o, ph, pw = g
    r = np.random.default_rng(seed + c + o)
    x = r.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (r.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    return x, wt, r.standard_normal(o).astype(np.float32)


def _conv(x, w, b, ph, pw, o=None):
    n, c, h, wd = x.shape
    o = w.shape[0] if o is None else o
    oh, ow = _out_hw(h, wd, ph, pw)
    out = np.full((n, o, oh, ow), np.nan, np.float32)
    _cpu.conv2d_forward(x, w, b, out, n, c, h, wd, 3, 3, 1, 1, ph, pw, 1, 1, o)
    return out


def _rel_err(got, want):
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


@pytest.fixture
def winograd(monkeypatch):
    monkeypatch.setenv("GPUCORE_CONV", "winograd")


@pytest.mark.parametrize("case", sorted(GEOMS))
@pytest.mark.parametrize("bias", [True, False])
def test_matches_float64(winograd, case, bias):
    g = GEOMS[case]
    x, w, b = _inputs(g)
    b = b if bias else None
    got = _conv(x, w, b, g[5], g[6])
    want = _ref(x, w, b, g[5], g[6])
    assert _rel_err(got, want) < 1e-5, (case, _rel_err(got, want))


@pytest.mark.parametrize("case", sorted(GEOMS))
def test_packed_weight_same_bits(winograd, case):
    """The weight transformed at packing (swap 2) or per call: the same U, the same bits; a
    weight packed for the direct kernel is read back and transformed the same way."""
    g = GEOMS[case]
    n, c, h, wd, o, ph, pw = g
    x, w, b = _inputs(g)
    plain = _conv(x, w, b, ph, pw)
    pk = _cpu.gemm_pack(w.reshape(-1), "a", o, c * 9, 0, 2)
    assert pk.swap == 2 and pk.rows == o and pk.cols == c * 9
    np.testing.assert_array_equal(_conv(x, pk, b, ph, pw, o), plain)
    other = _cpu.gemm_pack(w.reshape(-1), "a", o, c * 9, 0, 1)
    np.testing.assert_array_equal(_conv(x, other, b, ph, pw, o), plain)


def test_packed_weight_runs_winograd_whatever_the_rule(monkeypatch):
    g = GEOMS["channels_33"]
    n, c, h, wd, o, ph, pw = g
    x, w, b = _inputs(g)
    monkeypatch.setenv("GPUCORE_CONV", "winograd")
    want = _conv(x, w, b, ph, pw)
    monkeypatch.setenv("GPUCORE_CONV", "direct")
    pk = _cpu.gemm_pack(w.reshape(-1), "a", o, c * 9, 0, 2)
    np.testing.assert_array_equal(_conv(x, pk, b, ph, pw, o), want)
    assert not np.array_equal(_conv(x, w, b, ph, pw), want)  # the direct path: other bits


@pytest.mark.parametrize("case", ["batch3", "channels_33", "wide"])
def test_thread_count_does_not_change_bits(winograd, case):
    g = GEOMS[case]
    x, w, b = _inputs(g)
    before = _cpu.info()["threads"]
    try:
        _cpu.set_num_threads(1)
        one = _conv(x, w, b, g[5], g[6])
        _cpu.set_num_threads(2)
        two = _conv(x, w, b, g[5], g[6])
        _cpu.set_num_threads(3)
        three = _conv(x, w, b, g[5], g[6])
    finally:
        _cpu.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, three)


# ResNet's 3x3 stride-1 layers (batch 1): the error against float64, relative to the output's
# largest magnitude; the direct path's beside it for scale.  Measured (AVX2; the same bits on
# every ISA): Winograd 4.9e-6, 6.3e-6, 7.3e-6, 1.2e-5 for 64, 128, 256, 512 channels, the direct
# sum 6.5e-7 .. 3.8e-7 (8x .. 31x less): the transforms' constants (8 in A^T, 5 in B^T) and the
# cancellation in A^T's rows cost ~3-4 bits.
RESNET = [(1, 64, 56, 56, 64), (1, 128, 28, 28, 128), (1, 256, 14, 14, 256), (1, 512, 7, 7, 512)]


@pytest.mark.parametrize("shape", RESNET, ids=lambda s: f"{s[1]}x{s[2]}")
def test_resnet_layer_error(monkeypatch, shape):
    n, c, h, w, o = shape
    x, wt, b = _inputs((n, c, h, w, o, 1, 1), seed=1)
    want = _ref(x, wt, b, 1, 1)
    monkeypatch.setenv("GPUCORE_CONV", "winograd")
    err = _rel_err(_conv(x, wt, b, 1, 1), want)
    monkeypatch.setenv("GPUCORE_CONV", "direct")
    err_direct = _rel_err(_conv(x, wt, b, 1, 1), want)
    assert err < 2e-5, (err, err_direct)
    assert err < 40 * max(err_direct, 1e-7), (err, err_direct)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_stay_where_the_direct_sum_puts_them(winograd, bad):
    """An input holding inf or NaN goes to the direct / im2col paths (the transforms would
    spread it over a whole 4x4 tile): exactly the outputs whose window holds it come out
    non-finite, +-inf kept, as the float64 sum; a transformed (swap 2) weight falls back through
    the untransformed copy it keeps, to the same bits."""
    n, c, h, w, o = 1, 40, 16, 16, 40  # channels past the rule's 32
    x, wt, b = _inputs((n, c, h, w, o, 1, 1))
    pk = _cpu.gemm_pack(wt.reshape(-1), "a", o, c * 9, 0, 2)
    xb = x.copy()
    xb[0, 2, 5, 9] = bad
    got = _conv(xb, wt, b, 1, 1)
    with np.errstate(invalid="ignore"):
        want = _ref(xb, wt, b, 1, 1)
    finite = np.isfinite(want)
    assert (~finite).sum() == o * 9  # the 3x3 outputs that read (5, 9), every channel
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_array_equal(got[~finite], want[~finite].astype(np.float32))  # NaN, +-inf
    assert _rel_err(got[finite], want[finite]) < 1e-5
    np.testing.assert_array_equal(_conv(xb, pk, b, 1, 1, o), got)
    np.testing.assert_array_equal(_conv(x, pk, b, 1, 1, o), _conv(x, wt, b, 1, 1))


def test_a_read_only_weight_is_kept_by_reference_not_copied(winograd):
    """Packed from a read-only array (the runtime's constants), the transformed weight holds the
    array for the non-finite-input fallback instead of a copy after U: o*c*9 floats smaller,
    the same bits on both paths, and the array stays alive with it."""
    n, c, h, w, o = 1, 40, 16, 16, 37  # o off the panel width
    x, wt, b = _inputs((n, c, h, w, o, 1, 1))
    copied = _cpu.gemm_pack(wt.reshape(-1), "a", o, c * 9, 0, 2)
    ro = wt.copy()
    ro.flags.writeable = False
    held = _cpu.gemm_pack(ro.reshape(-1), "a", o, c * 9, 0, 2)
    assert copied.nbytes - held.nbytes == 4 * o * c * 9
    xb = x.copy()
    xb[0, 3, 7, 2] = np.nan  # the fallback, which reads the untransformed weight
    for inp in (x, xb):
        want = _conv(inp, copied, b, 1, 1, o)
        np.testing.assert_array_equal(_conv(inp, held, b, 1, 1, o), want)
    alive = weakref.ref(ro)
    del ro
    gc.collect()
    assert alive() is not None  # held by the packed weight
    np.testing.assert_array_equal(_conv(xb, held, b, 1, 1, o), _conv(xb, copied, b, 1, 1, o))
    del held
    gc.collect()
    assert alive() is None


def test_a_nan_weight_makes_its_channel_nan(winograd):
    n, c, h, w, o = 1, 6, 16, 16, 8
    x, wt, b = _inputs((n, c, h, w, o, 1, 1))
    wn = wt.copy()
    wn[3, 1, 0, 2] = np.nan
    got = _conv(x, wn, b, 1, 1)
    assert np.isnan(got[0, 3]).all()
    assert np.isfinite(np.delete(got[0], 3, axis=0)).all()


def test_rule(monkeypatch):
    geo = (1, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 64)
    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    assert _cpu.conv2d_winograd(*geo)
    stride2 = (1, 64, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 64)
    dilated = (1, 64, 56, 56, 3, 3, 1, 1, 2, 2, 2, 2, 64)
    five = (1, 64, 56, 56, 5, 5, 1, 1, 2, 2, 1, 1, 64)
    for env in ("winograd", "auto"):
        monkeypatch.setenv("GPUCORE_CONV", env)
        for g in (stride2, dilated, five):
            assert not _cpu.conv2d_winograd(*g)
    monkeypatch.setenv("GPUCORE_CONV", "winograd")
    assert _cpu.conv2d_winograd(1, 1, 3, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1)
    for env in ("direct", "im2col"):
        monkeypatch.setenv("GPUCORE_CONV", env)
        assert not _cpu.conv2d_winograd(*geo)


def test_bad_packed_weight():
    w = np.ones((4, 2, 3, 3), np.float32)
    pk = _cpu.gemm_pack(w.reshape(-1), "a", 4, 18, 0, 2)
    with pytest.raises(ValueError, match="gemm_pack: swap=2"):
        _cpu.gemm_pack(w.reshape(-1).astype(np.float64), "a", 4, 18, 0, 2)
    with pytest.raises(ValueError, match="gemm_pack: swap=2"):
        _cpu.gemm_pack(w.reshape(-1), "b", 18, 4, 0, 2)
    with pytest.raises(ValueError, match="gemm_pack: swap=2"):
        _cpu.gemm_pack(w.reshape(-1), "a", 4, 16, 0, 2)
    with pytest.raises(ValueError, match="'swap' must be 0, 1 or 2"):
        _cpu.gemm_pack(w.reshape(-1), "a", 4, 18, 0, 3)
    b = np.ones((18, 5), np.float32)
    c = np.empty((4, 5), np.float32)
    with pytest.raises(ValueError, match="gemm: 'a' is a Winograd convolution weight"):
        _cpu.gemm(pk, b, c, 1, 4, 5, 18, 0, 0, 1.0, 0.0, 0, 0, 0)
    # the same weight as a 1x9 kernel: not a Winograd geometry
    x = np.ones((1, 2, 5, 12), np.float32)
    out = np.empty((1, 4, 5, 4), np.float32)
    with pytest.raises(ValueError, match="conv2d_forward: 'w' is a Winograd weight"):
        _cpu.conv2d_forward(x, pk, None, out, 1, 2, 5, 12, 1, 9, 1, 1, 0, 0, 1, 1, 4)


def test_compiled_executor_packs_the_transformed_weight(monkeypatch):
    """packing.conv_weight gives a Winograd geometry its transformed weight (swap 2, what the C
    API packs again at load); GPUCORE_CONV=direct at compile time gives the direct layout."""
    from gpucore.runtime.ir import packing

    monkeypatch.delenv("GPUCORE_CONV", raising=False)
    w = np.random.default_rng(0).standard_normal((32, 32, 3, 3)).astype(np.float32)
    w.flags.writeable = False
    geo = (1, 32, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 32)
    pk = packing.conv_weight(w, 256, geo)
    assert isinstance(pk, _cpu.PackedMatrix) and pk.swap == 2
    monkeypatch.setenv("GPUCORE_CONV", "direct")
    w2 = w.copy()
    w2.flags.writeable = False
    assert packing.conv_weight(w2, 256, geo).swap == 1
