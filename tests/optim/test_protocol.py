"""The Optimizer protocol on every optimizer (SGD, Adam, AdamW, RMSprop, Adadelta, Adagrad,
Adamax, NAdam, RAdam): PyTorch's constructor signatures and flags (foreach / fused / capturable /
differentiable accepted, maximize real), state_dict round trips through gpucore.save, the state
dict layout against torch's, per-group options and add_param_group against torch, zero_grad,
and parameters without gradients."""

from __future__ import annotations

import copy
import inspect
import pickle

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import optim

# name -> options exercising the optimizer's state (the second group of a test may override lr)
OPTIMS = {
    "SGD": dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "Adam": dict(lr=0.01, amsgrad=True, weight_decay=0.01),
    "AdamW": dict(lr=0.01, weight_decay=0.1),
    "RMSprop": dict(lr=0.01, centered=True, momentum=0.5),
    "Adadelta": dict(lr=0.5, weight_decay=0.01),
    "Adagrad": dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
    "Adamax": dict(lr=0.01, weight_decay=0.01),
    "NAdam": dict(lr=0.01, weight_decay=0.01, decoupled_weight_decay=True),
    "RAdam": dict(lr=0.01, betas=(0.6, 0.8)),
}
FLAGS = ("foreach", "fused", "capturable", "differentiable", "maximize")


def make(name, **extra):
    return lambda m, ps: getattr(m, name)(ps, **{**OPTIMS[name], **extra})


def loss_of(ps, i):
    tgt = [np.sin(np.arange(p.numel()) + i).reshape(tuple(p.shape)) for p in ps]
    return sum(
        ((p - gpucore.tensor(t, dtype=p.dtype)) ** 2 * (1.0 + 0.1 * k)).sum()
        for k, (p, t) in enumerate(zip(ps, tgt))
    )


def model(dtype=gpucore.float32):
    rng = np.random.default_rng(3)
    return [
        gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(s), dtype=dtype))
        for s in ((4, 3), (3,), (2, 2))
    ]


def train(opt, ps, start, n):
    for i in range(start, start + n):
        opt.zero_grad()
        loss_of(ps, i).backward()
        opt.step()


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", list(OPTIMS) + ["LBFGS"])
def test_constructor_signature_matches_torch(name):
    ours = inspect.signature(getattr(optim, name)).parameters
    theirs = inspect.signature(getattr(h.torch.optim, name)).parameters
    assert list(ours) == list(theirs)
    for k, p in ours.items():
        q = theirs[k]
        assert p.kind == q.kind, k
        if q.default is not inspect.Parameter.empty:
            assert p.default == q.default, k


@pytest.mark.parametrize("name", OPTIMS)
def test_flags_are_accepted_and_recorded(name):
    accepted = [f for f in FLAGS if f in inspect.signature(getattr(optim, name)).parameters]
    assert "maximize" in accepted and "foreach" in accepted
    ps = model()
    opt = make(name, **{f: (f != "fused") for f in accepted})(optim, ps)
    for f in accepted:
        assert opt.param_groups[0][f] is (f != "fused")
    train(opt, ps, 0, 2)
    if "fused" in accepted:
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
            make(name, fused=True, foreach=True)(optim, model())
        with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
            make(name, fused=True, differentiable=True)(optim, model())


@pytest.mark.parametrize("name", OPTIMS)
def test_maximize_steps_along_the_gradient(name):
    plain, opt_a, ps = h.run_ours(make(name))
    negated = [[-g for g in gs] for gs in h.GRADS]
    up, _, _ = h.run_ours(make(name, maximize=True), grads=negated)
    h.assert_steps_close(up, plain, rtol=0, atol=0)


@pytest.mark.parametrize("name", OPTIMS)
def test_state_dict_round_trip_resumes_exactly(name, tmp_path):
    straight = model()
    opt = make(name)(optim, straight)
    train(opt, straight, 0, 8)

    resumed = model()
    opt2 = make(name)(optim, resumed)
    train(opt2, resumed, 0, 4)
    path = tmp_path / "ckpt.safetensors"
    gpucore.save({"opt": opt2.state_dict(), "params": [p.detach() for p in resumed]}, path)

    fresh = model()
    opt3 = make(name, lr=123.0)(optim, fresh)
    ck = gpucore.load(path)
    with gpucore.no_grad():
        for p, v in zip(fresh, ck["params"]):
            p.copy_(v)
    opt3.load_state_dict(ck["opt"])
    assert opt3.param_groups[0]["lr"] == OPTIMS[name]["lr"]
    train(opt3, fresh, 4, 4)
    for a, b in zip(straight, fresh):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("name", OPTIMS)
def test_deepcopy_and_pickle_continue_identically(name):
    ps = model()
    opt = make(name)(optim, ps)
    train(opt, ps, 0, 3)
    for clone in (copy.deepcopy, lambda o: pickle.loads(pickle.dumps(o))):
        opt2 = clone(opt)
        ps2 = opt2.param_groups[0]["params"] + [
            q for g in opt2.param_groups[1:] for q in g["params"]
        ]
        assert opt2.state[ps2[0]].keys() == opt.state[ps[0]].keys()
        train(opt2, ps2, 3, 2)
    train(opt, ps, 3, 2)
    for a, b in zip(ps, ps2):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", OPTIMS)
def test_state_dict_layout_matches_torch(name):
    _, ours, _ = h.run_ours(make(name), grads=h.GRADS[:3])
    _, theirs, _ = h.run_torch(make(name), grads=h.GRADS[:3])
    a, b = ours.state_dict(), theirs.state_dict()
    assert set(a["state"]) == set(b["state"])
    for i, st in a["state"].items():
        assert set(st) == set(b["state"][i])
        if "step" in st:
            assert st["step"] == int(b["state"][i]["step"])
    ga, gb = a["param_groups"][0], b["param_groups"][0]
    assert set(ga) == set(gb)
    for k, v in ga.items():
        assert gb[k] == v, k


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", OPTIMS)
def test_param_groups_and_add_param_group_match_torch(name):
    def build(m, ps):
        opt = getattr(m, name)([{"params": ps[:1], "lr": 0.02}], **OPTIMS[name])
        opt.add_param_group({"params": ps[1:2], "weight_decay": 0.05})
        opt.add_param_group({"params": ps[2:]})
        return opt

    ours, opt, _ = h.run_ours(build, grads=h.GRADS[:10])
    theirs, topt, _ = h.run_torch(build, grads=h.GRADS[:10])
    h.assert_steps_close(ours, theirs, rtol=1e-10)
    for g, tg in zip(opt.param_groups, topt.param_groups):
        assert {k: v for k, v in g.items() if k != "params"} == {
            k: v for k, v in tg.items() if k != "params"
        }


@pytest.mark.parametrize("name", OPTIMS)
def test_zero_grad_and_parameters_without_gradients(name):
    ps = model()
    opt = make(name)(optim, ps)
    loss_of(ps, 0).backward()
    opt.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in ps)
    opt.zero_grad()
    assert all(p.grad is None for p in ps)
    ps[0].grad = gpucore.ones(tuple(ps[0].shape))
    before = [p.detach().numpy().copy() for p in ps]
    opt.step()
    assert not np.array_equal(ps[0].detach().numpy(), before[0])
    for p, b in zip(ps[1:], before[1:]):
        np.testing.assert_array_equal(p.detach().numpy(), b)
        assert name == "Adagrad" or p not in opt.state  # Adagrad makes its state up front


@pytest.mark.parametrize("name", OPTIMS)
def test_float16_params(name):
    ps = [gpucore.nn.Parameter(gpucore.ones(4, dtype=gpucore.float16))]
    opt = make(name)(optim, ps)
    for _ in range(3):
        ps[0].grad = gpucore.full((4,), 0.5, dtype=gpucore.float16)
        opt.step()
    assert ps[0].dtype is gpucore.float16
    v = ps[0].detach().float().numpy()
    assert np.all(np.isfinite(v)) and np.all(v < 1.0)


@pytest.mark.parametrize("name", ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_parameters_on_the_vulkan_device(name, vulkan):
    def steps(device):
        ps = [p.detach().to(device).requires_grad_() for p in model()]
        opt = make(name)(optim, ps)
        for i in range(3):
            for k, p in enumerate(ps):
                p.grad = gpucore.full(tuple(p.shape), 0.1 * (i + k + 1)).to(device)
            opt.step()
        for st in opt.state.values():
            for v in st.values():
                if isinstance(v, gpucore.Tensor):
                    assert v.device.type == device
        return [p.detach().to("cpu").numpy() for p in ps]

    for a, b in zip(steps("vulkan"), steps("cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_lbfgs_on_the_vulkan_device(vulkan):
    def minimize(device):
        x = gpucore.tensor([-1.2, 1.0, 0.5]).to(device).requires_grad_()
        opt = optim.LBFGS([x], line_search_fn="strong_wolfe", max_iter=10)

        def closure():
            opt.zero_grad()
            loss = ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        if device == "vulkan":
            assert opt.state[x]["d"].device.type == "vulkan"
        return x.detach().to("cpu").numpy()

    np.testing.assert_allclose(minimize("vulkan"), minimize("cpu"), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["SGD", "Adam", "LBFGS"])
def test_step_hooks(name):
    """register_step_pre_hook / register_step_post_hook and the global forms, in PyTorch's
    order (global pre, own pre, step, own post, global post); a pre-hook may replace the
    arguments; handles remove."""
    from gpucore.optim import optimizer as O

    p = gpucore.nn.Parameter(gpucore.ones(2))
    opt = getattr(optim, name)([p], lr=0.1)
    calls = []

    def closure():
        calls.append("closure")
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    handles = [
        O.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global pre")),
        opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", len(a), dict(k)))),
        opt.register_step_post_hook(lambda o, a, k: calls.append("post")),
        O.register_optimizer_step_post_hook(lambda o, a, k: calls.append("global post")),
    ]
    try:
        opt.step(closure)
        # the positional arguments as PyTorch passes them: the optimizer, then the closure
        assert calls[0] == "global pre" and calls[1] == ("pre", 2, {})
        assert "closure" in calls and calls[-2:] == ["post", "global post"]
        # a pre-hook returning (args, kwargs) replaces the step's arguments
        swap = opt.register_step_pre_hook(lambda o, a, k: ((o,), {"closure": closure}))
        calls.clear()
        opt.step(lambda: 1 / 0)  # replaced, never called
        assert "closure" in calls
        swap.remove()
        bad = opt.register_step_pre_hook(lambda o, a, k: 3)
        with pytest.raises(RuntimeError, match="must return None or a tuple"):
            opt.step(closure)
        bad.remove()
    finally:
        for handle in handles:
            handle.remove()
    calls.clear()
    opt.step(closure)
    assert calls == ["closure"] * len(calls) and calls


def test_step_hook_arguments_match_torch():
    """What a pre-hook receives: (optimizer, args with the optimizer first, kwargs), as PyTorch."""
    torch = pytest.importorskip("torch")
    seen = {}
    for lib in (gpucore, torch):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1)
        got = []
        h = opt.register_step_pre_hook(
            lambda o, a, k, got=got: got.append((a[0] is o, len(a), dict(k)))
        )
        (p * p).sum().backward()
        opt.step()
        opt.step(closure=None)
        h.remove()
        seen[lib.__name__] = got
    assert seen["gpucore"] == seen["torch"]


def test_step_hooks_run_once_when_a_subclass_step_calls_super():
    class Clipped(optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    p = gpucore.nn.Parameter(gpucore.ones(2))
    opt = Clipped([p], lr=0.5)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    (p * p).sum().backward()
    opt.step()
    assert calls == ["pre", "post"]
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])  # 1 - 0.5 * 2


def test_an_optimizer_with_hooks_pickles_and_copies_without_them():
    import copy
    import pickle

    p = gpucore.nn.Parameter(gpucore.ones(2))
    opt = optim.SGD([p], lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append(o))
    opt.register_step_post_hook(lambda o, a, k: calls.append(o))
    for other in (pickle.loads(pickle.dumps(opt)), copy.deepcopy(opt)):
        other.step()
        assert calls == [] and other.param_groups[0]["lr"] == 0.1
    opt.step()
    assert calls == [opt, opt]
