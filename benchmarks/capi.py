"""Per-call cost of a deployed model from C (``gc_model_run``) vs Python and ONNX Runtime.

    python benchmarks/capi.py            # every model (~1 minute on 2 cores)
    python benchmarks/capi.py --quick    # fewer repeats

Each model is one ONNX file built here with fixed weights; ONNX Runtime runs it (CPU provider,
through its Python binding: the issue's comparison), and gpucore imports it
(``gpucore.onnx.load(dynamic=False)``, CPU), saves it and runs the saved file four ways:

- ``C buffers``: ``gc_model_run_buffers`` from a C driver (compiled here against the installed
  libgpucore): the lowest-overhead call, nothing allocated per run;
- ``C tensors``: ``gc_model_run`` with gc_tensor handles (a new output tensor per run, freed);
- ``Program.run``: the compiled executor's C loop called from Python on preallocated arrays
  (the kernels plus one Python call);
- ``Session.run``: ``gpucore.runtime.InferenceSession(path).run`` (Python, the public API).

The ``int8`` rows are the model above them statically quantized
(``gpucore.quantization.quantize_static``, calibrated on the input): the saved file's int8
program run by the same four callers (ONNX Runtime: n/a, its float row is the one above).

The ``tiny`` model (relu of one float) has kernels of a few nanoseconds: its C times are the C
API's own per-call overhead. Times are µs per call, the median of repeats, one thread for every
library (GPUCORE_NUM_THREADS=1, ORT intra_op_num_threads=1) so that pool wake-ups do not blur
microsecond-scale calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("GPUCORE_NUM_THREADS", "1")

import numpy as np  # noqa: E402

DRIVER = r"""
#include <gpucore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
int main(int argc, char **argv)
{
    gc_error err;
    gc_model *m = gc_model_load(argv[1], NULL, &err);
    if (!m || argc < 4) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    const int iters = atoi(argv[2]), reps = atoi(argv[3]);
    int64_t si[8], so[8];
    const int ni = gc_model_input_shape(m, 0, si, 8, &err);
    const int no = gc_model_output_shape(m, 0, so, 8, &err);
    size_t nin = 4, nout = 4;
    for (int d = 0; d < ni; d++)
        nin *= (size_t)si[d];
    for (int d = 0; d < no; d++)
        nout *= (size_t)so[d];
    float *x = calloc(nin, 1), *y = calloc(nout, 1);
    for (size_t i = 0; i < nin / 4; i++)
        x[i] = (float)(i % 7) * 0.25f;
    gc_tensor *xt = gc_tensor_from_buffer(x, nin, si, ni, GC_DTYPE_FLOAT32, GC_BUFFER_COPY, NULL,
                                          NULL, &err);
    const gc_tensor *xs[1] = {xt};
    const void *in[1] = {x};
    void *out[1] = {y};
    for (int mode = 0; mode < 2; mode++) {
        printf(mode ? "tensors" : "buffers");
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not printed */
            const double t0 = now();
            for (int i = 0; i < iters; i++) {
                if (mode == 0) {
                    gc_model_run_buffers(m, in, &nin, 1, out, &nout, 1, &err);
                } else {
                    gc_tensor *o = NULL;
                    gc_model_run(m, xs, 1, &o, 1, &err);
                    gc_tensor_free(o, &err);
                }
            }
            if (r >= 0)
                printf(" %.4f", (now() - t0) / iters);
        }
        printf("\n");
    }
    gc_tensor_free(xt, &err);
    gc_model_free(m, &err);
    free(x);
    free(y);
    return 0;
}
"""


def _rand(rng, *shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def onnx_models() -> dict:
    """name -> (onnx ModelProto, input array)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def model(name, nodes, inits, x, out_shape):
        g = helper.make_graph(
            nodes,
            name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
            [numpy_helper.from_array(v, k) for k, v in inits.items()],
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m, x

    def mlp(widths, batch):
        nodes, inits, prev = [], {}, "x"
        for i, (a, b) in enumerate(zip(widths, widths[1:])):
            inits[f"w{i}"], inits[f"b{i}"] = _rand(rng, b, a), _rand(rng, b)
            out = "y" if i == len(widths) - 2 else f"h{i}"
            nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [out], transB=1))
            if out != "y":
                nodes.append(helper.make_node("Relu", [out], [f"r{i}"]))
                out = f"r{i}"
            prev = out
        return model("mlp", nodes, inits, _rand(rng, batch, widths[0]), (batch, widths[-1]))

    def cnn(batch):
        inits = {"cw": _rand(rng, 16, 1, 3, 3), "cb": _rand(rng, 16)}
        inits.update({"fw": _rand(rng, 10, 16 * 4 * 4), "fb": _rand(rng, 10)})
        nodes = [
            helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
        ]
        return model("cnn", nodes, inits, _rand(rng, batch, 1, 8, 8), (batch, 10))

    tiny = model("tiny", [helper.make_node("Relu", ["x"], ["y"])], {}, _rand(rng, 1), (1,))
    return {
        "tiny (relu, 1 float)": tiny,
        "mlp 64-64-64-10, batch 1": mlp((64, 64, 64, 10), 1),
        "mlp 784-512-256-10, batch 1": mlp((784, 512, 256, 10), 1),
        "mlp 784-512-256-10, batch 32": mlp((784, 512, 256, 10), 32),
        "cnn (digits size), batch 1": cnn(1),
    }


def _median_us(fn, iters: int, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(times)


def bench(quick: bool) -> list:
    import gpucore
    import gpucore.onnx
    from gpucore import runtime
    from gpucore.quantization import quantize_static

    reps = 3 if quick else 7
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "driver")
        src = os.path.join(tmp, "driver.c")
        with open(src, "w") as f:
            f.write(DRIVER)
        lib = gpucore.get_library_dir()
        subprocess.run(
            ["cc", "-O2", src, f"-I{gpucore.get_include()}", f"-L{lib}", f"-Wl,-rpath,{lib}"]
            + ["-lgpucore", "-o", exe],
            check=True,
        )
        models = dict(onnx_models())
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from models import namespace, transformer_block

        gpucore.manual_seed(0)
        blk = transformer_block(namespace(gpucore.nn), 64).eval()  # no ONNX file: ORT n/a
        models["transformer block d64, 2x16"] = (blk, _rand(np.random.default_rng(1), 2, 16, 64))
        for name, (proto, x) in models.items():
            if isinstance(proto, gpucore.nn.Module):
                cm, proto = runtime.compile(proto, gpucore.from_numpy(x), device="cpu"), None
            else:
                cm = gpucore.onnx.load(proto, device="cpu", dynamic=False)
            rows.append(_row(name, cm, proto, x, exe, tmp, quick, reps))
            if name in INT8:  # the same model statically quantized (calibrated on x)
                qm = quantize_static(cm, [x])
                rows.append(_row(f"int8 {name}", qm, None, x, exe, tmp, quick, reps))
    return rows


INT8 = ("mlp 784-512-256-10, batch 1", "mlp 784-512-256-10, batch 32", "cnn (digits size), batch 1")


def _row(name, cm, proto, x, exe, tmp, quick, reps) -> tuple:
    """(name, C buffers, C tensors, Program.run, Session.run, ORT) µs for compiled model cm."""
    import onnxruntime as ort

    from gpucore import runtime

    small = x.size * 4 < 1e5 and "784" not in name
    iters = (20000 if small else 500) // (4 if quick else 1)
    path = os.path.join(tmp, "m.gcm")
    cm.save(path)
    out = subprocess.run([exe, path, str(iters), str(reps)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    c = {
        ln.split()[0]: statistics.median(map(float, ln.split()[1:]))
        for ln in out.stdout.splitlines()
    }
    sess = runtime.InferenceSession(path)
    feed = {sess.get_inputs()[0].name: x}
    runner = cm.executors()[0].pool.take() if cm.executors() else None
    if runner is None:
        cm.run_arrays([x])
        runner = cm.executors()[0].pool.take()
    y = np.empty_like(cm.run_arrays([x])[0])
    prog = runner.program
    osess = None
    if proto is not None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        osess = ort.InferenceSession(
            proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
    return (
        name,
        c["buffers"],
        c["tensors"],
        _median_us(lambda p=prog, y=y, x=x: p.run((x,), (y,), 0), iters, reps),
        _median_us(lambda s=sess, f=feed: s.run(None, f), iters, reps),
        _median_us(lambda s=osess, x=x: s.run(None, {"x": x}), iters, reps)
        if osess is not None
        else float("nan"),
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rows = bench(args.quick)
    head = ("model", "C buffers", "C tensors", "Program.run", "Session.run", "ORT (Python)")
    print(f"{head[0]:<36}" + "".join(f"{h:>14}" for h in head[1:]) + "   (µs per call, median)")
    for r in rows:
        print(f"{r[0]:<36}" + "".join(f"{v:>14.2f}" for v in r[1:]))
    tiny = rows[0]
    print(
        f"C API overhead per call (the tiny model): {tiny[1]:.2f} µs with buffers, {tiny[2]:.2f} "
        f"µs with tensor handles; InferenceSession.run adds {tiny[4] - tiny[1]:.2f} µs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
