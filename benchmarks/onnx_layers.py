"""Where an ONNX model's time goes, node by node, in gpucore's compiled program and in ONNX
Runtime (``python benchmarks/onnx_layers.py [--model resnet50] [--threads N] [--runs R]
[--stat min]``).

gpucore: the compiled executor's own lowered calls (packed weights, the same arena) run one
node at a time from Python and timed each (a Python call costs ~1 µs; the nodes that matter
take 0.1-3 ms). ONNX Runtime: ``SessionOptions.enable_profiling``'s per-node kernel times.
Both run ``--runs`` times, alternating; the table groups the nodes by kind and shape (a
convolution by its input channels, input size, output channels, kernel and stride, gpucore's
conv2d_act nodes, which hold the following residual add and ReLU, as ONNX Runtime's fused
convolutions do, among them) with medians summed over a group's nodes. Needs torch, onnx and
onnxruntime.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import clean_openblas_env  # noqa: E402

clean_openblas_env("onnx_layers.py")

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def _gc_steps(model, x):
    """[(key, [(binding, args)])] of the compiled program's nodes for input x, in order."""
    from gpucore import _cpu  # noqa: PLC0415
    from gpucore.runtime.executors.cpu import _arena, bind_arrays, lower_step  # noqa: PLC0415

    model(x)  # builds the executor of these sizes
    (ex,) = model.executors()
    plan = ex.plan
    arena = _arena(plan.arena_bytes)
    arrays, scratch = bind_arrays(plan, arena)
    np.copyto(arrays[plan.graph.inputs[0]], x)
    steps = []
    for step, sc in zip(plan.steps, scratch):
        if step.kind == "view":
            continue
        calls = lower_step(step, arrays, sc)
        node = step.node
        key = _gc_key(plan.graph, node)
        steps.append((key, [(getattr(_cpu, fn), args) for fn, args in calls or []]))
    return steps, arena


def _gc_key(graph, node) -> str:
    t = graph.tensors
    if node.op in ("conv2d", "conv2d_act"):  # conv2d_act: with its bias / residual / ReLU
        c, h, w = t[node.inputs[0]].shape[1:]
        o, _, kh, _ = t[node.inputs[1]].shape
        s = node.attrs["stride"][0]
        return f"conv {c}x{h}x{w} -> {o} k{kh} s{s}"
    shape = "x".join(str(d) for d in t[node.output].shape[1:])
    return f"{node.op} {shape}"


def _ort_key(ev) -> str | None:
    a = ev["args"]
    op = a.get("op_name", "")
    shapes = a.get("input_type_shape", [])
    dims = [next(iter(d.values())) for d in shapes]
    if op in ("Conv", "FusedConv"):
        x, w = dims[0], dims[1]
        # NCHWc convolutions are listed with the reordered weight; the graph's strides live in
        # the node name only, so the key takes the stride from the output's size
        out = next(iter(a["output_type_shape"][0].values()))
        s = round(x[2] / out[2])
        return f"conv {x[1]}x{x[2]}x{x[3]} -> {w[0]} k{w[2]} s{s}"
    out = a.get("output_type_shape", [{}])
    shape = "x".join(str(d) for d in next(iter(out[0].values()), [])[1:]) if out else ""
    return f"{op} {shape}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50", choices=("resnet50", "resnet18"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="per node over the runs (min: least disturbed by other jobs)")  # fmt: skip
    args = ap.parse_args()
    import onnxruntime as ort  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from onnx_models import _export, _models  # noqa: PLC0415

    import gpucore.onnx as gx  # noqa: PLC0415
    from gpucore import _cpu  # noqa: PLC0415

    _cpu.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    name = {"resnet50": "ResNet-50 b1", "resnet18": "ResNet-18 b1"}[args.model]
    module, xt = _models(torch)[name]
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "m.onnx")
    _export(torch, module, xt, path)
    x = xt.numpy()
    model = gx.load(path)
    steps, _arena = _gc_steps(model, x)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tmp, "ort")
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    for _ in range(3):
        sess.run(None, feed)
        model(x)
    gc_times: dict = collections.defaultdict(list)  # (index) -> [s]
    whole = {"gc": [], "ort": []}
    for _ in range(args.runs):
        t0 = time.perf_counter()
        model(x)
        whole["gc"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sess.run(None, feed)
        whole["ort"].append(time.perf_counter() - t0)
        for i, (_, calls) in enumerate(steps):
            t0 = time.perf_counter()
            for fn, a in calls:
                fn(*a)
            gc_times[i].append(time.perf_counter() - t0)
    prof = sess.end_profiling()
    with open(prof) as f:
        events = json.load(f)
    ort_runs: dict = collections.defaultdict(list)  # node name -> [us]
    ort_key: dict = {}
    for ev in events:
        if ev.get("cat") != "Node" or not ev["name"].endswith("_kernel_time"):
            continue
        k = _ort_key(ev)
        ort_key[ev["name"]] = k
        ort_runs[ev["name"]].append(ev["dur"])
    stat = statistics.median if args.stat == "median" else min
    gc_group: dict = collections.defaultdict(lambda: [0, 0.0])
    for i, (key, _) in enumerate(steps):
        g = gc_group[key]
        g[0] += 1
        g[1] += stat(gc_times[i]) * 1e3
    ort_group: dict = collections.defaultdict(lambda: [0, 0.0])
    for nm, durs in ort_runs.items():
        g = ort_group[ort_key[nm]]
        g[0] += 1
        g[1] += stat(durs[-args.runs :]) / 1e3  # the timed runs (warm-ups first)
    keys = sorted(set(gc_group) | set(ort_group), key=lambda k: -gc_group.get(k, [0, 0.0])[1])
    print(f"- {name}, {args.threads} thread(s), {args.runs} runs alternating, node times: "
          f"{args.stat} over the runs; load: "
          f"{os.getloadavg()[0]:.2f}; whole model median: gpucore "
          f"{statistics.median(whole['gc']) * 1e3:.2f} ms, ORT "
          f"{statistics.median(whole['ort']) * 1e3:.2f} ms (the profiled ORT run)")  # fmt: skip
    print()
    print("| node kind and shape | gc nodes | gc ms | ORT nodes | ORT ms | gc - ORT ms |")
    print("|---|---:|---:|---:|---:|---:|")
    tg = to = 0.0
    for k in keys:
        ng, mg = gc_group.get(k, [0, 0.0])
        no, mo = ort_group.get(k, [0, 0.0])
        tg += mg
        to += mo
        print(f"| {k} | {ng} | {mg:.3f} | {no} | {mo:.3f} | {mg - mo:+.3f} |")
    print(f"| total | | {tg:.3f} | | {to:.3f} | {tg - to:+.3f} |")


if __name__ == "__main__":
    main()
