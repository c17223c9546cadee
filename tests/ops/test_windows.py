"""The window functions (gpucore/ops/windows.py) against PyTorch's: every length from 0 to 12,
periodic and symmetric, float32 / float64, their parameters, device=, errors."""

import numpy as np
import pytest

import gpucore as gc

NAMES = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_as_torch(name, dt):
    torch = pytest.importorskip("torch")
    tol = 1e-6 if dt == "float32" else 1e-12
    for n in range(13):
        for periodic in (True, False):
            g = getattr(gc, name)(n, periodic, dtype=getattr(gc, dt))
            t = getattr(torch, name)(n, periodic, dtype=getattr(torch, dt))
            assert g.dtype is getattr(gc, dt) and tuple(g.shape) == tuple(t.shape)
            np.testing.assert_allclose(g.numpy(), t.numpy(), atol=tol, rtol=tol)


def test_parameters_and_default_dtype():
    torch = pytest.importorskip("torch")
    g = gc.hamming_window(9, False, 0.5, 0.3)
    np.testing.assert_allclose(g.numpy(), torch.hamming_window(9, False, 0.5, 0.3).numpy(), 1e-6)
    g = gc.kaiser_window(8, True, 3.5)
    np.testing.assert_allclose(g.numpy(), torch.kaiser_window(8, True, 3.5).numpy(), 1e-6)
    assert gc.hann_window(4).dtype is gc.float32
    assert gc.hann_window(4, requires_grad=True).requires_grad
    # numpy's symmetric windows
    np.testing.assert_allclose(gc.hann_window(7, False, dtype=gc.float64).numpy(), np.hanning(7))
    np.testing.assert_allclose(gc.kaiser_window(7, False, 5.0, dtype=gc.float64).numpy(),
                               np.kaiser(7, 5.0))  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_errors(name):
    fn = getattr(gc, name)
    with pytest.raises(ValueError, match=name):
        fn(-1)
    with pytest.raises(gc.DTypeError, match=name):
        fn(4, dtype=gc.int64)
    with pytest.raises(TypeError, match=name):
        fn(4.0)


def test_on_vulkan(vulkan):
    w = gc.hann_window(10, device="vulkan")
    assert w.device.type == "vulkan"
    np.testing.assert_allclose(w.numpy(), gc.hann_window(10).numpy())
