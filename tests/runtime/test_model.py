"""gpucore.runtime.model: gpucore.compile and CompiledModel (inputs checked, dynamic sizes,
one executor per set of sizes)."""

import numpy as np
import pytest
from runtime_models import block, eager, mlp, rand

import gpucore
from gpucore import runtime
from gpucore.runtime import InputError


def test_compile_is_gpucore_compile_and_calls_like_the_model():
    model = mlp(8)
    x = gpucore.randn(3, 8)
    cm = gpucore.compile(model, (x,), device="cpu")
    assert isinstance(cm, runtime.CompiledModel) and cm.device == "cpu"
    y = cm(x)
    assert isinstance(y, gpucore.Tensor) and y.dtype is gpucore.float32
    np.testing.assert_allclose(y.numpy(), eager(model, x.numpy()), rtol=1e-6)
    assert "gemm" in str(cm.graph) and "steps" in cm.plan_summary()


def test_functions_with_several_outputs():
    cm = gpucore.compile(lambda a, b: (a + b, a * b), (rand(4), rand(4)), device="cpu")
    s, p = cm(rand(4, seed=1), rand(4, seed=2))
    np.testing.assert_allclose(p.numpy(), rand(4, seed=1) * rand(4, seed=2), rtol=1e-6)
    assert cm.input_names == ["a", "b"] and cm.output_names == ["output_0", "output_1"]


def test_nested_outputs_come_back_in_the_model_structure():
    """The capture flattens nested outputs into graph outputs (run_arrays: the flat list, as
    ONNX); ``__call__`` rebuilds what the model returned: a ``((t,),)`` stays one (it used to
    come back a bare Tensor), lists stay lists, dicts keep their keys and order, also at
    another size of a dynamic axis."""

    def fn(a, b):
        return {"s": ((a + b,),), "p": [a * b, (a - b, [])]}

    x, y = rand(2, 4), rand(2, 4, seed=1)
    cm = gpucore.compile(fn, (x, y), device="cpu", dynamic_axes={"a": {0: "n"}, "b": {0: "n"}})
    assert cm.output_names == ["output_0", "output_1", "output_2"]
    for n in (2, 5):
        x, y = rand(n, 4, seed=n), rand(n, 4, seed=n + 1)
        got = cm(x, y)
        assert list(got) == ["s", "p"] and isinstance(got["p"], list) and got["p"][1][1] == []
        ((s,),) = got["s"]
        flat = [s, got["p"][0], got["p"][1][0]]
        for g, want in zip(flat, (x + y, x * y, x - y)):
            assert isinstance(g, gpucore.Tensor)
            np.testing.assert_array_equal(g.numpy(), want)
        for g, a in zip(flat, cm.run_arrays([x, y])):
            np.testing.assert_array_equal(g.numpy(), a)
    one = gpucore.compile(lambda a: ((a * 2,),), (rand(3),), device="cpu")
    ((t,),) = one(rand(3))
    np.testing.assert_array_equal(t.numpy(), rand(3) * 2)


def test_dynamic_batch_serves_every_size():
    model = block(16)
    cm = gpucore.compile(model, (rand(2, 5, 16),), device="cpu", dynamic_axes={"x": {0: "batch"}})
    assert cm.input_spec("x") == (("batch", 5, 16), gpucore.float32)
    for batch in (1, 2, 6):
        x = rand(batch, 5, 16, seed=batch)
        np.testing.assert_allclose(cm.run_arrays([x])[0], eager(model, x), rtol=1e-5, atol=1e-5)
    assert len(cm.executors()) == 3  # one plan per size, built once


def test_bad_inputs_name_the_input_and_the_expectation():
    cm = gpucore.compile(mlp(8), (rand(2, 8),), device="cpu", dynamic_axes={"input": [0]})
    with pytest.raises(InputError, match=r"input 'input': expected dtype float32, got float64"):
        cm.run_arrays([np.zeros((2, 8))])
    with pytest.raises(InputError, match=r"expected shape \('input_0', 8\).*dim 1 is fixed at 8"):
        cm.run_arrays([np.zeros((2, 9), np.float32)])
    with pytest.raises(InputError, match="expected 2 dims"):
        cm.run_arrays([np.zeros(8, np.float32)])
    with pytest.raises(InputError, match="takes 1 inputs"):
        cm.run_arrays([])
    with pytest.raises(InputError, match="Tensor or a numpy array"):
        cm.run_arrays([[1.0] * 8])


def test_check_nan_rejects_nan_inputs():
    cm = gpucore.compile(mlp(4), (rand(1, 4),), device="cpu", check_nan=True)
    x = rand(1, 4)
    x[0, 2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        cm.run_arrays([x])
    plain = gpucore.compile(mlp(4), (rand(1, 4),), device="cpu")
    assert np.isnan(plain.run_arrays([x])[0]).all()  # NaN flows through, as eager


def test_bad_options():
    with pytest.raises(ValueError, match="device must be one of"):
        gpucore.compile(mlp(4), (rand(1, 4),), device="gpu")
    with pytest.raises(ValueError, match="executor must be one of"):
        gpucore.compile(mlp(4), (rand(1, 4),), device="cpu", executor="jit")


@pytest.fixture
def probe_spy(monkeypatch, tmp_path):
    """dispatch's 'auto' device looked for afresh (its cache empty, then restored), with no
    GPU device node, the environment asking nothing, and the Vulkan probe replaced by a spy
    answering None (no device auto would use); yields (monkeypatch context, probe calls)."""
    from gpucore import dispatch

    calls = []

    def probe(required=False, allow_cpu=None):
        calls.append(required)
        return None

    with monkeypatch.context() as m:
        m.setattr(dispatch, "_vulkan_cache", {})
        m.setattr(dispatch, "vulkan_backend", probe)
        m.setattr(dispatch, "GPU_DEVICE_NODES", (str(tmp_path / "no-such-node"),))
        for var in ("GPUCORE_VULKAN_ALLOW_CPU", "GPUCORE_DEVICE", "GPUCORE_VULKAN_DEVICE"):
            m.delenv(var, raising=False)
        yield m, calls
    dispatch._update_fast()  # the fast lane's limit for the restored cache


_pick = runtime.model._pick_device
_LINUX = pytest.mark.skipif(
    not __import__("sys").platform.startswith("linux"), reason="the Linux device-node rule"
)


@_LINUX
def test_auto_skips_the_vulkan_probe_without_gpu_device_nodes(probe_spy):
    _, calls = probe_spy
    assert _pick("auto") == "cpu" and calls == []  # nothing a GPU driver could open


@_LINUX
@pytest.mark.parametrize("var", ["GPUCORE_VULKAN_ALLOW_CPU", "GPUCORE_VULKAN_DEVICE"])
def test_auto_asks_vulkan_when_the_environment_names_a_vulkan_device(probe_spy, var):
    # lavapipe allowed, or a device chosen by index (which raises when it names none)
    m, calls = probe_spy
    m.setenv(var, "1")
    assert _pick("auto") == "cpu" and calls == [False]


def test_auto_probes_when_a_gpu_device_node_exists(probe_spy, tmp_path):
    from gpucore import dispatch

    m, calls = probe_spy
    m.setattr(dispatch, "GPU_DEVICE_NODES", (str(tmp_path),))  # (an existing path)
    assert _pick("auto") == "cpu" and calls == [False]
    assert _pick("auto") == "cpu" and calls == [False]  # looked for once, as eager ops do
    assert _pick("cpu") == "cpu" and calls == [False]


def test_auto_picks_the_device_eager_auto_uses(probe_spy):
    from gpucore import dispatch

    m, calls = probe_spy
    device = object()  # (a stand-in: _pick_device only asks whether there is one)
    dispatch._vulkan_cache[True] = device  # lavapipe, made for an explicit .to("vulkan")
    assert _pick("auto") == "cpu"  # ... is not auto's device
    dispatch._vulkan_cache.clear()
    dispatch._vulkan_cache["auto"] = device  # eager 'auto' ops found a device
    assert _pick("auto") == "vulkan" and calls == []
