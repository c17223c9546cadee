"""nn.utils.parametrize (register_parametrization, remove_parametrizations, is_parametrized,
cached) and nn.utils.parametrizations.weight_norm: the originals, the swapped class, state_dict
names, assignment through right_inverse, chaining, removal, errors; against hand formulas and
torch when installed."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.nn.utils import parametrize
from gpucore.nn.utils.parametrizations import weight_norm

RNG = np.random.default_rng(11)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class Scale(nn.Module):
    def forward(self, X):
        return 2 * X

    def right_inverse(self, X):
        return X / 2


def _linear(n=3):
    m = nn.Linear(n, n).to(gpucore.float64)
    with gpucore.no_grad():
        m.weight.copy_(gpucore.tensor(RNG.standard_normal((n, n))))
    return m


def test_register_a_parametrization_and_remove_it():
    m = _linear()
    w = m.weight.detach().numpy().copy()
    original = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, nn.Linear)
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert m.parametrizations.weight.original is original  # the same Parameter
    names = [n for n, _ in m.named_parameters()]
    assert names == ["bias", "parametrizations.weight.original"]
    sym = np.triu(w) + np.triu(w, 1).T
    np.testing.assert_allclose(m.weight.detach().numpy(), sym)
    m(gpucore.ones(2, 3, dtype=gpucore.float64)).sum().backward()
    # d/dW of sum(1 W^T) = 2 for every entry of W, folded by the symmetrization
    np.testing.assert_allclose(
        original.grad.numpy(), np.triu(np.full((3, 3), 2.0)) * (1 + np.triu(np.ones((3, 3)), 1))
    )
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"]  # re-registered last
    np.testing.assert_allclose(m.weight.detach().numpy(), sym)


def test_chaining_assignment_and_cached():
    m = _linear()
    w = m.weight.detach().numpy().copy()
    parametrize.register_parametrization(m, "weight", Scale())
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), w / 2)
    np.testing.assert_allclose(m.weight.detach().numpy(), w)
    parametrize.register_parametrization(m, "weight", Scale())
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w)
    m.weight = gpucore.ones(3, 3, dtype=gpucore.float64)  # through both right inverses
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), 0.25)
    with parametrize.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(m.weight.detach().numpy(), 0.25)


def test_parametrize_errors():
    m = _linear()
    with pytest.raises(ValueError, match="does not have a parameter"):
        parametrize.register_parametrization(m, "scale", Scale())
    with pytest.raises(ValueError, match="does not have a parametrization"):
        parametrize.remove_parametrizations(m, "weight")

    class Shrink(nn.Module):
        def forward(self, X):
            return X[:1]

    with pytest.raises(ValueError, match="shape"):
        parametrize.register_parametrization(m, "weight", Shrink())
    parametrize.register_parametrization(m, "weight", Symmetric())
    with pytest.raises(RuntimeError, match="right_inverse"):
        m.weight = gpucore.ones(3, 3, dtype=gpucore.float64)
    weight_norm(m, "bias", dim=None)
    with pytest.raises(ValueError, match="sequence of tensors"):
        parametrize.remove_parametrizations(m, "bias", leave_parametrized=False)


def test_weight_norm_parametrization():
    m = _linear()
    w = m.weight.detach().numpy().copy()
    weight_norm(m)
    assert list(m.state_dict()) == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    np.testing.assert_allclose(
        m.parametrizations.weight.original0.detach().numpy(),
        np.sqrt((w**2).sum(1, keepdims=True)),
    )
    np.testing.assert_allclose(m.weight.detach().numpy(), w, rtol=1e-12)
    with pytest.raises(IndexError, match="out of range"):
        weight_norm(_linear(), dim=2)


@pytest.mark.parametrize("dim", [0, 1, None, -2])
def test_weight_norm_parametrization_matches_torch(dim):
    torch = pytest.importorskip("torch")
    w, b = RNG.standard_normal((4, 2, 3)), RNG.standard_normal(4)
    x = RNG.standard_normal((2, 2, 7))
    outs = []
    for lib in (gpucore, torch):
        m = lib.nn.Conv1d(2, 4, 3, padding=1).double()
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
        m = lib.nn.utils.parametrizations.weight_norm(m, dim=dim)
        assert type(m).__name__ == "ParametrizedConv1d"
        y = m(lib.tensor(x))
        (y * y).sum().backward()
        names = [n for n, _ in m.named_parameters()]
        grads = [p.grad.numpy() for _, p in m.named_parameters()]
        outs.append((names, list(m.state_dict()), y.detach().numpy(), grads))
    (n1, k1, y1, g1), (n2, k2, y2, g2) = outs
    assert n1 == n2 and k1 == k2
    np.testing.assert_allclose(y1, y2, rtol=1e-10)
    for a, b_ in zip(g1, g2):
        np.testing.assert_allclose(a, b_, rtol=1e-10, atol=1e-12)


def test_symmetric_matches_torch():
    torch = pytest.importorskip("torch")

    class TorchSymmetric(torch.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    w = RNG.standard_normal((3, 3))
    ours = nn.Linear(3, 3).double()
    theirs = torch.nn.Linear(3, 3).double()
    for m, lib, sym in ((ours, gpucore, Symmetric()), (theirs, torch, TorchSymmetric())):
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.zero_()
        lib.nn.utils.parametrize.register_parametrization(m, "weight", sym)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy())


def test_removal_keeps_the_parameter_object_or_follows_the_grad_mode():
    m = _linear()
    original = m.weight
    parametrize.register_parametrization(m, "weight", Scale())
    parametrize.register_parametrization(m, "weight", Scale())
    parametrize.remove_parametrizations(m, "weight")
    assert m.weight is original  # an optimizer holding it keeps working
    # a weight_norm (two originals) removed under no_grad leaves a plain tensor (a buffer), as
    # PyTorch: the value is computed under the caller's grad mode
    m = weight_norm(_linear())
    with gpucore.no_grad():
        parametrize.remove_parametrizations(m, "weight")
    assert "weight" in m._buffers and [n for n, _ in m.named_parameters()] == ["bias"]
    m = weight_norm(_linear())
    parametrize.remove_parametrizations(m, "weight")
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"] and m.weight.is_leaf
    torch = pytest.importorskip("torch")
    t = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 3))
    with torch.no_grad():
        torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
    assert [n for n, _ in t.named_parameters()] == ["bias"] and "weight" in t._buffers
