"""gpucore.amp.GradScaler: PyTorch's dynamic loss scaling (scale, unscale_, step skipping on
inf/NaN gradients, update's backoff and growth, state_dict), against torch.amp.GradScaler on the
CPU and hand-derived scale trajectories without it."""

import warnings

import numpy as np
import pytest

import gpucore as gc
from gpucore import nn

W1 = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
B1 = np.random.default_rng(1).standard_normal(4).astype(np.float32)
X = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
INF_STEPS = {2: float("inf"), 6: float("nan")}


def train(lib, scaler_cls, steps=10, clip=None, growth_interval=3):
    """Scaled SGD steps on a Linear layer; gradients poisoned at INF_STEPS. Returns the scales
    seen before each update, what step() returned and the final weights."""
    model = lib.nn.Linear(3, 4)
    with lib.no_grad():
        model.weight.copy_(lib.from_numpy(W1.copy()))
        model.bias.copy_(lib.from_numpy(B1.copy()))
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = scaler_cls("cpu", init_scale=1024.0, growth_interval=growth_interval)
    x = lib.from_numpy(X.copy())
    scales, results = [], []
    for i in range(steps):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        if i in INF_STEPS:
            with lib.no_grad():
                model.weight.grad[0, 0] = INF_STEPS[i]
        if clip is not None:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        results.append(scaler.step(opt) is None)
        scales.append(scaler.get_scale())
        scaler.update()
    scales.append(scaler.get_scale())
    return scales, results, model.weight.detach().numpy().copy(), scaler.state_dict()


def test_scale_trajectory_and_skipped_steps_by_hand():
    scales, _, w, _ = train(gc, gc.amp.GradScaler)
    # growth_interval 3: grows after 3 clean steps, halves (and restarts counting) on inf/NaN
    assert scales == [1024, 1024, 1024, 512, 512, 512, 1024, 512, 512, 512, 1024]
    assert np.isfinite(w).all()


@pytest.mark.parametrize("clip", [None, 0.5])
def test_equals_torch(clip):
    torch = pytest.importorskip("torch")
    ours = train(gc, gc.amp.GradScaler, clip=clip)
    ref = train(torch, torch.amp.GradScaler, clip=clip)
    assert ours[0] == ref[0]
    assert ours[1] == ref[1]
    np.testing.assert_allclose(ours[2], ref[2], rtol=1e-6, atol=1e-7)
    assert ours[3].keys() == ref[3].keys()
    assert ours[3]["_growth_tracker"] == ref[3]["_growth_tracker"]
    assert ours[3]["scale"] == float(ref[3]["scale"])


def test_unscale_divides_the_gradients_exactly_once():
    p = nn.Parameter(gc.ones(3))
    opt = gc.optim.SGD([p], lr=1.0)
    scaler = gc.amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale((p * gc.tensor([1.0, 2.0, 3.0])).sum()).backward()
    np.testing.assert_array_equal(p.grad.numpy(), [8, 16, 24])
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [1, 2, 3])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    np.testing.assert_array_equal(p.detach().numpy(), [0, -1, -2])
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()


def test_scale_accepts_tensors_and_iterables():
    scaler = gc.amp.GradScaler("cpu", init_scale=4.0)
    a, b = gc.tensor(1.0), gc.tensor(2.0)
    assert float(scaler.scale(a)) == 4.0
    assert [float(t) for t in scaler.scale([a, b])] == [4.0, 8.0]
    assert isinstance(scaler.scale((a, b)), tuple)
    assert [float(t) for t in scaler.scale(iter([a]))] == [4.0]
    with pytest.raises(ValueError, match="Tensor or an iterable"):
        scaler.scale(3.0)


def test_disabled_and_cuda_scalers_pass_through():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        cuda = gc.cuda.amp.GradScaler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = gc.amp.GradScaler("cpu", enabled=False)
        gc.amp.GradScaler(enabled=False)  # "cuda" but disabled: no warning
    for s in (cuda, off):
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
        loss = gc.tensor(2.0)
        assert s.scale(loss) is loss
        p = nn.Parameter(gc.ones(1))
        opt = gc.optim.SGD([p], lr=1.0)
        (p * 3).sum().backward()
        s.unscale_(opt)
        s.step(opt)
        s.update()
        assert float(p) == -2.0
        with pytest.raises(RuntimeError, match="enabled"):
            s.load_state_dict({"scale": 1.0})


def test_state_dict_round_trip_and_errors():
    a = gc.amp.GradScaler("cpu", init_scale=64.0, growth_interval=5)
    a._growth_tracker = 2
    b = gc.amp.GradScaler("cpu")
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict()
    with pytest.raises(RuntimeError, match="empty"):
        b.load_state_dict({})
    with pytest.raises(ValueError, match="growth_factor"):
        gc.amp.GradScaler("cpu", growth_factor=0.5)
    with pytest.raises(ValueError, match="backoff_factor"):
        gc.amp.GradScaler("cpu", backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        gc.amp.GradScaler("cpu", growth_interval=0)
    with pytest.raises(RuntimeError, match="Closure"):
        b.step(gc.optim.SGD([nn.Parameter(gc.ones(1))], lr=0.1), closure=lambda: None)
    p = nn.Parameter(gc.ones(2, dtype=gc.float16))
    p.grad = gc.ones(2, dtype=gc.float16)
    with pytest.raises(ValueError, match="FP16"):
        b.unscale_(gc.optim.SGD([p], lr=0.1))


def test_gradients_on_vulkan_give_the_cpu_result(vulkan):
    cpu = train(gc, gc.amp.GradScaler)
    with gc.device_policy("vulkan"):
        dev = train(gc, gc.amp.GradScaler)
    assert dev[0] == cpu[0] and dev[1] == cpu[1]
    np.testing.assert_allclose(dev[2], cpu[2], rtol=1e-5, atol=1e-6)
