"""gpucore.signal.windows (gpucore/signal/windows.py) against torch.signal.windows: every window,
lengths 0 to 9, symmetric and periodic, float32 / float64, their parameters and errors."""

import numpy as np
import pytest

import gpucore as gc

NAMES = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_hamming"]
NAMES += ["hamming", "hann", "kaiser", "nuttall"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_as_torch(name, dt):
    torch = pytest.importorskip("torch")
    tol = 1e-6 if dt == "float32" else 1e-12
    for m in range(10):
        for sym in (True, False):
            g = getattr(gc.signal.windows, name)(m, sym=sym, dtype=getattr(gc, dt))
            t = getattr(torch.signal.windows, name)(m, sym=sym, dtype=getattr(torch, dt))
            assert g.dtype is getattr(gc, dt) and tuple(g.shape) == tuple(t.shape)
            np.testing.assert_allclose(g.numpy(), t.numpy(), atol=tol, rtol=tol)


def test_parameters_as_torch():
    torch = pytest.importorskip("torch")
    w, tw = gc.signal.windows, torch.signal.windows
    pairs = [
        (w.gaussian(7, std=2.5), tw.gaussian(7, std=2.5)),
        (w.exponential(7, sym=False, center=2.0, tau=3.0),
         tw.exponential(7, sym=False, center=2.0, tau=3.0)),
        (w.general_cosine(7, a=[0.5, 0.3, 0.2]), tw.general_cosine(7, a=[0.5, 0.3, 0.2])),
        (w.general_hamming(6, alpha=0.6), tw.general_hamming(6, alpha=0.6)),
        (w.kaiser(7, beta=4.0), tw.kaiser(7, beta=4.0)),
    ]  # fmt: skip
    for g, t in pairs:
        np.testing.assert_allclose(g.numpy(), t.numpy(), atol=1e-6, rtol=1e-6)


def test_errors():
    torch = pytest.importorskip("torch")
    w = gc.signal.windows
    with pytest.raises(ValueError, match="hann"):
        w.hann(-1)
    for dt in (gc.int64, gc.float16, gc.bfloat16, gc.int8):  # torch: ValueError for each
        with pytest.raises(ValueError, match="hann"):
            w.hann(4, dtype=dt)
        with pytest.raises(ValueError, match="float32 or float64"):
            torch.signal.windows.hann(4, dtype=getattr(torch, str(dt).split(".")[-1]))
    with pytest.raises(ValueError, match="center"):
        w.exponential(5, center=1.0)
    with pytest.raises(ValueError, match="std"):
        w.gaussian(5, std=0.0)
    with pytest.raises(ValueError, match="beta"):
        w.kaiser(5, beta=-1.0)
