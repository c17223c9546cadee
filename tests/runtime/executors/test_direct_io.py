"""The compiled CPU executor's direct input / output (executors/cpu.py, ``direct_io``): its
kernels read the caller's input and write the result array in place where the plan allows. The
caller's arrays never change, the bits never do (the interpreted executor's, any thread count),
and arrays the kernels cannot use in place (misaligned, strided, Fortran order) go through the
copies with the same bits; a Tensor on a device is copied first; the planner keeps (no in-place
writes over) only the inputs read in place."""

import threading

import numpy as np
import pytest
from runtime_models import block, cnn, mlp, rand

import gpucore
from gpucore import nn, runtime
from gpucore.runtime.executors.cpu import CompiledExecutor
from gpucore.runtime.model import InputError, _to_array
from gpucore.runtime.planner.plan import plan


def _relu_linear():
    gpucore.manual_seed(0)
    return nn.Sequential(nn.ReLU(), nn.Linear(16, 16))


def _fan_out(x):
    """x read by four nodes (two of them one mul), two outputs."""
    h = x.exp() * x
    return h + x.tanh(), x.sigmoid()


DIRECT = {  # model, input shape, (direct inputs, direct outputs) expected
    "mlp": (lambda: mlp(16), (4, 16), True, True),
    "block": (lambda: block(16), (2, 5, 16), True, True),
    "relu_first": (_relu_linear, (4, 16), True, True),  # relu does not run in place over x
    "identity": (lambda: lambda x: x, (4, 16), True, True),  # a clone of x
    "reshape": (lambda: lambda x: x.reshape(16, 4), (4, 16), False, False),  # a view of x
    "double": (lambda: lambda x: x * 2, (4, 16), True, True),
    "two_outputs": (lambda: lambda x: (x.exp(), x.exp() + 1), (4, 16), True, True),
    "fan_out": (lambda: _fan_out, (4, 16), True, True),
    "input_and_output": (lambda: lambda x: (x, x.exp()), (4, 16), True, True),  # x cloned
    "cnn": (cnn, (2, 3, 8, 8), False, True),  # conv2d_forward declares no pointer fields
}


def _compile(name, **kw):
    build, shape, _, _ = DIRECT[name]
    return runtime.compile(build(), [rand(*shape, seed=5)], device="cpu", **kw)


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_the_callers_input_is_never_written_and_the_bits_stay(name):
    _, shape, want_in, want_out = DIRECT[name]
    interpreted = _compile(name, executor="interpreted")
    compiled = _compile(name)
    (ex,) = compiled.executors()
    ins, outs = ex.direct
    assert bool(ins) == want_in and bool(outs) == want_out, (ex.direct, compiled.graph)
    for seed in (6, 7):
        x = rand(*shape, seed=seed)
        keep = x.copy()
        want = interpreted.run_arrays([x])
        got = compiled.run_arrays([x])
        assert x.tobytes() == keep.tobytes()
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes() and not np.shares_memory(g, x)


def test_bits_do_not_depend_on_the_thread_count():
    x = rand(32, 16, seed=3)
    compiled = runtime.compile(mlp(16), [x], device="cpu")
    assert all(compiled.executors()[0].direct)
    before = gpucore.get_num_threads()
    try:
        got = []
        for n in (1, 2, 3, 8):
            gpucore.set_num_threads(n)
            got.append(compiled.run_arrays([x])[0].tobytes())
    finally:
        gpucore.set_num_threads(before)
    assert len(set(got)) == 1


def test_two_inputs_one_read_in_place_one_written_over():
    """y dies at the add, which the planner may write over (relu reads x twice: x is kept)."""

    def fn(x, y):
        return (x.relu() * x + y).exp()

    x, y = rand(4, 16, seed=1), rand(4, 16, seed=2)
    interpreted = runtime.compile(fn, [x, y], device="cpu", executor="interpreted")
    compiled = runtime.compile(fn, [x, y], device="cpu")
    (ex,) = compiled.executors()
    assert ex.direct[0] and ex.direct[1]
    keep = (x.copy(), y.copy())
    got = compiled.run_arrays([x, y])[0]
    assert got.tobytes() == interpreted.run_arrays([x, y])[0].tobytes()
    assert x.tobytes() == keep[0].tobytes() and y.tobytes() == keep[1].tobytes()


def _misaligned(x, offset=1):
    raw = np.zeros(x.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    y = np.frombuffer(raw.data, x.dtype, x.size, offset=start).reshape(x.shape)
    y[...] = x
    assert y.flags.c_contiguous
    return y


def test_inputs_the_kernels_cannot_read_in_place_are_copied_with_the_same_bits():
    compiled = runtime.compile(mlp(16), [rand(4, 16)], device="cpu")
    x = rand(4, 16, seed=8)
    (ex,) = compiled.executors()
    assert ex.direct[0]
    want = compiled.run_arrays([x])[0]
    fortran = np.asfortranarray(x)
    wide = np.zeros((4, 32), np.float32)
    wide[:, ::2] = x
    # offset 1: not item-aligned (copied); 4 and 20: item-aligned, not 16 or 64 (in place)
    arrays = [_misaligned(x, 1), _misaligned(x, 4), _misaligned(x, 20), fortran, wide[:, ::2]]
    assert not arrays[0].flags.aligned and arrays[1].flags.aligned
    for y in arrays:
        keep = y.copy()
        assert compiled.run_arrays([y])[0].tobytes() == want.tobytes()
        np.testing.assert_array_equal(y, keep)
    assert ex.run([_misaligned(x)])[0].tobytes() == want.tobytes()  # the executor itself
    with pytest.raises(ValueError, match="format 'd'"):
        ex.run([x.astype(np.float64)])
    with pytest.raises(InputError, match="float64"):
        compiled.run_arrays([x.astype(np.float64)])
    assert compiled.run_arrays([x])[0].tobytes() == want.tobytes()


def test_results_are_not_shared_between_calls():
    compiled = runtime.compile(mlp(16), [rand(4, 16)], device="cpu")
    a = compiled.run_arrays([rand(4, 16, seed=1)])[0]
    keep = a.copy()
    b = compiled.run_arrays([rand(4, 16, seed=2)])[0]
    assert not np.shares_memory(a, b) and a.tobytes() == keep.tobytes()
    assert not np.array_equal(a, b)


def test_eight_threads_on_one_session_read_their_own_inputs():
    compiled = runtime.compile(mlp(32), [rand(8, 32)], device="cpu")
    xs = [rand(8, 32, seed=s) for s in range(8)]
    keep = [x.copy() for x in xs]
    xs[3] = _misaligned(xs[3], 4)  # in place, but not 16-byte aligned
    xs[5] = _misaligned(xs[5], 2)  # copied
    serial = [compiled.run_arrays([x])[0] for x in xs]
    sess = runtime.InferenceSession(compiled, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    results: list = [[] for _ in xs]
    barrier = threading.Barrier(len(xs))

    def work(i):
        barrier.wait()
        for _ in range(30):
            results[i].append(sess.run(None, {name: xs[i]})[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(ex.direct[0] and ex.direct[1] for ex in compiled.executors())
    for i, outs in enumerate(results):
        assert xs[i].tobytes() == keep[i].tobytes()
        assert all(o.tobytes() == serial[i].tobytes() for o in outs)
    ids = {o.ctypes.data for outs in results for o in outs[-1:]}
    assert len(ids) == len(xs)  # distinct arrays alive at once


@pytest.mark.parametrize("name", ["relu_first", "double"])
def test_an_input_the_plan_writes_in_place_is_copied(name):
    """With the planner's in-place writes over graph inputs allowed (its default), relu / mul
    write over x's memory: that memory must stay the arena's copy, never the caller's array."""
    _, shape, _, _ = DIRECT[name]
    compiled = _compile(name)
    p = plan(compiled.graph)
    assert any(p.root[o] in compiled.graph.inputs for o in p.inplace)
    ex = CompiledExecutor(p)
    assert not ex.direct[0]
    x = rand(*shape, seed=6)
    keep = x.copy()
    got = ex.run([x])
    assert x.tobytes() == keep.tobytes()
    assert got[0].tobytes() == compiled.run_arrays([x])[0].tobytes()


def test_the_plan_keeps_only_the_inputs_read_in_place():
    """relu(x) may run over x's memory; kept for direct input it costs, at most, one allocation
    (transformer blocks: the residual add's; a copy less per run). An input that is not read in
    place (a conv reads it too: conv2d declares no pointer fields) is left to the planner's
    in-place writes (exp over x here), as in the interpreted executor's plan."""
    relu = _compile("relu_first")
    (ex,) = relu.executors()
    assert ex.direct[0] == relu.graph.inputs and not ex.plan.inplace
    assert plan(relu.graph).inplace  # the default plan writes relu over x
    gpucore.manual_seed(0)
    conv = nn.Conv2d(3, 3, 3, padding=1)
    x = rand(2, 3, 6, 6, seed=1)
    compiled = runtime.compile(lambda t: conv(t) * t.exp(), [x], device="cpu")
    interpreted = runtime.compile(
        lambda t: conv(t) * t.exp(), [x], device="cpu", executor="interpreted"
    )
    (ex,) = compiled.executors()
    assert not ex.direct[0]
    assert ex.plan.arena_bytes == plan(compiled.graph).arena_bytes
    # exp over x, as before
    assert any(ex.plan.root[o] in compiled.graph.inputs for o in ex.plan.inplace)
    assert compiled.run_arrays([x])[0].tobytes() == interpreted.run_arrays([x])[0].tobytes()


def test_saved_and_onnx_models_read_and_write_in_place(tmp_path):
    model = block(16)
    x = rand(3, 5, 16, seed=2)
    compiled = runtime.compile(model, [x], device="cpu")
    want = compiled.run_arrays([x])[0]
    compiled.save(tmp_path / "block.gcm")
    loaded = runtime.load(tmp_path / "block.gcm", device="cpu")
    assert loaded.run_arrays([x])[0].tobytes() == want.tobytes()
    assert all(loaded.executors()[0].direct)
    pytest.importorskip("onnx")
    mlp_model = mlp(16)
    x = rand(4, 16, seed=3)
    proto = gpucore.onnx.export(mlp_model, (gpucore.tensor(x),))
    imported = gpucore.onnx.load(proto, device="cpu", dynamic=False)
    interpreted = gpucore.onnx.load(proto, device="cpu", dynamic=False, executor="interpreted")
    for xi in (x, _misaligned(x, 4), _misaligned(x, 1)):
        got = imported.run_arrays([xi])[0]
        assert got.tobytes() == interpreted.run_arrays([xi])[0].tobytes()
    (ex,) = imported.executors()
    assert ex.direct[0] and ex.direct[1]
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(
        proto if isinstance(proto, bytes) else proto.SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    (ref,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_a_device_tensor_input_is_copied_first():
    """A gpucore Tensor on a Vulkan device: its host view is an uncached mapping that device
    work may write while the kernels read their input in place, so the executor reads a copy;
    the result is the numpy input's and the tensor keeps its values."""
    if gpucore.dispatch.vulkan_backend(allow_cpu=True) is None:
        pytest.skip("no Vulkan device: " + (gpucore.vulkan.unavailable_reason() or "unknown"))
    x = rand(4, 16, seed=8)
    t = gpucore.tensor(x).to("vulkan")
    arr = _to_array("x", t)
    assert arr.tobytes() == x.tobytes() and not np.shares_memory(arr, t._host())
    host = gpucore.tensor(x)  # a CPU tensor's array is read as is (no copy)
    assert np.shares_memory(_to_array("x", host), host._host())
    compiled = _compile("double")
    assert all(compiled.executors()[0].direct)
    want = compiled.run_arrays([x])[0]
    assert compiled(t).numpy().tobytes() == want.tobytes()
    assert t.numpy().tobytes() == x.tobytes()
