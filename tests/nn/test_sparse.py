"""Embedding, functional and module: rows picked by int64 and int32 indices, padding_idx (no
gradient), max_norm (renormalized in place), from_pretrained and the default initialisation.
one_hot is tested with unfold and fold in test_conv.py."""

import numpy as np
import pytest
from helpers import assert_close, check_op, rand, to_np

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f32(a):
    return gpucore.tensor(np.asarray(a), dtype=gpucore.float32)


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


def test_embedding():
    w = rand((6, 3))
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    check_op(lambda wt: F.embedding(gpucore.tensor(idx), wt), lambda wt: wt[idx], [(6, 3)])
    wt = f64(w, grad=True)
    out = F.embedding(gpucore.tensor(idx), wt, padding_idx=2)
    assert_close(out, w[idx])
    out.backward(f64(np.ones((2, 3, 3))))
    expected = np.zeros((6, 3))
    np.add.at(expected, idx[idx != 2], 1.0)
    assert_close(wt.grad, expected)
    # int32 indices, negative padding_idx
    assert_close(F.embedding(gpucore.tensor(idx).int(), f64(w), padding_idx=-1), w[idx])
    with pytest.raises(gpucore.DTypeError, match="int64"):
        F.embedding(gpucore.tensor([0.0]), f64(w))
    with pytest.raises(IndexError):
        F.embedding(gpucore.tensor([6]), f64(w))


def test_embedding_module():
    gpucore.manual_seed(1)
    m = nn.Embedding(1000, 8, padding_idx=3)
    assert repr(m) == "Embedding(1000, 8, padding_idx=3)"
    wv = to_np(m.weight)
    assert (wv[3] == 0).all()
    assert abs(wv.std() - 1) < 0.05 and abs(wv.mean()) < 0.05  # N(0, 1)
    out = m(gpucore.tensor([3, 4]))
    out.sum().backward()
    g = to_np(m.weight.grad)
    assert (g[3] == 0).all() and (g[4] == 1).all()
    e = nn.Embedding.from_pretrained(f32(rand((4, 2))))
    assert not e.weight.requires_grad and e(gpucore.tensor([1])).shape == (1, 2)
    # max_norm renormalizes looked-up rows in place
    m = nn.Embedding(3, 2, max_norm=1.0)
    with gpucore.no_grad():
        m.weight.copy_(gpucore.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]]))
    m(gpucore.tensor([0, 1]))
    assert_close(m.weight, [[0.6, 0.8], [0.3, 0.4], [6.0, 8.0]], rtol=1e-5)


def test_embedding_refuses_negative_and_too_large_indices():
    """Issue 20, item 10: F.embedding(tensor([-1]), w) returned the last row; PyTorch raises."""
    w = gpucore.tensor(rand((4, 3)))
    for bad, fragment in (([-1], "index -1"), ([0, 4], "index 4")):
        with pytest.raises(gpucore.GpucoreIndexError, match=r"embedding\(\): " + fragment) as e:
            F.embedding(gpucore.tensor(bad), w)
        assert "0 <= index < 4" in str(e.value)
    with pytest.raises(IndexError, match="embedding"):
        nn.Embedding(4, 3)(gpucore.tensor([[1, -2]]))
