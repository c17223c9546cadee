"""gpucore.runtime.executors.cpu: interpreted and compiled executors give the same bits, equal
eager gpucore, and serve many threads at once."""

import gc
import threading
import weakref

import numpy as np
import pytest
from runtime_models import block, cnn, eager, lm, mlp, rand, token_ids, unet

import gpucore
from gpucore import runtime

MODELS = {
    "mlp": (lambda: mlp(32), (4, 32)),
    "mlp_batch1": (lambda: mlp(64), (1, 64)),
    "block": (lambda: block(16), (2, 5, 16)),
    "causal_block": (lambda: block(32, causal=True, approximate="tanh"), (3, 7, 32)),
    "cnn": (cnn, (2, 3, 8, 8)),
    "unet": (unet, (2, 3, 8, 8)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_equals_interpreted_equals_eager(name):
    build, shape = MODELS[name]
    model = build()
    x = rand(*shape, seed=1)
    interpreted = runtime.compile(model, [x], device="cpu", executor="interpreted")
    compiled = runtime.compile(model, [x], device="cpu")
    for seed in (2, 3):
        x = rand(*shape, seed=seed)
        a = interpreted.run_arrays([x])[0]
        b = compiled.run_arrays([x])[0]
        np.testing.assert_array_equal(a, b)  # the same kernels, the same bits
        np.testing.assert_allclose(b, eager(model, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unoptimized_graphs_run_too(name):
    build, shape = MODELS[name]
    model = build()
    x = rand(*shape, seed=4)
    cm = runtime.compile(model, [x], device="cpu", optimize=False)
    np.testing.assert_allclose(cm.run_arrays([x])[0], eager(model, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_models_run_as_one_c_call(name):
    """Every op of these models (cat, upsampling and padding through gather, average pooling
    through im2col, clamp, log1p among them) has a C lowering: no step runs in Python."""
    build, shape = MODELS[name]
    cm = runtime.compile(build(), [rand(*shape)], device="cpu")
    (ex,) = cm.executors()
    assert ex.python_steps == 0, cm.graph


def test_a_token_model_runs_as_one_c_call():
    """Embedding lookups (gather with an expanded index, read in place) on int64 ids."""
    model, ids = lm(), token_ids(2, 8)
    compiled = runtime.compile(model, [ids], device="cpu")
    interpreted = runtime.compile(model, [ids], device="cpu", executor="interpreted")
    assert compiled.executors()[0].python_steps == 0, compiled.graph
    for seed in (1, 2):
        ids = token_ids(2, 8, seed=seed)
        got = compiled.run_arrays([ids])[0]
        np.testing.assert_array_equal(got, interpreted.run_arrays([ids])[0])
        np.testing.assert_allclose(got, eager(model, ids), rtol=1e-5, atol=1e-5)
    bad = token_ids(2, 8)
    bad[1, 3] = 20
    with pytest.raises(IndexError, match=r"index values must be in \[0, 20\)"):
        compiled.run_arrays([bad])


def test_dtype_conversions_are_c_calls():
    """Tensor.to(dtype) between bool, 8-bit, 32/64-bit integers and floats lowers to
    ``_cpu.cast``: the eager kernel's (numpy's) bits, NaN and out-of-range values included."""

    def fn(x):
        i = x.to(gpucore.int32)  # truncation; out of range: int32's minimum (as numpy on x86)
        u = (x * 0.01).to(gpucore.uint8)  # wraps
        f = i.to(gpucore.float64) + u.to(gpucore.float64) + (x > 0).to(gpucore.float64)
        return f.to(gpucore.float32), x.to(gpucore.int64), i.to(gpucore.int8)

    x = rand(4, 33, seed=1) * 1e4
    x[0, :4] = [np.nan, np.inf, -np.inf, 3e9]
    cm = runtime.compile(fn, [x], device="cpu")
    (ex,) = cm.executors()
    assert ex.python_steps == 0, cm.graph
    interpreted = runtime.compile(fn, [x], device="cpu", executor="interpreted")
    with gpucore.no_grad():
        want = [t.numpy() for t in fn(gpucore.tensor(x))]
    for got, ref, eager_out in zip(cm.run_arrays([x]), interpreted.run_arrays([x]), want):
        assert got.tobytes() == ref.tobytes() == eager_out.tobytes()


def test_python_steps_between_c_calls():
    def fn(x):  # cumsum has no lowering: it runs from Python between two C calls
        return (gpucore.cumsum(x.exp(), 1) * 2).relu()

    x = rand(3, 5)
    cm = runtime.compile(fn, [x], device="cpu")
    (ex,) = cm.executors()
    assert ex.python_steps >= 1
    with gpucore.no_grad():
        want = fn(gpucore.tensor(x)).numpy()
    np.testing.assert_allclose(cm.run_arrays([x])[0], want, rtol=1e-6)


def test_eight_threads_equal_serial_runs():
    model = block(32)
    cm = runtime.compile(model, [rand(2, 9, 32)], device="cpu")
    xs = [rand(2, 9, 32, seed=s) for s in range(8)]
    serial = [cm.run_arrays([x])[0] for x in xs]
    results = [None] * 8
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        for _ in range(20):
            results[i] = cm.run_arrays([xs[i]])[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, serial):
        np.testing.assert_array_equal(got, want)
    (ex,) = cm.executors()
    assert 1 <= ex.pool.created <= 9  # one runner (arena + program) per concurrent run


def test_outputs_are_fresh_arrays():
    cm = runtime.compile(mlp(8), [rand(2, 8)], device="cpu")
    a = cm.run_arrays([rand(2, 8, seed=1)])[0]
    b = cm.run_arrays([rand(2, 8, seed=2)])[0]
    assert not np.shares_memory(a, b) and not np.array_equal(a, b)


@pytest.mark.parametrize("group", ["NORM", "ACTIVATION", "PAD", "UPSAMPLE", "DISTANCE"])
def test_every_nn_module_compiled_equals_interpreted_and_eager(group):
    """Every module of the nn table (tests/nn/nn_cases.py), optimised and compiled, in float64."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "nn"))
    import nn_cases

    for case in getattr(nn_cases, f"{group}_CASES"):
        m = nn_cases.ours(case, gpucore.float64).eval()
        ins = [np.asarray(x, np.float64) for x in case.inputs]
        try:
            compiled = runtime.compile(m, ins, device="cpu")
        except runtime.CaptureError as e:
            assert "random" in str(e), case
            continue
        interpreted = runtime.compile(m, ins, device="cpu", executor="interpreted")
        got = compiled.run_arrays(ins)
        np.testing.assert_array_equal(got[0], interpreted.run_arrays(ins)[0], err_msg=repr(case))
        with gpucore.no_grad():
            want = m(*[gpucore.tensor(x) for x in ins])
        want = want if isinstance(want, tuple) else (want,)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-9, atol=1e-12, err_msg=repr(case))


@pytest.mark.parametrize("executor", ["compiled", "interpreted"])
def test_a_dropped_model_is_freed_without_the_cycle_collector(executor):
    """No reference cycle through the executor (its pool's ``make``, its runners): the arena
    and packed weights go when the last reference does, so a model loaded again reuses them."""
    build, shape = MODELS["cnn"]
    x = rand(*shape, seed=1)
    cm = runtime.compile(build(), [x], device="cpu", executor=executor)
    cm.run_arrays([x])
    executors = [weakref.ref(e) for e in cm._executors.values()]
    assert executors
    gc.disable()
    try:
        del cm
        assert all(e() is None for e in executors)
    finally:
        gc.enable()
