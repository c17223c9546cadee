"""INT8 ONNX models imported by gpucore.onnx against ONNX Runtime running the same file (``python
benchmarks/quant.py --onnx``).

A CNN on 1x28x28 (conv16-relu-pool-conv32-relu-pool-fc10) and an MLP 784-512-256-10 with random
weights are written with onnx.helper, quantized by ONNX Runtime's ``quantize_static`` (its
default int8 activations, and uint8 ones; int8 weights per channel; four random calibration
batches) in the QDQ and the QOperator format, then run by ``gpucore.onnx.load`` (the compiled C
program of int8 ``qconv2d`` / ``qlinear`` nodes) and by an ``onnxruntime.InferenceSession`` (CPU
provider, all graph optimizations, ``intra_op_num_threads`` = the row's threads). The two calls
alternate in rounds and the median round is reported, µs per call. "steps" is the largest
difference of the outputs in units of the output's quantization scale (0: the same bits; ONNX
Runtime's uint8 x int8 kernel on AVX2 without VNNI saturates pairs of products at int16, which
can move its result by a few steps where gpucore computes the exact integer sums).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from quant_models import _paired  # the same alternating timer (run from benchmarks/)

import gpucore as gc
from gpucore import _cpu

F32 = np.float32


def _models(rng):
    """{name: (float ModelProto, input shape without the batch)}."""
    from onnx import TensorProto as TP  # noqa: PLC0415
    from onnx import helper as h  # noqa: PLC0415
    from onnx import numpy_helper as nh  # noqa: PLC0415

    def init(name, shape, fan_in):
        w = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        return nh.from_array(w.astype(F32), name)

    def model(nodes, inits, shape, name):
        g = h.make_graph(
            nodes,
            name,
            [h.make_tensor_value_info("x", TP.FLOAT, ["N", *shape])],
            [h.make_tensor_value_info("y", TP.FLOAT, ["N", 10])],
            inits,
        )
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)

    n = h.make_node
    cnn = model(
        [
            n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
            n("Relu", ["c1"], ["r1"]),
            n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
            n("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
            n("Relu", ["c2"], ["r2"]),
            n("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
            n("Flatten", ["p2"], ["f"]),
            n("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
        ],
        [init("w1", (16, 1, 3, 3), 9), init("b1", (16,), 100), init("w2", (32, 16, 3, 3), 144),
         init("b2", (32,), 100), init("w3", (10, 1568), 1568), init("b3", (10,), 100)],
        (1, 28, 28),
        "cnn",
    )  # fmt: skip
    mlp = model(
        [
            n("Gemm", ["x", "w1", "b1"], ["a1"], transB=1),
            n("Relu", ["a1"], ["r1"]),
            n("Gemm", ["r1", "w2", "b2"], ["a2"], transB=1),
            n("Relu", ["a2"], ["r2"]),
            n("Gemm", ["r2", "w3", "b3"], ["y"], transB=1),
        ],
        [init("w1", (512, 784), 784), init("b1", (512,), 100), init("w2", (256, 512), 512),
         init("b2", (256,), 100), init("w3", (10, 256), 256), init("b3", (10,), 100)],
        (784,),
        "mlp",
    )  # fmt: skip
    return {"CNN 28x28": (cnn, (1, 28, 28)), "MLP 784-512-256-10": (mlp, (784,))}


def _quantize(fmodel, shape, fmt: str, act: str, d: str, rng) -> str:
    import onnx  # noqa: PLC0415
    from onnxruntime import quantization as oq  # noqa: PLC0415

    class Batches(oq.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal((8, *shape)).astype(F32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    fpath = os.path.join(d, f"{fmodel.graph.name}.onnx")
    qpath = os.path.join(d, f"{fmodel.graph.name}_{fmt}_{act}.onnx")
    onnx.save(fmodel, fpath)
    oq.quantize_static(
        fpath,
        qpath,
        Batches(),
        quant_format=getattr(oq.QuantFormat, fmt),
        per_channel=True,
        activation_type=oq.QuantType.QInt8 if act == "int8" else oq.QuantType.QUInt8,
    )
    return qpath


def _out_scale(path: str) -> float:
    import onnx  # noqa: PLC0415
    from onnx import numpy_helper as nh  # noqa: PLC0415

    m = onnx.load(path)
    last = [nd for nd in m.graph.node if nd.op_type == "DequantizeLinear"][-1]
    inits = {i.name: i for i in m.graph.initializer}
    return float(nh.to_array(inits[last.input[1]]))


def _row(cm, sess, x, step: float, rounds: int, min_time: float) -> tuple:
    """(gpucore µs, ONNX Runtime µs, int8 node kinds, largest difference in output steps)."""
    xt = gc.from_numpy(x)
    diff = np.abs(cm(xt).numpy() - sess.run(None, {"x": x})[0]).max()
    ops = {nd.op for e in cm.executors() for nd in e.plan.graph.nodes}
    r = _paired({"gc": lambda: cm(xt), "ort": lambda: sess.run(None, {"x": x})}, rounds, min_time)
    return r["gc"], r["ort"], sorted(ops & {"qconv2d", "qlinear"}), float(diff) / step


def table(rounds: int = 5, min_time: float = 0.2, threads=(1, 2), batches=(1, 32)) -> None:
    """Print the markdown table (module docstring)."""
    try:
        import onnxruntime as ort  # noqa: PLC0415
    except ImportError:
        print("- onnxruntime is not installed: no table")
        return
    import gpucore.onnx as gx  # noqa: PLC0415

    rng = np.random.default_rng(0)
    print(f"- ISA {_cpu.info()['isa']}; ONNX Runtime {ort.__version__}")
    print()
    print("| model | format | activations | batch | threads | gpucore µs | ONNX Runtime µs "
          "| ORT / gpucore | int8 nodes | steps |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    saved = _cpu.info()["threads"]
    with tempfile.TemporaryDirectory() as d:
        try:
            for name, (fmodel, shape) in _models(rng).items():
                for fmt, act in (("QDQ", "int8"), ("QOperator", "int8"), ("QDQ", "uint8"),
                                 ("QOperator", "uint8")):  # fmt: skip
                    path = _quantize(fmodel, shape, fmt, act, d, rng)
                    step = _out_scale(path)
                    cm = gx.load(path)
                    for nt in threads:
                        _cpu.set_num_threads(nt)
                        opts = ort.SessionOptions()
                        opts.intra_op_num_threads = nt
                        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
                        for b in batches:
                            x = rng.standard_normal((b, *shape)).astype(F32)
                            g, o, q, steps = _row(cm, sess, x, step, rounds, min_time)
                            row = f"| {name} | {fmt} | {act} | {b} | {nt} | {g:.1f} | {o:.1f} | "
                            row += f"{o / g:.2f}x | {', '.join(q)} | {steps:.0f} |"
                            print(row, flush=True)
        finally:
            _cpu.set_num_threads(saved)


def dynamic_table(rounds: int = 5, min_time: float = 0.2, batches=(1, 32)) -> None:
    """ONNX Runtime's ``quantize_dynamic`` of the MLP (DynamicQuantizeLinear -> MatMulInteger ->
    Cast -> Mul; int8 weights per channel), gpucore against ONNX Runtime on one thread. gpucore
    runs it as ``dynamic_quantize_linear`` (one fused kernel), ``qlinear_dynamic`` (the int8 GEMM
    with the Cast, the Mul by the scales and the bias Add in its epilogue) and ``relu`` nodes.
    "max |d|" is the largest output difference: both quantize the activations per call; ONNX
    Runtime's uint8 x int8 kernel on AVX2 saturates pairs of products, gpucore's sums are exact
    (it equals ONNX's reference evaluator bit for bit). With a Vulkan device that has
    shaderFloat64 the same file loaded with device="vulkan" (the int8 shaders:
    DynamicQuantizeLinear, the GEMM reading its scale and zero point on the device) is timed in
    the same rounds, its outputs checked against the CPU's bits; on lavapipe that is CPU time
    too."""
    try:
        import onnx  # noqa: PLC0415
        import onnxruntime as ort  # noqa: PLC0415
        from onnxruntime import quantization as oq  # noqa: PLC0415
    except ImportError:
        print("- onnxruntime is not installed: no table")
        return
    import gpucore.onnx as gx  # noqa: PLC0415

    rng = np.random.default_rng(0)
    fmodel, shape = _models(rng)["MLP 784-512-256-10"]
    be = gc.dispatch.vulkan_backend(required=False, allow_cpu=True)
    dev = f"{be.ctx.info.name} µs" if be is not None and be.ctx.float64 else None
    print("| model | batch | gpucore µs | ONNX Runtime µs | ORT / gpucore | max abs diff |"
          + (f" {dev} | Vulkan = CPU bits |" if dev else ""))  # fmt: skip
    print("|---|---|---|---|---|---|" + ("---|---|" if dev else ""))
    saved = _cpu.info()["threads"]
    with tempfile.TemporaryDirectory() as d:
        fpath, qpath = os.path.join(d, "mlp.onnx"), os.path.join(d, "mlp_dynamic.onnx")
        onnx.save(fmodel, fpath)
        oq.quantize_dynamic(fpath, qpath, weight_type=oq.QuantType.QInt8, per_channel=True)
        cm = gx.load(qpath)
        vm = gx.load(qpath, device="vulkan") if dev else None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(qpath, opts, providers=["CPUExecutionProvider"])
        try:
            _cpu.set_num_threads(1)
            for b in batches:
                x = rng.standard_normal((b, *shape)).astype(F32)
                xt = gc.from_numpy(x)
                diff = np.abs(cm(xt).numpy() - sess.run(None, {"x": x})[0]).max()
                fns = {"gc": lambda: cm(xt), "ort": lambda: sess.run(None, {"x": x})}  # noqa: B023
                extra = ""
                if vm is not None:
                    fns["vk"] = lambda: vm.run_arrays([x])  # noqa: B023
                    same = vm.run_arrays([x])[0].tobytes() == cm(xt).numpy().tobytes()
                r = _paired(fns, rounds, min_time)
                if vm is not None:
                    extra = f" {r['vk']:.1f} | {'yes' if same else 'NO'} |"
                print(f"| MLP dynamic int8 | {b} | {r['gc']:.1f} | {r['ort']:.1f} | "
                      f"{r['ort'] / r['gc']:.2f}x | {diff:.2g} |{extra}", flush=True)  # fmt: skip
        finally:
            _cpu.set_num_threads(saved)
