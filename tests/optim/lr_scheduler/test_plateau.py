"""ReduceLROnPlateau (gpucore/optim/lr_scheduler/plateau.py): every mode and threshold mode,
patience, cooldown, min_lr (one or per group) and eps, bit for bit against torch over 50 epochs
and by hand; tensors as metrics; state dicts; errors."""

from __future__ import annotations

import math

import optim_harness as h
import pytest

import gpucore
from gpucore.optim import lr_scheduler as L

SGD = lambda m, g: m.SGD(g, lr=0.1, momentum=0.9)  # noqa: E731


def falling_then_flat(i):
    return 1.0 / (1 + i) if i < 10 else 0.1 + 0.001 * math.sin(i)


def rising_then_flat(i):
    return -falling_then_flat(i)


CASES = {
    "defaults": (dict(), falling_then_flat),
    "min_rel_patience_cooldown": (
        dict(patience=2, cooldown=3, factor=0.5, threshold=0.01),
        falling_then_flat,
    ),
    "max_abs_min_lrs": (
        dict(
            mode="max",
            threshold_mode="abs",
            threshold=0.1,
            patience=2,
            cooldown=3,
            min_lr=[0.01, 0.02],
            factor=0.5,
        ),
        rising_then_flat,
    ),
    "max_rel": (dict(mode="max", patience=0, factor=0.7), rising_then_flat),
    "min_abs_eps": (
        dict(threshold_mode="abs", patience=1, eps=0.05, factor=0.3),
        falling_then_flat,
    ),
}


@pytest.mark.skipif(h.torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name", CASES)
def test_sequences_match_torch_exactly(name):
    kw, metric = CASES[name]

    def make(S, o):
        return S.ReduceLROnPlateau(o, **kw)

    ours = h.lr_sequence(gpucore, SGD, make, metrics=metric)
    assert ours == h.lr_sequence(h.torch, SGD, make, metrics=metric)


def run(metrics, **kw):
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = L.ReduceLROnPlateau(opt, **kw)
    out = []
    for m in metrics:
        opt.step()
        s.step(m)
        out.append(s.get_last_lr()[0])
    return out, s


def test_patience_and_cooldown_by_hand():
    # best 1.0 at epoch 1; epochs 2, 3 are bad (patience 1): reduce at epoch 3, then a cooldown
    # of 2 epochs in which bad epochs do not count; two more bad epochs reduce again
    lrs, s = run([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], patience=1, cooldown=2, factor=0.5)
    assert lrs == pytest.approx([0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025])
    assert s.best == 1.0 and s.last_epoch == 7


def test_threshold_modes():
    # rel: 0.9995 is not better than 1.0 * (1 - 1e-3); abs: it is better than 1.0 - 1e-4
    assert run([1.0, 0.9995, 0.9995], patience=0, threshold=1e-3)[0][-1] == pytest.approx(1e-3)
    assert run([1.0, 0.9995], patience=0, threshold=1e-4, threshold_mode="abs")[0] == [0.1, 0.1]
    # max mode: rising is good
    assert run([1.0, 2.0, 3.0], mode="max", patience=0)[0] == [0.1, 0.1, 0.1]


def test_min_lr_and_eps():
    lrs, _ = run([1.0] * 8, patience=0, factor=0.1, min_lr=0.0005)
    assert lrs[-1] == 0.0005
    # a change smaller than eps is not made
    lrs, _ = run([1.0] * 4, patience=0, factor=0.9, eps=0.05)
    assert lrs == [0.1] * 4


def test_tensor_metric_and_in_cooldown():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = L.ReduceLROnPlateau(opt, patience=0, cooldown=1)
    opt.step()
    s.step(gpucore.tensor(2.0))
    s.step(gpucore.tensor([3.0]))
    assert s.in_cooldown and opt.param_groups[0]["lr"] == pytest.approx(0.01)


def test_state_dict_round_trip(tmp_path):
    metrics = [falling_then_flat(i) for i in range(30)]
    straight, _ = run(metrics, patience=2, cooldown=1)
    _, s = run(metrics[:15], patience=2, cooldown=1)
    path = tmp_path / "plateau.safetensors"
    gpucore.save({"s": s.state_dict(), "o": s.optimizer.state_dict()}, path)
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s2 = L.ReduceLROnPlateau(opt)
    ck = gpucore.load(path)
    opt.load_state_dict(ck["o"])
    s2.load_state_dict(ck["s"])
    rest = []
    for m in metrics[15:]:
        opt.step()
        s2.step(m)
        rest.append(s2.get_last_lr()[0])
    assert rest == straight[15:]


def test_a_group_added_later():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    s = L.ReduceLROnPlateau(opt, patience=0, min_lr=0.001)
    opt.add_param_group({"params": [gpucore.nn.Parameter(gpucore.zeros(1))], "lr": 0.5})
    opt.step()
    s.step(1.0)
    s.step(1.0)
    assert s.get_last_lr() == pytest.approx([0.01, 0.05])
    per_group = L.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0, 0.0])
    opt.add_param_group({"params": [gpucore.nn.Parameter(gpucore.zeros(1))]})
    per_group.step(1.0)
    with pytest.raises(RuntimeError, match="differs from when `ReduceLROnPlateau`"):
        per_group.step(1.0)


def test_errors():
    opt = SGD(gpucore.optim, [gpucore.nn.Parameter(gpucore.zeros(1))])
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        L.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode median is unknown!"):
        L.ReduceLROnPlateau(opt, mode="median")
    with pytest.raises(ValueError, match="threshold mode pct is unknown!"):
        L.ReduceLROnPlateau(opt, threshold_mode="pct")
    with pytest.raises(ValueError, match="expected 1 min_lrs, got 2"):
        L.ReduceLROnPlateau(opt, min_lr=[0.1, 0.2])
    with pytest.raises(TypeError, match="is not an Optimizer"):
        L.ReduceLROnPlateau(object())
