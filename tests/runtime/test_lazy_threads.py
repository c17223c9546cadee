"""Lazily compiled models and captures under real threads (gpucore/runtime/lazy.py,
capture/trace.py's per-thread router): what a model served by a thread pool needs.

Barriers inside the models' forward force the overlap: both threads are inside the model (one
tracing it, the other tracing or running it eagerly) at the same moment, whatever the scheduler
does. Results are checked against eager gpucore and numpy float64; ``stats()`` shows which path
each call took."""

import threading

import numpy as np
from thread_helpers import TIMEOUT, run_threads

import gpucore as gc
import gpucore.nn as nn
from gpucore import runtime


class Gate:
    """A barrier the model's forward waits at while ``open`` is False (the calls that must
    overlap), and passes freely otherwise."""

    def __init__(self, parties: int):
        self.barrier = threading.Barrier(parties, timeout=TIMEOUT)
        self.armed = False

    def __call__(self):
        if self.armed:
            self.barrier.wait()


def affine_fn(gate, w, b):
    def fn(x):
        gate()  # every thread in the model at once: one tracing, the other(s) too or eager
        return (x @ w + b).relu() * 2.0

    return fn


def reference(x, w, b):
    x, w, b = (np.asarray(t.numpy(), np.float64) for t in (x, w, b))
    return np.maximum(x @ w + b, 0.0) * 2.0


def test_concurrent_second_calls_compile_the_signature_once():
    gc.manual_seed(0)
    w, b = gc.randn(8, 5), gc.randn(5)
    gate = Gate(2)
    f = gc.compile(affine_fn(gate, w, b))
    xs = [gc.randn(3, 8) for _ in range(2)]
    with gc.no_grad():
        f(xs[0])  # the first call: eager, the signature seen once
        gate.armed = True
        outs = [None, None]

        def call(i):
            def go():
                with gc.no_grad():
                    outs[i] = f(xs[i])

            return go

        run_threads(call(0), call(1))  # both are second calls: one builds, one runs eagerly
        gate.armed = False
        for x, out in zip(xs, outs):
            np.testing.assert_allclose(out.numpy(), reference(x, w, b), rtol=1e-5, atol=1e-5)
        s = f.stats()
        assert s["fallbacks"] == {} and s["compiles"] == 1
        assert (s["eager"], s["compiled"]) == (2, 1)
        again = f(xs[1])
    np.testing.assert_allclose(again.numpy(), reference(xs[1], w, b), rtol=1e-5, atol=1e-5)
    assert f.stats()["compiled"] == 2 and f.stats()["compiles"] == 1


def test_two_models_capture_in_two_threads_at_once():
    gc.manual_seed(1)
    gate = Gate(2)
    params = [(gc.randn(8, 5), gc.randn(5)), (gc.randn(8, 5), gc.randn(5))]
    fs = [gc.compile(affine_fn(gate, w, b)) for w, b in params]
    x = gc.randn(4, 8)
    outs = [None, None]
    with gc.no_grad():
        for f in fs:
            f(x)
    gate.armed = True

    def call(i):
        def go():
            with gc.no_grad():
                outs[i] = fs[i](x)  # the second call of each: two traces at the same time

        return go

    run_threads(call(0), call(1))
    gate.armed = False
    for f, (w, b), out in zip(fs, params, outs):
        np.testing.assert_allclose(out.numpy(), reference(x, w, b), rtol=1e-5, atol=1e-5)
        s = f.stats()
        assert s["fallbacks"] == {} and (s["compiles"], s["compiled"]) == (1, 1)


class Block(nn.Module):
    def __init__(self, gate):
        super().__init__()
        self.gate = gate
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        self.gate()
        return self.norm(self.fc(x).relu() + x)


def test_many_threads_serve_a_lazily_compiled_module():
    gc.manual_seed(2)
    gate = Gate(6)
    model = Block(gate).eval()
    served = gc.compile(model)
    xs = [gc.randn(2, 7, 16) for _ in range(6)]
    with gc.no_grad():
        want = [model(x).numpy() for x in xs]
        served(xs[0])
    gate.armed = True
    got = [[] for _ in xs]

    def worker(i):
        def go():
            with gc.no_grad():
                got[i].append(served(xs[i]).numpy())  # the overlapping call
                gate.armed = False
                for _ in range(5):
                    got[i].append(served(xs[i]).numpy())

        return go

    run_threads(*(worker(i) for i in range(6)))
    for outs, ref in zip(got, want):
        for out in outs:
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    s = served.stats()
    assert s["fallbacks"] == {} and s["compiles"] == 1
    # calls made while the one build ran were eager (how many depends on the scheduler)
    assert s["eager"] + s["compiled"] == 1 + 36 and s["compiled"] >= 1
    with gc.no_grad():
        np.testing.assert_allclose(served(xs[0]).numpy(), want[0], rtol=1e-5, atol=1e-5)
    assert served.stats()["compiled"] == s["compiled"] + 1


def test_a_capture_while_another_thread_trains_eagerly():
    gc.manual_seed(3)
    gate = Gate(2)
    w, b = gc.randn(8, 5), gc.randn(5)
    fn = affine_fn(gate, w, b)
    x = gc.randn(3, 8)

    def make():
        gc.manual_seed(4)
        return nn.Sequential(nn.Linear(6, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 1))

    data, target = gc.randn(10, 6), gc.randn(10, 1)

    def train(net, steps, during=None):
        opt = gc.optim.SGD(net.parameters(), lr=0.1)
        losses = []
        for k in range(steps):
            if k == 1 and during is not None:
                during()  # meet the capturing thread inside its model
            loss = (net(data) - target).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    serial = train(make(), 4)
    gate.armed = True
    result = {}

    def capture():
        result["model"] = runtime.compile(fn, [x], device="cpu")

    def trainer():
        result["losses"] = train(make(), 4, during=gate.barrier.wait)

    run_threads(capture, trainer)
    gate.armed = False
    # the trainer's ops ran eagerly with autograd (not recorded by the other thread's trace)
    np.testing.assert_allclose(result["losses"], serial, rtol=1e-5)
    cm = result["model"]
    assert sorted(n.op for n in cm.symbolic.order()) == ["add", "matmul", "mul", "relu"]
    np.testing.assert_allclose(cm(x).numpy(), reference(x, w, b), rtol=1e-5, atol=1e-5)


def test_a_lazily_compiled_submodule_inside_a_capture_is_traced():
    gc.manual_seed(5)
    inner = gc.compile(nn.Sequential(nn.Linear(4, 4), nn.Tanh()).eval())
    x = gc.randn(2, 4)
    with gc.no_grad():
        for _ in range(3):  # compiled by now
            inner(x)
    assert inner.stats()["compiles"] == 1

    def outer(a):
        return inner(a) * 3.0

    cm = runtime.compile(outer, [x], device="cpu")
    ops = [n.op for n in cm.symbolic.order()]
    assert "tanh" in ops and "mul" in ops  # the inner model's ops are in the outer graph
    y = gc.randn(2, 4)
    with gc.no_grad():
        want = inner(y).numpy() * 3.0
    np.testing.assert_allclose(cm(y).numpy(), want, rtol=1e-5, atol=1e-5)
    assert inner.stats()["fallbacks"] == {}


def test_first_runs_of_new_sizes_from_many_threads():
    gc.manual_seed(6)
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU()).eval()
    cm = runtime.compile(model, [gc.randn(2, 8)], device="cpu", dynamic_axes={"input": {0: "n"}})
    start = threading.Barrier(8, timeout=TIMEOUT)
    xs = [
        np.random.default_rng(i).standard_normal((3 + i % 2, 8)).astype(np.float32)
        for i in range(8)
    ]
    got = [None] * 8

    def worker(i):
        def go():
            start.wait()
            got[i] = cm.run_arrays([xs[i]])[0]

        return go

    run_threads(*(worker(i) for i in range(8)))
    with gc.no_grad():
        for x, out in zip(xs, got):
            np.testing.assert_allclose(out, model(gc.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert len(cm.executors()) == 3  # sizes 2 (the example), 3 and 4: each built once


class Trainable(nn.Module):
    """Batch norm and dropout: what a capture must see in eval mode."""

    def __init__(self, hook):
        super().__init__()
        self.hook = hook
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        self.hook()
        return self.drop(self.bn(self.fc(x)).relu())


def test_two_captures_of_one_training_module_both_see_eval_mode():
    gc.manual_seed(7)
    both_in = threading.Barrier(2, timeout=TIMEOUT)
    first_done = threading.Event()
    names = {}

    def hook():
        if threading.current_thread().name in names:
            both_in.wait()  # the two traces are inside forward together
            if names[threading.current_thread().name] == "second":
                assert first_done.wait(TIMEOUT)  # ... and the first ends before the second

    model = Trainable(hook)
    with gc.no_grad():
        model.bn(gc.randn(16, 6) * 3 + 1)  # running statistics that are not the identity
    model.train()
    x = gc.randn(5, 6)
    results = {}

    def capture(role):
        def go():
            names[threading.current_thread().name] = role
            results[role] = runtime.compile(model, [x], device="cpu")
            if role == "first":
                first_done.set()

        return go

    run_threads(capture("first"), capture("second"))
    names.clear()
    assert model.training  # restored once both captures ended
    model.eval()
    with gc.no_grad():
        want = model(x).numpy()
    for cm in results.values():
        np.testing.assert_allclose(cm(x).numpy(), want, rtol=1e-5, atol=1e-5)


def test_another_threads_autocast_holds_while_a_capture_runs():
    gc.manual_seed(8)
    w, b = gc.randn(8, 5), gc.randn(5)
    inside = threading.Barrier(2, timeout=TIMEOUT)

    def fn(x):
        inside.wait()  # the trace has begun: the other thread computes now
        inside.wait()
        return (x @ w + b).relu() * 2.0

    x = gc.randn(3, 8)
    a, m = gc.randn(4, 6), gc.randn(6, 3)
    with gc.autocast("cpu", dtype=gc.bfloat16):
        want = a @ m  # autocast's matmul: bfloat16
    assert want.dtype == gc.bfloat16
    got = {}

    def capture():
        got["model"] = runtime.compile(fn, [x], device="cpu")

    def mixed():
        with gc.autocast("cpu", dtype=gc.bfloat16):
            inside.wait()
            got["out"] = a @ m
            inside.wait()

    run_threads(capture, mixed)
    assert got["out"].dtype == gc.bfloat16
    np.testing.assert_array_equal(got["out"].float().numpy(), want.float().numpy())
    np.testing.assert_allclose(got["model"](x).numpy(), reference(x, w, b), rtol=1e-5, atol=1e-5)
