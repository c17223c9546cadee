"""gpucore.runtime.executors.vulkan: the graph recorded once, replayed with one submit per run,
equal to eager gpucore (lavapipe in CI)."""

import threading

import numpy as np
import pytest
from runtime_models import block, cnn, eager, mlp, rand

import gpucore
from gpucore import runtime
from gpucore.errors import DeviceError

MODELS = {
    "mlp": (lambda: mlp(64), (4, 64)),
    "block": (lambda: block(16), (2, 5, 16)),
    "causal_block": (lambda: block(32, causal=True, approximate="tanh"), (3, 7, 32)),
    "cnn": (cnn, (2, 3, 8, 8)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_replay_equals_eager(vulkan, name):
    build, shape = MODELS[name]
    model = build()
    cm = runtime.compile(model, [rand(*shape)], device="vulkan")
    assert cm.device == "vulkan"
    for seed in (1, 2):
        x = rand(*shape, seed=seed)
        with gpucore.device_policy("cpu"):
            want = eager(model, x)
        np.testing.assert_allclose(cm.run_arrays([x])[0], want, rtol=1e-4, atol=1e-5)


def test_a_run_is_one_submit_whatever_the_number_of_ops(vulkan):
    def chain(x):  # 30 dependent ops
        for i in range(10):
            x = (x * 1.5 + float(i)).tanh()
        return x

    x = rand(64, 64)
    cm = runtime.compile(chain, [x], device="vulkan", optimize=False)
    (ex,) = cm.executors()
    assert ex.dispatches() >= 30
    stream = vulkan.ctx.stream
    before = dict(stream.stats)
    out = cm.run_arrays([x])[0]
    assert stream.stats["submits"] == before["submits"]  # nothing through the eager stream
    assert stream.stats["dispatches"] == before["dispatches"]  # nothing recorded again
    runner = ex.pool.take()
    assert runner.capture.replays >= 1
    ex.pool.give(runner)
    with gpucore.no_grad(), gpucore.device_policy("cpu"):
        want = chain(gpucore.tensor(x)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_dynamic_batch_and_threads(vulkan):
    model = block(16)
    cm = runtime.compile(model, [rand(2, 5, 16)], device="vulkan", dynamic_axes={"x": [0]})
    xs = [rand(1 + i % 3, 5, 16, seed=i) for i in range(6)]
    serial = [cm.run_arrays([x])[0] for x in xs]
    got = [None] * 6

    def work(i):
        for _ in range(3):
            got[i] = cm.run_arrays([xs[i]])[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, serial):
        np.testing.assert_array_equal(a, b)


def test_ops_without_shaders_are_refused_at_compile(vulkan):
    with pytest.raises(DeviceError, match="no Vulkan shader.*device='cpu'"):
        runtime.compile(lambda x: gpucore.logcumsumexp(x * 2, 0), [rand(4)], device="vulkan")
    # the stream works as before after the refusal
    y = gpucore.ones(8).to("vulkan") * 3
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(8, 3.0, np.float32))


class EmbedCat(gpucore.nn.Module):
    """An embedding (a gather in the captured graph) joined with a float input (cat)."""

    def __init__(self):
        super().__init__()
        gpucore.manual_seed(3)
        self.emb = gpucore.nn.Embedding(50, 16)
        self.lin = gpucore.nn.Linear(32, 8)

    def forward(self, ids, x):
        return self.lin(gpucore.cat([self.emb(ids), x], -1)).relu()


def test_embedding_and_cat_replay_equal_to_the_cpu(vulkan):
    model = EmbedCat()
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 50, (3, 7))
    cm = runtime.compile(model, [ids, rand(3, 7, 16)], device="vulkan")
    assert cm.device == "vulkan"
    (ex,) = cm.executors()
    ops = {s.node.op for s in ex.plan.steps}
    assert {"gather", "cat"} <= ops, ops
    for seed in (1, 2):
        ids, x = rng.integers(0, 50, (3, 7)), rand(3, 7, 16, seed=seed)
        with gpucore.device_policy("cpu"), gpucore.no_grad():
            want = model(gpucore.tensor(ids), gpucore.tensor(x)).numpy()
        np.testing.assert_allclose(cm.run_arrays([ids, x])[0], want, rtol=1e-5, atol=1e-6)


def test_bool_view_copies_and_cat_replay(vulkan):
    # a transposed bool output is a copy step (copy.comp's byte mode), joined by a bool cat
    def f(t):
        return (t > 0).T, gpucore.cat([t > 0.25, t < -0.25, t == 0], 1)

    x = rand(33, 70) - 0.5
    cm = runtime.compile(f, [x], device="vulkan")
    (ex,) = cm.executors()
    assert "copy" in {s.kind for s in ex.plan.steps}
    for seed in (1, 2):
        x = rand(33, 70, seed=seed) - 0.5
        x[0, :5] = 0
        got = cm.run_arrays([x])
        np.testing.assert_array_equal(got[0], (x > 0).T)
        np.testing.assert_array_equal(got[1], np.concatenate([x > 0.25, x < -0.25, x == 0], 1))
