"""gpucore.optim.LBFGS: Rosenbrock minimized like torch's (the same iterates, evaluation and
iteration counts, with and without the strong-Wolfe line search, short histories, several
parameters), convergence without torch, each stopping rule, state_dict round trips (also from
torch's state dict), and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import optim_harness as h
import pytest

import gpucore
from gpucore import optim

X0 = [np.array([-1.2, 1.0, -0.5]), np.array([0.8, 1.5])]  # two parameters, one flat vector


def rosenbrock(parts, lib):
    x = lib.cat([p.reshape(-1) for p in parts])
    return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()


def minimize(lib, kw, steps=6, x0=X0, make=None):
    """``steps`` calls of step(closure); the parameters and loss after each, and the state."""
    if lib is gpucore:
        ps = [gpucore.nn.Parameter(gpucore.tensor(a, dtype=gpucore.float64)) for a in x0]
    else:
        ps = [lib.nn.Parameter(lib.tensor(a, dtype=lib.float64)) for a in x0]
    opt = lib.optim.LBFGS(ps, **kw) if make is None else make(lib, ps)
    calls = []

    def closure():
        opt.zero_grad()
        loss = rosenbrock(ps, lib)
        loss.backward()
        calls.append(1)
        return loss

    out = []
    for _ in range(steps):
        opt.step(closure)
        out.append((np.concatenate([p.detach().numpy().ravel() for p in ps]), len(calls)))
    return out, opt, ps


KWS = [
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7),
    dict(lr=0.05),
    dict(lr=1.0, max_iter=5, history_size=2),
    dict(line_search_fn="strong_wolfe", max_iter=30, max_eval=20, tolerance_change=1e-12),
]


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("kw", KWS)
def test_rosenbrock_iterates_match_torch(kw):
    ours, opt, ps = minimize(gpucore, kw)
    theirs, topt, qs = minimize(h.torch, kw)
    for (x, n), (y, m) in zip(ours, theirs):
        assert n == m  # the same closure calls: the same decisions in the search
        np.testing.assert_allclose(x, y, rtol=1e-7, atol=1e-9)
    a, b = opt.state[ps[0]], topt.state[qs[0]]
    assert (a["func_evals"], a["n_iter"]) == (b["func_evals"], b["n_iter"])
    assert len(a["old_dirs"]) == len(b["old_dirs"]) <= opt.param_groups[0]["history_size"]
    assert a["H_diag"] == pytest.approx(float(b["H_diag"]), rel=1e-6)


def test_strong_wolfe_converges_to_the_minimum():
    kw = dict(line_search_fn="strong_wolfe", tolerance_grad=1e-10, tolerance_change=1e-15)
    out, opt, ps = minimize(gpucore, kw, steps=5)
    np.testing.assert_allclose(out[-1][0], np.ones(5), atol=1e-9)
    assert rosenbrock(ps, gpucore).item() < 1e-15
    # once converged, a step evaluates once and returns (the gradient is below tolerance_grad)
    before = opt.state[ps[0]]["func_evals"]
    minimize_more = opt.step(lambda: _closure(opt, ps))
    assert minimize_more.item() < 1e-15
    assert opt.state[ps[0]]["func_evals"] == before + 1


def _closure(opt, ps):
    opt.zero_grad()
    loss = rosenbrock(ps, gpucore)
    loss.backward()
    return loss


def test_fixed_steps_decrease_the_loss_and_respect_max_iter():
    out, opt, ps = minimize(gpucore, dict(lr=0.05, max_iter=4), steps=3)
    assert opt.state[ps[0]]["n_iter"] == 12
    assert [n for _, n in out] == [4, 8, 12]  # max_iter evaluations per step (the last is free)
    start = rosenbrock([gpucore.tensor(a, dtype=gpucore.float64) for a in X0], gpucore).item()
    assert rosenbrock(ps, gpucore).item() < start


def test_max_eval_bounds_the_evaluations_of_one_step():
    kw = dict(line_search_fn="strong_wolfe", max_iter=100, max_eval=9)
    out, _, _ = minimize(gpucore, kw, steps=1)
    assert out[0][1] <= 9 + 1  # the line search may end the step on the evaluation it started


def test_a_zero_gradient_returns_at_once():
    p = gpucore.nn.Parameter(gpucore.ones(3, dtype=gpucore.float64))
    opt = optim.LBFGS([p])
    calls = []

    def closure():
        opt.zero_grad()
        loss = ((p - 1) ** 2).sum()
        loss.backward()
        calls.append(1)
        return loss

    assert opt.step(closure).item() == 0.0
    assert calls == [1] and "d" not in opt.state[p]


def test_a_quadratic_is_solved_exactly():
    # f(x) = 0.5 x'Ax - b'x with A s.p.d.: the minimum is A^-1 b
    rng = np.random.default_rng(0)
    m = rng.standard_normal((4, 4))
    a_np = m @ m.T + 4 * np.eye(4)
    b_np = rng.standard_normal(4)
    x = gpucore.nn.Parameter(gpucore.zeros(4, dtype=gpucore.float64))
    a, b = gpucore.tensor(a_np), gpucore.tensor(b_np)
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe", tolerance_change=1e-15)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * (a @ x)).sum() - (b * x).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(a_np, b_np), rtol=1e-8)


def test_state_dict_round_trip_resumes_exactly(tmp_path):
    kw = dict(line_search_fn="strong_wolfe", history_size=4, max_iter=3)
    straight, _, _ = minimize(gpucore, kw, steps=4)
    half, opt, ps = minimize(gpucore, kw, steps=2)
    path = tmp_path / "lbfgs.safetensors"
    gpucore.save(opt.state_dict(), path)
    x_mid = [p.detach().numpy() for p in ps]

    def resumed(lib, qs):
        o = lib.optim.LBFGS(qs, **kw)
        o.load_state_dict(gpucore.load(path))
        return o

    rest, opt2, qs = minimize(gpucore, kw, steps=2, x0=x_mid, make=resumed)
    for (x, _), (y, _) in zip(straight[2:], rest):
        np.testing.assert_array_equal(x, y)
    st = opt2.state[qs[0]]
    assert isinstance(st["t"], float) and isinstance(st["ro"][0], float)


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
def test_loads_torchs_state_dict():
    kw = dict(line_search_fn="strong_wolfe", max_iter=4)
    _, topt, qs = minimize(h.torch, kw, steps=2)
    sd = topt.state_dict()

    def convert(v):
        if isinstance(v, h.torch.Tensor):
            return gpucore.tensor(v.detach().numpy())
        if isinstance(v, list):
            return [convert(x) for x in v]
        return v

    mine = {"param_groups": sd["param_groups"], "state": {}}
    mine["state"] = {i: {k: convert(v) for k, v in st.items()} for i, st in sd["state"].items()}
    x_mid = [q.detach().numpy() for q in qs]

    def loaded(lib, ps):
        o = lib.optim.LBFGS(ps, **kw)
        o.load_state_dict(mine if lib is gpucore else sd)
        return o

    ours, _, _ = minimize(gpucore, kw, steps=2, x0=x_mid, make=loaded)
    theirs, _, _ = minimize(h.torch, kw, steps=2, x0=x_mid, make=loaded)
    for (x, n), (y, m) in zip(ours, theirs):
        assert n == m
        np.testing.assert_allclose(x, y, rtol=1e-8)


def test_errors():
    p = gpucore.nn.Parameter(gpucore.zeros(2))
    q = gpucore.nn.Parameter(gpucore.zeros(2))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [p]}, {"params": [q]}])
    opt = optim.LBFGS([p], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = ((p - 1) ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS([p]).step(None)
    assert optim.LBFGS([p], max_iter=8).param_groups[0]["max_eval"] == 10
