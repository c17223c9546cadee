"""The kernels of train.py's CNN step (conv16-pool-conv32-pool-fc on 28x28, batch 64) alone,
float32: gpucore's C kernels (``gpucore._cpu``) beside PyTorch's ATen calls for the same work
(when torch is importable).

    python benchmarks/cnn_step_kernels.py               # the pool's threads (all CPUs)
    python benchmarks/cnn_step_kernels.py --threads 1 --rounds 15
    python benchmarks/cnn_step_kernels.py --threads 1 -k stem   # rows whose name holds "stem"

Rows: max_pool2d forward with indices and its backward for both pools (64 x 16 x 28 x 28 and 64 x
32 x 14 x 14), the values-only max_pool2d of ResNet-18/50's stem (3x3 / 2, padding 1, 1 x 64 x 112
x 112, what the compiled executor runs; torch's call without indices), conv2d forward and backward
for both layers with the gradients the step asks for (the first layer's weight and bias, the
second's input, weight and bias). Each round times a block of calls per kernel, all of gpucore's
then all of torch's; the table gives the median per call over the rounds (wall clock; with
--threads 1 the thread's CPU time) and torch / gpucore (> 1: gpucore is faster), with the load
average before the run; for the stem pool also ONNX Runtime's one-node MaxPool model (when
importable; its session.run per call). gpucore's calls write into buffers made once; PyTorch's
functional calls allocate their outputs (values and indices, gx) on every call, so its times
include that allocation: read the ratios as "the call a training step makes", not as kernel against
kernel. The gpucore imported is the one on ``sys.path`` (``PYTHONPATH=... python ...`` times
another tree's build).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from gpucore import _cpu

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None
try:
    import onnx
    import onnxruntime as ort
except ImportError:  # pragma: no cover - onnxruntime is optional
    ort = None

N = 64
POOLS = [("pool1", 16, 28), ("pool2", 32, 14)]
CONVS = [("conv1 1->16", 1, 16, 28, False), ("conv2 16->32", 16, 32, 14, True)]


def _ort_max_pool(x, threads):
    """ONNX Runtime's MaxPool 3x3 / 2, padding 1 on x (one output: the values), or None."""
    if ort is None:
        return None
    h = onnx.helper
    node = h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    io = [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in ("x", "y")]
    graph = h.make_graph([node], "pool", io[:1], io[1:])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8  # what any recent onnxruntime reads
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"x": x})


def _cases(rng, threads=1):
    """[(name, gpucore fn, torch fn or None, onnxruntime fn or None)]"""
    out = []
    for name, c, hw in POOLS:
        x = rng.standard_normal((N, c, hw, hw)).astype(np.float32)
        oh = hw // 2
        vals, idx = np.empty((N, c, oh, oh), np.float32), np.empty((N, c, oh, oh), np.int64)
        geo = (N * c, hw, hw, 2, 2, 2, 2, 0, 0, 1, 1, oh, oh)
        _cpu.max_pool2d(x, vals, idx, *geo)
        g = rng.standard_normal(vals.shape).astype(np.float32)
        gx = np.empty_like(x)
        tf = tb = None
        if torch is not None:
            xt, gt, it = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(idx)

            def tf(xt=xt):
                torch.nn.functional.max_pool2d(xt, 2, return_indices=True)

            def tb(gt=gt, xt=xt, it=it):
                torch.ops.aten.max_pool2d_with_indices_backward(
                    gt, xt, [2, 2], [2, 2], [0, 0], [1, 1], False, it
                )

        out.append(
            (
                f"max_pool2d {name}",
                lambda x=x, v=vals, i=idx, q=geo: _cpu.max_pool2d(x, v, i, *q),
                tf,
            )
        )
        out.append(
            (
                f"max_pool2d_backward {name}",
                lambda g=g, i=idx, gx=gx, q=geo: _cpu.max_pool2d_backward(g, i, gx, *q),
                tb,
            )
        )
    x = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)
    vals = np.empty((1, 64, 56, 56), np.float32)
    geo = (64, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 56, 56)
    tf = None
    if torch is not None:
        xt = torch.from_numpy(x)

        def tf(xt=xt):
            torch.nn.functional.max_pool2d(xt, 3, 2, 1)

    out.append(
        (
            "max_pool2d values ResNet stem 64x112x112 3x3/2 p1",
            lambda x=x, v=vals, q=geo: _cpu.max_pool2d(x, v, None, *q),
            tf,
            _ort_max_pool(x, threads),
        )
    )
    for name, ci, co, hw, need_gx in CONVS:
        x = rng.standard_normal((N, ci, hw, hw)).astype(np.float32)
        w = (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(9 * ci)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        g = rng.standard_normal((N, co, hw, hw)).astype(np.float32)
        y = np.empty_like(g)
        gx = np.empty_like(x) if need_gx else None
        gw, gb = np.empty_like(w), np.empty_like(b)
        geo = (N, ci, hw, hw, 3, 3, 1, 1, 1, 1, 1, 1, co)
        tf = tb = None
        if torch is not None:
            xt, wt, bt, gt = (torch.from_numpy(a) for a in (x, w, b, g))

            def tf(xt=xt, wt=wt, bt=bt):
                torch.nn.functional.conv2d(xt, wt, bt, padding=1)

            def tb(gt=gt, xt=xt, wt=wt, need_gx=need_gx, co=co):
                torch.ops.aten.convolution_backward(
                    gt,
                    xt,
                    wt,
                    [co],
                    [1, 1],
                    [1, 1],
                    [1, 1],
                    False,
                    [0, 0],
                    1,
                    [need_gx, True, True],
                )

        out.append(
            (
                f"conv2d {name}",
                lambda x=x, w=w, b=b, y=y, q=geo: _cpu.conv2d_forward(x, w, b, y, *q),
                tf,
            )
        )
        out.append(
            (
                f"conv2d_backward {name}",
                lambda x=x, w=w, g=g, gx=gx, gw=gw, gb=gb, q=geo: _cpu.conv2d_backward(
                    x, w, g, gx, gw, gb, *q
                ),
                tb,
            )
        )
    return out


def _block(fn, calls, clock=time.perf_counter):
    t = clock()
    for _ in range(calls):
        fn()
    return (clock() - t) / calls * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0, help="threads for both (0: all CPUs)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=20, help="calls per timed block")
    ap.add_argument("-k", default="", help="only the rows whose name holds this string")
    a = ap.parse_args()
    threads = a.threads or os.cpu_count() or 1
    _cpu.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)
    # one thread: the calling thread's CPU time (what the kernel costs, not what other
    # processes on a shared machine take from it); more: wall clock
    clock = time.thread_time if threads == 1 else time.perf_counter
    load = os.getloadavg()
    cases = [(*c, None)[:4] for c in _cases(np.random.default_rng(0), threads) if a.k in c[0]]
    times = {name: ([], [], []) for name, *_ in cases}
    for _name, *fns in cases:  # warm-up
        for f in fns:
            if f is not None:
                _block(f, 3)
    for _ in range(a.rounds):
        # all of gpucore's kernels, a pause, all of torch's, a pause: a library's spinning
        # worker threads would otherwise slow the other's
        for lib in (0, 1, 2):
            for name, *fns in cases:
                if fns[lib] is not None:
                    times[name][lib].append(_block(fns[lib], a.calls, clock))
            time.sleep(0.3)
    print(f"- gpucore {_cpu.__file__} (isa {_cpu.info()['isa']}), {threads} thread(s)")
    print(f"- torch {torch.__version__ if torch is not None else 'not importable'}")
    print(f"- onnxruntime {ort.__version__ if ort is not None else 'not importable'}")
    print(f"- load average before the run: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f}")
    what = "thread CPU time" if threads == 1 else "wall clock"
    print(f"- median of {a.rounds} rounds x {a.calls} calls, ms per call ({what})\n")
    print("| kernel | gpucore ms | torch ms | torch / gpucore | ORT ms | ORT / gpucore |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, *_ in cases:
        mg = statistics.median(times[name][0])
        cols = []
        for tt in times[name][1:]:
            mt = statistics.median(tt) if tt else float("nan")
            cols += [f"{mt:.3f}", f"{mt / mg:.2f}"] if tt else ["—", "—"]
        print(f"| {name} | {mg:.3f} | {' | '.join(cols)} |")


if __name__ == "__main__":
    main()
