"""What the optimizer and scheduler tests share: runners that step gpucore's and PyTorch's
optimizers on the same parameters and gradients, and float64 numpy references for Adadelta,
Adagrad, Adamax, NAdam and RAdam (the update rules of PyTorch's documentation, "Algorithm" boxes,
written plainly and independently of gpucore's code; tests/optim_ref.py has SGD, Adam, RMSprop).

Every family is checked against its numpy reference always, and against torch step by step when
torch is installed (``torch`` is None otherwise).
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest

import gpucore

try:  # optional: the parity checks are skipped without it
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

SHAPES = [(4, 3), (5,), (2, 1, 3)]
STEPS = 20
_RNG = np.random.default_rng(1234)
P0 = [_RNG.standard_normal(s) for s in SHAPES]
GRADS = [[_RNG.standard_normal(s) for s in SHAPES] for _ in range(STEPS)]


# ----------------------------------------------------------------------------- runners
def run_ours(make, dtype=gpucore.float64, p0=P0, grads=GRADS):
    """Step ``make(gpucore.optim, params)`` over ``grads`` (set as .grad); the parameters (numpy,
    float64) after each step, and the optimizer and parameters."""
    ps = [gpucore.nn.Parameter(gpucore.tensor(a, dtype=dtype)) for a in p0]
    opt = make(gpucore.optim, ps)
    out = []
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = gpucore.tensor(g, dtype=dtype)
        opt.step()
        out.append([p.detach().numpy().astype(np.float64) for p in ps])
    return out, opt, ps


@contextlib.contextmanager
def torch_float64():
    """torch's default dtype float64 (its optimizers then keep scalar state such as NAdam's
    mu_product in float64, as gpucore does)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def run_torch(make, p0=P0, grads=GRADS):
    """The same as ``run_ours`` with ``make(torch.optim, params)``, in float64."""
    with torch_float64():
        ps = [torch.nn.Parameter(torch.tensor(a)) for a in p0]
        opt = make(torch.optim, ps)
        out = []
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = torch.tensor(g)
            opt.step()
            out.append([p.detach().numpy().copy() for p in ps])
    return out, opt, ps


def run_reference(ref, kw, p0=P0, grads=GRADS):
    """A numpy reference run per parameter: the parameters after each step and the final state
    of each."""
    per_param = [ref(p, [gs[i] for gs in grads], **kw) for i, p in enumerate(p0)]
    steps = [[pp[0][t] for pp in per_param] for t in range(len(grads))]
    return steps, [pp[1] for pp in per_param]


def assert_steps_close(ours, want, rtol=1e-12, atol=1e-14):
    """Every parameter after every step."""
    assert len(ours) == len(want)
    for t, (a, b) in enumerate(zip(ours, want)):
        for i, (x, y) in enumerate(zip(a, b)):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"step {t}, param {i}")


def assert_state_matches_torch(ours, theirs, ps, qs, rtol=1e-10):
    """The same state entries per parameter, buffers equal, scalars equal."""
    for p, q in zip(ps, qs):
        a, b = ours.state[p], theirs.state[q]
        assert set(a) == set(b)
        for k, v in a.items():
            w = b[k]
            if isinstance(v, gpucore.Tensor):
                np.testing.assert_allclose(v.numpy(), w.detach().numpy(), rtol=rtol, atol=1e-14)
            else:
                assert float(v) == float(w) or math.isclose(float(v), float(w), rel_tol=rtol), k


def assert_matches_reference(make, ref, kw, keys=(), count=False):
    """``make``'s float64 steps equal the numpy reference ``ref``'s (with ``kw``), and so do the
    final state buffers named in ``keys`` (rtol 1e-12) and, with ``count``, the step counts;
    returns (opt, ps, states) for a caller's further state checks."""
    ours, opt, ps = run_ours(make)
    want, states = run_reference(ref, kw)
    assert_steps_close(ours, want)
    for p, st in zip(ps, states):
        if count:
            assert opt.state[p]["step"] == st["step"]
        for k in keys:
            np.testing.assert_allclose(opt.state[p][k].numpy(), st[k], rtol=1e-12)
    return opt, ps, states


def assert_matches_torch(make):
    """``make``'s steps and final state equal torch's, step by step (float64, rtol 1e-10)."""
    ours, opt, ps = run_ours(make)
    theirs, topt, qs = run_torch(make)
    assert_steps_close(ours, theirs, rtol=1e-10)
    assert_state_matches_torch(opt, topt, ps, qs)


def assert_bad_argument(make, message):
    """Constructing ``make(gpucore.optim, [p])`` raises ValueError matching ``message``."""
    p = gpucore.nn.Parameter(gpucore.zeros(2))
    with pytest.raises(ValueError, match=message):
        make(gpucore.optim, [p])


# ----------------------------------------------------------------------------- references
def _grad(p, g, maximize, weight_decay, coupled=True):
    g = -np.array(g, np.float64) if maximize else np.array(g, np.float64)
    return g + weight_decay * p if (weight_decay and coupled) else g


def adadelta(p, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    p = np.array(p, np.float64)
    v, u, out = np.zeros_like(p), np.zeros_like(p), []
    for g in grads:
        g = _grad(p, g, maximize, weight_decay)
        v = rho * v + (1 - rho) * g * g
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta
        out.append(p)
    return out, {"step": len(grads), "square_avg": v, "acc_delta": u}


def adagrad(
    p,
    grads,
    lr=1e-2,
    lr_decay=0.0,
    weight_decay=0.0,
    initial_accumulator_value=0.0,
    eps=1e-10,
    maximize=False,
):
    p = np.array(p, np.float64)
    s, out = np.full_like(p, initial_accumulator_value), []
    for t, g in enumerate(grads, 1):
        g = _grad(p, g, maximize, weight_decay)
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (np.sqrt(s) + eps)
        out.append(p)
    return out, {"step": len(grads), "sum": s}


def adamax(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    p = np.array(p, np.float64)
    m, u, out = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads, 1):
        g = _grad(p, g, maximize, weight_decay)
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr / (1 - b1**t) * m / u
        out.append(p)
    return out, {"step": len(grads), "exp_avg": m, "exp_inf": u}


def nadam(
    p,
    grads,
    lr=2e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.0,
    momentum_decay=4e-3,
    decoupled_weight_decay=False,
    maximize=False,
):
    b1, b2 = betas
    p = np.array(p, np.float64)
    m, v, mu_prod, out = np.zeros_like(p), np.zeros_like(p), 1.0, []
    for t, g in enumerate(grads, 1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        g = _grad(p, g, maximize, weight_decay, coupled=not decoupled_weight_decay)
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_prod = mu_prod * mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2**t)) + eps
        p = p - lr * (1 - mu) / (1 - mu_prod) * g / denom
        p = p - lr * mu_next / (1 - mu_prod * mu_next) * m / denom
        out.append(p)
    return out, {"step": len(grads), "mu_product": mu_prod, "exp_avg": m, "exp_avg_sq": v}


def radam(
    p,
    grads,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.0,
    decoupled_weight_decay=False,
    maximize=False,
):
    b1, b2 = betas
    p = np.array(p, np.float64)
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        g = _grad(p, g, maximize, weight_decay, coupled=not decoupled_weight_decay)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho_t > 5:
            r = math.sqrt(
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            )
            p = p - lr * m_hat * r * math.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
        else:
            p = p - lr * m_hat
        out.append(p)
    return out, {"step": len(grads), "exp_avg": m, "exp_avg_sq": v}


# ----------------------------------------------------------------------------- schedulers
def lr_sequence(lib, make_opt, make_sched, n=50, metrics=None):
    """(lr, momentum, betas) of every group at construction and after each of n (optimizer
    step, scheduler step); ``lib`` is gpucore or torch. ``metrics(i)`` feeds ReduceLROnPlateau."""
    optim = lib.optim
    ps = [lib.nn.Parameter(lib.zeros(2)) for _ in range(2)]
    opt = make_opt(optim, [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own deprecations are not under test
        sched = make_sched(optim.lr_scheduler, opt)

        def record():
            return [
                (g["lr"], g.get("momentum"), tuple(g["betas"]) if "betas" in g else None)
                for g in opt.param_groups
            ]

        out = [record()]
        for i in range(n):
            opt.step()
            sched.step() if metrics is None else sched.step(metrics(i))
            out.append(record())
            assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
    return out
