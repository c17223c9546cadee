"""Modules, optimizers and schedulers pickle and deepcopy after training (their Parameters hold
``.grad`` and AccumulateGrad nodes with weakrefs, which Tensor.__reduce_ex__ drops): identical
outputs, and training continues identically from the copy, as in PyTorch."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import gpucore
from gpucore import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        self.head = nn.Linear(6, 10)
        self.head.weight = self.emb.weight  # tied weights

    def forward(self, idx):
        return self.head(gpucore.relu(self.bn(self.fc(self.emb(idx)))))


def _setup(seed: int = 0):
    gpucore.manual_seed(seed)
    model = Net()
    opt = gpucore.optim.AdamW(model.parameters(), lr=1e-2)
    sched = gpucore.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    idx, target = gpucore.randint(0, 10, (8,)), gpucore.randint(0, 10, (8,))
    return model, opt, sched, idx, target


def _step(model, opt, sched, idx, target) -> float:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(idx), target)
    loss.backward()
    opt.step()
    sched.step()
    return loss.item()


def _trained():
    model, opt, sched, idx, target = _setup()
    for _ in range(3):
        _step(model, opt, sched, idx, target)
    loss = nn.functional.cross_entropy(model(idx), target)
    loss.backward()  # leave gradients (and the graph's nodes) on the parameters
    return model, opt, sched, idx, target


def _continue_identically(a, b, idx, target):
    """Train both (model, opt, sched) triples: every loss and final weight bit-identical."""
    for _ in range(3):
        assert _step(*a, idx, target) == _step(*b, idx, target)
    for (n, p), (_, q) in zip(a[0].state_dict().items(), b[0].state_dict().items()):
        assert np.array_equal(p.numpy(), q.numpy()), n


def test_deepcopy_of_a_trained_model_and_optimizer():
    model, opt, sched, idx, target = _trained()
    m2, o2, s2 = copy.deepcopy((model, opt, sched))
    assert m2.head.weight is m2.emb.weight  # ties kept
    assert all(a is b for a, b in zip(o2.param_groups[0]["params"], m2.parameters()))
    assert m2.fc.weight.grad is not None  # deepcopy keeps .grad, as PyTorch
    model.eval(), m2.eval()
    assert np.array_equal(model(idx).detach().numpy(), m2(idx).detach().numpy())
    model.train(), m2.train()
    _continue_identically((model, opt, sched), (m2, o2, s2), idx, target)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_pickle_of_a_trained_model_and_optimizer(protocol):
    model, opt, sched, idx, target = _trained()
    data = pickle.dumps({"model": model, "opt": opt, "sched": sched}, protocol=protocol)
    back = pickle.loads(data)
    m2, o2, s2 = back["model"], back["opt"], back["sched"]
    assert m2.head.weight is m2.emb.weight and type(m2.fc.weight) is nn.Parameter
    assert m2.fc.weight.grad is None  # pickling drops .grad, as PyTorch
    assert s2.optimizer is o2
    assert o2.state[o2.param_groups[0]["params"][0]]["exp_avg"].shape == m2.emb.weight.shape
    model.eval(), m2.eval()
    assert np.array_equal(model(idx).detach().numpy(), m2(idx).detach().numpy())
    model.train(), m2.train()
    _continue_identically((model, opt, sched), (m2, o2, s2), idx, target)


def test_whole_checkpoint_through_gpucore_save(tmp_path):
    model, opt, sched, idx, target = _trained()
    gpucore.save({"model": model, "opt": opt, "sched": sched}, tmp_path / "all.pt")
    ck = gpucore.load(tmp_path / "all.pt", weights_only=False)
    _continue_identically((model, opt, sched), (ck["model"], ck["opt"], ck["sched"]), idx, target)


def test_modules_with_hooks_and_buffers():
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    m.register_buffer("steps", gpucore.tensor(3), persistent=False)
    m(gpucore.randn(4, 2))  # running stats move
    back = pickle.loads(pickle.dumps(m))
    assert back.steps.item() == 3 and "steps" not in back.state_dict()
    assert back[1].running_mean.tolist() == m[1].running_mean.tolist()
    assert back[1].num_batches_tracked.item() == 1
    handle = back.register_forward_hook(_double)  # a module-level function pickles
    back2 = pickle.loads(pickle.dumps(back))
    x = gpucore.randn(3, 2)
    back.eval(), back2.eval()
    assert back2(x).tolist() == back(x).tolist()
    handle.remove()


def _double(module, inputs, output):
    return output * 2


def test_same_semantics_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, gpucore):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        m(lib.ones(1, 3)).sum().backward()
        opt.step()
        m(lib.ones(1, 3)).sum().backward()
        m2, o2 = pickle.loads(pickle.dumps((m, opt)))
        assert m2.weight.grad is None and m2.weight.requires_grad, lib.__name__
        assert o2.param_groups[0]["params"][0] is m2.weight, lib.__name__
        buf = o2.state[m2.weight]["momentum_buffer"]
        assert buf.tolist() == opt.state[m.weight]["momentum_buffer"].tolist(), lib.__name__
        m3 = copy.deepcopy(m)  # (torch's Parameter deepcopy drops .grad; gpucore's keeps it)
        assert m3.weight is not m.weight and m3.weight.tolist() == m.weight.tolist()
        assert type(m3.weight) is lib.nn.Parameter, lib.__name__
