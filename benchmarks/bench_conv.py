"""conv2d layers alone, float32, one thread: gpucore's forward paths (im2col + GEMM, the direct
kernel, cpu/conv_direct.c, its pixels x channels tile, cpu/conv_direct_lanes.c, "direct_t",
where the ISA has it, and Winograd F(4x4, 3x3), cpu/conv_winograd.c, for 3x3 stride-1 layers;
GPUCORE_CONV forces one per call), each with the weight as an array (eager) and
pre-packed (the compiled executor), beside PyTorch's conv2d and the layer's FLOPs at the
machine's SGEMM rate (``_cpu.gemm`` 1024^3, measured in the same run).

    python benchmarks/bench_conv.py                  # ResNet-18's and ResNet-50's convolutions
                                                     # (batch 1), the training CNN's (batch 64)
    python benchmarks/bench_conv.py --only layer4 --reps 9
    python benchmarks/bench_conv.py --backward       # also conv2d_backward per layer
    python benchmarks/bench_conv.py --only none --gradients   # the training CNN's two convs,
                                                     # forward and each gradient alone, per path
    python benchmarks/bench_conv.py --only none --resnet 15   # ResNet-18 (compiled, each
                                                     # path) vs ONNX Runtime, 15 rounds

Times are the calling thread's CPU time (``time.thread_time``: what the layer costs, not what the
other processes on a shared 2-core machine take from it), medians over rounds in which the
variants alternate call block by call block.  Ratios: time / FLOPs at the SGEMM rate.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("GPUCORE_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from gpucore import _cpu  # noqa: E402
from gpucore.runtime.ir import packing  # noqa: E402

MODES = ("im2col", "direct", "direct_t", "winograd")  # GPUCORE_CONV per column
NM = len(MODES)
# name, c, h (= w), o, kernel, stride, padding, count in the model, batch
LAYERS = [
    ("resnet conv1 7x7/2", 3, 224, 64, 7, 2, 3, 1, 1),
    ("resnet layer1 3x3", 64, 56, 64, 3, 1, 1, 4, 1),
    ("resnet layer2.0 3x3/2", 64, 56, 128, 3, 2, 1, 1, 1),
    ("resnet layer2 3x3", 128, 28, 128, 3, 1, 1, 3, 1),
    ("resnet layer3.0 3x3/2", 128, 28, 256, 3, 2, 1, 1, 1),
    ("resnet layer3 3x3", 256, 14, 256, 3, 1, 1, 3, 1),
    ("resnet layer4.0 3x3/2", 256, 14, 512, 3, 2, 1, 1, 1),
    ("resnet layer4 3x3", 512, 7, 512, 3, 1, 1, 3, 1),
    ("resnet downsample 1x1/2 (l2)", 64, 56, 128, 1, 2, 0, 1, 1),
    ("resnet downsample 1x1/2 (l3)", 128, 28, 256, 1, 2, 0, 1, 1),
    ("resnet downsample 1x1/2 (l4)", 256, 14, 512, 1, 2, 0, 1, 1),
    ("resnet50 l1 1x1 64->64", 64, 56, 64, 1, 1, 0, 1, 1),
    ("resnet50 l1 1x1 64->256", 64, 56, 256, 1, 1, 0, 4, 1),
    ("resnet50 l1 1x1 256->64", 256, 56, 64, 1, 1, 0, 2, 1),
    ("resnet50 l1 3x3", 64, 56, 64, 3, 1, 1, 3, 1),
    ("resnet50 l2 1x1 256->128", 256, 56, 128, 1, 1, 0, 1, 1),
    ("resnet50 l2.0 3x3/2", 128, 56, 128, 3, 2, 1, 1, 1),
    ("resnet50 l2 1x1 128->512", 128, 28, 512, 1, 1, 0, 4, 1),
    ("resnet50 l2 1x1 512->128", 512, 28, 128, 1, 1, 0, 3, 1),
    ("resnet50 l2 3x3", 128, 28, 128, 3, 1, 1, 3, 1),
    ("resnet50 l3 1x1 512->256", 512, 28, 256, 1, 1, 0, 1, 1),
    ("resnet50 l3.0 3x3/2", 256, 28, 256, 3, 2, 1, 1, 1),
    ("resnet50 l3 1x1 256->1024", 256, 14, 1024, 1, 1, 0, 6, 1),
    ("resnet50 l3 1x1 1024->256", 1024, 14, 256, 1, 1, 0, 5, 1),
    ("resnet50 l3 3x3", 256, 14, 256, 3, 1, 1, 5, 1),
    ("resnet50 l4 1x1 1024->512", 1024, 14, 512, 1, 1, 0, 1, 1),
    ("resnet50 l4.0 3x3/2", 512, 14, 512, 3, 2, 1, 1, 1),
    ("resnet50 l4 1x1 512->2048", 512, 7, 2048, 1, 1, 0, 3, 1),
    ("resnet50 l4 1x1 2048->512", 2048, 7, 512, 1, 1, 0, 2, 1),
    ("resnet50 l4 3x3", 512, 7, 512, 3, 1, 1, 2, 1),
    ("resnet50 downsample 1x1/2 (l2)", 256, 56, 512, 1, 2, 0, 1, 1),
    ("resnet50 downsample 1x1/2 (l3)", 512, 28, 1024, 1, 2, 0, 1, 1),
    ("resnet50 downsample 1x1/2 (l4)", 1024, 14, 2048, 1, 2, 0, 1, 1),
    ("cnn conv1 1->16 b64", 1, 28, 16, 3, 1, 1, 1, 64),
    ("cnn conv2 16->32 b64", 16, 14, 32, 3, 1, 1, 1, 64),
    # gpucore/examples/digits.py's CNN (8x8 images; benchmarks/quant.py --models)
    ("digits conv1 1->16 b64", 1, 8, 16, 3, 1, 1, 1, 64),
    ("digits conv2 16->32 b64", 16, 8, 32, 3, 1, 1, 1, 64),
    ("digits conv1 1->16 b1", 1, 8, 16, 3, 1, 1, 1, 1),
    ("digits conv2 16->32 b1", 16, 8, 32, 3, 1, 1, 1, 1),
]


def _per_call(fn, n):
    t = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t) / n


def _measure(layer, r, rate, torch, reps):
    """Median seconds per call of each variant of one layer, and its FLOPs at the SGEMM rate."""
    name, ci, h, o, k, s, p, count, n = layer
    oh = (h + 2 * p - k) // s + 1
    x = r.standard_normal((n, ci, h, h), dtype=np.float32)
    w = (r.standard_normal((o, ci, k, k)) / np.sqrt(ci * k * k)).astype(np.float32)
    w.flags.writeable = False  # a graph constant: what the compiled executor packs
    out = np.empty((n, o, oh, oh), np.float32)
    geo = (n, ci, h, h, k, k, s, s, p, p, 1, 1, o)
    packs = {}
    for mode in MODES:
        os.environ["GPUCORE_CONV"] = mode
        packs[mode] = packing.conv_weight(w, oh * oh, geo)
    runs = [(m, lambda: _cpu.conv2d_forward(x, w, None, out, *geo)) for m in MODES]
    runs += [(m, lambda m=m: _cpu.conv2d_forward(x, packs[m], None, out, *geo)) for m in MODES]
    if torch:
        xt, wt = torch.from_numpy(x), torch.from_numpy(w.copy())
        runs.append((None, lambda: torch.nn.functional.conv2d(xt, wt, None, s, p)))
    for mode, fn in runs:
        if mode:
            os.environ["GPUCORE_CONV"] = mode
        fn()
    os.environ["GPUCORE_CONV"] = "direct"
    calls = max(1, int(0.02 / max(_per_call(runs[1][1], 1), 1e-6)))
    times = [[] for _ in runs]
    for _ in range(reps):
        for i, (mode, fn) in enumerate(runs):
            if mode:
                os.environ["GPUCORE_CONV"] = mode
            times[i].append(_per_call(fn, calls))
    med = [statistics.median(t) for t in times]
    os.environ["GPUCORE_CONV"] = "winograd"
    if not _cpu.conv2d_winograd(*geo):  # not a Winograd geometry: the column is direct's
        med[3] = med[3 + NM] = float("nan")
    os.environ["GPUCORE_CONV"] = "direct_t"
    if not _cpu.conv2d_direct_lanes(*geo):  # not on this ISA / geometry: another path's
        med[2] = med[2 + NM] = float("nan")
    return med, 2.0 * n * o * oh * oh * ci * k * k / rate


def _measure_backward(layer, r, rate, torch, reps):
    """Median seconds per conv2d_backward call, im2col then direct (then torch's forward +
    backward), and the FLOPs of the gradients computed at the SGEMM rate."""
    name, ci, h, o, k, s, p, count, n = layer
    oh = (h + 2 * p - k) // s + 1
    x = r.standard_normal((n, ci, h, h), dtype=np.float32)
    w = (r.standard_normal((o, ci, k, k)) / np.sqrt(ci * k * k)).astype(np.float32)
    g = r.standard_normal((n, o, oh, oh), dtype=np.float32)
    need_gx = ci >= 4
    gx = np.empty_like(x) if need_gx else None
    gw, gb = np.empty_like(w), np.empty(o, np.float32)
    geo = (n, ci, h, h, k, k, s, s, p, p, 1, 1, o)
    runs = [
        (m, lambda: _cpu.conv2d_backward(x, w, g, gx, gw, gb, *geo)) for m in ("im2col", "direct")
    ]
    if torch:
        xt = torch.from_numpy(x).requires_grad_(need_gx)
        wt, gt = torch.from_numpy(w).requires_grad_(True), torch.from_numpy(g)

        def fwd_bwd():
            y = torch.nn.functional.conv2d(xt, wt, None, s, p)
            return torch.autograd.grad(y, [xt, wt] if need_gx else [wt], gt)

        runs.append((None, fwd_bwd))
    for mode, fn in runs:
        if mode:
            os.environ["GPUCORE_CONV"] = mode
        fn()
    calls = max(1, int(0.02 / max(_per_call(runs[1][1], 1), 1e-6)))
    times = [[] for _ in runs]
    for _ in range(reps):
        for i, (mode, fn) in enumerate(runs):
            if mode:
                os.environ["GPUCORE_CONV"] = mode
            times[i].append(_per_call(fn, calls))
    flops = 2.0 * n * o * oh * oh * ci * k * k * (2 if need_gx else 1)
    return [statistics.median(t) for t in times], flops / rate


# the train.py CNN's convolutions (batch 64, 28x28): name, c, h, o
CNN_CONVS = [("conv1 1->16", 1, 28, 16), ("conv2 16->32", 16, 14, 32)]
# step: the gradients train.py's step asks for; relu_pool: the forward with its ReLU and the 2x2
# max pool (values and indices) after it, conv2d_relu_max_pool2d's C calls (relu_fused.py: one
# where cpu/conv_c1.c applies, each image pooled from the cache)
GRADS = ("forward", "relu_pool", "gx", "gw", "gb", "step")
GRAD_MODES = ("auto", "im2col", "direct", "direct_c1")
FWD_ONLY = ("direct_c1",)  # modes of the forward alone (cpu/conv_c1.c; the backward's is auto's)


def _gradient_rows(name, ci, h, o, rate, reps, r):
    """_gradients' rows of one convolution (3x3, padding 1, batch 64)."""
    n = 64
    x = r.standard_normal((n, ci, h, h), dtype=np.float32)
    w = (r.standard_normal((o, ci, 3, 3)) / np.sqrt(ci * 9)).astype(np.float32)
    g = r.standard_normal((n, o, h, h), dtype=np.float32)
    out, gx, gw, gb = np.empty_like(g), np.empty_like(x), np.empty_like(w), np.empty(o, "f")
    vals = np.empty((n, o, h // 2, h // 2), np.float32)
    idx = np.empty(vals.shape, np.int64)
    pool = (n * o, h, h, 2, 2, 2, 2, 0, 0, 1, 1, h // 2, h // 2)
    geo = (n, ci, h, h, 3, 3, 1, 1, 1, 1, 1, 1, o)
    fma = 2.0 * n * o * h * h * ci * 9
    args = {
        "forward": None,
        "relu_pool": None,
        "gx": (gx, None, None),
        "gw": (None, gw, None),
        "gb": (None, None, gb),
        "step": (gx if ci > 1 else None, gw, gb),
    }
    flops = {"forward": fma, "relu_pool": fma, "gx": fma, "gw": fma, "gb": n * o * h * h}
    flops["step"] = fma * (2 if ci > 1 else 1) + flops["gb"]

    def call(part):
        if part == "relu_pool":  # (relu_fused.py's kernel: one call where conv_c1.c applies)
            if _cpu.conv2d_relu_max_pool2d(x, w, None, vals, idx, *geo, *pool[3:]):
                return None
            _cpu.conv2d_forward(x, w, None, out, *geo, None, _cpu.UNARY_RELU)
            return _cpu.max_pool2d(out, vals, idx, *pool)
        if args[part] is None:
            return _cpu.conv2d_forward(x, w, None, out, *geo)
        return _cpu.conv2d_backward(x, w, g, *args[part], *geo)

    fwd = ("forward", "relu_pool")
    runs = [(p, m) for p in GRADS for m in GRAD_MODES if p in fwd or m not in FWD_ONLY]
    calls = {}
    for part, mode in runs:
        os.environ["GPUCORE_CONV"] = mode
        call(part)
        calls[part] = max(1, int(0.02 / max(_per_call(lambda p=part: call(p), 1), 1e-6)))
    times = {k: [] for k in runs}
    for _ in range(reps):
        for part, mode in runs:
            os.environ["GPUCORE_CONV"] = mode
            times[part, mode].append(_per_call(lambda p=part: call(p), calls[part]))
    for part in GRADS:
        at = flops[part] / rate
        med = [statistics.median(times[part, m]) if times.get((part, m)) else None
               for m in GRAD_MODES]  # fmt: skip
        cells = ["-" if v is None else f"{v * 1e3:.3f} ({v / at:.2f})" for v in med]
        print(f"| {name} | {part} | " + " | ".join(cells) + f" | {at * 1e3:.3f} |")


def _gradients(rate, reps):
    """The CNN's two 3x3 / 1 convolutions (padding 1, batch 64): the forward and each gradient
    alone through conv2d_backward (gx, gw, gb; "step": gw + gb for the first layer, whose input
    needs no gradient, all three for the second), under each GPUCORE_CONV mode; one thread's CPU
    time, medians over rounds in which every call block alternates; ratio = time / (FLOPs at the
    SGEMM rate) with 2 n o l ck FLOPs for the forward, gx and gw, n o l adds for gb.  relu_pool:
    the forward with its ReLU, then the 2x2 max pool (its FLOPs: the convolution's); direct_c1
    (cpu/conv_c1.c, where it applies) for those two alone."""
    r = np.random.default_rng(0)
    print("\nThe CNN's convolutions, forward and each gradient alone, ms (ratio to FLOPs at the")
    print("SGEMM rate):\n")
    print("| conv | part | " + " | ".join(GRAD_MODES) + " | at SGEMM rate |")
    print("|---|---|" + "---:|" * (len(GRAD_MODES) + 1))
    for name, ci, h, o in CNN_CONVS:
        _gradient_rows(name, ci, h, o, rate, reps, r)
    os.environ.pop("GPUCORE_CONV", None)


def _resnet(rounds):
    """ResNet-18 b1 compiled under each path (weights packed as it reads them; auto: Winograd
    for the 3x3 stride-1 layers its rule takes, direct for the others) vs ONNX Runtime
    (one thread), in this process, calls alternating: thread CPU time, ms."""
    import warnings  # noqa: PLC0415

    import onnxruntime as ort  # noqa: PLC0415
    import torch  # noqa: PLC0415

    import gpucore  # noqa: PLC0415
    import gpucore.nn  # noqa: PLC0415
    import gpucore.runtime as rt  # noqa: PLC0415

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models  # noqa: PLC0415

    torch.manual_seed(0)
    tm = models.resnet18(models.namespace(torch.nn))
    models.randomize_batchnorm(torch, tm, torch.randn(2, 3, 224, 224))
    tm.eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = os.path.join(d, "resnet18.onnx")
        torch.onnx.export(tm, (torch.from_numpy(x),), path, input_names=["x"], dynamo=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    gm = models.resnet18(models.namespace(gpucore.nn))
    models.load_numpy_state(gpucore, gm, models.state_to_numpy(tm.state_dict()))
    gm.eval()
    fns, outs = {"ort": lambda: sess.run(None, {"x": x})}, {}
    for mode in ("im2col", "direct", "auto"):  # auto: Winograd where its rule says, else direct
        os.environ["GPUCORE_CONV"] = mode
        cm = rt.compile(gm, (gpucore.from_numpy(x),), device="cpu", executor="compiled")
        outs[mode] = cm.run_arrays([x])[0]
        fns[mode] = lambda cm=cm, mode=mode: (
            os.environ.__setitem__("GPUCORE_CONV", mode),
            cm.run_arrays([x]),
        )
    with torch.inference_mode():
        ref = tm(torch.from_numpy(x)).numpy()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(_per_call(fn, 1))
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print("\nResNet-18 b1, one thread, compiled executor vs ONNX Runtime (CPU ms, medians):\n")
    print("| path | ms | / ORT | max rel diff vs torch |\n|---|---:|---:|---:|")
    for k, v in med.items():
        diff = float(np.abs(outs[k] - ref).max() / np.abs(ref).max()) if k in outs else 0.0
        print(f"| {k} | {v:.1f} | {v / med['ort']:.2f} | {diff:.1e} |")
    same = np.array_equal(outs["im2col"], outs["direct"])
    print(f"\nim2col and direct outputs bitwise equal: {same}")
    os.environ.pop("GPUCORE_CONV", None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", help="layers whose name contains this")
    ap.add_argument("--reps", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--backward", action="store_true", help="also conv2d_backward per layer")
    ap.add_argument(
        "--gradients", action="store_true", help="the CNN's convs: each gradient alone, per path"
    )
    ap.add_argument("--resnet", type=int, metavar="ROUNDS", help="also ResNet-18 vs ONNX Runtime")
    args = ap.parse_args()
    torch = None
    if not args.no_torch:
        try:
            import torch

            torch.set_num_threads(1)
        except ImportError:
            torch = None
    r = np.random.default_rng(0)
    a = r.standard_normal((1024, 1024), dtype=np.float32)
    c = np.empty_like(a)
    gemm = lambda: _cpu.gemm(a, a, c, 1, 1024, 1024, 1024, 0, 0, 1.0, 0.0, 0, 0, 0)  # noqa: E731
    rate = 2 * 1024**3 / statistics.median(_per_call(gemm, 3) for _ in range(args.reps))
    print(f"SGEMM 1024^3, one thread: {rate / 1e9:.1f} GFLOP/s (median of {args.reps})\n")
    layers = [ly for ly in LAYERS if not args.only or any(t in ly[0] for t in args.only)]
    if layers:  # (none with ``--only none --gradients``: the gradient table alone)
        cols = [*MODES, *(m + " packed" for m in MODES)] + (["torch"] if torch else [])
        print(
            "| layer | count | O x L x CK | "
            + " | ".join(cols)
            + " | at SGEMM rate | best / rate |"
        )
        print("|---|---:|---|" + "---:|" * (len(cols) + 2))
        total = np.zeros(len(cols) + 1)
        for layer in layers:
            med, at_rate = _measure(layer, r, rate, torch, args.reps)
            name, ci, h, o, k, s, p, count, n = layer
            oh = (h + 2 * p - k) // s + 1
            best = np.nanmin(med[: 2 * NM])  # a layer without a path's column counts its best there
            total += np.where(np.isnan(med + [at_rate]), best, med + [at_rate]) * count
            print(
                f"| {name} | {count} | {o}x{n * oh * oh}x{ci * k * k} | "
                + " | ".join(f"{v * 1e3:.2f}" for v in med)
                + f" | {at_rate * 1e3:.2f} | {best / at_rate:.2f} |"
            )
        os.environ.pop("GPUCORE_CONV", None)
        print(
            "| total (x count), ms | | | "
            + " | ".join(f"{v * 1e3:.1f}" for v in total)
            + f" | {min(total[: 2 * NM]) / total[-1]:.2f} |"
        )
    if args.backward:
        print("\n`conv2d_backward` (gx, gw, gb; gw, gb only for an input with < 4 channels), ms:\n")
        print("| layer | im2col | direct | torch (fwd + bwd) | gradients at SGEMM rate |")
        print("|---|---:|---:|---:|---:|")
        for layer in LAYERS:
            if args.only and not any(t in layer[0] for t in args.only):
                continue
            med, at_rate = _measure_backward(layer, r, rate, torch, args.reps)
            print(f"| {layer[0]} | " + " | ".join(f"{v * 1e3:.2f}" for v in med + [at_rate]) + " |")
    if args.gradients:
        _gradients(rate, args.reps)
    if args.resnet:
        _resnet(args.resnet)


if __name__ == "__main__":
    main()
