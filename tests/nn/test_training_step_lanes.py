"""A whole training step (Sequential MLP, cross_entropy, Adam) through its Python lanes (the
fused ReLU layers, cross_entropy's one node, the engine's inline leaf accumulation, Adam's
one-loop host step) against the same step with every lane closed (relu_fusion and loss_fused
switched off, Adam's per-parameter path): bitwise the same parameters, losses and optimizer
state over several steps, with zero_grad(set_to_none=False), tensor and post-accumulate hooks
(in PyTorch's order), retain_grad and a parameter frozen mid-training."""

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore import dispatch, optim
from gpucore.nn.functional import loss_fused
from gpucore.nn.modules import relu_fusion


@pytest.fixture(autouse=True)
def _cpu_policy():
    old = dispatch.get_device_policy()
    dispatch.set_device_policy("cpu")
    yield
    dispatch.set_device_policy(old)


def _model(dtype):
    gc.manual_seed(0)
    return nn.Sequential(
        nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 5)
    ).to(dtype)


def _train(lanes: bool, dtype, set_to_none: bool, steps: int = 5):
    relu_fusion.ENABLED[0] = loss_fused.ENABLED[0] = lanes
    try:
        model = _model(dtype)
        ps = list(model.parameters())
        cls = optim.Adam if lanes else type("PerParam", (optim.Adam,), {
            "_step_group": optim.Optimizer._step_group})  # fmt: skip
        opt = cls(ps, lr=0.01, weight_decay=0.05)
        rng = np.random.default_rng(1)
        x = gc.tensor(rng.standard_normal((9, 12))).to(dtype)
        y = gc.tensor(rng.integers(0, 5, 9))
        events = []
        ps[0].register_hook(lambda g: g * 0.5)  # a tensor hook on a weight's gradient
        for i, p in enumerate(ps):
            p.register_post_accumulate_grad_hook(lambda p, i=i: events.append(i))
        losses = []
        for step in range(steps):
            opt.zero_grad(set_to_none=set_to_none)
            if step == 3:  # a parameter frozen mid-training: no gradient from now on
                ps[3].requires_grad_(False)
                ps[3].grad = None
            loss = F.cross_entropy(model(x), y)
            assert (loss.grad_fn.name() == "Cross_entropyBackward") is lanes
            loss.retain_grad()
            loss.backward()
            assert float(loss.grad) == 1.0
            losses.append(loss.detach().numpy().copy())
            opt.step()
        state = [
            {k: (v.numpy().copy() if isinstance(v, gc.Tensor) else v) for k, v in s.items()}
            for s in opt.state_dict()["state"].values()
        ]
        return [p.detach().numpy().copy() for p in ps], losses, state, events
    finally:
        relu_fusion.ENABLED[0] = loss_fused.ENABLED[0] = True


@pytest.mark.parametrize("dtype", [gc.float32, gc.float64])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_lanes_give_the_plain_steps_bits(dtype, set_to_none):
    fast, plain = _train(True, dtype, set_to_none), _train(False, dtype, set_to_none)
    for a, b in zip(fast[0] + fast[1], plain[0] + plain[1]):
        assert a.tobytes() == b.tobytes()
    assert len(fast[2]) == len(plain[2])
    for sa, sb in zip(fast[2], plain[2]):
        assert sa.keys() == sb.keys()
        for k in sa:
            va, vb = sa[k], sb[k]
            assert va.tobytes() == vb.tobytes() if isinstance(va, np.ndarray) else va == vb
    # post-accumulate hooks: once per parameter with a gradient, as the plain path orders them
    assert fast[3] == plain[3] and len(fast[3]) == 3 * 6 + 2 * 5
