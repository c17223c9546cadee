"""Anomaly detection (gpucore/autograd/anomaly_mode.py) as PyTorch's: the switches and a NaN
gradient caught at the op that made it."""

import pytest

import gpucore as gc


def _nan_backward():
    x = gc.tensor([0.0, 1.0], requires_grad=True)
    y = (x.sqrt() * 0).sum()  # sqrt's gradient at 0 is inf; times 0: NaN
    y.backward()
    return x.grad


def test_switches_as_torch():
    torch = pytest.importorskip("torch")
    assert gc.is_anomaly_enabled() is torch.is_anomaly_enabled() is False
    with gc.autograd.set_detect_anomaly(True, check_nan=False):
        assert gc.is_anomaly_enabled() and not gc.is_anomaly_check_nan_enabled()
    assert not gc.is_anomaly_enabled()
    gc.autograd.set_detect_anomaly(True)
    assert gc.is_anomaly_enabled() and gc.is_anomaly_check_nan_enabled()
    gc.autograd.set_detect_anomaly(False)
    assert not gc.is_anomaly_enabled()
    with pytest.raises(TypeError, match="set_detect_anomaly"):
        gc.autograd.set_detect_anomaly("yes")


def test_nan_gradient_raises_naming_the_op():
    assert bool(_nan_backward().isnan().any())  # off: the NaN reaches the leaf
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        ctx = gc.autograd.detect_anomaly()
    with ctx, pytest.raises(gc.AutogradError, match="returned nan values in its 0th output"):
        _nan_backward()
    assert not gc.is_anomaly_enabled()
    with gc.autograd.set_detect_anomaly(True, check_nan=False):
        assert bool(_nan_backward().isnan().any())


def test_torch_raises_there_too():
    torch = pytest.importorskip("torch")
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with torch.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="nan values"):
        (x.sqrt() * 0).sum().backward()
