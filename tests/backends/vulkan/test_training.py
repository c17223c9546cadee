"""Training on the Vulkan device against the CPU: an MLP and a small CNN (conv-relu-pool twice,
then linear) give the same loss, gradients and updated weights under device_policy('vulkan') as
under device_policy('cpu') from identical initial weights (rtol 1e-4); 100 training steps leave
the live device bytes at their steady value; a forward pass of 10+ large ops moves nothing
between host and device until the result is read.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import nn

RTOL, ATOL = 1e-4, 1e-6


def mlp():
    return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 7 * 7, 10),
    )


MODELS = {"mlp": (mlp, (64, 784)), "cnn": (cnn, (16, 1, 28, 28))}


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, shape[0]).astype(np.int64)
    return x, y


def _model(factory, device: str, seed=11):
    gpucore.manual_seed(seed)
    with gpucore.device_policy("cpu"):
        m = factory()  # initialised on the host: both runs start from the same weights
    return m.to(device) if device != "cpu" else m


def _train(factory, device: str, x, y, steps: int):
    """Per step: (loss, [grads]); and the final parameters, all as numpy."""
    model = _model(factory, device)
    opt = gpucore.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xt, yt = gpucore.tensor(x), gpucore.tensor(y)
    if device != "cpu":
        xt, yt = xt.to(device), yt.to(device)
    history = []
    with gpucore.device_policy(device):
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(xt), yt)
            loss.backward()
            grads = [p.grad for p in model.parameters()]
            assert all(g.device.type == device for g in grads)
            history.append((loss.item(), [g.numpy().copy() for g in grads]))
            opt.step()
    return history, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("name", list(MODELS))
def test_training_steps_match_cpu(vulkan, name):
    factory, shape = MODELS[name]
    x, y = _data(shape)
    with gpucore.dispatch.trace_ops() as ops:
        dev_hist, dev_params = _train(factory, "vulkan", x, y, steps=3)
    ran = {n for n, b, _ in ops if b == "vulkan"}
    assert {"matmul", "cross_entropy", "cross_entropy_backward", "sgd_step"} <= ran, ran
    if name == "cnn":
        assert {"im2col", "col2im", "max_pool2d", "max_pool2d_backward"} <= ran, ran
    cpu_hist, cpu_params = _train(factory, "cpu", x, y, steps=3)
    for (dl, dg), (cl, cg) in zip(dev_hist, cpu_hist):
        assert dl == pytest.approx(cl, rel=RTOL)
        for a, b in zip(dg, cg):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    for a, b in zip(dev_params, cpu_params):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_initial_weights_identical(vulkan):
    for factory, _ in MODELS.values():
        a = [p.detach().numpy() for p in _model(factory, "vulkan").parameters()]
        b = [p.detach().numpy() for p in _model(factory, "cpu").parameters()]
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def _live():
    gpucore.vulkan.synchronize()
    return gpucore.vulkan.stats()["live_bytes"]


def _collect_earlier_garbage():
    # A parameter and its AccumulateGrad node reference each other, so models of earlier tests
    # hold device memory until the cycle collector runs; collect now so that cannot happen
    # half-way through the measurement.
    gc.collect()


def test_no_leak_over_100_steps_with_optimizer(vulkan):
    _collect_earlier_garbage()
    x, y = _data((64, 784), seed=1)
    model = _model(mlp, "vulkan")
    opt = gpucore.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xt, yt = gpucore.tensor(x).to("vulkan"), gpucore.tensor(y).to("vulkan")
    levels = {}
    for step in range(1, 101):
        opt.zero_grad()
        loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        del loss
        if step in (5, 50, 100):
            levels[step] = _live()
    assert levels[5] == levels[50] == levels[100], levels


def test_no_leak_over_100_steps_with_inplace_sgd(vulkan):
    # SGD written by hand: in-place updates under no_grad, as a user would.
    _collect_earlier_garbage()
    x, y = _data((32, 784), seed=2)
    model = _model(mlp, "vulkan")
    params = list(model.parameters())
    xt, yt = gpucore.tensor(x).to("vulkan"), gpucore.tensor(y).to("vulkan")
    levels = {}
    for step in range(1, 101):
        for p in params:
            p.grad = None
        loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        with gpucore.no_grad():
            for p in params:
                p.sub_(p.grad * 0.05)
        del loss
        if step in (5, 50, 100):
            levels[step] = _live()
    assert levels[5] == levels[50] == levels[100], levels


def test_cnn_forward_chain_makes_no_host_transfers(vulkan):
    # Large ops only (im2col, matmul, bias add, relu, max_pool2d; twice; then linear).
    x, _ = _data((16, 1, 28, 28))
    model = _model(cnn, "vulkan")
    xt = gpucore.tensor(x).to("vulkan")
    gpucore.vulkan.synchronize()
    s0 = gpucore.vulkan.stats()
    with gpucore.no_grad(), gpucore.dispatch.trace_ops() as ops:
        out = model(xt)
    s1 = gpucore.vulkan.stats()
    assert len(ops) >= 10 and {b for _, b, _ in ops} == {"vulkan"}, ops
    for key in ("bytes_uploaded", "bytes_downloaded", "submits"):
        assert s1[key] == s0[key], (key, s0[key], s1[key])
    got = out.numpy()
    assert gpucore.vulkan.stats()["bytes_downloaded"] - s1["bytes_downloaded"] == got.nbytes
    cpu_model = _model(cnn, "cpu")
    with gpucore.device_policy("cpu"), gpucore.no_grad():
        ref = cpu_model(gpucore.tensor(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
