"""gpucore.onnx.load and the InferenceSession hook: sources (path, bytes, ModelProto, external
data), symbolic dims as dynamic axes, output names, initializer names, Vulkan, and the optional
dependency."""

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper
from onnx_cases import assert_close, model, onnx, rand, run_gpucore, run_ort

import gpucore
import gpucore.onnx
from gpucore.dispatch import GPU_DEVICE_NODES
from gpucore.errors import SerializationError
from gpucore.runtime import InferenceSession


def _mlp(input_shape=("N", 8), opset=17):
    """x -> Gemm -> Relu -> MatMul -> Add, weights as initializers."""
    nodes = [
        helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "out.weight"], ["m"]),
        helper.make_node("Add", ["m", "out.bias"], ["y"]),
    ]
    inits = {
        "fc.weight": rand(16, 8, seed=1),
        "fc.bias": rand(16, seed=2),
        "out.weight": rand(16, 4, seed=3),
        "out.bias": rand(4, seed=4),
    }
    x = rand(2, 8)
    return model(nodes, {"x": x}, {"y": np.float32}, inits, opset, {"x": list(input_shape)})


def test_path_bytes_and_model_proto_load_the_same(tmp_path):
    m = _mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(m, path)
    x = rand(3, 8, seed=9)
    want = run_ort(m, {"x": x})
    for source in (str(path), path, m.SerializeToString(), m):
        cm = gpucore.onnx.load(source, device="cpu")
        assert cm.input_names == ["x"] and cm.output_names == ["y"]
        assert_close(cm.run_arrays([x]), want)


def test_symbolic_dims_become_dynamic_axes():
    m = _mlp()
    cm = gpucore.onnx.load(m, device="cpu")
    assert cm.symbols == ["N"]
    assert cm.input_spec("x")[0] == ("N", 8)
    for n in (1, 3, 7):
        x = rand(n, 8, seed=n)
        assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_dynamic_false_fixes_symbolic_dims_at_1():
    cm = gpucore.onnx.load(_mlp(), device="cpu", dynamic=False)
    assert cm.symbols == [] and cm.input_spec("x")[0] == (1, 8)


def test_an_unnamed_unknown_dim_gets_a_symbol_of_its_own():
    cm = gpucore.onnx.load(_mlp(input_shape=(None, 8)), device="cpu")
    assert cm.symbols == ["x_0"]


def test_inputs_sharing_a_dim_param_share_the_symbol():
    node = helper.make_node("Add", ["a", "b"], ["y"])
    a, b = rand(2, 3), rand(2, 3, seed=1)
    m = model([node], {"a": a, "b": b}, {"y": np.float32},
              input_shapes={"a": ["B", 3], "b": ["B", 3]})  # fmt: skip
    cm = gpucore.onnx.load(m, device="cpu")
    assert cm.symbols == ["B"]
    feeds = {"a": rand(5, 3, seed=2), "b": rand(5, 3, seed=3)}
    assert_close(cm.run_arrays([feeds["a"], feeds["b"]]), run_ort(m, feeds))


def test_weights_keep_their_initializer_names():
    cm = gpucore.onnx.load(_mlp(), device="cpu", optimize=False)
    constants = {n for n, t in cm.symbolic.tensors.items() if t.data is not None}
    assert {"fc.weight", "fc.bias", "out.weight", "out.bias"} <= constants


def test_output_names_several_outputs_and_a_constant_output():
    nodes = [
        helper.make_node("Relu", ["x"], ["output"]),  # the name the tracer gives its output
        helper.make_node("Neg", ["x"], ["output_0"]),
        helper.make_node("Identity", ["w"], ["w_out"]),
    ]
    x = rand(2, 3)
    outs = {"output_0": np.float32, "output": np.float32, "w_out": np.float32}
    m = model(nodes, {"x": x}, outs, {"w": rand(3, seed=1)})
    cm = gpucore.onnx.load(m, device="cpu")
    assert cm.output_names == ["output_0", "output", "w_out"]
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_inference_session_opens_onnx_paths_and_bytes(tmp_path):
    m = _mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(m, path)
    x = rand(4, 8, seed=5)
    want = run_ort(m, {"x": x})
    for source in (str(path), path, m.SerializeToString()):
        sess = InferenceSession(source, providers=["CPUExecutionProvider"])
        assert [i.name for i in sess.get_inputs()] == ["x"]
        assert sess.get_inputs()[0].shape == ["N", 8]
        assert sess.get_outputs()[0].name == "y"
        assert_close(sess.run(None, {"x": x}), want)
    with pytest.raises(SerializationError, match="<bytes>"):
        InferenceSession(b"not a model")


def test_external_data_is_read_from_the_models_folder(tmp_path):
    m = _mlp()
    path = tmp_path / "ext.onnx"
    ext = onnx.ModelProto()
    ext.CopyFrom(m)  # save_model moves the copy's weights out
    onnx.save_model(ext, path, save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert (tmp_path / "ext.bin").exists()
    x = rand(2, 8)
    assert_close(gpucore.onnx.load(path, device="cpu").run_arrays([x]), run_ort(m, {"x": x}))
    with pytest.raises(SerializationError, match="external"):
        gpucore.onnx.load(path.read_bytes(), device="cpu")  # bytes have no folder
    os.remove(tmp_path / "ext.bin")
    with pytest.raises(SerializationError, match="ext.onnx"):
        gpucore.onnx.load(path, device="cpu")


def test_models_run_on_vulkan(vulkan):
    m = _mlp()
    cm = gpucore.onnx.load(m, device="vulkan")
    assert cm.device == "vulkan"
    for n in (1, 3):
        x = rand(n, 8, seed=n)
        assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_options_reach_the_runtime():
    cm = gpucore.onnx.load(_mlp(), device="cpu", executor="interpreted", optimize=False)
    assert cm.executor_kind == "interpreted" and not cm.optimize
    x = rand(2, 8)
    assert_close(run_gpucore(_mlp(), {"x": x}, executor="interpreted"), run_ort(_mlp(), {"x": x}))


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_onnx_is_imported_only_when_a_model_is_loaded():
    r = _python(
        "import sys, gpucore, gpucore.onnx, gpucore.runtime\n"
        "assert 'onnx' not in sys.modules, 'onnx imported'\n"
        "assert gpucore.onnx.supported_ops()\n"
        "assert 'onnx' not in sys.modules, 'onnx imported by supported_ops'\n"
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or any(os.path.exists(p) for p in GPU_DEVICE_NODES),
    reason="a machine that may have a GPU: device='auto' asks Vulkan",
)
def test_auto_loads_without_the_vulkan_bindings_on_a_machine_without_gpu(tmp_path):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(_mlp().SerializeToString())
    asks_vulkan = ("GPUCORE_VULKAN_ALLOW_CPU", "GPUCORE_DEVICE", "GPUCORE_VULKAN_DEVICE")
    env = {k: v for k, v in os.environ.items() if k not in asks_vulkan}
    r = subprocess.run(
        [sys.executable, "-c",
         "import sys, numpy as np, gpucore.onnx\n"
         f"cm = gpucore.onnx.load({str(path)!r})\n"
         "assert cm.device == 'cpu', cm.device\n"
         "cm.run_arrays([np.ones((2, 8), np.float32)])\n"
         "assert 'vulkan' not in sys.modules, 'the Vulkan bindings were imported'\n"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_auto_with_a_vulkan_device_index_naming_no_device_raises(tmp_path):
    # GPUCORE_VULKAN_DEVICE asks Vulkan, with or without GPU device nodes: a wrong index says so
    # (as an eager op under 'auto' does) instead of quietly running on the CPU
    if not gpucore.vulkan.devices():
        pytest.skip("no Vulkan device list to index")
    path = tmp_path / "mlp.onnx"
    path.write_bytes(_mlp().SerializeToString())
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCORE_DEVICE",)}
    env["GPUCORE_VULKAN_DEVICE"] = "99"
    r = subprocess.run(
        [sys.executable, "-c", f"import gpucore.onnx\ngpucore.onnx.load({str(path)!r})\n"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert r.returncode != 0 and "GPUCORE_VULKAN_DEVICE='99' does not name a device" in r.stderr


def test_a_missing_onnx_package_says_how_to_install_it():
    r = _python(
        "import sys\nsys.modules['onnx'] = None\nimport gpucore.onnx\n"
        "try:\n    gpucore.onnx.load(b'x')\nexcept ImportError as e:\n    print(e)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "pip install 'gpucore[onnx]'" in r.stdout


def test_a_value_computed_from_a_dynamic_size_that_feeds_a_tensor_op():
    """Range(0, T) over a dynamic T is a new constant at every size: refused with a hint, and
    loadable with dynamic=False."""
    mk = helper.make_node
    nodes = [
        mk("Shape", ["x"], ["s"]),
        mk("Gather", ["s", "one"], ["t"], axis=0),
        mk("Range", ["zero", "t", "one"], ["r"]),
        mk("Cast", ["r"], ["rf"], to=1),
        mk("Add", ["x", "rf"], ["y"]),
    ]
    inits = {"one": np.array(1, np.int64), "zero": np.array(0, np.int64)}
    m = model(nodes, {"x": rand(2, 3)}, {"y": np.float32}, inits, input_shapes={"x": [2, "T"]})
    with pytest.raises(gpucore.runtime.CaptureError, match="dynamic=False"):
        gpucore.onnx.load(m, device="cpu")
    cm = gpucore.onnx.load(m, device="cpu", dynamic=False)
    x = rand(2, 1)
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_load_runs_no_kernel_of_an_op_that_reads_the_inputs():
    """The graph is captured from the ops' shape rules (a shapes-only trace): loading a CNN runs
    no convolution, pooling or GEMM kernel, while a constant subgraph (a weight's Transpose and
    Mul) is still computed at load. The loaded model gives ONNX Runtime's values."""
    mk = helper.make_node
    nodes = [
        mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        mk("Relu", ["c"], ["r"]),
        mk("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        mk("Flatten", ["p"], ["f"]),
        mk("Transpose", ["fc"], ["fct"], perm=[1, 0]),
        mk("Mul", ["fct", "two"], ["fct2"]),
        mk("Gemm", ["f", "fct2", "fb"], ["y"]),
    ]
    inits = {
        "w": rand(8, 3, 3, 3, seed=1),
        "b": rand(8, seed=2),
        "fc": rand(5, 8 * 4 * 4, seed=3),
        "two": np.array(2.0, np.float32),
        "fb": rand(5, seed=4),
    }
    m = model(
        nodes, {"x": rand(2, 3, 8, 8)}, {"y": np.float32}, inits, input_shapes={"x": [2, 3, 8, 8]}
    )
    with gpucore.profiler() as p:
        cm = gpucore.onnx.load(m, device="cpu")
    ran = {op for op, _, _ in p.events}
    assert not ran & {"conv2d", "conv2d_fused", "relu", "max_pool2d", "linear", "matmul", "addmm"}
    x = rand(2, 3, 8, 8, seed=5)
    assert_close(cm.run_arrays([x]), run_ort(m, {"x": x}))


def test_dynamic_axes_load_shapes_only_too():
    with gpucore.profiler() as p:
        cm = gpucore.onnx.load(_mlp(), device="cpu")
    assert cm.symbols == ["N"] and not p.events
    x = rand(5, 8, seed=5)
    assert_close(cm.run_arrays([x]), run_ort(_mlp(), {"x": x}))
