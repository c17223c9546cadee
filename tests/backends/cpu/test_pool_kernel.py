"""cpu/maxpool.c's kernels called directly: the 2-wide window path (kw = sw = 2, every output row
in vectors plus an overlapping last vector, or scalar when ow < the vector width) and the general
path, against a float64 scan with PyTorch's rule, on widths around the vector edges, odd rows,
row padding and dilation, ties, NaN and infinities; the same bits with one thread and with the
pool; the values-only forward (idx None) against the indexed one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from cpu_isa_harness import ISAS, C, run_in_subprocess


def ref_max_pool2d(x, k, s, p, d, oh, ow):
    """float64 scan: first in-image position taken, then ``v > best or isnan(v)``."""
    n, h, w = x.shape
    vals = np.full((n, oh, ow), -np.inf)
    idx = np.full((n, oh, ow), -1, np.int64)
    for i, j, a, b in itertools.product(range(oh), range(ow), range(k[0]), range(k[1])):
        r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
        if not (0 <= r < h and 0 <= q < w):
            continue
        v = x[:, r, q].astype(np.float64)
        take = (v > vals[:, i, j]) | np.isnan(v) | (idx[:, i, j] < 0)
        vals[:, i, j] = np.where(take, v, vals[:, i, j])
        idx[:, i, j] = np.where(take, r * w + q, idx[:, i, j])
    return vals, idx


def out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def run(x, k, s, p, d):
    planes, h, w = x.shape
    oh, ow = out_size(h, k[0], s[0], p[0], d[0]), out_size(w, k[1], s[1], p[1], d[1])
    vals = np.full((planes, oh, ow), 7, x.dtype)
    idx = np.full((planes, oh, ow), 7, np.int64)
    C.max_pool2d(x, vals, idx, planes, h, w, *k, *s, *p, *d, oh, ow)
    return vals, idx, (oh, ow)


def data(shape, dtype, seed, special=False):
    r = np.random.default_rng(seed)
    if not special:
        return r.standard_normal(shape).astype(dtype)
    x = r.integers(-2, 3, size=shape).astype(dtype)  # many ties
    x[r.random(shape) < 0.1] = np.nan
    x[r.random(shape) < 0.1] = -np.inf
    x[r.random(shape) < 0.05] = np.inf
    return x


# (kh, sh, ph, dh) of the rows; the columns are the 2-wide window (kw = sw = 2)
ROWS = [(2, 2, 0, 1), (1, 1, 0, 1), (3, 2, 1, 1), (3, 1, 1, 1), (2, 1, 0, 2), (3, 2, 1, 2)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", ROWS)
def test_two_wide_path_around_vector_edges(dtype, rows):
    kh, sh, ph, dh = rows
    for w in range(2, 21):
        h = 5 + w % 3
        for special in (False, True):
            x = data((3, h, w), dtype, seed=w, special=special)
            k, s, p, d = (kh, 2), (sh, 2), (ph, 0), (dh, 1)
            vals, idx, (oh, ow) = run(x, k, s, p, d)
            rv, ri = ref_max_pool2d(x, k, s, p, d, oh, ow)
            np.testing.assert_array_equal(idx, ri, err_msg=f"w={w} rows={rows}")
            np.testing.assert_array_equal(vals, rv.astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_general_path_shapes(dtype):
    """Geometries the 2-wide path does not take: column padding, stride 1, dilated or 3-wide
    windows."""
    geoms = [
        ((2, 2), (2, 2), (0, 1), (1, 1)),
        ((3, 3), (1, 1), (1, 1), (1, 1)),
        ((2, 2), (2, 2), (0, 0), (1, 2)),
        ((3, 3), (2, 2), (1, 1), (1, 1)),
        ((2, 3), (1, 2), (1, 1), (2, 1)),
    ]
    for (k, s, p, d), w in itertools.product(geoms, (5, 8, 13)):
        x = data((2, 9, w), dtype, seed=w, special=True)
        vals, idx, (oh, ow) = run(x, k, s, p, d)
        rv, ri = ref_max_pool2d(x, k, s, p, d, oh, ow)
        np.testing.assert_array_equal(idx, ri)
        np.testing.assert_array_equal(vals, rv.astype(dtype))


def test_threads_bitwise():
    """A CNN's pools, large enough for the pool: the same values and indices on one thread."""
    x = data((64 * 16, 28, 28), np.float32, seed=1)
    k = s = (2, 2)
    many = run(x, k, s, (0, 0), (1, 1))
    threads = C.info()["threads"]
    try:
        C.set_num_threads(1)
        one = run(x, k, s, (0, 0), (1, 1))
    finally:
        C.set_num_threads(threads)
    np.testing.assert_array_equal(many[0], one[0])
    np.testing.assert_array_equal(many[1], one[1])
    rv, ri = ref_max_pool2d(x[:8], k, s, (0, 0), (1, 1), 14, 14)
    np.testing.assert_array_equal(many[1][:8], ri)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_only_same_bits(dtype):
    """idx None (the compiled executor's forward, which drops the indices): the values path
    gives the bits of the indexed paths (NaN payloads included) and float64's scan, on the
    2-wide and general geometries, ResNet's stem pool (3x3 / 2, padding 1, 112 wide) and
    strides 1-3, with one thread and with the pool."""
    geoms = [((k, 2), (sh, 2), (ph, 0), (dh, 1)) for k, sh, ph, dh in ROWS] + [
        ((2, 2), (2, 2), (0, 1), (1, 1)),
        ((3, 3), (1, 1), (1, 1), (1, 1)),
        ((2, 2), (2, 2), (0, 0), (1, 2)),
        ((3, 3), (2, 2), (1, 1), (1, 1)),
        ((2, 3), (1, 2), (1, 1), (2, 1)),
        ((3, 3), (3, 3), (1, 1), (1, 1)),
    ]
    bits = np.uint32 if dtype == np.float32 else np.uint64
    for (k, s, p, d), w in itertools.product(geoms, (5, 8, 13, 30)):
        for special in (False, True):
            x = data((3, 9, w), dtype, seed=w, special=special)
            planes, h, _ = x.shape
            vals, _, (oh, ow) = run(x, k, s, p, d)
            only = np.full_like(vals, 7)
            C.max_pool2d(x, only, None, planes, h, w, *k, *s, *p, *d, oh, ow)
            np.testing.assert_array_equal(only.view(bits), vals.view(bits), err_msg=str(k + s))
            rv, _ = ref_max_pool2d(x, k, s, p, d, oh, ow)
            np.testing.assert_array_equal(only, rv.astype(dtype))
    x = data((64, 112, 112), dtype, seed=3)
    vals, _, (oh, ow) = run(x, (3, 3), (2, 2), (1, 1), (1, 1))
    only = np.empty_like(vals)
    geometry = (64, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, oh, ow)
    C.max_pool2d(x, only, None, *geometry)
    threads = C.info()["threads"]
    try:
        C.set_num_threads(1)
        one = np.empty_like(vals)
        C.max_pool2d(x, one, None, *geometry)
    finally:
        C.set_num_threads(threads)
    assert only.tobytes() == vals.tobytes() == one.tobytes()


def ref_backward(g, idx, h, w):
    planes = g.shape[0]
    out = np.zeros((planes, h * w))
    np.add.at(out, (np.repeat(np.arange(planes), idx[0].size), idx.reshape(-1)), g.reshape(-1))
    return out.reshape(planes, h, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_tiled_and_scattered(dtype):
    """Windows tiling the plane (kh = sh, 2-wide) are written in one pass; leftover rows and
    columns get zeros; indices that leave their window (but not the plane) are scattered as
    before; -0 gradients sum to +0 as the scatter gives."""
    for kh, w, h in [(2, 8, 8), (2, 9, 7), (3, 13, 10), (1, 6, 3), (2, 3, 2)]:
        x = data((3, h, w), dtype, seed=w + h)
        k, s = (kh, 2), (kh, 2)
        vals, idx, (oh, ow) = run(x, k, s, (0, 0), (1, 1))
        g = data((3, oh, ow), dtype, seed=1)
        g[0, 0, 0] = -0.0
        gx = np.full((3, h, w), 5, dtype)
        C.max_pool2d_backward(g, idx, gx, 3, h, w, *k, *s, 0, 0, 1, 1, oh, ow)
        want = ref_backward(g, idx, h, w).astype(dtype)
        np.testing.assert_array_equal(gx, want)
        assert not np.signbit(gx).any() or np.signbit(want).any()
        moved = idx.copy()
        moved[1, 0, 0] = h * w - 1  # inside the plane, outside its window: scattered
        C.max_pool2d_backward(g, moved, gx, 3, h, w, *k, *s, 0, 0, 1, 1, oh, ow)
        np.testing.assert_array_equal(gx, ref_backward(g, moved, h, w).astype(dtype))
        moved[2, 0, 0] = h * w  # outside the plane
        with pytest.raises(IndexError):
            C.max_pool2d_backward(g, moved, gx, 3, h, w, *k, *s, 0, 0, 1, 1, oh, ow)


def _payload_nans(x, seed):
    """x with its NaNs given distinct payloads and some zeros made -0 (the scan keeps the
    window's last NaN and its first zero: the bits tell them apart)."""
    r = np.random.default_rng(seed)
    ubits = np.uint32 if x.dtype == np.float32 else np.uint64
    b = x.view(ubits)
    nan = np.isnan(x)
    b[nan] |= r.integers(1, 1 << 20, size=int(nan.sum())).astype(ubits)
    zero = (x == 0) & (r.random(x.shape) < 0.5)
    x[zero] = -0.0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_only_stride_two_rows_in_registers(dtype):
    """The values path at column stride 2 (a vector's maximum kept in a register over the
    window, NaN windows redone by the exact rule, the row ends scalar): the bits of the indexed
    path, NaN payloads and signed zeros included, for windows 1-5 wide with every column
    padding, widths around the vector edges, row stride 1 and 2."""
    bits = np.uint32 if dtype == np.float32 else np.uint64
    for kw in range(1, 6):
        for pw, w, sh in itertools.product(range(kw // 2 + 1), range(kw, 40), (1, 2)):
            for special in (False, True):
                x = data((2, 7, w), dtype, seed=w * 7 + kw, special=special)
                if special:
                    x = _payload_nans(x, w)
                k, s, p, d = (3, kw), (sh, 2), (1, pw), (1, 1)
                vals, _, (oh, ow) = run(x, k, s, p, d)
                only = np.full_like(vals, 7)
                C.max_pool2d(x, only, None, 2, 7, w, *k, *s, *p, *d, oh, ow)
                msg = f"kw={kw} pw={pw} w={w} sh={sh}"
                np.testing.assert_array_equal(only.view(bits), vals.view(bits), err_msg=msg)
    x = data((1, 5, 16), dtype, seed=2)
    x[0, 2, 5] = np.inf
    x[0, 3, 6] = -np.inf  # inf + -inf in a window's side sum: no NaN there, the same values
    vals, _, (oh, ow) = run(x, (3, 3), (2, 2), (1, 1), (1, 1))
    only = np.empty_like(vals)
    C.max_pool2d(x, only, None, 1, 5, 16, 3, 3, 2, 2, 1, 1, 1, 1, oh, ow)
    np.testing.assert_array_equal(only.view(bits), vals.view(bits))


_BWD_ISA_SCRIPT = """
import numpy as np
out = {}
r = np.random.default_rng(5)
for kh in (1, 2, 3):
    for w in range(2, 41):
        h = kh * 3 + w % 2
        oh, ow = (h - kh) // kh + 1, w // 2
        x = r.standard_normal((2, h, w)).astype(np.float32)
        x[1] = r.integers(-2, 3, size=(h, w))  # ties
        x[1][r.random((h, w)) < 0.1] = np.nan
        x[1][r.random((h, w)) < 0.1] = -np.inf
        idx = np.empty((2, oh, ow), np.int64)
        vals = np.empty((2, oh, ow), np.float32)
        C.max_pool2d(x, vals, idx, 2, h, w, kh, 2, kh, 2, 0, 0, 1, 1, oh, ow)
        out[f"{kh}.{w}.x"], out[f"{kh}.{w}.vals"], out[f"{kh}.{w}.idx"] = x, vals, idx.copy()
        g = r.standard_normal((2, oh, ow)).astype(np.float32)
        g.reshape(-1)[::5] = -0.0
        g.reshape(-1)[1::7] = np.nan
        g.reshape(-1)[2::11] = -np.inf
        for tag in ("own", "moved"):
            if tag == "moved":  # an index inside the plane but outside its window
                idx[1, oh - 1, ow - 1] = 0
            gx = np.full((2, h, w), 5, np.float32)
            C.max_pool2d_backward(g, idx, gx, 2, h, w, kh, 2, kh, 2, 0, 0, 1, 1, oh, ow)
            out[f"{kh}.{w}.{tag}.g"], out[f"{kh}.{w}.{tag}.i"] = g, idx.copy()
            out[f"{kh}.{w}.{tag}.gx"] = gx
np.savez(OUT, **out)
"""


@pytest.mark.parametrize("isa", ISAS)
def test_two_wide_forward_and_tiled_backward_every_isa(isa, tmp_path):
    """The 2-wide forward (isa.h's mp_fwd_w2_f32 on AVX-512, 16 outputs a step; else 16-byte
    vectors) against the float64 scan, ties, NaN and -inf included; the tiled backward's row
    kernels (isa.h's mp_bwd_w2_f32: AVX-512 masked tails, AVX2's overlapping last vector; sse2
    / scalar the portable masks) for widths 2-40 (odd ones leave a zero column), window rows
    1-3, an index moved out of its window (the scatter then), -0, NaN and -inf gradients: the
    scatter's bits (-0 + 0 = +0), in a subprocess per ISA."""
    path = tmp_path / "r.npz"
    p = run_in_subprocess(f"OUT = {str(path)!r}\n" + _BWD_ISA_SCRIPT, GPUCORE_CPU_ISA=isa)
    assert p.returncode == 0, p.stderr
    got = np.load(path)
    for key in got.files:  # the forward (AVX-512: 16 outputs a step, masked) against the scan
        if key.endswith(".x"):
            kh = int(key.split(".")[0])
            x = got[key]
            oh, ow = got[key[:-2] + ".idx"].shape[1:]
            rv, ri = ref_max_pool2d(x, (kh, 2), (kh, 2), (0, 0), (1, 1), oh, ow)
            np.testing.assert_array_equal(got[key[:-2] + ".idx"], ri, err_msg=f"{isa} {key}")
            np.testing.assert_array_equal(got[key[:-2] + ".vals"], rv.astype(np.float32))
    for key in got.files:
        if not key.endswith(".gx"):
            continue
        stem = key[:-3]
        g, idx = got[stem + ".g"], got[stem + ".i"]
        h, w = got[key].shape[1:]
        want = np.zeros((2, h * w), np.float32)
        for pl in range(2):
            for gi, k in zip(g[pl].reshape(-1), idx[pl].reshape(-1)):
                want[pl, k] += gi
        want = want.reshape(2, h, w)
        assert got[key].tobytes() == want.tobytes(), f"{isa} {stem}"


def test_backward_threads_bitwise():
    """The train.py CNN's pools' backward: the same bits on one thread and on the pool."""
    for c, hw in ((16, 28), (32, 14)):
        x = data((64 * c, hw, hw), np.float32, seed=c)
        vals, idx, (oh, ow) = run(x, (2, 2), (2, 2), (0, 0), (1, 1))
        g = data(vals.shape, np.float32, seed=3)
        geo = (64 * c, hw, hw, 2, 2, 2, 2, 0, 0, 1, 1, oh, ow)
        many = np.empty_like(x)
        C.max_pool2d_backward(g, idx, many, *geo)
        threads = C.info()["threads"]
        try:
            C.set_num_threads(1)
            one = np.empty_like(x)
            C.max_pool2d_backward(g, idx, one, *geo)
        finally:
            C.set_num_threads(threads)
        assert many.tobytes() == one.tobytes()
        np.testing.assert_array_equal(many[:4], ref_backward(g[:4], idx[:4], hw, hw))


# The values path at column stride 2 a plane per call (maxpool.c's mp_plane_s2: each input row's
# maxima at stride 2 once, then vertical maxima): per case the input, the values-only result
# and the indexed path's values (unchanged, the old bits), under the forced ISA.
_PLANE_S2_SCRIPT = """
import itertools
import numpy as np
out = {}
r = np.random.default_rng(17)

def osz(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1

def case(name, x, k, s, p, d):
    planes, h, w = x.shape
    oh, ow = osz(h, k[0], s[0], p[0], d[0]), osz(w, k[1], s[1], p[1], d[1])
    only = np.full((planes, oh, ow), 7, x.dtype)
    vals = np.full_like(only, 7)
    idx = np.empty(only.shape, np.int64)
    geo = (planes, h, w, *k, *s, *p, *d, oh, ow)
    C.max_pool2d(x, only, None, *geo)
    C.max_pool2d(x, vals, idx, *geo)
    out[name + ".x"], out[name + ".only"], out[name + ".vals"] = x, only, vals
    out[name + ".geo"] = np.array(k + s + p + d)

def planes(shape, dtype):
    x = r.integers(-2, 3, size=shape).astype(dtype)  # ties, zeros of both signs
    x[r.random(shape) < 0.3] = -0.0
    x[1] = r.standard_normal(shape[1:])
    x[2][r.random(shape[1:]) < 0.05] = np.nan  # a NaN plane among clean ones
    b = x[2].view(np.uint32 if dtype == np.float32 else np.uint64)
    b[np.isnan(x[2])] |= 12345  # payloads: the window's last NaN wins
    x[3][r.random(shape[1:]) < 0.1] = np.inf  # inf and -inf, no NaN
    x[3][r.random(shape[1:]) < 0.1] = -np.inf
    x[4] = -np.inf
    return x

for dt in (np.float32, np.float64):
    t = np.dtype(dt).name
    for kw in range(1, 6):
        for pw, w in itertools.product(range(kw // 2 + 1), (kw, 9, 16, 17, 31, 32, 33, 47, 70)):
            if w < kw:
                continue
            for kh, sh, ph, dh in ((3, 2, 1, 1), (1, 1, 0, 1), (2, 2, 0, 1), (3, 1, 1, 1),
                                   (3, 3, 1, 2), (4, 2, 2, 1)):
                x = planes((5, 11, w), dt)
                case(f"{t}.{kw}.{pw}.{w}.{kh}{sh}{ph}{dh}", x, (kh, kw), (sh, 2), (ph, pw), (dh, 1))
    # the stem's geometry; a plane too tall for one band of rows; one too wide for the stack
    for name, shape in (("stem", (5, 112, 112)), ("bands", (5, 300, 260)), ("wide", (5, 4, 4200))):
        case(f"{t}.{name}", planes(shape, dt), (3, 3), (2, 2), (1, 1), (1, 1))
np.savez(OUT, **out)
"""


@pytest.mark.parametrize("isa", ISAS)
def test_values_only_stride_two_plane_every_isa(isa, tmp_path):
    """The stride-2 values path a plane per call (separable: input rows' maxima once, then the
    window rows'), every ISA in a subprocess: the indexed path's bits (which it must keep: NaN
    payloads, -0 before +0, padding as -inf) for windows 1-5 wide with every padding, window
    rows 1-4 with row strides 1-3, padding and dilation, widths around 16 and 32, a plane with
    NaN among clean ones, inf with -inf, all -inf; ResNet's stem geometry, one plane needing
    several bands of rows and one too wide for the stack buffers; float32's cases 9 and 33 wide
    also against float64's scan."""
    path = tmp_path / "r.npz"
    p = run_in_subprocess(f"OUT = {str(path)!r}\n" + _PLANE_S2_SCRIPT, GPUCORE_CPU_ISA=isa)
    assert p.returncode == 0, p.stderr
    got = np.load(path)
    for key in got.files:
        if not key.endswith(".x"):
            continue
        stem = key[:-2]
        x, only, vals = got[key], got[stem + ".only"], got[stem + ".vals"]
        bits = np.uint32 if x.dtype == np.float32 else np.uint64
        assert only.view(bits).tobytes() == vals.view(bits).tobytes(), f"{isa} {stem}"
        if x.dtype == np.float32 and x.shape[1:] in ((11, 9), (11, 33)):  # the scan is slow
            g = got[stem + ".geo"]
            k, s, pad, d = (g[0], g[1]), (g[2], g[3]), (g[4], g[5]), (g[6], g[7])
            rv, _ = ref_max_pool2d(x, k, s, pad, d, *only.shape[1:])
            np.testing.assert_array_equal(only, rv.astype(x.dtype), err_msg=f"{isa} {stem}")
