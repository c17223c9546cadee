"""capturable=True optimizers on device parameters (gpucore/optim/_capturable.py): the step
count (and NAdam's mu_product) is a float32 device tensor and the step-dependent scalars are
computed on the device, so each update must still be PyTorch's: compared with torch.optim's
(float32, CPU) over several steps from the same weights and gradients; the state survives a
state_dict round trip; optimizers PyTorch gives no capturable refuse it the same way."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore

CASES = {
    "adam": ("Adam", dict(lr=1e-2)),
    "amsgrad_maximize": ("Adam", dict(lr=1e-2, amsgrad=True, maximize=True, weight_decay=0.05)),
    "adamw": ("AdamW", dict(lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1)),
    "adamax": ("Adamax", dict(lr=1e-2)),
    "adamax_decay_maximize": ("Adamax", dict(lr=1e-2, weight_decay=0.1, maximize=True)),
    "nadam": ("NAdam", dict(lr=1e-2)),
    "nadamw": ("NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
    "radam": ("RAdam", dict(lr=1e-2, weight_decay=0.05)),  # 12 steps: both sides of rho_t = 5
    "radamw_fast_beta2": (
        "RAdam",
        dict(
            lr=1e-2, betas=(0.9, 0.9), weight_decay=0.1, decoupled_weight_decay=True, maximize=True
        ),
    ),
    "adadelta": ("Adadelta", dict(lr=0.5, weight_decay=0.1)),
}
# the first moment buffer of each, compared with torch's as well
MOMENT = {"Adamax": "exp_inf", "Adadelta": "square_avg"}


@pytest.mark.parametrize("case", list(CASES))
def test_capturable_adam_matches_torch(vulkan, case):
    torch = pytest.importorskip("torch")
    name, opts = CASES[case]
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((64, 80)).astype(np.float32)
    grads = [rng.standard_normal((64, 80)).astype(np.float32) for _ in range(12)]
    p = gpucore.nn.Parameter(gpucore.tensor(w0).to("vulkan"))
    opt = getattr(gpucore.optim, name)([p], capturable=True, **opts)
    tp = torch.nn.Parameter(torch.tensor(w0))
    topt = getattr(torch.optim, name)([tp], **opts)
    for g in grads:
        p.grad = gpucore.tensor(g).to("vulkan")
        tp.grad = torch.tensor(g)
        opt.step()
        topt.step()
    step = opt.state[p]["step"]
    assert isinstance(step, gpucore.Tensor) and step.device.type == "vulkan"
    assert step.item() == len(grads)
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    moment = MOMENT.get(name, "exp_avg_sq")
    np.testing.assert_allclose(
        opt.state[p][moment].numpy(), topt.state[tp][moment].numpy(), rtol=1e-5, atol=1e-7
    )
    if name == "NAdam":
        mu = opt.state[p]["mu_product"]
        assert mu.device.type == "vulkan"
        np.testing.assert_allclose(mu.item(), float(topt.state[tp]["mu_product"]), rtol=1e-6)


@pytest.mark.parametrize("name", ["Adagrad", "SGD", "LBFGS"])
def test_capturable_refused_where_pytorch_refuses_it(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError) as want:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(2))], capturable=True)
    p = gpucore.nn.Parameter(gpucore.zeros(2))
    with pytest.raises(TypeError, match="capturable") as got:
        getattr(gpucore.optim, name)([p], capturable=True)
    assert "unexpected keyword argument 'capturable'" in str(want.value)
    assert "unexpected keyword argument 'capturable'" in str(got.value)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax"])
def test_capturable_state_dict_round_trip_more(vulkan, name):
    """A state saved from device counts (0-d tensors) loads and continues as a fresh run."""
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((64, 80)).astype(np.float32)
    g = rng.standard_normal((64, 80)).astype(np.float32)
    params = [gpucore.nn.Parameter(gpucore.tensor(w0).to("vulkan")) for _ in range(2)]
    opts = [getattr(gpucore.optim, name)([q], lr=1e-2, capturable=True) for q in params]
    for _ in range(7):
        params[0].grad = gpucore.tensor(g).to("vulkan")
        opts[0].step()
    params[1].data.copy_(params[0].detach())
    opts[1].load_state_dict(opts[0].state_dict())
    for q, o in zip(params, opts):
        q.grad = gpucore.tensor(g).to("vulkan")
        o.step()
    np.testing.assert_array_equal(params[1].detach().numpy(), params[0].detach().numpy())
    assert opts[1].state[params[1]]["step"].item() == 8


def test_capturable_state_dict_round_trip(vulkan):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((64, 80)).astype(np.float32)
    g = rng.standard_normal((64, 80)).astype(np.float32)
    params = [gpucore.nn.Parameter(gpucore.tensor(w0).to("vulkan")) for _ in range(2)]
    opts = [gpucore.optim.Adam([q], lr=1e-2, capturable=True) for q in params]
    for _ in range(3):
        params[0].grad = gpucore.tensor(g).to("vulkan")
        opts[0].step()
    sd = opts[0].state_dict()
    params[1].data.copy_(params[0].detach())
    opts[1].load_state_dict(sd)
    for q, o in zip(params, opts):
        q.grad = gpucore.tensor(g).to("vulkan")
        o.step()
    np.testing.assert_array_equal(params[1].detach().numpy(), params[0].detach().numpy())
    assert opts[1].state[params[1]]["step"].item() == 4
