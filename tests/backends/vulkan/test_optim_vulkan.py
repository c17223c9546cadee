"""The fused optimizer kernels on the Vulkan device (shaders/optim.comp via kernels/optim.py)
against the float64 references and the CPU path; where updates run for each residency and
policy; device state dicts loading on the CPU."""

from __future__ import annotations

import numpy as np
import optim_ref as ref
import pytest

import gpucore
from gpucore import optim

RNG = np.random.default_rng(5)
TOL = dict(rtol=2e-5, atol=2e-6)


def data(n, steps=3):
    return RNG.standard_normal(n), [RNG.standard_normal(n) for _ in range(steps)]


def steps(make, p0, grads, device):
    """Run the optimizer over grads with the parameter (and grads) on ``device``."""
    p = gpucore.nn.Parameter(gpucore.tensor(p0, dtype=gpucore.float32).to(device))
    opt = make([p])
    out = []
    with gpucore.dispatch.trace_ops() as ops:
        for g in grads:
            p.grad = gpucore.tensor(g, dtype=gpucore.float32).to(device)
            opt.step()
            out.append(p.detach().cpu().numpy().astype(np.float64))
    return out, opt, p, ops


CASES = [
    ("sgd", lambda ps: optim.SGD(ps, lr=0.1), lambda p, g: ref.sgd(p, g, 0.1)),
    (
        "sgd_momentum",
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.2),
        lambda p, g: ref.sgd(p, g, 0.1, 0.9, 0.2),
    ),
    (
        "sgd_nesterov",
        lambda ps: optim.SGD(
            ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True
        ),
        lambda p, g: ref.sgd(p, g, 0.05, 0.8, 0.0, 0.1, True, True),
    ),
    ("adam", lambda ps: optim.Adam(ps, lr=0.01), lambda p, g: ref.adam(p, g, 0.01)),
    (
        "adam_amsgrad_wd",
        lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1, betas=(0.3, 0.9)),
        lambda p, g: ref.adam(p, g, 0.01, (0.3, 0.9), amsgrad=True, weight_decay=0.1),
    ),
    (
        "adamw",
        lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.2, maximize=True),
        lambda p, g: ref.adam(p, g, 0.01, weight_decay=0.2, decoupled=True, maximize=True),
    ),
    ("rmsprop", lambda ps: optim.RMSprop(ps, lr=0.01), lambda p, g: ref.rmsprop(p, g, 0.01)),
    (
        "rmsprop_centered_momentum",
        lambda ps: optim.RMSprop(ps, lr=0.01, centered=True, momentum=0.9, weight_decay=0.05),
        lambda p, g: ref.rmsprop(p, g, 0.01, centered=True, momentum=0.9, weight_decay=0.05),
    ),
    (
        "rmsprop_momentum",
        lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, alpha=0.4),
        lambda p, g: ref.rmsprop(p, g, 0.01, alpha=0.4, momentum=0.5),
    ),
]


@pytest.mark.parametrize("n", [1, 1000, 5003])
@pytest.mark.parametrize("name, make, rule", CASES, ids=[c[0] for c in CASES])
def test_device_kernel_equals_reference(vulkan, name, make, rule, n):
    p0, grads = data(n)
    p0 = p0.astype(np.float32).astype(np.float64)
    grads = [g.astype(np.float32).astype(np.float64) for g in grads]
    out, opt, p, ops = steps(make, p0, grads, "vulkan")
    want, st = rule(p0, grads)
    for o, w in zip(out, want):
        np.testing.assert_allclose(o, w, **TOL)
    op = {"s": "sgd_step", "a": "adam_step", "r": "rmsprop_step"}[name[0]]
    assert [b for o_, b, _ in ops if o_ == op] == ["vulkan"] * 3, ops
    assert p.is_vulkan
    for k, v in st.items():
        if v is None:
            assert k not in opt.state[p]
        elif k == "step":
            assert opt.state[p][k] == v
        else:
            t = opt.state[p][k]
            assert t.is_vulkan, k
            np.testing.assert_allclose(t.cpu().numpy(), v, **TOL)


def test_device_equals_cpu_kernel(vulkan):
    p0, grads = data(3000)
    make = CASES[4][1]
    dev, _, _, _ = steps(make, p0, grads, "vulkan")
    with gpucore.device_policy("cpu"):
        host, _, _, ops = steps(make, p0, grads, "cpu")
    assert {b for o, b, _ in ops if o == "adam_step"} == {"cpu"}
    for a, b in zip(dev, host):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_small_device_param_runs_on_the_device_under_auto(vulkan):
    # An in-place update runs where the parameter lives, even below the size threshold.
    p0, grads = data(10)
    with gpucore.device_policy("auto"):
        out, _, p, ops = steps(CASES[3][1], p0, grads, "vulkan")
    assert [b for o, b, _ in ops if o == "adam_step"] == ["vulkan"] * 3
    want, _ = ref.adam(p0, grads, 0.01)
    np.testing.assert_allclose(out[-1], want[-1], rtol=1e-4, atol=1e-6)


def test_device_param_under_the_cpu_policy(vulkan):
    # the C kernel writes through to device memory; the parameter stays on the device
    p0, grads = data(100)
    with gpucore.device_policy("cpu"):
        p = gpucore.nn.Parameter(gpucore.tensor(p0, dtype=gpucore.float32).to("vulkan"))
        opt = optim.SGD([p], lr=0.1, momentum=0.9)
        with gpucore.dispatch.trace_ops() as ops:
            for g in grads:
                p.grad = gpucore.tensor(g, dtype=gpucore.float32).to("vulkan")
                opt.step()
    assert [b for o, b, _ in ops if o == "sgd_step"] == ["cpu"] * 3
    assert p.is_vulkan and opt.state[p]["momentum_buffer"].is_vulkan
    want, _ = ref.sgd(p0, grads, 0.1, 0.9)
    np.testing.assert_allclose(p.detach().cpu().numpy(), want[-1], **TOL)


def test_host_param_under_the_vulkan_policy_runs_on_the_cpu(vulkan):
    p0, grads = data(5000)
    out, opt, p, ops = steps(CASES[6][1], p0, grads, "cpu")
    assert [b for o, b, _ in ops if o == "rmsprop_step"] == ["cpu"] * 3
    assert not p.is_vulkan
    want, _ = ref.rmsprop(p0, grads, 0.01)
    np.testing.assert_allclose(out[-1], want[-1], **TOL)


def test_host_grad_for_device_param(vulkan):
    p0, grads = data(500)
    p = gpucore.nn.Parameter(gpucore.tensor(p0, dtype=gpucore.float32).to("vulkan"))
    opt = optim.Adam([p], lr=0.01)
    for g in grads:
        p.grad = gpucore.tensor(g, dtype=gpucore.float32)  # on the host
        opt.step()
    want, _ = ref.adam(p0, grads, 0.01)
    np.testing.assert_allclose(p.detach().cpu().numpy(), want[-1], **TOL)


def test_float64_device_param_uses_the_c_kernel(vulkan):
    p0, grads = data(50)
    p = gpucore.nn.Parameter(gpucore.tensor(p0).to("vulkan"))
    opt = optim.Adam([p], lr=0.01, amsgrad=True)
    for g in grads:
        p.grad = gpucore.tensor(g).to("vulkan")
        opt.step()
    want, _ = ref.adam(p0, grads, 0.01, amsgrad=True)
    np.testing.assert_allclose(p.detach().cpu().numpy(), want[-1], rtol=1e-12)


def test_device_training_and_state_dict_load_on_cpu(vulkan, tmp_path):
    rng = np.random.default_rng(1)
    w0, x, y = rng.standard_normal((8, 4)), rng.standard_normal((16, 8)), rng.standard_normal(16)

    def train(device, opt=None, w=None, n=5):
        if w is None:
            w = gpucore.nn.Parameter(gpucore.tensor(w0, dtype=gpucore.float32).to(device))
            opt = optim.AdamW([w], lr=0.01)
        xs = gpucore.tensor(x, dtype=gpucore.float32).to(device)
        ys = gpucore.tensor(y, dtype=gpucore.float32).to(device)
        for _ in range(n):
            opt.zero_grad()
            loss = ((xs.matmul(w).sum(1) - ys) ** 2).mean()
            loss.backward()
            opt.step()
        return w, opt

    w, opt = train("vulkan")
    path = tmp_path / "opt.safetensors"
    gpucore.save({"w": w.detach(), "opt": opt.state_dict()}, path)
    ck = gpucore.load(path)
    with gpucore.device_policy("cpu"):
        w2 = gpucore.nn.Parameter(ck["w"])
        opt2 = optim.AdamW([w2], lr=0.5)
        opt2.load_state_dict(ck["opt"])
        assert not opt2.state[w2]["exp_avg"].is_vulkan
        assert opt2.param_groups[0]["lr"] == 0.01
        w2, _ = train("cpu", opt2, w2)
    w3, _ = train("vulkan", opt, w)
    np.testing.assert_allclose(w2.detach().numpy(), w3.detach().cpu().numpy(), rtol=1e-4, atol=1e-6)
