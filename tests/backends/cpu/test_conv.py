"""The fused conv2d kernels of the C extension (cpu/conv.c): forward with bias, and the three
gradients in one pass, against float64 numpy built from im2col; results independent of the
thread count; bad buffers rejected before any memory is touched."""

from __future__ import annotations

import numpy as np
import pytest
from conv_cases import conv_args, conv_geom
from helpers import np_col2im, np_im2col, rand

import gpucore
from gpucore import _cpu

# (n, c, h, w, o, kernel, stride, padding, dilation): edges of the image loop (one image, a
# chunk and a half, more images than GC_CONV_CHUNK * GC_CONV_MAX_CHUNKS), 1x1 kernels, padding
# wider than the kernel's reach, strides that skip pixels, dilation.
GEOMS = {
    "one_image": (1, 3, 7, 6, 5, (3, 3), (1, 1), (1, 1), (1, 1)),
    "chunk_and_half": (6, 4, 9, 8, 7, (3, 2), (2, 1), (0, 1), (1, 1)),
    "pointwise": (5, 16, 4, 4, 8, (1, 1), (1, 1), (0, 0), (1, 1)),
    "dilated_wide_pad": (3, 2, 6, 7, 3, (3, 3), (1, 2), (3, 2), (2, 1)),
    "skip_pixels": (4, 3, 11, 10, 4, (2, 2), (3, 3), (0, 0), (1, 1)),
    "many_images": (150, 2, 5, 5, 3, (3, 3), (1, 1), (1, 1), (1, 1)),
    "lenet_like": (16, 8, 14, 14, 16, (3, 3), (1, 1), (1, 1), (1, 1)),
}


def _geom(case):
    return conv_geom(GEOMS[case])


def _args(case):
    return conv_args(GEOMS[case])


def _reference(case, x, wt, b, g):
    """(out, gx, gw, gb) in float64 from the im2col formulation."""
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    cols = np_im2col(x, k, s, p, d)  # [n, CK, L]
    w2 = wt.reshape(o, -1)
    out = np.einsum("ok,nkl->nol", w2, cols).reshape(n, o, oh, ow) + b[None, :, None, None]
    g3 = g.reshape(n, o, -1)
    gw = np.einsum("nol,nkl->ok", g3, cols).reshape(wt.shape)
    gb = g3.sum((0, 2))
    gx = np_col2im(np.einsum("ok,nol->nkl", w2, g3), x.shape, k, s, p, d)
    return out, gx, gw, gb


def _run(case, dtype, x, wt, b, g, parts=(True, True, True)):
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    xs, ws, bs, gs = (a.astype(dtype) for a in (x, wt, b, g))
    out = np.empty((n, o, oh, ow), dtype)
    _cpu.conv2d_forward(xs, ws, bs, out, *_args(case))
    gx = np.full(x.shape, np.nan, dtype) if parts[0] else None
    gw = np.full(wt.shape, np.nan, dtype) if parts[1] else None
    gb = np.full(b.shape, np.nan, dtype) if parts[2] else None
    _cpu.conv2d_backward(xs, ws, gs, gx, gw, gb, *_args(case))
    return out, gx, gw, gb


def _inputs(case):
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    return (
        rand((n, c, h, w), seed=1),
        rand((o, c, *k), seed=2),
        rand((o,), seed=3),
        rand((n, o, oh, ow), seed=4),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", GEOMS)
def test_forward_and_gradients_match_im2col_reference(case, dtype):
    x, wt, b, g = _inputs(case)
    got = _run(case, dtype, x, wt, b, g)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for name, a, r in zip(("out", "gx", "gw", "gb"), got, _reference(case, x, wt, b, g)):
        scale = max(1.0, float(np.abs(r).max()))
        err = float(np.abs(a.astype(np.float64) - r).max()) / scale
        assert err <= tol, f"{case} {name}: relative error {err:.3g}"


@pytest.mark.parametrize(
    "parts", [(True, False, False), (False, True, False), (False, False, True), (False, True, True)]
)
def test_only_requested_gradients_are_written(parts):
    case = "chunk_and_half"
    x, wt, b, g = _inputs(case)
    got = _run(case, np.float64, x, wt, b, g, parts)
    ref = _reference(case, x, wt, b, g)
    for want, a, r in zip(parts, got[1:], ref[1:]):
        if want:
            np.testing.assert_allclose(a, r, rtol=1e-11, atol=1e-11)
        else:
            assert a is None


def test_no_bias_forward():
    case = "skip_pixels"
    x, wt, b, g = _inputs(case)
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    out = np.empty((n, o, oh, ow))
    _cpu.conv2d_forward(x, wt, None, out, *_args(case))
    ref = _reference(case, x, wt, np.zeros_like(b), g)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["many_images", "lenet_like"])
def test_results_are_bitwise_independent_of_thread_count(case):
    x, wt, b, g = _inputs(case)
    before = gpucore.get_num_threads()
    try:
        results = []
        for nt in (1, 2, 3):
            gpucore.set_num_threads(nt)
            results.append(_run(case, np.float32, x, wt, b, g))
    finally:
        gpucore.set_num_threads(before)
    for other in results[1:]:
        for a, r in zip(other, results[0]):
            assert np.array_equal(a, r)


def test_bad_buffers_raise_before_touching_memory():
    case = "one_image"
    x, wt, b, g = (a.astype(np.float32) for a in _inputs(case))
    n, c, h, w, o, k, s, p, d, oh, ow = _geom(case)
    out = np.empty((n, o, oh, ow), np.float32)
    with pytest.raises(ValueError, match="conv2d_forward.*out"):
        _cpu.conv2d_forward(x, wt, b, out[:, :, :-1], *_args(case))
    with pytest.raises(ValueError, match="conv2d_forward.*w"):
        _cpu.conv2d_forward(x, wt[:-1], b, out, *_args(case))
    with pytest.raises(TypeError, match="conv2d_forward"):
        _cpu.conv2d_forward(x, wt.astype(np.float64), b, out, *_args(case))
    with pytest.raises(ValueError, match="conv2d_backward.*overlap"):
        _cpu.conv2d_backward(x, wt, g, x, None, None, *_args(case))
    with pytest.raises(ValueError, match="conv2d_backward.*gb"):
        _cpu.conv2d_backward(x, wt, g, None, None, np.empty(o - 1, np.float32), *_args(case))
