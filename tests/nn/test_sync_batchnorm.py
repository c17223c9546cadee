"""nn.SyncBatchNorm in one process (no process group): BatchNorm's results, and
convert_sync_batchnorm. Its statistics across ranks are tested under mpirun in
tests/distributed/test_ddp.py."""

import numpy as np
import pytest

import gpucore as gc
from gpucore import nn


def test_without_a_process_group_it_is_batchnorm():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float64)
    bn, sbn = nn.BatchNorm1d(3, dtype=gc.float64), nn.SyncBatchNorm(3, dtype=gc.float64)
    for m in (bn, sbn):
        m.weight.data.copy_(gc.tensor([0.5, 2.0, -1.0], dtype=gc.float64))
    xa, xb = gc.tensor(x, requires_grad=True), gc.tensor(x, requires_grad=True)
    ya, yb = bn(xa), sbn(xb)
    np.testing.assert_allclose(yb.detach().numpy(), ya.detach().numpy(), rtol=1e-12)
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    np.testing.assert_allclose(xb.grad.numpy(), xa.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sbn.running_var.numpy(), bn.running_var.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="at least 2D"):
        sbn(gc.ones(3))


def test_convert_sync_batchnorm_keeps_parameters_and_statistics():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Sequential(nn.BatchNorm1d(4)))
    model[1].running_mean.fill_(0.25)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(converted[1], nn.SyncBatchNorm) and isinstance(
        converted[2][0], nn.SyncBatchNorm
    )
    assert converted[1].weight is model[1].weight
    assert converted[1].running_mean.numpy().tolist() == [0.25, 0.25]
    assert set(converted.state_dict()) == set(model.state_dict())
