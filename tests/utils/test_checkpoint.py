"""gpucore.utils.checkpoint: checkpoint and checkpoint_sequential give the gradients of the plain
forward (inputs and parameters, with and without an input that requires grad, float64 exact),
replay dropout's mask (the generator state is restored), keyword arguments, errors; against
PyTorch's where installed."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.utils.checkpoint import checkpoint, checkpoint_sequential


def _model(dropout=0.0):
    m = nn.Sequential(
        nn.Linear(4, 8), nn.Tanh(), nn.Dropout(dropout), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)
    ).double()
    rng = np.random.default_rng(1)
    with gpucore.no_grad():
        for p in m.parameters():
            p.copy_(gpucore.tensor(rng.uniform(-1, 1, tuple(p.shape))))
    return m


def _grads(run, input_grad=True, dropout=0.0):
    gpucore.manual_seed(5)
    m = _model(dropout)
    x = gpucore.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=input_grad)
    y = run(m, x)
    (y**2).sum().backward()
    return (
        [y.detach().numpy()]
        + [p.grad.numpy() for p in m.parameters()]
        + ([x.grad.numpy()] if input_grad else [])
    )


def _head(m):
    return lambda t: m[4](m[3](m[2](m[1](m[0](t)))))


@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("input_grad", [True, False])
def test_checkpoint_gives_the_plain_gradients(use_reentrant, input_grad):
    want = _grads(lambda m, x: m(x), input_grad)
    got = _grads(
        lambda m, x: m[5](checkpoint(_head(m), x, use_reentrant=use_reentrant)), input_grad
    )
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("segments", [1, 2, 3])
def test_checkpoint_sequential(segments):
    want = _grads(lambda m, x: m(x))
    got = _grads(lambda m, x: checkpoint_sequential(m, segments, x, use_reentrant=False))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_dropout_mask_replayed_and_kwargs():
    want = _grads(lambda m, x: m(x), dropout=0.5)
    got = _grads(lambda m, x: m[5](checkpoint(_head(m), x, use_reentrant=False)), dropout=0.5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    x = gpucore.tensor([1.0, 2.0], requires_grad=True)
    checkpoint(lambda a, scale: a * scale, x, use_reentrant=False, scale=3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_errors_and_warning():
    x = gpucore.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lambda a: a * 2, x)
    with pytest.raises(ValueError, match="Unexpected keyword"):
        checkpoint(lambda a, s: a * s, x, use_reentrant=True, s=2.0)
    with pytest.raises(NotImplementedError, match="context_fn"):
        checkpoint(lambda a: a, x, use_reentrant=False, context_fn=lambda: None)


def test_what_a_checkpoint_refuses_rather_than_answer_wrongly():
    """As PyTorch's reentrant checkpoint: no autograd.grad / backward(inputs=) through it (the
    parameters inside would get .grad), no create_graph (a gradient penalty would lose its
    term), no grad-requiring tensor hidden in a container argument (it would get no gradient)."""
    m = _model()
    x = gpucore.tensor(np.ones((2, 4)), requires_grad=True)
    with pytest.raises(RuntimeError, match="autograd.grad"):
        gpucore.autograd.grad(checkpoint(m, x, use_reentrant=False).sum(), x)
    with pytest.raises(RuntimeError, match="backward\\(inputs"):
        checkpoint(m, x, use_reentrant=False).sum().backward(inputs=[x])
    assert all(p.grad is None for p in m.parameters())  # nothing was accumulated
    y = checkpoint(m, x, use_reentrant=True)
    with pytest.raises(NotImplementedError, match="create_graph"):
        y.sum().backward(create_graph=True)
    w = x * 3
    with pytest.raises(NotImplementedError, match="list argument"):
        checkpoint(lambda items: items[0] * 2, [w], use_reentrant=False)
    with pytest.raises(NotImplementedError, match="dict argument"):
        checkpoint(lambda a, d: a * d["s"], x, use_reentrant=False, d={"s": w})
    # containers without such tensors are fine
    out = checkpoint(lambda items: items[0] * 2, [x.detach()], use_reentrant=False)
    np.testing.assert_array_equal(out.detach().numpy(), np.full((2, 4), 2.0))


def test_matches_torch():
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(0).standard_normal((3, 4))
    ws = np.random.default_rng(1).standard_normal((4, 4))

    def run(lib, ck):
        w = lib.tensor(ws, requires_grad=True)
        x = lib.tensor(xs, requires_grad=True)
        y = ck(lambda t: (t @ w).tanh() @ w, x, use_reentrant=False)
        (y**2).sum().backward()
        return [x.grad.numpy(), w.grad.numpy()]

    for g, t in zip(run(gpucore, checkpoint), run(torch, torch.utils.checkpoint.checkpoint)):
        np.testing.assert_allclose(g, t, rtol=1e-12)
