"""The CPU thread pool: results bitwise identical for any thread count and whatever the
workers were doing when a region came (spinning or asleep), a long sum accurate, eight Python
threads issuing GEMMs at once, the pool surviving fork, and set_num_threads checking its
argument."""

from __future__ import annotations

import itertools
import os
import textwrap
import threading
import time

import numpy as np
import pytest
from cpu_isa_harness import INFO, C, run_in_subprocess


def _workload():
    """Kernels big enough to run in parallel regions; returns their outputs."""
    r = np.random.default_rng(9)
    out = []
    for (m, n, k), (ta, tb) in zip(
        [(300, 257, 190), (64, 784, 512), (1000, 7, 300), (33, 1000, 65)],
        itertools.product([0, 1], [0, 1]),
    ):
        for dt in (np.float32, np.float64):
            a = r.standard_normal((k, m) if ta else (m, k)).astype(dt)
            b = r.standard_normal((n, k) if tb else (k, n)).astype(dt)
            c = np.empty((m, n), dt)
            C.gemm(a, b, c, 1, m, n, k, ta, tb, 1.0, 0.0, 0, 0, 0)
            out.append(c)
    for dt in (np.float32, np.float64):  # many K blocks, beta != 0: K blocks must run in order
        a = r.standard_normal((150, 3000)).astype(dt)
        b = r.standard_normal((3000, 100)).astype(dt)
        c = r.standard_normal((150, 100)).astype(dt)
        for _ in range(3):
            C.gemm(a, b, c, 1, 150, 100, 3000, 0, 0, 0.5, -0.75, 0, 0, 0)
        out.append(c)
    a = r.standard_normal((16, 40, 30)).astype(np.float32)  # batched, spread over threads
    b = r.standard_normal((16, 30, 20)).astype(np.float32)
    c = np.empty((16, 40, 20), np.float32)
    C.gemm(a, b, c, 16, 40, 20, 30, 0, 0, 1.0, 0.0, 1200, 600, 800)
    out.append(c)
    x = (r.standard_normal(1_000_003) * 5).astype(np.float32)
    for op in ("EXP", "TANH", "GELU", "SIN"):
        y = np.empty_like(x)
        C.unary(getattr(C, "UNARY_" + op), x, y)
        out.append(y)
    y = np.empty_like(x)
    C.binary(C.BINARY_MUL, x, x[::-1], y)
    out.append(y)
    for op in ("SUM", "MAX", "ARGMIN"):
        o = np.empty(1, np.int64 if op.startswith("ARG") else np.float32)
        C.reduce(getattr(C, "REDUCE_" + op), x, o, 1, x.size, 1)
        out.append(o)
        o = np.empty(1000, np.int64 if op.startswith("ARG") else np.float32)
        C.reduce(getattr(C, "REDUCE_" + op), x[:1_000_000], o, 1, 1000, 1000)
        out.append(o)
    s = x[:1_000_000].reshape(1000, 1000)
    for lg in (0, 1):
        y = np.empty_like(s)
        C.softmax(s, y, 1000, 1000, 1, lg)
        out.append(y)
    return out


def test_results_identical_for_any_thread_count(threads):
    threads(1)
    one = _workload()
    for n in (2, 3, 5, 8):
        threads(n)
        many = _workload()
        for i, (p, q) in enumerate(zip(one, many)):
            assert np.array_equal(p, q, equal_nan=True), (n, i)


def test_regions_after_idle_gaps_give_the_same_bits(threads):
    """pool.c's workers spin for 200 us after a region, then sleep, and small GEMMs split over
    the threads only while the first worker is awake (gc_pool_awake: the MLP step's last-layer
    products).  Regions that find the workers spinning or asleep give the bits of one thread,
    and the right product (float64 reference).  The gaps walk through both states: back to
    back, 0.5 and 5 ms (past the spin), then short gaps again."""
    r = np.random.default_rng(11)
    # (m, n, k, trans_a, trans_b): the blocked path at k = 10, the gemv path (m = 10, A^T),
    # the narrow-N path (n = 10, B^T), a row-split product and a general one
    shapes = [
        (256, 256, 10, 0, 0),
        (64, 256, 10, 0, 0),
        (10, 256, 256, 1, 0),
        (256, 10, 256, 0, 1),
        (64, 512, 256, 0, 0),
        (300, 257, 190, 0, 1),
    ]
    ops = []
    for m, n, k, ta, tb in shapes:
        a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        ops.append(((m, n, k, ta, tb), a, b, (a64.T if ta else a64) @ (b64.T if tb else b64)))

    def run(dims, a, b):
        m, n, k, ta, tb = dims
        c = np.empty((m, n), np.float32)
        C.gemm(a, b, c, 1, m, n, k, ta, tb, 1.0, 0.0, 0, 0, 0)
        return c

    threads(1)
    one = [run(*op[:3]) for op in ops]
    threads(2)
    for gap in (0.0, 0.0005, 0.0005, 0.005, 0.0, 0.005, 0.0005, 0.0005, 0.0):
        time.sleep(gap)
        for (dims, a, b, ref), want in zip(ops, one):
            got = run(dims, a, b)
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
            assert np.array_equal(got, want), (gap, dims)


def test_softmax_bitwise_same_for_one_and_two_threads(threads):
    """The fused exp-shift-sum sums a row in an order fixed by its length, so softmax,
    log-softmax and the cross-entropy forward give the same bits on 1 and 2 threads."""
    r = np.random.default_rng(3)
    x = (r.standard_normal((2000, 1001)) * 4).astype(np.float32)
    t = r.integers(0, 1001, 2000)
    res = []
    for n in (1, 2):
        threads(n)
        outs = []
        for lg in (0, 1):
            y = np.empty_like(x)
            C.softmax(x, y, 2000, 1001, 1, lg)
            outs.append(y)
        loss, lse = np.empty(2000, np.float32), np.empty(2000, np.float32)
        C.cross_entropy_forward(x, t, loss, lse, 2000, 1001, -100)
        res.append(outs + [loss, lse])
    for p, q in zip(*res):
        assert np.array_equal(p, q)


def test_long_sum_is_accurate():
    x = np.full(3_000_001, 0.1, np.float32)
    o = np.empty(1, np.float32)
    C.reduce(C.REDUCE_SUM, x, o, 1, x.size, 1)
    assert abs(float(o[0]) - 3_000_001 * float(np.float32(0.1))) <= 1e-6 * 300_000


def test_eight_python_threads_issue_gemms_concurrently(threads):
    threads(max(2, INFO["threads"]))
    r = np.random.default_rng(4)
    jobs = []
    for t in range(8):
        m, n, k = 100 + 7 * t, 150 - 3 * t, 120 + 11 * t
        a = r.standard_normal((m, k)).astype(np.float32)
        b = r.standard_normal((n, k)).astype(np.float32)
        jobs.append((a, b, a.astype(np.float64) @ b.T.astype(np.float64)))
    errors = []
    start = threading.Barrier(8)

    def work(a, b, ref):
        try:
            start.wait()
            c = np.empty(ref.shape, np.float32)
            for _ in range(15):
                C.gemm(a, b, c, 1, ref.shape[0], ref.shape[1], a.shape[1], 0, 1, 1.0, 0.0, 0, 0, 0)
                np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
                y = np.empty_like(c)
                C.unary(C.UNARY_TANH, c, y)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=j) for j in jobs]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a GEMM thread hung"
    assert not errors, errors[0]


def test_pool_survives_fork():
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    code = textwrap.dedent(
        """
        import os, numpy as np
        C.set_num_threads(2)
        a = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
        c = np.empty_like(a)
        C.gemm(a, a, c, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)  # workers now exist
        ref = a.astype(np.float64) @ a
        pid = os.fork()
        if pid == 0:
            d = np.empty_like(a)
            for _ in range(3):
                C.gemm(a, a, d, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)
            ok = np.allclose(d, ref, rtol=1e-4, atol=1e-3) and C.info()["threads"] == 2
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        C.gemm(a, a, c, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)
        assert np.allclose(c, ref, rtol=1e-4, atol=1e-3)
        print("child", os.WEXITSTATUS(status))
        """
    )
    p = run_in_subprocess(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "child 0"


def test_set_num_threads_validates():
    with pytest.raises(ValueError):
        C.set_num_threads(0)
    with pytest.raises(TypeError):
        C.set_num_threads("2")


def _until(cond, timeout=10.0):
    """Polls cond() until it holds or timeout seconds pass (a busy machine may delay a thread
    for long); returns whether it held.  A busy poll: a worker is awake for only ~200 us."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
    return True


def test_pool_awake_reports_the_spin_then_the_sleep(threads):
    """pool_awake (gc_pool_awake, which sets small GEMMs' thread count): with two threads the
    worker reads as awake once a region posted it (it then spins 200 us) and as asleep after;
    with one thread, never awake."""
    threads(2)
    a = np.ones((300, 300), np.float32)
    c = np.empty_like(a)
    seen = False
    for _ in range(5):  # this thread may lose the CPU for the whole spin on a loaded machine
        C.gemm(a, a, c, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)  # a region: posts the worker
        assert _until(lambda: not C.pool_awake()), "the worker never went to sleep"
        C.gemm(a, a, c, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)
        if _until(C.pool_awake, 0.2):
            seen = True
            break
    assert seen, "a region did not wake the sleeping worker"
    assert _until(lambda: not C.pool_awake()), "the worker did not sleep again after its spin"
    threads(1)
    assert not C.pool_awake()
    with pytest.raises(TypeError):
        C.pool_awake(1)
