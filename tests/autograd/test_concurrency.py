"""Ops and backward from 8 Python threads at once give the same results as run serially."""

from __future__ import annotations

import threading

import numpy as np

import gpucore as gc

N_THREADS = 8


def workload(seed: int):
    """A small training-like step: forward, loss, backward, in-place update; returns arrays."""
    rng = np.random.default_rng(seed)
    xv = rng.standard_normal((64, 96)).astype(np.float32)
    wv = rng.standard_normal((96, 48)).astype(np.float32) * 0.1
    bv = rng.standard_normal(48).astype(np.float32)
    x = gc.tensor(xv)
    w = gc.tensor(wv, requires_grad=True)
    b = gc.tensor(bv, requires_grad=True)
    results = []
    for _step in range(3):
        h = (x @ w + b).tanh()
        h2 = h * 1
        h2[:, 0] *= 2  # in-place on a view of a non-leaf
        p = h2.softmax(1)
        loss = -(p.log() * p).sum(1).mean() + (h * h).mean()
        loss.backward()
        (gw2,) = gc.autograd.grad((w * w * w).sum(), w, create_graph=True)
        (gww,) = gc.autograd.grad(gw2.sum(), w)  # 6w
        np.testing.assert_allclose(gww.numpy(), 6 * w.detach().numpy(), rtol=1e-6)
        big = gc.tensor(rng.standard_normal((256, 256)).astype(np.float32))
        results.append((big @ big.T).sum(0).numpy().copy())  # large enough for the C pool
        results += [loss.item(), w.grad.numpy().copy(), b.grad.numpy().copy(), gww.numpy().copy()]
        with gc.no_grad():
            w.sub_(w.grad * 0.5)
            b.sub_(b.grad * 0.5)
            assert not (w * 2).requires_grad
        w.grad = None
        b.grad = None
        assert (w * 2).requires_grad
    results.append(w.detach().numpy().copy())
    return results


def _compare(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def test_threads_match_serial():
    serial = [workload(s) for s in range(N_THREADS)]
    out = [None] * N_THREADS
    errors = []
    barrier = threading.Barrier(N_THREADS)

    def run(i):
        try:
            barrier.wait(10)
            out[i] = workload(i)
        except Exception as e:  # reported in the main thread
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for i in range(N_THREADS):
        _compare(out[i], serial[i])


def test_shared_leaf_read_concurrently():
    """Many threads differentiate through one shared leaf with autograd.grad (no accumulation)."""
    rng = np.random.default_rng(0)
    wv = rng.standard_normal((32, 32)).astype(np.float64)
    w = gc.tensor(wv, requires_grad=True)
    expected = {}
    for k in range(N_THREADS):
        (g,) = gc.autograd.grad(((w * (k + 1)).sigmoid()).sum(), w)
        expected[k] = g.numpy().copy()
    # and by hand for one: d/dw sigmoid(kw) = k s (1 - s)
    s = 1 / (1 + np.exp(-3 * wv))
    np.testing.assert_allclose(expected[2], 3 * s * (1 - s), rtol=1e-12)
    got, errors = {}, []

    def run(k):
        try:
            for _ in range(5):
                (g,) = gc.autograd.grad(((w * (k + 1)).sigmoid()).sum(), w)
                np.testing.assert_array_equal(g.numpy(), expected[k])
            got[k] = True
        except Exception as e:
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(got) == N_THREADS
    assert w.grad is None
