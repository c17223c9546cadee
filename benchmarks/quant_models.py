"""Models in FP32 vs INT8 static quantization (``python benchmarks/quant.py --models``): the
digits CNN and MLP of gpucore/examples/digits.py (trained here, seed 0) and a 784-1024-1024-10
MLP (random weights: time and size only), through gpucore's ``quantize_static``, PyTorch's FX
static quantization (``prepare_fx`` / ``convert_fx``, the x86 qconfig) and ONNX Runtime's
``quantize_static`` (QDQ, per-channel int8 weights, uint8 activations), each from the same
weights and calibrated on the same batches, when installed; "gpucore Vulkan": gpucore's FP32 and
INT8 models compiled for the Vulkan device (on lavapipe, a CPU device: CPU timings, with its own
threads). Everything on one thread; the
libraries' FP32 and INT8 calls alternate in rounds and the median round is reported (µs per
call). Size: the saved model file (gpucore ``.save``, ``torch.save`` of the state dict, the
.onnx file). Accuracy: on the 360 held-out digits (batches of the timed size).
"""

from __future__ import annotations

import io
import os
import statistics
import tempfile
import time

import numpy as np

import gpucore as gc
from gpucore import nn
from gpucore.quantization import quantize_static


def _rate(fn, min_time: float) -> float:
    """µs per call of fn over at least min_time seconds (one warm-up call)."""
    fn()
    reps, t0 = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        t = time.perf_counter() - t0
        if t >= min_time:
            return t / reps * 1e6


def _paired(fns: dict, rounds: int, min_time: float) -> dict:
    got = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            got[k].append(_rate(fn, min_time))
    return {k: statistics.median(v) for k, v in got.items()}


def _acc(logits: np.ndarray, y) -> float | None:
    return None if y is None else float((logits.argmax(1) == y[: len(logits)]).mean() * 100)


def _cos(a, b) -> float:
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _batches(x: np.ndarray, b: int) -> list:
    return [x[i : i + b] for i in range(0, len(x) - b + 1, b)]


def cases(models=None) -> list:
    """(name, gpucore module, train x, test x, test y or None); ``models``: only the names
    containing one of these strings."""
    from gpucore.examples import digits as demo

    def keep(name):
        return not models or any(m in name for m in models)

    x_tr, _, x_te, y_te = demo.load_data(0)
    out = []
    for kind in ("cnn", "mlp"):
        if keep(f"digits {kind.upper()}"):
            model = demo.train(kind, progress=False, device="cpu").model.eval()
            out.append((f"digits {kind.upper()}", model, x_tr, x_te, y_te))
    if not keep("MLP 784-1024-1024-10"):
        return out
    gc.manual_seed(0)
    big = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                        nn.Linear(1024, 10)).eval()  # fmt: skip
    rng = np.random.default_rng(0)
    out.append(("MLP 784-1024-1024-10", big, rng.standard_normal((1024, 784)).astype(np.float32),
                rng.standard_normal((256, 784)).astype(np.float32), None))  # fmt: skip
    return out


def run_gpucore(model, calib, tests, rounds, min_time, d) -> dict:
    fm = gc.compile(model, gc.tensor(tests[0]), device="cpu")
    qm = quantize_static(fm, calib)
    x = tests[0]
    t = _paired({"f": lambda: fm.run_arrays([x]), "q": lambda: qm.run_arrays([x])}, rounds,
                min_time)  # fmt: skip
    fm.save(os.path.join(d, "f.gcm"))
    qm.save(os.path.join(d, "q.gcm"))
    f_out = np.concatenate([fm.run_arrays([b])[0] for b in tests])
    q_out = np.concatenate([qm.run_arrays([b])[0] for b in tests])
    sizes = (os.path.getsize(os.path.join(d, "f.gcm")), os.path.getsize(os.path.join(d, "q.gcm")))
    return {"t": (t["f"], t["q"]), "size": sizes, "out": (f_out, q_out)}


def run_vulkan(model, calib, tests, rounds, min_time, d) -> dict | None:
    """gpucore's FP32 and INT8 (``quantize_static(..., device="vulkan")``: the int8 shaders)
    models on the Vulkan device; None without one. On lavapipe (a CPU device) these are CPU
    timings, its own threads (LP_NUM_THREADS) included."""
    if gc.dispatch.vulkan_backend(required=False, allow_cpu=True) is None:
        return None
    fc = gc.compile(model, gc.tensor(tests[0]), device="cpu")
    fm = gc.compile(model, gc.tensor(tests[0]), device="vulkan")
    qm = quantize_static(fc, calib, device="vulkan")
    x = tests[0]
    t = _paired({"f": lambda: fm.run_arrays([x]), "q": lambda: qm.run_arrays([x])}, rounds,
                min_time)  # fmt: skip
    fc.save(os.path.join(d, "f.gcm"))
    qm.save(os.path.join(d, "q.gcm"))
    f_out = np.concatenate([fm.run_arrays([b])[0] for b in tests])
    q_out = np.concatenate([qm.run_arrays([b])[0] for b in tests])
    sizes = (os.path.getsize(os.path.join(d, "f.gcm")), os.path.getsize(os.path.join(d, "q.gcm")))
    return {"t": (t["f"], t["q"]), "size": sizes, "out": (f_out, q_out)}


def _torch_model(model):
    import torch  # noqa: PLC0415

    mods = []
    for m in model:
        name = type(m).__name__
        if name == "Conv2d":
            mods.append(torch.nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size,
                                        m.stride, m.padding))  # fmt: skip
        elif name == "Linear":
            mods.append(torch.nn.Linear(m.in_features, m.out_features))
        elif name == "MaxPool2d":
            mods.append(torch.nn.MaxPool2d(m.kernel_size))
        else:
            mods.append(getattr(torch.nn, name)())
    tm = torch.nn.Sequential(*mods).eval()
    sd = {k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()}
    tm.load_state_dict(sd)
    return tm


def run_torch(model, calib, tests, rounds, min_time, d) -> dict | None:
    try:
        import torch  # noqa: PLC0415
        from torch.ao.quantization import get_default_qconfig_mapping  # noqa: PLC0415
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx  # noqa: PLC0415
    except ImportError:
        return None
    torch.set_num_threads(1)
    torch.backends.quantized.engine = "x86"
    tm = _torch_model(model)
    x0 = torch.from_numpy(tests[0])
    prepared = prepare_fx(_torch_model(model), get_default_qconfig_mapping("x86"), (x0,))
    with torch.no_grad():
        for b in calib:
            prepared(torch.from_numpy(b))
        qm = convert_fx(prepared)

        def call(m, x=x0):
            with torch.no_grad():
                return m(x)

        t = _paired({"f": lambda: call(tm), "q": lambda: call(qm)}, rounds, min_time)
        f_out = np.concatenate([tm(torch.from_numpy(b)).numpy() for b in tests])
        q_out = np.concatenate([qm(torch.from_numpy(b)).numpy() for b in tests])
    sizes = []
    for m in (tm, qm):
        buf = io.BytesIO()
        torch.save(m.state_dict(), buf)
        sizes.append(buf.tell())
    return {"t": (t["f"], t["q"]), "size": tuple(sizes), "out": (f_out, q_out)}


def run_ort(model, calib, tests, rounds, min_time, d) -> dict | None:
    try:
        import onnxruntime as ort  # noqa: PLC0415
        import torch  # noqa: PLC0415
        from onnxruntime import quantization as oq  # noqa: PLC0415
    except ImportError:
        return None
    fpath, qpath = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
    torch.onnx.export(_torch_model(model), (torch.from_numpy(tests[0]),), fpath,
                      input_names=["x"], output_names=["y"], dynamo=False)  # fmt: skip

    class Reader(oq.CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib)

        def get_next(self):
            b = next(self.it, None)
            return None if b is None else {"x": b}

    oq.quantize_static(fpath, qpath, Reader(), quant_format=oq.QuantFormat.QDQ,
                       per_channel=True, activation_type=oq.QuantType.QUInt8,
                       weight_type=oq.QuantType.QInt8)  # fmt: skip
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    fs = ort.InferenceSession(fpath, opts, providers=["CPUExecutionProvider"])
    qs = ort.InferenceSession(qpath, opts, providers=["CPUExecutionProvider"])
    x = tests[0]
    t = _paired({"f": lambda: fs.run(None, {"x": x}), "q": lambda: qs.run(None, {"x": x})},
                rounds, min_time)  # fmt: skip
    f_out = np.concatenate([fs.run(None, {"x": b})[0] for b in tests])
    q_out = np.concatenate([qs.run(None, {"x": b})[0] for b in tests])
    return {"t": (t["f"], t["q"]), "size": (os.path.getsize(fpath), os.path.getsize(qpath)),
            "out": (f_out, q_out)}  # fmt: skip


LIBS = {"gpucore": run_gpucore, "gpucore Vulkan": run_vulkan, "PyTorch FX": run_torch,
        "ONNX Runtime": run_ort}  # fmt: skip


def table(batches=(64, 1), rounds: int = 5, min_time: float = 0.2, libs=None, models=None):
    """Prints the markdown table (module docstring); ``libs`` / ``models``: only those rows (names
    of LIBS; model names containing one of the strings)."""
    gc._cpu.set_num_threads(1)
    print("| model | batch | library | FP32 µs | INT8 µs | speed-up | FP32 KB | INT8 KB | "
          "size ratio | FP32 acc % | INT8 acc % | cos(INT8, FP32) |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, model, x_tr, x_te, y in cases(models):
        for b in batches:
            calib = _batches(x_tr, b)[: max(8, 512 // b)]
            tests = _batches(x_te, b)
            for lib, fn in LIBS.items():
                if libs and lib not in libs:
                    continue
                with tempfile.TemporaryDirectory() as d:
                    try:
                        r = fn(model, calib, tests, rounds, min_time, d)
                    except Exception as e:  # noqa: BLE001 - a library that cannot run it: say so
                        print(f"| {name} | {b} | {lib} | failed: {type(e).__name__}: "
                              f"{str(e)[:80]} |||||||||")  # fmt: skip
                        continue
                if r is None:
                    continue
                (tf, tq), (sf, sq), (of, oq) = r["t"], r["size"], r["out"]
                af, aq = _acc(of, y), _acc(oq, y)
                acc = f"{af:.2f} | {aq:.2f}" if af is not None else "- | -"
                print(f"| {name} | {b} | {lib} | {tf:.1f} | {tq:.1f} | {tf / tq:.2f}x | "
                      f"{sf / 1024:.1f} | {sq / 1024:.1f} | {sf / sq:.2f}x | {acc} | "
                      f"{_cos(oq, of):.5f} |", flush=True)  # fmt: skip
