"""Embedding, functional and module: rows picked by int64 and int32 indices, padding_idx (no
gradient), max_norm (renormalized in place), from_pretrained and the default initialisation;
EmbeddingBag (sum, mean, max, offsets, per_sample_weights, padding_idx) against a loop and
PyTorch; scale_grad_by_freq (each row's gradient over its count) for both. one_hot is tested
with unfold and fold in test_conv.py."""

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_op, rand, to_np
from nn_checks import check_function_vs_torch, check_module_vs_torch

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


# ============================================================================= embedding_bag
def np_embedding_bag(idx, w, offsets, mode, psw=None, padding_idx=None, last=False):
    """Bags of rows summed, averaged or maxed in a loop (padding entries left out, empty bags
    zero)."""
    if idx.ndim == 2:
        offsets, idx = np.arange(idx.shape[0]) * idx.shape[1], idx.reshape(-1)
        psw = None if psw is None else psw.reshape(-1)
    ends = list(offsets[1:]) + ([] if last else [len(idx)])
    starts = offsets[:-1] if last else offsets
    out = np.zeros((len(starts), w.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        keep = [i for i in range(s, e) if idx[i] != padding_idx]
        if not keep:
            continue
        rows = w[idx[keep]] * (1.0 if psw is None else psw[keep][:, None])
        out[b] = {"sum": rows.sum, "mean": rows.mean, "max": rows.max}[mode](0)
    return out


IDX = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8])
BAGS = {
    "offsets": dict(offsets=np.array([0, 3, 3, 7])),
    "last_offset": dict(offsets=np.array([0, 2, 2, 12]), include_last_offset=True),
    "fixed_2d": dict(shape=(3, 4)),
    "padding_2d": dict(shape=(4, 3), padding_idx=5),
}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bag", BAGS.values(), ids=BAGS)
def test_embedding_bag_against_a_loop(bag, mode):
    w = rand((10, 4))
    idx = IDX.reshape(bag["shape"]) if "shape" in bag else IDX
    off, last, pad = (
        bag.get("offsets"),
        bag.get("include_last_offset", False),
        bag.get("padding_idx"),
    )
    expected = np_embedding_bag(idx, w, off, mode, padding_idx=pad, last=last)
    off_t = None if off is None else gpucore.tensor(off)

    def fn(w):
        return F.embedding_bag(
            gpucore.tensor(idx), w, off_t, mode=mode, include_last_offset=last, padding_idx=pad
        )

    assert_close(fn(gpucore.tensor(w)), expected, rtol=1e-12, atol=1e-12)
    check_grad(fn, w)


def test_embedding_bag_per_sample_weights():
    w, psw, off = rand((10, 4)), rand((12,), seed=1), np.array([0, 5, 5])
    expected = np_embedding_bag(IDX, w, off, "sum", psw)
    out = F.embedding_bag(
        gpucore.tensor(IDX), gpucore.tensor(w), gpucore.tensor(off), mode="sum",
        per_sample_weights=gpucore.tensor(psw),
    )  # fmt: skip
    assert_close(out, expected, rtol=1e-12, atol=1e-12)
    check_grad(
        lambda w, p: F.embedding_bag(
            gpucore.tensor(IDX), w, gpucore.tensor(off), mode="sum", per_sample_weights=p
        ),
        w,
        psw,
    )
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(
            gpucore.tensor(IDX), gpucore.tensor(w), gpucore.tensor(off), per_sample_weights=out
        )


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_torch(mode):
    torch = pytest.importorskip("torch")
    off = np.array([0, 3, 3, 7])
    check_function_vs_torch(
        lambda i, w, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=1),
        lambda i, w, o: torch.nn.functional.embedding_bag(i, w, o, mode=mode, padding_idx=1),
        [IDX, rand((10, 4)), off],
    )
    kw = dict(mode=mode, padding_idx=5)
    check_module_vs_torch(
        nn.EmbeddingBag(10, 4, **kw), torch.nn.EmbeddingBag(10, 4, **kw), [IDX.reshape(3, 4)]
    )
    if mode == "sum":
        check_module_vs_torch(
            nn.EmbeddingBag(10, 4, mode="sum"),
            torch.nn.EmbeddingBag(10, 4, mode="sum"),
            [IDX, off, rand((12,), seed=1)],
        )


def test_embedding_bag_module_defaults_and_errors():
    m = nn.EmbeddingBag(10, 3, padding_idx=-1)
    assert repr(m) == "EmbeddingBag(10, 3, mode='mean', padding_idx=9)"
    assert list(m.state_dict()) == ["weight"] and np.all(to_np(m.weight)[9] == 0)
    pre = nn.EmbeddingBag.from_pretrained(gpucore.ones(4, 2), mode="max")
    assert not pre.weight.requires_grad and pre.mode == "max"
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(10, 3, mode="median")
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(gpucore.tensor(IDX), m.weight)
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(gpucore.tensor(IDX.reshape(3, 4)), m.weight, gpucore.tensor([0, 1]))
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(gpucore.tensor(IDX), m.weight, gpucore.tensor([1, 3]))


def test_embedding_scale_grad_by_freq():
    w, g = rand((6, 3)), rand((2, 4, 3), seed=3)
    idx = np.array([[1, 2, 4, 1], [4, 4, 5, 0]])
    ref = np.zeros((6, 3))
    np.add.at(ref, idx.reshape(-1), g.reshape(-1, 3))
    ref /= np.maximum(np.bincount(idx.reshape(-1), minlength=6), 1)[:, None]
    wt = f64(w, grad=True)
    out = F.embedding(gpucore.tensor(idx), wt, scale_grad_by_freq=True)
    assert_close(out, w[idx])  # the forward is unchanged
    out.backward(f64(g))
    assert_close(wt.grad, ref)
    m = nn.Embedding(6, 3, padding_idx=4, scale_grad_by_freq=True).to(gpucore.float64)
    assert repr(m) == "Embedding(6, 3, padding_idx=4, scale_grad_by_freq=True)"
    m(gpucore.tensor(idx)).backward(f64(g))
    ref[4] = 0.0
    assert_close(m.weight.grad, ref)
    for make in (
        lambda: nn.Embedding(6, 3, sparse=True),
        lambda: nn.EmbeddingBag(6, 3, sparse=True),
    ):
        with pytest.raises(NotImplementedError, match="sparse"):
            make()


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    idx = np.array([1, 2, 4, 1, 4, 4, 9, 0, 2, 2, 2, 7])
    off = np.array([0, 3, 3, 7])
    w, g = rand((10, 4)), rand((4, 4), seed=5)
    ends = np.append(off[1:], idx.size)
    ref = np.zeros((10, 4))
    counts = np.bincount(idx, minlength=10)
    for b, (lo, hi) in enumerate(zip(off, ends)):
        for i in idx[lo:hi]:
            ref[i] += g[b] / (max(hi - lo, 1) if mode == "mean" else 1) / counts[i]
    wt = f64(w, grad=True)
    out = F.embedding_bag(
        gpucore.tensor(idx), wt, gpucore.tensor(off), mode=mode, scale_grad_by_freq=True
    )
    out.backward(f64(g))
    assert_close(wt.grad, ref)
    with pytest.raises(ValueError, match="max mode"):
        F.embedding_bag(
            gpucore.tensor(idx), wt, gpucore.tensor(off), mode="max", scale_grad_by_freq=True
        )


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_scale_grad_by_freq_matches_torch(mode):
    torch = pytest.importorskip("torch")
    # every index twice: PyTorch 2.13's CPU embedding_bag divides a row by another index's count
    # where counts differ (pytorch/pytorch#190063), so parity is checked where it is right
    idx = np.array([3, 1, 3, 5, 1, 0, 5, 0])
    kw = dict(mode=mode, scale_grad_by_freq=True)
    check_module_vs_torch(
        nn.EmbeddingBag(10, 4, **kw), torch.nn.EmbeddingBag(10, 4, **kw), [idx, np.array([0, 3, 3])]
    )
    idx = np.array([1, 2, 4, 1, 4, 4, 9, 0, 2, 2, 2, 7])
    check_module_vs_torch(
        nn.Embedding(10, 4, scale_grad_by_freq=True, padding_idx=2),
        torch.nn.Embedding(10, 4, scale_grad_by_freq=True, padding_idx=2),
        [idx.reshape(3, 4)],
    )
