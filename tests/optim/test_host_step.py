"""Adam's and SGD's one-loop host step (gpucore/optim/_host_step.py) against the per-parameter path
(one fused_update each), bitwise, across what can change between steps: a parameter appended to
a group or a group added, a gradient set to None, the parameters' dtype changed, a state loaded,
a buffer replaced, a strided gradient; and where it must step aside (a subclass gathering its
own tensors, the first step, the profiler)."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import optim
from gpucore.optim import _host_step

SHAPES = ((7, 5), (5,), (3, 7), (3,))


@pytest.fixture(autouse=True)
def _cpu_policy():
    """No device the 'auto' policy could move an update to (the loop steps aside for one)."""
    old = gpucore.dispatch.get_device_policy()
    gpucore.dispatch.set_device_policy("cpu")
    yield
    gpucore.dispatch.set_device_policy(old)


@pytest.fixture
def taken(monkeypatch):
    """Counts the groups the one-loop step took (True) and handed on (False)."""
    seen = {True: 0, False: 0}
    orig = _host_step.host_adam_group

    def spy(*a):
        r = orig(*a)
        seen[r] += 1
        return r

    monkeypatch.setattr(optim.adam, "host_adam_group", spy)
    return seen


def params(dtype=gpucore.float32, seed=0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    return [
        gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(s), dtype=dtype)) for s in shapes
    ]


def per_param(cls):
    return type("PerParam" + cls.__name__, (cls,), {"_step_group": optim.Optimizer._step_group})


def grads(ps, i, skip=()):
    rng = np.random.default_rng(100 + i)
    for k, p in enumerate(ps):
        p.grad = (
            None
            if k in skip
            else gpucore.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype)
        )


def same(ps, qs, a, b):
    for p, q in zip(ps, qs):
        assert p.dtype is q.dtype
        np.testing.assert_array_equal(
            p.detach().numpy().view(np.uint8), q.detach().numpy().view(np.uint8)
        )
    sa, sb = a.state_dict()["state"], b.state_dict()["state"]
    assert sa.keys() == sb.keys()
    for k in sa:
        for name, v in sa[k].items():
            w = sb[k][name]
            if isinstance(v, gpucore.Tensor):
                assert v.dtype is w.dtype
                np.testing.assert_array_equal(v.numpy().view(np.uint8), w.numpy().view(np.uint8))
            else:
                assert v == w and type(v) is type(w)


def pair(cls, ps, qs, **kw):
    return cls(ps, **kw), per_param(cls)(qs, **kw)


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
@pytest.mark.parametrize("kw", [{}, {"amsgrad": True, "maximize": True, "weight_decay": 0.1}])
def test_steady_state_takes_the_loop(taken, cls, kw):
    ps, qs = params(), params()
    a, b = pair(cls, ps, qs, lr=0.01, **kw)
    for i in range(4):
        grads(ps, i)
        grads(qs, i)
        a.step()
        b.step()
    same(ps, qs, a, b)
    assert taken[True] == 3 and taken[False] == 1  # the first step creates the state


def test_parameters_added_later(taken):
    ps, qs = params(), params()
    a, b = pair(optim.Adam, ps[:2], qs[:2], lr=0.01)
    for i in range(5):
        if i == 2:  # appended to the group's list
            a.param_groups[0]["params"].append(ps[2])
            b.param_groups[0]["params"].append(qs[2])
        if i == 3:  # a new group with its own options
            a.add_param_group({"params": [ps[3]], "lr": 0.003, "amsgrad": True})
            b.add_param_group({"params": [qs[3]], "lr": 0.003, "amsgrad": True})
        grads(ps, i)
        grads(qs, i)
        a.step()
        b.step()
    same(ps, qs, a, b)
    assert taken[True] > 0


def test_grad_none_mid_training_and_a_strided_grad():
    ps, qs = params(), params()
    a, b = pair(optim.Adam, ps, qs, lr=0.01)
    for i in range(5):
        skip = (1, 3) if i in (2, 3) else ()
        grads(ps, i, skip)
        grads(qs, i, skip)
        if i == 4:  # a transposed (non-contiguous) gradient
            for p in (ps[0], qs[0]):
                p.grad = gpucore.tensor(np.ascontiguousarray(p.grad.numpy().T)).T
        a.step()
        b.step()
    same(ps, qs, a, b)


def test_dtype_change_and_state_replaced():
    ps, qs = params(), params()
    a, b = pair(optim.Adam, ps, qs, lr=0.01)
    for i in range(6):
        if i == 2:  # the parameters become float64: buffers follow on the next step
            for p in ps + qs:
                p.data = p.data.to(gpucore.float64)
        if i == 4:  # the caller replaces a buffer
            a.state[ps[1]]["exp_avg"] = gpucore.zeros(5, dtype=gpucore.float64)
            b.state[qs[1]]["exp_avg"] = gpucore.zeros(5, dtype=gpucore.float64)
        grads(ps, i)
        grads(qs, i)
        a.step()
        b.step()
    same(ps, qs, a, b)


def test_load_state_dict_mid_training():
    ps, qs, rs = params(), params(), params()
    a, b = pair(optim.Adam, ps, qs, lr=0.01)
    for i in range(3):
        grads(ps, i)
        grads(qs, i)
        a.step()
        b.step()
    c = optim.Adam(rs, lr=0.01)
    for p, r in zip(ps, rs):
        r.data = p.detach().clone()
    c.load_state_dict(a.state_dict())
    for i in range(3, 5):
        grads(rs, i)
        grads(qs, i)
        c.step()
        b.step()
    same(rs, qs, c, b)


def test_versions_bumped():
    (p,) = params(shapes=((4,),))
    opt = optim.Adam([p], lr=0.01)
    for i in range(2):
        grads([p], i)
        before = p._vbox[0], opt.state.get(p, {}).get("exp_avg")
        opt.step()
    m = opt.state[p]["exp_avg"]
    assert p._vbox[0] == before[0] + 1 and m is before[1]


def test_subclass_and_profiler_take_the_general_path(taken):
    class Mine(optim.Adam):
        def _tensors(self, p, grad, group, state=None):
            return super()._tensors(p, grad, group, state)

    ps = params()
    opt = Mine(ps, lr=0.01)
    for i in range(3):
        grads(ps, i)
        opt.step()
    assert taken[True] == 0
    opt = optim.Adam(ps, lr=0.01)
    for i in range(2):
        grads(ps, i)
        opt.step()
    with gpucore.profiler() as prof:
        opt.step()
    assert [e[0] for e in prof.events] == ["adam_step"]
    assert taken[True] == 1


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"momentum": 0.9, "dampening": 0.25, "weight_decay": 0.01},
        {"momentum": 0.9, "nesterov": True, "maximize": True},
    ],
)
def test_sgd_same_bits_and_takes_the_loop(monkeypatch, kw):
    seen = []
    orig = _host_step.host_sgd_group
    monkeypatch.setattr(optim.sgd, "host_sgd_group", lambda *a: seen.append(orig(*a)) or seen[-1])
    ps, qs = params(), params()
    a, b = pair(optim.SGD, ps, qs, lr=0.05, **kw)
    for i in range(4):
        skip = (2,) if i == 2 else ()
        grads(ps, i, skip)
        grads(qs, i, skip)
        a.step()
        b.step()
    same(ps, qs, a, b)
    # the first step creates the momentum buffers (the general path); without momentum none
    assert seen == ([True] * 4 if not kw else [False] + [True] * 3)
