"""capture/trace.py's per-thread router seen from outside the capturing thread: another thread's
eager ops run as with no capture (fast lanes, so bits, included), a fork() leaves the child's
router consistent, and a module's eval() / train() run outside the router's lock.

Barriers force the overlap: the other thread works while the capturing thread is parked inside
the traced function, whatever the scheduler does."""

import os
import sys
import threading

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn.functional as F
from gpucore.ops import registry
from gpucore.runtime.capture import trace as T

TIMEOUT = 30  # seconds a barrier waits before the test fails (a thread that never came)


def run_threads(*targets):
    """Run each callable in its own thread; re-raise the first exception any of them raised."""
    errors = []

    def wrap(fn):
        def go():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported in the main thread
                errors.append(e)

        return go

    threads = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def parked_capture(during):
    """Trace ``x * 2`` in one thread while another runs ``during()`` with the first parked
    inside the traced function; returns (the graph, what ``during`` returned)."""
    inside = threading.Barrier(2, timeout=TIMEOUT)
    done = threading.Barrier(2, timeout=TIMEOUT)
    out = {}

    def fn(x):
        inside.wait()
        done.wait()
        return x * 2.0

    def capturer():
        out["graph"] = T.trace(fn, [gc.randn(2, 2)])

    def other():
        inside.wait()
        try:
            out["during"] = during()
        finally:
            done.wait()

    run_threads(capturer, other)
    return out["graph"], out["during"]


def test_another_threads_eager_ops_are_bitwise_those_of_no_capture():
    # the fused lanes (sdpa, avg_pool2d, layer_norm, softmax in one C call) and the composed
    # paths a capture records round differently: another thread must keep the fused ones
    gc.manual_seed(0)
    q, k, v = (gc.randn(2, 4, 33, 16) for _ in range(3))
    img = gc.randn(2, 3, 17, 17)
    h, w, b = gc.randn(64, 48), gc.randn(48), gc.randn(48)

    def work():
        with gc.no_grad():
            return [
                F.scaled_dot_product_attention(q, k, v).numpy(),
                F.avg_pool2d(img, 3, 2, 1).numpy(),
                F.layer_norm(h, (48,), w, b).numpy(),
                F.softmax(h, -1).numpy(),
                F.group_norm(img, 3).numpy(),
                (h * 2.0 + 1.0).numpy(),
                (h @ h.T).numpy(),
                h.reshape(48, 64)[1:3].numpy(),
            ]

    alone = work()
    graph, during = parked_capture(work)
    for i, (a, d) in enumerate(zip(alone, during)):
        assert np.array_equal(a, d), i
    # the other thread's ops are not in the graph: only the traced function's multiply
    assert [n.op for n in graph.nodes] == ["mul"]
    ref = np.asarray(h.numpy(), np.float64)
    np.testing.assert_allclose(during[5], ref * 2 + 1, rtol=1e-6)
    assert registry.CAPTURE[0] is None  # the last capture to end clears the hook
