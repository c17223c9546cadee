"""The top-level functional forms (gpucore.dropout, gpucore.conv2d, ... with torch's top-level
signatures; gpucore/nn/functional/toplevel.py) and F.threshold / hardshrink / softshrink /
rrelu against PyTorch: values and gradients."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


X4, W4 = _rand(2, 3, 6, 6, seed=1), _rand(4, 3, 3, 3, seed=2)


def test_conv_pool_forms_as_torch():
    same_as_torch(lambda m, x, w: m.conv2d(x, w, None, 1, 1), X4, W4)
    same_as_torch(lambda m, x, w: m.conv1d(x, w), X4[:, :, 0], W4[:, :, 0])
    same_as_torch(lambda m, x, w: m.conv_transpose2d(x, w, stride=2), X4, np.swapaxes(W4, 0, 1))
    same_as_torch(lambda m, x: m.max_pool2d(x, 2), X4)
    same_as_torch(lambda m, x: m.avg_pool1d(x, 2), X4[:, :, 0])
    same_as_torch(lambda m, x: m.adaptive_avg_pool1d(x, 3), X4[:, :, 0])
    same_as_torch(lambda m, x: m.pixel_shuffle(x, 2), _rand(1, 8, 2, 3, seed=3))


def test_normalization_forms_as_torch():
    w, b = _rand(3, seed=4), _rand(3, seed=5)
    same_as_torch(lambda m, x, w, b: m.layer_norm(x, (6,), None, None, 1e-5), X4, w, b)
    same_as_torch(lambda m, x, w, b: m.group_norm(x, 3, w, b), X4, w, b)
    rm, rv = _rand(3, seed=6), np.abs(_rand(3, seed=7)) + 0.5

    def bn(m, x, w, b):
        stats = m.tensor(rm), m.tensor(rv)  # running statistics: no gradient
        return m.batch_norm(x, w, b, *stats, False, 0.1, 1e-5, False)

    same_as_torch(bn, X4, w, b)
    same_as_torch(
        lambda m, x, w, b: m.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False), X4, w, b
    )


def test_embedding_distance_activation_forms_as_torch():
    idx = np.array([[0, 2], [4, 2]])
    same_as_torch(lambda m, w, i: m.embedding(w, i), _rand(5, 3, seed=8), idx)
    # padding_idx: no gradient for its row (finite differences see the values move)
    same_as_torch(lambda m, w, i: m.embedding(w, i, 2), _rand(5, 3, seed=8), idx, check_fd=False)
    a, b = _rand(4, 5, seed=9), _rand(4, 5, seed=10)
    same_as_torch(lambda m, a, b: m.cosine_similarity(a, b), a, b)
    same_as_torch(lambda m, a, b: m.pairwise_distance(a, b, 3.0), a, b)
    same_as_torch(lambda m, a: m.selu(a) + m.celu(a, 0.5), a)
    same_as_torch(lambda m, a: m.threshold(a, 0.1, 5.0), a)
    same_as_torch(lambda m, a: m.hardshrink(a, 0.7) + a.hardshrink(), a)
    same_as_torch(lambda m, a: m.rrelu(a), a)
    same_as_torch(lambda m, a: m.nn.functional.softshrink(a, 0.3), a)
    torch = pytest.importorskip("torch")
    g = gpucore.dropout(gpucore.ones(1000), 0.25, True).numpy()
    np.testing.assert_allclose(g[g != 0], 1 / 0.75, rtol=1e-6)
    assert abs((g == 0).mean() - 0.25) < 0.05
    np.testing.assert_array_equal(gpucore.dropout(gpucore.ones(5), 0.5, False).numpy(), 1)
    assert torch.dropout(torch.ones(3), 0.5, False).tolist() == [1.0] * 3


def test_rrelu_training_slopes():
    x = gpucore.tensor(-np.ones(20000), requires_grad=True)
    y = gpucore.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    s = -y.detach().numpy()
    assert s.min() >= 0.1 and s.max() <= 0.3 and abs(s.mean() - 0.2) < 0.005
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), s)  # the gradient is the drawn slope
