"""interpolate, functional and the Upsample modules: nearest, nearest-exact, linear, bilinear,
trilinear, bicubic (align_corners, scale_factor, recompute_scale_factor) and area against numpy
float64 references built pixel by pixel, errors, and PyTorch's modules where installed."""

import math

import numpy as np
import pytest
from helpers import assert_close, check_op, rand
from nn_cases import UPSAMPLE_CASES
from nn_checks import module_tests

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def np_nearest(x, out_size, exact=False):
    for d, o in zip(range(2, x.ndim), out_size):
        n = x.shape[d]
        src = np.minimum(np.floor((np.arange(o) + (0.5 if exact else 0.0)) * n / o), n - 1)
        x = np.take(x, src.astype(int), axis=d)
    return x


def np_linear(x, out_size, align_corners, scales=None):
    """Separable linear interpolation over every spatial dim, pixel by pixel (PyTorch's
    source-index formulas)."""
    scales = scales or [None] * len(out_size)
    for d, o, s in zip(range(2, x.ndim), out_size, scales):
        n = x.shape[d]
        y = np.zeros(x.shape[:d] + (o,) + x.shape[d + 1 :])
        for j in range(o):
            if align_corners:
                src = j * (n - 1) / (o - 1) if o > 1 else 0.0
            else:
                ratio = 1 / s if s else n / o
                src = max((j + 0.5) * ratio - 0.5, 0.0)
            i0 = min(int(math.floor(src)), n - 1)
            i1 = min(i0 + 1, n - 1)
            lam = src - i0
            a, b = np.take(x, i0, axis=d), np.take(x, i1, axis=d)
            y[(slice(None),) * d + (j,)] = a * (1 - lam) + b * lam
        x = y
    return x


def keys_kernel(d, a=-0.75):
    """Keys' cubic convolution kernel at distance d (written on |d|, not on the fraction)."""
    d = abs(d)
    if d <= 1:
        return (a + 2) * d**3 - (a + 3) * d**2 + 1
    if d < 2:
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return 0.0


def np_bicubic(x, out_size, align_corners, scales=None):
    """Each output pixel: the 4x4 input pixels around its source point (edge pixels repeated),
    weighted by the kernel of their distances (PyTorch's source index, not clamped at 0)."""
    scales = scales or [None, None]
    h, w = x.shape[2:]
    coords = []
    for n, o, s in zip((h, w), out_size, scales):
        if align_corners:
            src = np.arange(o) * ((n - 1) / (o - 1) if o > 1 else 0.0)
        else:
            src = (np.arange(o) + 0.5) * (1 / s if s else n / o) - 0.5
        coords.append(src)
    y = np.zeros(x.shape[:2] + tuple(out_size))
    for i, sy in enumerate(coords[0]):
        for j, sx in enumerate(coords[1]):
            fy, fx = math.floor(sy), math.floor(sx)
            for ty in range(fy - 1, fy + 3):
                for tx in range(fx - 1, fx + 3):
                    wgt = keys_kernel(sy - ty) * keys_kernel(sx - tx)
                    y[:, :, i, j] += wgt * x[:, :, min(max(ty, 0), h - 1), min(max(tx, 0), w - 1)]
    return y


@pytest.mark.parametrize("size", [(6, 8), (3, 2), (5, 7), (4, 5), (1, 1)])
def test_interpolate_nearest(size):
    check_op(lambda x: F.interpolate(x, size=size), lambda x: np_nearest(x, size), [(2, 3, 4, 5)])
    check_op(
        lambda x: F.interpolate(x, size=size, mode="nearest-exact"),
        lambda x: np_nearest(x, size, exact=True),
        [(2, 3, 4, 5)],
        grad=False,
    )


def test_interpolate_nearest_scale_factor_and_dims():
    check_op(
        lambda x: F.interpolate(x, scale_factor=2), lambda x: np_nearest(x, (6, 8)), [(1, 2, 3, 4)]
    )
    check_op(
        lambda x: F.interpolate(x, scale_factor=(2, 0.5)),
        lambda x: np_nearest(x, (6, 2)),
        [(1, 2, 3, 4)],
    )
    check_op(lambda x: F.interpolate(x, size=7), lambda x: np_nearest(x, (7,)), [(2, 3, 4)])
    check_op(
        lambda x: F.interpolate(x, scale_factor=2),
        lambda x: np_nearest(x, (4, 6, 2)),
        [(1, 2, 2, 3, 1)],
        grad=False,
    )


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(6, 8), (3, 2), (5, 7), (1, 3), (4, 5)])
def test_interpolate_bilinear(size, align_corners):
    check_op(
        lambda x: F.interpolate(x, size=size, mode="bilinear", align_corners=align_corners),
        lambda x: np_linear(x, size, align_corners),
        [(2, 3, 4, 5)],
    )


def test_interpolate_linear_scale_factor():
    check_op(
        lambda x: F.interpolate(x, scale_factor=2.5, mode="bilinear"),
        lambda x: np_linear(x, (7, 10), False, [2.5, 2.5]),
        [(1, 2, 3, 4)],
    )
    # recompute_scale_factor: the ratio of the sizes, not 1 / scale_factor
    check_op(
        lambda x: F.interpolate(x, scale_factor=2.5, mode="bilinear", recompute_scale_factor=True),
        lambda x: np_linear(x, (7, 10), False),
        [(1, 2, 3, 4)],
        grad=False,
    )
    check_op(
        lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True),
        lambda x: np_linear(x, (9,), True),
        [(2, 2, 4)],
    )
    check_op(
        lambda x: F.interpolate(x, size=(3, 4, 2), mode="trilinear"),
        lambda x: np_linear(x, (3, 4, 2), False),
        [(1, 1, 2, 3, 3)],
    )


# float32 inputs get float32 weights (PyTorch's): 16 taps of magnitude 2 that cancel leave a few
# float32 ulps of the inputs, not of the (small) result
BICUBIC_ATOL = 5e-6


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(6, 8), (3, 2), (5, 7), (1, 3), (9, 11)])
def test_interpolate_bicubic(size, align_corners):
    check_op(
        lambda x: F.interpolate(x, size=size, mode="bicubic", align_corners=align_corners),
        lambda x: np_bicubic(x, size, align_corners),
        [(2, 3, 4, 5)],
        atol=BICUBIC_ATOL,
    )


def test_interpolate_bicubic_scale_factor():
    # 1 / scale_factor as the ratio, unless recompute_scale_factor
    check_op(
        lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic"),
        lambda x: np_bicubic(x, (5, 6), False, [1.7, 1.7]),
        [(1, 2, 3, 4)],
        atol=BICUBIC_ATOL,
    )
    check_op(
        lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic", recompute_scale_factor=True),
        lambda x: np_bicubic(x, (5, 6), False),
        [(1, 2, 3, 4)],
        atol=BICUBIC_ATOL,
        grad=False,
    )


def test_interpolate_bicubic_matches_torch():
    """A ViT position-embedding resize as fine-tuning scripts write it, values and gradients."""
    torch = pytest.importorskip("torch")
    x = rand((1, 8, 7, 7), seed=3).astype(np.float32)
    g = rand((1, 8, 10, 10), seed=4).astype(np.float32)
    xt = torch.from_numpy(x).requires_grad_()
    yt = torch.nn.functional.interpolate(xt, size=(10, 10), mode="bicubic", align_corners=False)
    yt.backward(torch.from_numpy(g))
    xg = gpucore.tensor(x, requires_grad=True)
    yg = F.interpolate(xg, size=(10, 10), mode="bicubic", align_corners=False)
    yg.backward(gpucore.tensor(g))
    assert_close(yg, yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_close(xg.grad, xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_interpolate_area():
    x = rand((2, 3, 4, 6))
    ref = x.reshape(2, 3, 2, 2, 3, 2).mean((3, 5))
    assert_close(F.interpolate(f64(x), size=(2, 3), mode="area"), ref, rtol=1e-9)


def test_interpolate_errors():
    x = gpucore.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="3D input, but bilinear mode needs 4D"):
        F.interpolate(gpucore.zeros(1, 3, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="3D input, but bicubic mode needs 4D"):
        F.interpolate(gpucore.zeros(1, 3, 3), scale_factor=2, mode="bicubic")
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(x, scale_factor=2, mode="lanczos")
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True)
    with pytest.raises(gpucore.ShapeError, match="interpolate"):
        F.interpolate(gpucore.zeros(3, 3), size=4)
    with pytest.raises(ValueError, match="size"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="scale_factor must be positive"):
        F.interpolate(x, scale_factor=-1.0)
    with pytest.raises(gpucore.ShapeError, match="output size"):
        F.interpolate(x, scale_factor=0.2)


# ============================================================================= modules
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # Upsample
        (lambda: nn.UpsamplingBilinear2d(scale_factor=2)(z(1, 2, 3)), NotImplementedError, "4D"),
        (
            lambda: nn.Upsample(scale_factor=2, align_corners=True)(z(1, 1, 2, 2)),
            ValueError,
            "align_corners",
        ),
        (lambda: nn.Upsample()(z(1, 1, 2, 2)), ValueError, "size or scale_factor"),
        (lambda: nn.Upsample(size=(2, 3, 4))(z(1, 1, 2, 2)), ValueError, "size"),
    ]


MODULE_ERRORS = _module_errors()


(
    test_module_forward,
    test_module_input_gradients,
    test_module_errors,
    test_module_match_torch,
) = module_tests(UPSAMPLE_CASES, MODULE_ERRORS)
