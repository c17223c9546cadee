"""The regression losses: mse_loss, l1_loss, smooth_l1_loss and huber_loss against numpy float64
references with gradcheck, known values, finite gradients where input == target, and bad
arguments. Their modules and PyTorch are in test_loss_modules.py."""

import numpy as np
import pytest
from helpers import check_op, to_np
from nn_refs import REDUCTIONS, f64, np_huber, np_smooth_l1, reduce

import gpucore.nn.functional as F


# ============================================================================= regression losses
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_l1(reduction):
    check_op(
        lambda a, b: F.mse_loss(a, b, reduction=reduction),
        lambda a, b: reduce((a - b) ** 2, reduction),
        [(3, 4), (3, 4)],
        gradgrad=True,
    )
    check_op(
        lambda a, b: F.l1_loss(a, b, reduction=reduction),
        lambda a, b: reduce(np.abs(a - b), reduction),
        [(3, 4), (3, 4)],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.4, 0.0])
def test_smooth_l1(reduction, beta):
    check_op(
        lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
        lambda a, b: reduce(np_smooth_l1(a - b, beta), reduction),
        [(4, 5), (4, 5)],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 0.3, 2.5])
def test_huber(reduction, delta):
    check_op(
        lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
        lambda a, b: reduce(np_huber(a - b, delta), reduction),
        [(4, 5), (4, 5)],
    )


def test_regression_known_values_and_errors():
    a, b = f64([0.0, 1.0, 3.0]), f64([0.5, 1.0, 0.0])
    assert F.mse_loss(a, b).item() == pytest.approx((0.25 + 9) / 3)
    assert F.l1_loss(a, b, reduction="sum").item() == pytest.approx(3.5)
    assert F.smooth_l1_loss(a, b, reduction="none").tolist() == [0.125, 0.0, 2.5]
    assert F.huber_loss(a, b, delta=2.0, reduction="none").tolist() == [0.125, 0.0, 4.0]
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(f64(np.zeros((3, 1))), f64(np.zeros(3)))
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(a, b, reduction="avg")
    with pytest.raises(TypeError, match="deprecated"):
        F.l1_loss(a, b, size_average=False)
    with pytest.raises(ValueError, match="beta"):
        F.smooth_l1_loss(a, b, beta=-1.0)
    with pytest.raises(ValueError, match="delta"):
        F.huber_loss(a, b, delta=0.0)
    # the gradient of the smooth losses is finite where input == target
    x = f64([1.0, 2.0], grad=True)
    (F.smooth_l1_loss(x, f64([1.0, 0.0])) + F.huber_loss(x, f64([1.0, 0.0]))).backward()
    assert to_np(x.grad).tolist() == [0.0, 1.0]
