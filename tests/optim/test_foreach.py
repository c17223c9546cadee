"""The group update of SGD, Adam, AdamW and RMSprop: one multi-tensor C call per param group
(``*_step_multi``) for the host float32 / float64 parameters, bitwise the same parameters and
state as the per-parameter path (one ``fused_update`` each) for every option; parameters that the
call cannot take (float16, non-contiguous, a gradient of another dtype, no gradient, listed
twice, sharing memory) behave as before."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest

import gpucore
from gpucore import _cpu as C
from gpucore import optim

KERNELS = ("sgd_step", "adam_step", "rmsprop_step")
SHAPES = ((17, 9), (9,), (5, 17), (5,), (1,))


@pytest.fixture
def calls(monkeypatch):
    """Counts the optimizer entries of gpucore._cpu as the library calls them: '<name>' per
    single-tensor call, '<name>_multi' per multi-tensor call, '<name>_multi_params' the
    parameters those took."""
    counts = Counter()

    def spying(fn):
        orig = getattr(C, fn)

        def spy(*args):
            counts[fn] += 1
            if fn.endswith("_multi"):
                counts[fn + "_params"] += len(args[0])
            return orig(*args)

        return spy

    for name in KERNELS:
        for fn in (name, name + "_multi"):
            monkeypatch.setattr(C, fn, spying(fn))
    return counts


def per_param(cls):
    """The optimizer with the base class's group update: one ``_update`` (fused_update) per
    parameter, the path every step took before the multi-tensor entries."""
    return type("PerParam" + cls.__name__, (cls,), {"_step_group": optim.Optimizer._step_group})


def model(dtype=gpucore.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [
        gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(s), dtype=dtype)) for s in SHAPES
    ]


def set_grads(ps, i, skip=()):
    rng = np.random.default_rng(100 + i)
    for k, p in enumerate(ps):
        g = rng.standard_normal(tuple(p.shape))
        p.grad = None if k in skip else gpucore.tensor(g, dtype=p.dtype)


def train(opt, ps, steps=3, skip=lambda i: ()):
    for i in range(steps):
        set_grads(ps, i, skip(i))
        opt.step()


def bits(t):
    return np.ascontiguousarray(t.detach().numpy()).view(np.uint8)


def assert_same(ps, qs, opt_a, opt_b):
    """Bitwise the same parameters and the same state (buffers bitwise, steps equal)."""
    for p, q in zip(ps, qs):
        assert p.dtype is q.dtype
        np.testing.assert_array_equal(bits(p), bits(q))
    sa, sb = opt_a.state_dict()["state"], opt_b.state_dict()["state"]
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].keys() == sb[k].keys()
        for name, a in sa[k].items():
            b = sb[k][name]
            if isinstance(a, gpucore.Tensor):
                np.testing.assert_array_equal(bits(a), bits(b))
            else:
                assert a == b


def two_groups(ps, **second):
    return [{"params": ps[:3]}, {"params": ps[3:], **second}]


CASES = [
    (optim.SGD, dict(lr=0.05)),
    (optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.25, weight_decay=0.01)),
    (optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    (optim.Adam, dict(lr=0.01)),
    (optim.Adam, dict(lr=0.01, betas=(0.3, 0.6), eps=1e-6, weight_decay=0.1)),
    (optim.Adam, dict(lr=0.01, amsgrad=True, maximize=True)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (optim.AdamW, dict(lr=0.02, betas=(0.85, 0.95), maximize=True)),
    (optim.RMSprop, dict(lr=0.01)),
    (optim.RMSprop, dict(lr=0.01, alpha=0.3, eps=1e-6, weight_decay=0.1)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.9, centered=True)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True, maximize=True)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}{v}' for k, v in kw.items())}" for cls, kw in CASES]


def kernel_of(cls):
    return {
        optim.SGD: "sgd_step",
        optim.Adam: "adam_step",
        optim.AdamW: "adam_step",
        optim.RMSprop: "rmsprop_step",
    }[cls]


@pytest.mark.parametrize("dtype", [gpucore.float32, gpucore.float64])
@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_one_c_call_per_group_and_the_same_bits(calls, cls, kw, dtype):
    ps, qs = model(dtype), model(dtype)
    # the second group's options differ: each group is its own call with its own options
    opt = cls(two_groups(ps, lr=kw["lr"] * 0.5), **kw)
    ref = per_param(cls)(two_groups(qs, lr=kw["lr"] * 0.5), **kw)
    train(ref, qs)
    name = kernel_of(cls)
    assert calls[name] == 3 * len(SHAPES) and calls[name + "_multi"] == 0
    calls.clear()
    train(opt, ps)
    assert calls[name + "_multi"] == 3 * 2, calls  # 3 steps x 2 groups
    assert calls[name + "_multi_params"] == 3 * len(SHAPES)
    assert calls[name] == 0
    assert_same(ps, qs, opt, ref)


@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_a_parameter_whose_gradient_starts_later(calls, cls, kw):
    # SGD's momentum buffer (and Adam's / RMSprop's state) created at a later step for one
    # parameter: per-parameter 'first' flags and step counts in one call
    ps, qs = model(), model()
    opt, ref = cls(ps, **kw), per_param(cls)(qs, **kw)

    def skip(i):
        return (1, 4) if i == 0 else ((4,) if i == 1 else ())

    train(opt, ps, steps=4, skip=skip)
    train(ref, qs, steps=4, skip=skip)
    assert_same(ps, qs, opt, ref)
    assert calls[kernel_of(cls) + "_multi"] == 4
    if cls is not optim.SGD:
        assert opt.state[ps[1]]["step"] == 3 and opt.state[ps[4]]["step"] == 2


def mixed_model(seed=0):
    """A group that mixes what the multi call takes with what it does not: float32 (taken),
    float16 and a transposed view (composite path), a float64 gradient for a float32 parameter
    (cast, then the single kernel), one without gradient, and another float32 (taken)."""
    rng = np.random.default_rng(seed)
    a = gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal((4, 3)), dtype=gpucore.float32))
    b = gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(6), dtype=gpucore.float16))
    base = gpucore.tensor(rng.standard_normal((3, 5)), dtype=gpucore.float32)
    c = gpucore.nn.Parameter(base.t())
    assert not c.is_contiguous()
    d = gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(4), dtype=gpucore.float32))
    e = gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(7), dtype=gpucore.float32))
    f = gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal((2, 2)), dtype=gpucore.float32))
    return [a, b, c, d, e, f]


def mixed_grads(ps, i):
    rng = np.random.default_rng(50 + i)
    for k, p in enumerate(ps):
        g = rng.standard_normal(tuple(p.shape))
        if k == 3:
            p.grad = None
        elif k == 4:
            p.grad = gpucore.tensor(g, dtype=gpucore.float64)
        else:
            p.grad = gpucore.tensor(g, dtype=p.dtype)


@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_mixed_group(calls, cls, kw):
    ps, qs = mixed_model(), mixed_model()
    opt, ref = cls(ps, **kw), per_param(cls)(qs, **kw)
    for i in range(3):
        mixed_grads(qs, i)
        ref.step()
    calls.clear()
    for i in range(3):
        mixed_grads(ps, i)
        opt.step()
    assert_same(ps, qs, opt, ref)
    name = kernel_of(cls)
    assert calls[name + "_multi"] == 3 and calls[name + "_multi_params"] == 3 * 2  # a and f
    assert calls[name] == 3  # e
    assert ps[3] not in opt.state or not opt.state[ps[3]]
    assert ps[1].dtype is gpucore.float16


def test_a_parameter_listed_twice_is_stepped_twice_as_before(calls):
    ps, qs = model(), model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optim.Adam([ps[0], ps[1], ps[0]], lr=0.01)
        ref = per_param(optim.Adam)([qs[0], qs[1], qs[0]], lr=0.01)
    train(opt, ps[:2])
    train(ref, qs[:2])
    assert_same(ps, qs, opt, ref)
    assert opt.state[ps[0]]["step"] == 6
    assert calls["adam_step_multi"] == 0


def test_parameters_sharing_memory_are_updated_one_after_the_other(calls):
    def views():
        base = gpucore.tensor(np.linspace(-1, 1, 9), dtype=gpucore.float32)
        return [gpucore.nn.Parameter(base[0:6]), gpucore.nn.Parameter(base[3:9])]

    ps, qs = views(), views()
    opt = optim.SGD(ps, lr=0.1, momentum=0.9)
    ref = per_param(optim.SGD)(qs, lr=0.1, momentum=0.9)
    train(opt, ps, steps=2)
    train(ref, qs, steps=2)
    assert_same(ps, qs, opt, ref)
    # the multi call refused the overlap before writing anything; the single calls ran (from
    # the second step on, the one-loop step of optim/_host_step.py asks first, refused too)
    assert calls["sgd_step_multi"] == 3 and calls["sgd_step"] == 2 * 2 * 2


def test_versions_are_bumped_once_per_step():
    ps = model()
    opt = optim.Adam(ps, lr=0.01, amsgrad=True)
    set_grads(ps, 0)
    y = (ps[0] * ps[0]).sum()
    v0 = [p._vbox[0] for p in ps]
    g0 = [p.grad._vbox[0] for p in ps]
    opt.step()
    assert [p._vbox[0] for p in ps] == [v + 1 for v in v0]
    assert [p.grad._vbox[0] for p in ps] == g0  # gradients are only read
    for p in ps:
        st = opt.state[p]
        assert [st[k]._vbox[0] for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")] == [1, 1, 1]
    with pytest.raises(gpucore.errors.AutogradError):
        y.backward()


def test_profiler_and_trace_see_the_group_update():
    ps = model()
    opt = optim.Adam(two_groups(ps), lr=0.01)
    set_grads(ps, 0)
    with gpucore.profiler() as prof:
        opt.step()
    assert [e[:2] for e in prof.events] == [("adam_step", "cpu")] * 2  # one per group
    with gpucore.dispatch.trace_ops() as ops:
        opt.step()
    assert ops == [("adam_step", "cpu", s) for s in SHAPES]  # one per parameter, as before


def test_state_dict_round_trip_through_the_group_update(tmp_path):
    ps, qs = model(), model()
    opt = optim.Adam(ps, lr=0.01, amsgrad=True)
    train(opt, ps, steps=2)
    path = tmp_path / "opt.pt"
    gpucore.save({"opt": opt.state_dict(), "ps": [p.detach() for p in ps]}, path)
    saved = gpucore.load(path)
    for q, p in zip(qs, saved["ps"]):
        with gpucore.no_grad():
            q.copy_(p)
    resumed = optim.Adam(qs, lr=0.01, amsgrad=True)
    resumed.load_state_dict(saved["opt"])
    for i in range(2, 4):
        set_grads(ps, i)
        set_grads(qs, i)
        opt.step()
        resumed.step()
    assert_same(ps, qs, opt, resumed)
