"""interpolate, functional and the Upsample modules: nearest, nearest-exact, linear, bilinear,
trilinear (align_corners, scale_factor, recompute_scale_factor) and area against numpy float64
references built pixel by pixel, errors, and PyTorch's modules where installed."""

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
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
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
