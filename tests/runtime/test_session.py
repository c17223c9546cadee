"""gpucore.runtime.session: ONNX Runtime's InferenceSession interface and statistics."""

import threading

import numpy as np
import pytest
from runtime_models import block, eager, mlp, rand

import gpucore
from gpucore.runtime import InferenceSession, InputError


@pytest.fixture
def session():
    model = block(16)
    cm = gpucore.compile(model, (rand(2, 5, 16),), device="cpu", dynamic_axes={"x": [0]})
    return model, InferenceSession(cm, providers=["CPUExecutionProvider"])


def test_run_and_metadata(session):
    model, sess = session
    (inp,) = sess.get_inputs()
    assert (inp.name, inp.shape, inp.type) == ("x", ["x_0", 5, 16], "tensor(float)")
    assert [o.name for o in sess.get_outputs()] == ["output"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    x = rand(3, 5, 16)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, eager(model, x), rtol=1e-5, atol=1e-5)
    (y2,) = sess.run(["output"], {"x": gpucore.tensor(x)})
    np.testing.assert_array_equal(y, y2)


def test_input_feed_errors(session):
    _, sess = session
    with pytest.raises(InputError, match="unknown input 'y'"):
        sess.run(None, {"x": rand(1, 5, 16), "y": rand(1)})
    with pytest.raises(InputError, match="input 'x' is missing"):
        sess.run(None, {})
    with pytest.raises(InputError, match="unknown output 'logits'"):
        sess.run(["logits"], {"x": rand(1, 5, 16)})
    with pytest.raises(ValueError, match="unknown provider"):
        InferenceSession(session[1].model, providers=["CUDAExecutionProvider"])
    with pytest.raises(TypeError, match="compile the module first"):
        InferenceSession(mlp(4))


def test_stats_and_reset(session):
    _, sess = session
    for _ in range(5):
        sess.run(None, {"x": rand(2, 5, 16)})
    st = sess.stats()
    assert st["calls"] == 5 and 0 < st["p50_ms"] <= st["p99_ms"] and st["mean_ms"] > 0
    assert "nodes" not in st
    sess.reset_stats()
    assert sess.stats()["calls"] == 0


def test_profiling_times_every_node():
    cm = gpucore.compile(mlp(16), (rand(2, 16),), device="cpu")
    sess = InferenceSession(cm, enable_profiling=True)
    for _ in range(3):
        sess.run(None, {"input": rand(2, 16)})
    nodes = sess.stats()["nodes"]
    assert len(nodes) == 3 and all(rec["calls"] == 3 for rec in nodes.values())
    assert all(rec["total_ms"] > 0 for rec in nodes.values())


def test_many_threads_on_one_session(session):
    _, sess = session
    xs = [rand(2, 5, 16, seed=s) for s in range(8)]
    want = [sess.run(None, {"x": x})[0] for x in xs]
    got = [None] * 8

    def work(i):
        for _ in range(10):
            got[i] = sess.run(None, {"x": xs[i]})[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert sess.stats()["calls"] == 8 + 80


def test_session_options_leave_the_callers_model_unchanged():
    cm = gpucore.compile(mlp(4), (rand(1, 4),), device="cpu")
    sess = InferenceSession(cm, check_nan=True)
    x = rand(1, 4)
    x[0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        sess.run(None, {"input": x})
    assert not cm.check_nan and np.isnan(cm.run_arrays([x])[0]).all()
    assert InferenceSession(cm).model is cm  # nothing to change: the model itself
