"""gpucore.optim: SGD, Adam, AdamW, RMSprop against float64 references (3 steps each), hand-
computed scalar cases, per-group options, zero_grad, skipped parameters, state_dict round trips,
validation and the composite (float16 / non-contiguous) path."""

from __future__ import annotations

import warnings

import numpy as np
import optim_ref as ref
import pytest

import gpucore
from gpucore import optim
from gpucore.errors import AutogradError

RNG = np.random.default_rng(7)
P0 = RNG.standard_normal((3, 4))
GRADS = [RNG.standard_normal((3, 4)) for _ in range(3)]


def param(a, dtype=gpucore.float64):
    return gpucore.nn.Parameter(gpucore.tensor(np.array(a), dtype=dtype))


def run(make_opt, grads=GRADS, p0=P0, dtype=gpucore.float64):
    """Step an optimizer over ``grads`` (set as .grad); the parameter after each step."""
    p = param(p0, dtype)
    opt = make_opt([p])
    out = []
    for g in grads:
        p.grad = gpucore.tensor(np.array(g), dtype=dtype)
        opt.step()
        out.append(p.detach().numpy().astype(np.float64))
    return out, opt, p


def check(ours, want, rtol=1e-12, atol=1e-14):
    assert len(ours) == len(want)
    for o, w in zip(ours, want):
        np.testing.assert_allclose(o, w, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- hand-computed
def test_sgd_momentum_dampening_by_hand():
    # p = 1, grads 1, 2, 3; lr 0.1, momentum 0.9, dampening 0.5:
    # buf1 = 1 (first step: the gradient), p1 = 1 - 0.1 = 0.9
    # buf2 = 0.9 * 1 + 0.5 * 2 = 1.9,       p2 = 0.9 - 0.19 = 0.71
    # buf3 = 0.9 * 1.9 + 0.5 * 3 = 3.21,    p3 = 0.71 - 0.321 = 0.389
    out, opt, p = run(
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
        grads=[[1.0], [2.0], [3.0]],
        p0=[1.0],
    )
    check(out, [[0.9], [0.71], [0.389]])
    assert opt.state[p]["momentum_buffer"].item() == pytest.approx(3.21, rel=1e-14)


def test_sgd_nesterov_weight_decay_by_hand():
    # p = 1, grads 1, 1; lr 0.1, momentum 0.5, nesterov, weight_decay 0.1:
    # g1 = 1 + 0.1 = 1.1, buf1 = 1.1, step = 1.1 + 0.5 * 1.1 = 1.65, p1 = 1 - 0.165 = 0.835
    # g2 = 1 + 0.0835 = 1.0835, buf2 = 0.55 + 1.0835 = 1.6335,
    # step = 1.0835 + 0.81675 = 1.90025, p2 = 0.835 - 0.190025 = 0.644975
    out, _, _ = run(
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.5, nesterov=True, weight_decay=0.1),
        grads=[[1.0], [1.0]],
        p0=[1.0],
    )
    check(out, [[0.835], [0.644975]])


def test_adam_bias_correction_by_hand():
    # With bias correction, Adam's first step is -lr * sign(g) (up to eps): m1 = 0.1 g,
    # v1 = 0.001 g^2, mhat = g, vhat = g^2 -> p1 = p0 - lr * g / (|g| + eps).
    # Step 2 with g2 = g1: mhat = g, vhat = g^2 again -> another -lr * sign(g).
    out, opt, p = run(
        lambda ps: optim.Adam(ps, lr=0.01, eps=0.0), grads=[[4.0, -0.5], [4.0, -0.5]], p0=[1.0, 1.0]
    )
    check(out, [[0.99, 1.01], [0.98, 1.02]])
    st = opt.state[p]
    assert st["step"] == 2
    # m2 = 0.9 * 0.4 + 0.1 * 4 = 0.76 ; v2 = 0.999 * 0.016 + 0.001 * 16 = 0.031984
    np.testing.assert_allclose(st["exp_avg"].numpy(), [0.76, -0.095], rtol=1e-14)
    np.testing.assert_allclose(st["exp_avg_sq"].numpy(), [0.031984, 0.00049975], rtol=1e-13)


def test_adamw_decoupled_by_hand():
    # AdamW, g = 0: the moments stay 0 and only the decay acts: p *= (1 - lr * wd) per step.
    out, _, _ = run(
        lambda ps: optim.AdamW(ps, lr=0.1, weight_decay=0.5), grads=[[0.0], [0.0], [0.0]], p0=[2.0]
    )
    check(out, [[1.9], [1.805], [1.71475]])
    # Adam's coupled decay instead feeds wd * p into the moments: the first step is -lr.
    out, _, _ = run(
        lambda ps: optim.Adam(ps, lr=0.1, weight_decay=0.5, eps=0.0), grads=[[0.0]], p0=[2.0]
    )
    check(out, [[1.9]])


# ----------------------------------------------------------------------------- references
SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True, maximize=True),
]


@pytest.mark.parametrize("kw", SGD_CASES)
def test_sgd(kw):
    out, opt, p = run(lambda ps: optim.SGD(ps, **kw))
    want, st = ref.sgd(P0, GRADS, **kw)
    check(out, want)
    if kw.get("momentum"):
        np.testing.assert_allclose(
            opt.state[p]["momentum_buffer"].numpy(), st["momentum_buffer"], rtol=1e-12
        )
    else:
        assert p not in opt.state  # as PyTorch: plain SGD keeps no state
        assert opt.state_dict()["state"] == {}


ADAM_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.02, amsgrad=True, weight_decay=0.05, maximize=True),
    dict(lr=0.01, betas=(0.3, 0.6)),  # beta1 < 0.5: lerp's other branch
]


@pytest.mark.parametrize("kw", ADAM_CASES)
def test_adam(kw):
    out, opt, p = run(lambda ps: optim.Adam(ps, **kw))
    want, st = ref.adam(P0, GRADS, **kw)
    check(out, want)
    for k, v in st.items():
        got = opt.state[p][k]
        if k == "step":
            assert got == v
        else:
            np.testing.assert_allclose(got.numpy(), v, rtol=1e-12, atol=1e-15)


def test_amsgrad_uses_the_running_max():
    # a large gradient then small ones: v decays, so amsgrad's max differs from v
    grads = [np.full((3, 4), 10.0), np.full((3, 4), 0.1), np.full((3, 4), 0.1)]
    out, opt, p = run(lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True), grads=grads)
    want, st = ref.adam(P0, grads, lr=0.01, amsgrad=True)
    check(out, want)
    plain, _ = ref.adam(P0, grads, lr=0.01)
    assert not np.allclose(plain[-1], want[-1], rtol=1e-6, atol=0)
    assert (opt.state[p]["max_exp_avg_sq"].numpy() > opt.state[p]["exp_avg_sq"].numpy()).all()


ADAMW_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, weight_decay=0.3, amsgrad=True),
    dict(lr=0.05, weight_decay=0.1, maximize=True, betas=(0.85, 0.95)),
]


@pytest.mark.parametrize("kw", ADAMW_CASES)
def test_adamw(kw):
    out, opt, _ = run(lambda ps: optim.AdamW(ps, **kw))
    kw = dict(kw)
    kw.setdefault("weight_decay", 1e-2)  # AdamW's default
    want, _ = ref.adam(P0, GRADS, decoupled=True, **kw)
    check(out, want)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


RMSPROP_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, alpha=0.9, eps=1e-6),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, centered=True),
    dict(lr=0.01, centered=True, momentum=0.8, weight_decay=0.1),
    dict(lr=0.01, centered=True, momentum=0.5, maximize=True, alpha=0.3),
]


@pytest.mark.parametrize("kw", RMSPROP_CASES)
def test_rmsprop(kw):
    out, opt, p = run(lambda ps: optim.RMSprop(ps, **kw))
    want, st = ref.rmsprop(P0, GRADS, **kw)
    check(out, want)
    assert set(opt.state[p]) == set(st)
    for k, v in st.items():
        if k != "step":
            np.testing.assert_allclose(opt.state[p][k].numpy(), v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "make, rule",
    [
        (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), lambda: ref.sgd(P0, GRADS, 0.1, 0.9)),
        (lambda ps: optim.Adam(ps, lr=0.01), lambda: ref.adam(P0, GRADS, 0.01)),
        (
            lambda ps: optim.RMSprop(ps, lr=0.01, centered=True),
            lambda: ref.rmsprop(P0, GRADS, 0.01, centered=True),
        ),
    ],
)
def test_float32_params(make, rule):
    out, _, _ = run(make, dtype=gpucore.float32)
    want, _ = rule()
    check(out, want, rtol=2e-5, atol=1e-6)


def test_maximize_is_descent_on_the_negated_gradient():
    up, _, _ = run(lambda ps: optim.Adam(ps, lr=0.01, maximize=True))
    neg, _, _ = run(lambda ps: optim.Adam(ps, lr=0.01), grads=[-g for g in GRADS])
    check(up, neg, rtol=0, atol=0)


# ----------------------------------------------------------------------------- groups
def test_param_groups_per_group_options():
    a, b = param(P0), param(P0)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["momentum"] == 0.0  # filled from the defaults
    assert len(opt.param_groups[1]["params"]) == 1 and opt.param_groups[1]["params"][0] is b
    for g in GRADS:
        a.grad = gpucore.tensor(g)
        b.grad = gpucore.tensor(g)
        opt.step()
    check([a.detach().numpy()], [ref.sgd(P0, GRADS, 0.1)[0][-1]])
    check([b.detach().numpy()], [ref.sgd(P0, GRADS, 0.5, 0.9)[0][-1]])


def test_group_lr_written_between_steps_is_used():
    out = []
    p = param(P0)
    opt = optim.SGD([p], lr=0.1)
    for i, g in enumerate(GRADS):
        opt.param_groups[0]["lr"] = 0.1 * (i + 1)
        p.grad = gpucore.tensor(g)
        opt.step()
        out.append(p.detach().numpy())
    want = P0 - 0.1 * GRADS[0] - 0.2 * GRADS[1] - 0.3 * GRADS[2]
    check([out[-1]], [want])


def test_add_param_group():
    a, b = param(P0), param(P0)
    opt = optim.Adam([a], lr=0.01)
    opt.add_param_group({"params": [b], "lr": 0.02})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="ordered collections"):
        opt.add_param_group({"params": {param(P0)}})


def test_named_parameters_are_accepted():
    a = param(P0)
    opt = optim.SGD([("w", a)], lr=0.1)
    assert opt.param_groups[0]["params"][0] is a
    assert opt.param_groups[0]["param_names"] == ["w"]


def test_constructor_errors():
    p = param(P0)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid momentum"):
        optim.RMSprop([p], momentum=-0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="floating-point"):
        optim.SGD([gpucore.tensor([1, 2])], lr=0.1)


def test_edited_group_options_are_validated_at_step():
    p = param(P0)
    opt = optim.SGD([p], lr=0.1)
    opt.param_groups[0]["lr"] = -0.5
    p.grad = gpucore.tensor(GRADS[0])
    with pytest.raises(ValueError, match="Invalid learning rate"):
        opt.step()


# ----------------------------------------------------------------------------- zero_grad, skips
def test_zero_grad():
    p = param(P0)
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    opt.zero_grad()
    assert p.grad is None
    (p * p).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g
    assert (p.grad.numpy() == 0).all()
    opt.zero_grad(set_to_none=False)  # nothing to do when already zero / None is fine
    opt.zero_grad()
    opt.zero_grad()


def test_params_without_grad_are_skipped():
    a, b = param(P0), param(P0)
    for make in (
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.Adam(ps),
        lambda ps: optim.RMSprop(ps, centered=True),
    ):
        opt = make([a, b])
        before = b.detach().numpy().copy()
        a.grad = gpucore.tensor(GRADS[0])
        b.grad = None
        opt.step()
        assert (b.detach().numpy() == before).all()
        assert b not in opt.state or not opt.state[b]
        assert opt.state[a]


def test_closure():
    p = param(P0)
    opt = optim.SGD([p], lr=0.1)
    calls = []

    def closure():
        assert gpucore.is_grad_enabled()
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        calls.append(1)
        return loss

    with gpucore.no_grad():
        loss = opt.step(closure)
    assert calls == [1]
    assert loss.item() == pytest.approx((P0**2).sum())
    check([p.detach().numpy()], [P0 - 0.1 * 2 * P0])


def test_step_bumps_version_counters():
    # A graph that saved the parameter sees the in-place update (as a PyTorch in-place op).
    p = param(P0)
    opt = optim.Adam([p], lr=0.01)
    y = (p * p).sum()
    v0 = p._vbox[0]
    p.grad = gpucore.tensor(GRADS[0])
    opt.step()
    assert p._vbox[0] == v0 + 1
    assert opt.state[p]["exp_avg"]._vbox[0] == 1
    with pytest.raises(AutogradError):
        y.backward()


# ----------------------------------------------------------------------------- composite path
@pytest.mark.parametrize(
    "make, rule, kw",
    [
        (optim.SGD, ref.sgd, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
        (optim.Adam, ref.adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
        (optim.AdamW, lambda *a, **k: ref.adam(*a, decoupled=True, **k), dict(lr=0.01)),
        (optim.RMSprop, ref.rmsprop, dict(lr=0.01, centered=True, momentum=0.9)),
    ],
)
def test_float16_params_use_the_composite_path(make, rule, kw):
    p0 = np.float16(P0).astype(np.float64)
    grads = [np.float16(g).astype(np.float64) for g in GRADS]
    out, opt, p = run(lambda ps: make(ps, **kw), grads=grads, p0=p0, dtype=gpucore.float16)
    assert p.dtype is gpucore.float16
    assert all(
        t.dtype is gpucore.float16 for t in opt.state[p].values() if isinstance(t, gpucore.Tensor)
    )
    if make is optim.AdamW:
        kw = dict(kw, weight_decay=1e-2)
    want, _ = rule(p0, grads, **kw)
    check(out, want, rtol=3e-3, atol=3e-3)


def test_non_contiguous_param_uses_the_composite_path():
    base = gpucore.tensor(P0.T.copy())
    p = gpucore.nn.Parameter(base.t())  # a transposed (non-contiguous) view
    assert not p.is_contiguous()
    opt = optim.Adam([p], lr=0.01)
    for g in GRADS:
        p.grad = gpucore.tensor(g)
        opt.step()
    want, _ = ref.adam(P0, GRADS, lr=0.01)
    check([p.detach().numpy()], [want[-1]], rtol=1e-6)


# ----------------------------------------------------------------------------- state dicts
def _model(dtype=gpucore.float32):
    rng = np.random.default_rng(3)
    return [
        gpucore.nn.Parameter(gpucore.tensor(rng.standard_normal(s), dtype=dtype))
        for s in ((4, 3), (3,), (2, 2))
    ]


def _loss(ps, i):
    tgt = [np.sin(np.arange(p.numel()) + i).reshape(tuple(p.shape)) for p in ps]
    return sum(
        ((p - gpucore.tensor(t, dtype=p.dtype)) ** 2 * (1.0 + 0.1 * k)).sum()
        for k, (p, t) in enumerate(zip(ps, tgt))
    )


def _train(opt, ps, start, n):
    for i in range(start, start + n):
        opt.zero_grad()
        _loss(ps, i).backward()
        opt.step()


OPTIMS = [
    lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: optim.SGD(
        [{"params": ps[:1], "lr": 0.01}, {"params": ps[1:]}], lr=0.05, momentum=0.5, dampening=0.1
    ),
    lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    lambda ps: optim.RMSprop(ps, lr=0.01, centered=True, momentum=0.9, weight_decay=0.01),
]


def _plain(obj):
    """Only tensors, numbers, strings, bools, None, lists, tuples and dicts."""
    if isinstance(obj, dict):
        return all(isinstance(k, (str, int)) and _plain(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return all(_plain(v) for v in obj)
    return obj is None or isinstance(obj, (gpucore.Tensor, bool, int, float, str))


@pytest.mark.parametrize("make", OPTIMS)
def test_state_dict_round_trip_resumes_exactly(make, tmp_path):
    straight = _model()
    opt = make(straight)
    _train(opt, straight, 0, 10)

    resumed = _model()
    opt2 = make(resumed)
    _train(opt2, resumed, 0, 5)
    path = tmp_path / "ckpt.safetensors"
    gpucore.save({"opt": opt2.state_dict(), "params": [p.detach() for p in resumed]}, path)

    fresh = _model()
    opt3 = make(fresh)
    ck = gpucore.load(path)
    with gpucore.no_grad():
        for p, v in zip(fresh, ck["params"]):
            p.copy_(v)
    opt3.load_state_dict(ck["opt"])
    _train(opt3, fresh, 5, 5)
    for a, b in zip(straight, fresh):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("make", OPTIMS)
def test_state_dict_layout(make):
    ps = _model()
    opt = make(ps)
    _train(opt, ps, 0, 2)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert _plain(sd)
    assert sorted(i for g in sd["param_groups"] for i in g["params"]) == [0, 1, 2]
    assert set(sd["state"]) == {0, 1, 2}
    for i, st in sd["state"].items():
        for v in st.values():
            if isinstance(v, gpucore.Tensor):
                assert v.shape == ps[i].shape
    for g, og in zip(sd["param_groups"], opt.param_groups):
        assert {k: v for k, v in g.items() if k != "params"} == {
            k: v for k, v in og.items() if k != "params"
        }


def test_load_state_dict_copies_and_restores_options():
    ps = _model()
    opt = optim.Adam(ps, lr=0.01)
    _train(opt, ps, 0, 2)
    sd = opt.state_dict()
    ps2 = _model()
    opt2 = optim.Adam(ps2, lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.01
    assert opt2.param_groups[0]["params"][0] is ps2[0]
    st = opt2.state[ps2[0]]
    assert st["step"] == 2
    assert st["exp_avg"]._data is not sd["state"][0]["exp_avg"]._data  # no aliasing
    np.testing.assert_array_equal(st["exp_avg"].numpy(), sd["state"][0]["exp_avg"].numpy())


def test_load_state_dict_casts_to_the_param_dtype():
    ps = _model(gpucore.float32)
    opt = optim.SGD(ps, lr=0.1, momentum=0.9)
    _train(opt, ps, 0, 1)
    ps64 = _model(gpucore.float64)
    opt64 = optim.SGD(ps64, lr=0.1, momentum=0.9)
    opt64.load_state_dict(opt.state_dict())
    assert opt64.state[ps64[0]]["momentum_buffer"].dtype is gpucore.float64
    _train(opt64, ps64, 1, 1)


def test_load_state_dict_errors():
    ps = _model()
    opt = optim.Adam(ps, lr=0.01)
    _train(opt, ps, 0, 1)
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="parameter groups"):
        optim.Adam([{"params": ps[:1]}, {"params": ps[1:]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.Adam(ps[:2]).load_state_dict(sd)
    swapped = [ps[1], ps[0], ps[2]]
    with pytest.raises(ValueError, match="shape"):
        optim.Adam(swapped).load_state_dict(sd)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        optim.Adam(ps).load_state_dict({"state": {}})


def test_repr():
    opt = optim.SGD([param(P0)], lr=0.1, momentum=0.9)
    r = repr(opt)
    assert r.startswith("SGD (") and "Parameter Group 0" in r and "momentum: 0.9" in r


def test_no_warnings_in_normal_use():
    ps = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for make in OPTIMS:
            opt = make(ps)
            _train(opt, ps, 0, 2)


# ----------------------------------------------------------------------------- the fused ops
def test_fused_ops_check_their_tensors():
    from gpucore.errors import DTypeError, ShapeError
    from gpucore.ops.optim import ADAM_STEP, SGD_STEP, fused_update
    from gpucore.ops.registry import apply

    p, g = gpucore.zeros(3), gpucore.ones(3)
    hp = dict(
        step=1,
        lr=0.1,
        beta1=0.9,
        beta2=0.999,
        eps=1e-8,
        weight_decay=0.0,
        amsgrad=False,
        decoupled=False,
        maximize=False,
    )
    with pytest.raises(ShapeError, match="adam_step: state buffer 0 has shape"):
        fused_update(ADAM_STEP, p, g, gpucore.zeros(4), gpucore.zeros(3), **hp)
    with pytest.raises(DTypeError, match="adam_step: state buffer 1 is gpucore.float64"):
        fused_update(
            ADAM_STEP, p, g, gpucore.zeros(3), gpucore.zeros(3, dtype=gpucore.float64), **hp
        )
    with pytest.raises(ValueError, match="expected 5 tensors"):
        fused_update(ADAM_STEP, p, g, gpucore.zeros(3), gpucore.zeros(3), **dict(hp, amsgrad=True))
    sgd = dict(
        lr=0.1,
        momentum=0.0,
        dampening=0.0,
        weight_decay=0.0,
        nesterov=False,
        maximize=False,
        first=False,
    )
    with pytest.raises(TypeError, match="in place"):
        apply(SGD_STEP, p, g, **sgd)
    fused_update(SGD_STEP, p, g.double(), **sgd)  # the gradient is cast to the parameter's dtype
    np.testing.assert_allclose(p.numpy(), -0.1)
