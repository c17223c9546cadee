"""capturable=True Adam / AdamW on device parameters (gpucore/optim/_capturable.py): the step
count is a float32 device tensor and the bias corrections are computed on the device, so the
update must still be PyTorch's Adam: compared with torch.optim.Adam (float32, CPU) over several
steps from the same weights and gradients; and the state survives a state_dict round trip."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore

CASES = {
    "adam": ("Adam", dict(lr=1e-2)),
    "amsgrad_maximize": ("Adam", dict(lr=1e-2, amsgrad=True, maximize=True, weight_decay=0.05)),
    "adamw": ("AdamW", dict(lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_capturable_adam_matches_torch(vulkan, case):
    torch = pytest.importorskip("torch")
    name, opts = CASES[case]
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((64, 80)).astype(np.float32)
    grads = [rng.standard_normal((64, 80)).astype(np.float32) for _ in range(6)]
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
    np.testing.assert_allclose(
        opt.state[p]["exp_avg_sq"].numpy(), topt.state[tp]["exp_avg_sq"].numpy(), rtol=1e-5
    )


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
