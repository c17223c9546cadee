"""pixel_shuffle and pixel_unshuffle, functional and modules: the index formula in numpy, round
trips, extra batch dims, integer inputs, gradients, errors and PyTorch."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, rand, to_np
from nn_checks import check_function_vs_torch, check_module_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def np_pixel_shuffle(x, r):
    """out[..., c, h*r + i, w*r + j] = x[..., c*r*r + i*r + j, h, w]."""
    *lead, cr, h, w = x.shape
    out = np.zeros((*lead, cr // (r * r), h * r, w * r), x.dtype)
    for c in range(cr // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., c, i::r, j::r] = x[..., c * r * r + i * r + j, :, :]
    return out


def test_pixel_shuffle_and_unshuffle_against_the_index_formula():
    x = rand((2, 3, 8, 3, 4))
    out = F.pixel_shuffle(gpucore.tensor(x), 2)
    assert_close(out, np_pixel_shuffle(x, 2), rtol=0, atol=0)
    back = F.pixel_unshuffle(out, 2)
    assert_close(back, x, rtol=0, atol=0)
    ints = np.arange(2 * 9 * 2 * 2).reshape(2, 9, 2, 2)
    np.testing.assert_array_equal(
        to_np(F.pixel_shuffle(gpucore.tensor(ints), 3)), np_pixel_shuffle(ints, 3)
    )
    check_grad(lambda x: F.pixel_shuffle(x, 2), rand((1, 4, 2, 3)))
    check_grad(lambda x: F.pixel_unshuffle(x, 2), rand((3, 4, 2)))


@pytest.mark.parametrize(
    ("name", "r", "shape"), [("pixel_shuffle", 2, (2, 8, 3, 4)), ("pixel_unshuffle", 3, (2, 6, 9))]
)
def test_pixel_shuffle_matches_torch(name, r, shape):
    torch = pytest.importorskip("torch")
    check_function_vs_torch(
        lambda x: getattr(F, name)(x, r),
        lambda x: getattr(torch.nn.functional, name)(x, r),
        [rand(shape)],
    )
    module = "PixelShuffle" if name == "pixel_shuffle" else "PixelUnshuffle"
    check_module_vs_torch(getattr(nn, module)(r), getattr(torch.nn, module)(r), [rand(shape)])


def test_pixel_shuffle_modules_and_errors():
    assert repr(nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert repr(nn.PixelUnshuffle(3)) == "PixelUnshuffle(downscale_factor=3)"
    with pytest.raises(gpucore.ShapeError, match=r"pixel_shuffle\(\)"):
        F.pixel_shuffle(gpucore.zeros(1, 3, 2, 2), 2)
    with pytest.raises(gpucore.ShapeError, match=r"pixel_unshuffle\(\)"):
        F.pixel_unshuffle(gpucore.zeros(1, 3, 5, 4), 2)
    with pytest.raises(ValueError, match="upscale_factor"):
        F.pixel_shuffle(gpucore.zeros(1, 4, 2, 2), 0)
