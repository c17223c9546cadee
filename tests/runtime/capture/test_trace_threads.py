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
from thread_helpers import TIMEOUT, run_threads

import gpucore as gc
import gpucore.nn.functional as F
from gpucore.ops import registry
from gpucore.runtime.capture import trace as T


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


class Parked(gc.nn.Module):
    """A module whose eval() (which a capture calls, under the router's lock) waits for
    ``release``: a capture of it holds the lock meanwhile."""

    def __init__(self):
        super().__init__()
        self.fc = gc.nn.Linear(4, 4)
        self.inside, self.release = threading.Event(), threading.Event()

    def eval(self):
        self.inside.set()
        assert self.release.wait(TIMEOUT)
        return super().eval()

    def forward(self, x):
        return self.fc(x)


def _in_child(check) -> int:
    """fork(); the child runs ``check()`` (under an alarm: a hang fails) and exits 0 when it
    passed; the parent returns the child's exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            __import__("signal").alarm(TIMEOUT)
            check()
            code = 0
        except BaseException as e:  # noqa: BLE001 - told through the exit status
            print(f"child: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
def test_a_fork_while_another_thread_captures_leaves_the_child_no_capture():
    # the other thread is inside its capture and holds the router's lock (in eval()): the
    # child, which holds only the forking thread, has no capture running and can start one
    model = Parked()
    t = threading.Thread(target=lambda: T.trace(model, [gc.randn(2, 4)]), daemon=True)
    t.start()
    assert model.inside.wait(TIMEOUT)

    def check():
        assert registry.CAPTURE[0] is None and T.active_tracer() is None
        graph = T.trace(lambda x: x + 1.0, [gc.randn(2)])
        assert [n.op for n in graph.nodes] == ["add"] and registry.CAPTURE[0] is None

    try:
        assert _in_child(check) == 0
        assert registry.CAPTURE[0] is not None  # the parent's capture still runs
    finally:
        model.release.set()
        t.join(TIMEOUT)
    assert registry.CAPTURE[0] is None and model.training


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
def test_a_fork_inside_a_capture_keeps_the_forking_threads_tracer():
    codes = []

    def fn(x):
        y = x * 2.0

        def check():  # the child goes on recording the forking thread's ops
            tracer = T.active_tracer()
            assert tracer is not None and registry.capturing() is tracer
            (y - 1.0).numpy  # noqa: B018 - an op, recorded
            assert [n.op for n in tracer.graph.nodes] == ["mul", "sub"]

        codes.append(_in_child(check))
        return y

    T.trace(fn, [gc.randn(2)])
    assert codes == [0]


class EvalStartsACapture(gc.nn.Module):
    """A module whose eval() / train() (user code a capture calls) tries a capture itself."""

    def __init__(self):
        super().__init__()
        self.fc = gc.nn.Linear(4, 4)
        self.refused = []
        self.example = gc.randn(2)

    def train(self, mode=True):
        try:
            T.trace(lambda a: a + 1.0, [self.example])
        except T.CaptureError as e:
            self.refused.append(str(e))
        return super().train(mode)

    def forward(self, x):
        return self.fc(x)


def test_a_capture_inside_a_modules_eval_is_refused_as_nested():
    model = EvalStartsACapture()
    model.refused.clear()
    run_threads(lambda: T.trace(model, [gc.randn(2, 4)]))  # (a deadlock fails as a hang)
    assert len(model.refused) == 2  # eval() at the start, train() at the end
    assert all("already capturing" in m for m in model.refused)
    assert model.training and registry.CAPTURE[0] is None


class EvalRaises(gc.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = gc.nn.Linear(4, 4)
        self.fail = True

    def eval(self):
        if self.fail:
            super().eval()  # (part way: the flag changed, then it raised)
            raise RuntimeError("eval failed")
        return super().eval()

    def forward(self, x):
        return self.fc(x)


def test_a_modules_eval_that_raises_leaves_no_capture_and_its_flag():
    model = EvalRaises()
    with pytest.raises(RuntimeError, match="eval failed"):
        T.trace(model, [gc.randn(2, 4)])
    assert model.training and T._ROUTER.modules == {} and registry.CAPTURE[0] is None
    model.fail = False
    T.trace(model, [gc.randn(2, 4)])
    assert model.training and T._ROUTER.modules == {}
