"""The pixels x channels tiles (cpu/conv_pw.c's pointwise_t mode, cpu/conv_direct_lanes.c's
direct_t path) read and write nothing past their arrays: every operand (image, weight, bias,
residual, output, pre-packed weight aside) placed so that it ends at, or starts after, a page
mapped PROT_NONE, on geometries whose last pixel tile, output row or channel block is partial.
An access past an end faults (the test process dies), so passing is the check; the results are
compared with the im2col GEMM path's bits as well."""

from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np
import pytest

import gpucore
from gpucore import _cpu

pytestmark = pytest.mark.skipif(os.name != "posix", reason="mprotect guard pages (POSIX)")

PAGE = mmap.PAGESIZE


class _Guarded:
    """Arrays in anonymous mappings with a PROT_NONE page before and after them."""

    def __init__(self):
        self._maps = []
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def __call__(self, a: np.ndarray, at_end: bool) -> np.ndarray:
        a = np.ascontiguousarray(a)
        pages = (a.nbytes + PAGE - 1) // PAGE + 2
        m = mmap.mmap(-1, pages * PAGE)
        self._maps.append(m)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        for at in (base, base + (pages - 1) * PAGE):
            assert self._libc.mprotect(at, PAGE, 0) == 0, ctypes.get_errno()
        off = (pages - 1) * PAGE - a.nbytes if at_end else PAGE
        g = np.frombuffer(m, dtype=a.dtype, count=a.size, offset=off).reshape(a.shape)
        g[...] = a
        return g


# (mode, n, c, h, w, k, stride, pad, dilation, o): pixels 1, 25, 50 (7 x 7 + 1), 253 (36 x 7 + 1)
# in tiles of 7; output channels 25, 33, 65, 97 (partial 64-wide blocks); output rows 1, 6, 8, 20
CASES = [
    ("pointwise_t", 1, 5, 1, 1, 1, (1, 1), 0, 1, 25),
    ("pointwise_t", 2, 33, 5, 5, 1, (1, 1), 0, 1, 97),
    ("pointwise_t", 1, 290, 5, 10, 1, (1, 1), 0, 1, 65),
    ("pointwise_t", 2, 7, 21, 23, 1, (2, 2), 0, 1, 33),
    ("pointwise_t", 1, 17, 11, 23, 1, (1, 1), 0, 1, 7),
    ("direct_t", 1, 3, 3, 8, 3, (1, 1), 1, 1, 25),
    ("direct_t", 2, 40, 5, 20, 3, (1, 2), 0, 1, 65),
    ("direct_t", 1, 40, 7, 7, 3, (2, 2), 1, 2, 33),
    ("direct_t", 1, 1, 4, 12, 3, (1, 1), 1, 1, 97),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "_".join(map(str, c[:2] + c[2:5] + c[-1:])))
def test_partial_tiles_stay_inside_their_arrays(case, monkeypatch):
    mode, n, c, h, w, k, s, p, d, o = case
    oh = (h + 2 * p - d * (k - 1) - 1) // s[0] + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s[1] + 1
    geo = (n, c, h, w, k, k, *s, p, p, d, d, o)
    monkeypatch.setenv("GPUCORE_CONV", mode)
    if mode == "pointwise_t":
        taken = _cpu.conv2d_pointwise(*geo) == 2
    else:
        taken = _cpu.conv2d_direct_lanes(*geo)
    if not taken:
        pytest.skip("no pixels x channels tile on this ISA")
    r = np.random.default_rng(sum(geo))
    x = r.standard_normal((n, c, h, w)).astype(np.float32)
    wt = r.standard_normal((o, c, k, k)).astype(np.float32)
    b = r.standard_normal(o).astype(np.float32)
    res = r.standard_normal((n, o, oh, ow)).astype(np.float32)
    guard = _Guarded()
    before = gpucore.get_num_threads()
    try:
        for at_end in (True, False):
            gx, gw, gb, gres = (guard(a, at_end) for a in (x, wt, b, res))
            for nt in (1, 3):
                gpucore.set_num_threads(nt)
                out = guard(np.zeros((n, o, oh, ow), np.float32), at_end)
                _cpu.conv2d_forward(gx, gw, gb, out, *geo, gres, _cpu.UNARY_RELU)
                monkeypatch.setenv("GPUCORE_CONV", "im2col")
                want = np.zeros_like(out)
                _cpu.conv2d_forward(x, wt, b, want, *geo, res, _cpu.UNARY_RELU)
                monkeypatch.setenv("GPUCORE_CONV", mode)
                if o > 24:  # the GEMM's blocked kernel: the same bits
                    assert np.array_equal(out.view(np.uint32), want.view(np.uint32))
                else:
                    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    finally:
        gpucore.set_num_threads(before)
