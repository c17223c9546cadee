"""ONNX models through gpucore.onnx against ONNX Runtime on the same files: load time, first run
and steady time per call (``python benchmarks/onnx_models.py [--quick] [--threads N]
[--vulkan] [--only NAME ...]``).

The models are PyTorch modules with random weights exported by ``torch.onnx.export`` (the
TorchScript exporter, opset 17, batch norms kept as BatchNormalization): ResNet-18 and ResNet-50
(torchvision's layouts, 1000 classes) at batch 1 on 224x224, a BERT-base encoder layer
(``nn.TransformerEncoderLayer``: d 768, 12 heads, FFN 3072, exact GELU) and a GPT-2 block
(pre-LN, causal self-attention, tanh GELU, d 768, 12 heads) on batch 1 x 128 tokens.

- load: ``gpucore.onnx.load(path)`` (parse, import, passes, plan, the compiled C program, packed
  weights) against ``onnxruntime.InferenceSession(path)`` (its graph optimizations included);
  the median of 3 fresh loads each, after one uncounted;
- first: the first call after a load (both libraries prepare lazily);
- steady: the median of calls alternating between the two libraries in rounds.

Batch > 1: the BERT layer and the GPT-2 block again at 4 x 128 tokens (``b4``; exported at
that batch), where the attention and its projections carry a batch dim.

Fresh process (``--fresh``, its own table): each library in a new Python process per run,
alternating, medians of ``--fresh-rounds``: numpy's import (both pay it), ``import gpucore``,
``import gpucore.onnx``, the load and the first call, against ``import onnxruntime``, the
InferenceSession and its first call; "total" is the process's start to the first result
(interpreter start included). Byte-compiled imports as an installed package has them: the
children write their ``.pyc`` files to a temporary PYTHONPYCACHEPREFIX (filled by one
uncounted run each) even where PYTHONDONTWRITEBYTECODE is set.

ONNX Runtime runs the CPU provider with ``intra_op_num_threads`` = gpucore's thread count.
``--vulkan`` adds gpucore on the Vulkan device (lavapipe here: a CPU device, so its times are
not GPU times). Needs torch, onnx and onnxruntime.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("onnx_models.py")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

_START = time.perf_counter()  # a --child's imports are timed from here

_AT_NUMPY = time.perf_counter()  # numpy's import starts here (a --child reports it)
import numpy as np  # noqa: E402


# ------------------------------------------------------------------------------- the models
def _models(torch):
    """{name: (torch module, example input)}."""
    from models import namespace, resnet18  # noqa: PLC0415

    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride=1):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))  # fmt: skip

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            out = torch.relu(self.bn1(self.conv1(x)))
            out = torch.relu(self.bn2(self.conv2(out)))
            return torch.relu(self.bn3(self.conv3(out)) + idt)

    def resnet50():
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                  nn.MaxPool2d(3, 2, 1)]  # fmt: skip
        cin = 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))

    class Gpt2Block(nn.Module):
        def __init__(self, d=768, heads=12):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.heads = heads

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))  # fmt: skip
            att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            h = nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh")
            return x + self.fc2(h)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(
                768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True
            )

        def forward(self, x):  # is_causal given: PyTorch 2.13's tracer passes a Tensor else
            return self.layer(x, is_causal=False)

    torch.manual_seed(0)
    bert = Bert()
    image = torch.randn(1, 3, 224, 224)
    tokens = torch.randn(1, 128, 768)
    tokens4 = torch.randn(4, 128, 768)
    gpt2 = Gpt2Block()
    out = {
        "ResNet-18 b1": (resnet18(namespace(nn)), image),
        "ResNet-50 b1": (resnet50(), image),
        "BERT-base layer b1 x 128": (bert, tokens),
        "GPT-2 block b1 x 128": (gpt2, tokens),
        "BERT-base layer b4 x 128": (bert, tokens4),
        "GPT-2 block b4 x 128": (gpt2, tokens4),
    }
    g = torch.Generator().manual_seed(1)
    for model, _ in out.values():
        model.eval()
        for m in model.modules():  # eval statistics that are not the identity
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2, generator=g)
                m.running_var.uniform_(0.5, 2.0, generator=g)
    return out


def _export(torch, model, x, path: str) -> None:
    # the eval-mode fast path of nn.TransformerEncoderLayer is one op ONNX has no form of
    torch.backends.mha.set_fastpath_enabled(False)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL)  # fmt: skip


# ------------------------------------------------------------------------------- the timing
def _load_times(load, rounds: int) -> tuple:
    """(median ms of ``rounds`` fresh loads after one uncounted, the last session): the first
    load in a process pays one-time costs (gpucore: importing onnx, probing Vulkan for
    device='auto'; ~0.5 s here), which a service pays once."""
    load()
    times, sess = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        sess = load()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), sess


def _first(call) -> float:
    t = time.perf_counter()
    call()
    return (time.perf_counter() - t) * 1e3


def _steady(calls: dict, rounds: int, min_time: float) -> dict:
    """Median ms per call of each of ``calls``, alternating in rounds of >= min_time s each."""
    per = {k: [] for k in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                el = time.perf_counter() - t0
                if el >= min_time:
                    break
            per[name].append(el / n * 1e3)
    return {k: statistics.median(v) for k, v in per.items()}


def table(quick: bool, threads: int, vulkan: bool, only=None) -> None:
    """Print the markdown table (module docstring)."""
    try:
        import onnxruntime as ort  # noqa: PLC0415
        import torch  # noqa: PLC0415
    except ImportError as e:
        print(f"- needs torch and onnxruntime ({e}): no table")
        return
    import gpucore  # noqa: PLC0415
    import gpucore.onnx as gx  # noqa: PLC0415
    from gpucore import _cpu  # noqa: PLC0415

    _cpu.set_num_threads(threads)
    torch.set_num_threads(threads)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    rounds, min_time = (3, 0.3) if quick else (7, 0.5)
    print(f"- gpucore {_cpu.info()['isa']}, {threads} thread(s); ONNX Runtime {ort.__version__} "
          f"CPU provider, {threads} intra-op thread(s); ms")  # fmt: skip
    print()
    cols = "| model | gc load | ORT load | gc first | ORT first | gc steady | ORT steady "
    cols += "| steady gc/ORT | max abs diff |"
    if vulkan:
        cols += " Vulkan load | Vulkan steady |"
    print(cols)
    print("|---" * (cols.count("|") - 1) + "|")
    with tempfile.TemporaryDirectory() as d:
        for name, (model, x) in _models(torch).items():
            if only and not any(o.lower() in name.lower() for o in only):
                continue
            path = os.path.join(d, "m.onnx")
            _export(torch, model, x, path)
            xn = x.numpy()
            gl, cm = _load_times(functools.partial(gx.load, path), 3)
            ort_load = functools.partial(
                ort.InferenceSession, path, opts, providers=["CPUExecutionProvider"]
            )
            ol, sess = _load_times(ort_load, 3)
            xt = gpucore.from_numpy(xn)
            gf = _first(lambda: cm(xt))  # noqa: B023
            of = _first(lambda: sess.run(None, {"x": xn}))  # noqa: B023
            diff = np.abs(cm(xt).numpy() - sess.run(None, {"x": xn})[0]).max()
            calls = {"gc": lambda: cm(xt), "ort": lambda: sess.run(None, {"x": xn})}  # noqa: B023
            st = _steady(calls, rounds, min_time)
            row = f"| {name} | {gl:.1f} | {ol:.1f} | {gf:.1f} | {of:.1f} | {st['gc']:.2f} | "
            row += f"{st['ort']:.2f} | {st['gc'] / st['ort']:.2f} | {diff:.1e} |"
            if vulkan:
                vl, vm = _load_times(functools.partial(gx.load, path, device="vulkan"), 1)
                vm(xt)
                vs = _steady({"vk": lambda: vm(xt)}, max(rounds // 2, 1), min_time)  # noqa: B023
                row += f" {vl:.0f} | {vs['vk']:.1f} |"
            print(row, flush=True)


# ------------------------------------------------------------------------- fresh processes
FRESH = ("ResNet-18 b1", "BERT-base layer b1 x 128")


def _child(lib: str, path: str, threads: int) -> None:
    """One fresh process's timings (ms since the script started), printed as JSON."""
    t_np = time.perf_counter()  # numpy: imported at the top
    if lib == "gc":
        import gpucore  # noqa: PLC0415

        t_lib = time.perf_counter()
        import gpucore.onnx as gx  # noqa: PLC0415

        t_sub = time.perf_counter()
        gpucore._cpu.set_num_threads(threads)
        model = gx.load(path)
        t_load = time.perf_counter()
        spec = model.input_spec(model.input_names[0])
        x = np.random.default_rng(0).standard_normal(spec[0]).astype(np.float32)
        t_x = time.perf_counter()
        model.run_arrays([x])
    else:
        import onnxruntime as ort  # noqa: PLC0415

        t_lib = t_sub = time.perf_counter()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        t_load = time.perf_counter()
        shape = sess.get_inputs()[0].shape
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        t_x = time.perf_counter()
        sess.run(None, {"x": x})
    t_end = time.perf_counter()
    ms = {
        "numpy": t_np - _AT_NUMPY,
        "import": t_lib - t_np,
        "import_onnx": t_sub - t_lib,
        "load": t_load - t_sub,
        "first": t_end - t_x,
        "in_process": t_end - _START,
    }
    print(json.dumps({k: v * 1e3 for k, v in ms.items()}))


def _fresh_run(lib: str, path: str, threads: int, env: dict) -> dict:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", lib, path, "--threads",
         str(threads)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall = (time.perf_counter() - t) * 1e3
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["total"] = wall
    return got


def fresh_table(threads: int, rounds: int, only=None) -> None:
    """Print the fresh-process table (module docstring)."""
    try:
        import onnxruntime  # noqa: F401, PLC0415
        import torch  # noqa: PLC0415
    except ImportError as e:
        print(f"- needs torch and onnxruntime ({e}): no fresh-process table")
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"- fresh processes, {threads} thread(s) each, medians of {rounds} runs (gc and ORT "
          "alternating); ms; total: process start to first result")  # fmt: skip
    print()
    cols = "| model | numpy import | gc import | gc import onnx | gc load | gc first "
    cols += "| ORT import | ORT session | ORT first | gc total | ORT total | total gc/ORT "
    cols += "| load+first gc/ORT |"
    print(cols)
    print("|---" * (cols.count("|") - 1) + "|")
    models = _models(torch)
    with tempfile.TemporaryDirectory() as d:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = os.path.join(d, "pyc")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        for name in FRESH:
            if only and not any(o.lower() in name.lower() for o in only):
                continue
            model, x = models[name]
            path = os.path.join(d, "m.onnx")
            _export(torch, model, x, path)
            for lib in ("gc", "ort"):  # uncounted: byte-compiles, warms the file cache
                _fresh_run(lib, path, threads, env)
            runs = {"gc": [], "ort": []}
            for _ in range(rounds):
                for lib in runs:
                    runs[lib].append(_fresh_run(lib, path, threads, env))

            def med(lib, key):
                return statistics.median(r[key] for r in runs[lib])  # noqa: B023

            g_lf = med("gc", "load") + med("gc", "first")
            o_lf = med("ort", "load") + med("ort", "first")
            row = f"| {name} | {med('gc', 'numpy'):.0f} | {med('gc', 'import'):.0f} | "
            row += f"{med('gc', 'import_onnx'):.0f} | {med('gc', 'load'):.0f} | "
            row += f"{med('gc', 'first'):.0f} | {med('ort', 'import'):.0f} | "
            row += f"{med('ort', 'load'):.0f} | {med('ort', 'first'):.0f} | "
            row += f"{med('gc', 'total'):.0f} | {med('ort', 'total'):.0f} | "
            row += f"{med('gc', 'total') / med('ort', 'total'):.2f} | {g_lf / o_lf:.2f} |"
            print(row, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    p.add_argument("--threads", type=int, default=1, help="threads of both libraries")
    p.add_argument("--vulkan", action="store_true", help="gpucore on the Vulkan device too")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="the models whose names contain one of these (e.g. bert gpt)")  # fmt: skip
    p.add_argument("--fresh", action="store_true",
                   help="the fresh-process table (import, load, first call) too")  # fmt: skip
    p.add_argument("--fresh-only", action="store_true", help="only the fresh-process table")
    p.add_argument("--fresh-rounds", type=int, default=None, help="fresh runs per library")
    p.add_argument("--child", nargs=2, metavar=("LIB", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], args.threads)
        return 0
    share = CpuShare(children=True)
    if not args.fresh_only:
        table(args.quick, args.threads, args.vulkan, args.only)
    if args.fresh or args.fresh_only:
        if not args.fresh_only:
            print()
        rounds = args.fresh_rounds or (3 if args.quick else 7)
        fresh_table(args.threads, rounds, args.only)
    print()
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
