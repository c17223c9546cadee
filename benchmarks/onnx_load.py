"""Where ``gpucore.onnx.load`` spends its time, stage by stage, beside ONNX Runtime's session
creation on the same files (``python benchmarks/onnx_load.py [--rounds N] [--model NAME]``).

The models are onnx_models.py's (exported once by ``torch.onnx.export``). Each row is the median
of ``--rounds`` fresh loads after one load that is not counted (the first load of a process
imports onnx and the handlers and probes the Vulkan device), wall time and this process's CPU
time: on a shared machine the CPU time is the steadier figure (it leaves out the time other
processes held the cores). The stages: the file read and split (proto.read), the checked model
(proto.check: initializers copied out of the file), the shapes-only capture, the shape check,
the passes, the planner, and the compiled executor (lowering, weight packing, the C program).

ONNX Runtime's loads run in a process of their own (in gpucore's, the memory gpucore's host cache
keeps would hand ORT fresh pages, slowing it). "fresh process": each library's first load of the
model in a new process that has already loaded a small model (so onnx is imported, the Vulkan
probe and ORT's start-up done): no memory warm from an earlier load of the same model (gpucore's
reloads pack into the blocks a dropped model left in its host cache), the cost a service pays
once (medians of rounds / 2 processes for gpucore, one process for ORT).
Needs torch, onnx and onnxruntime.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("onnx_load.py")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ORT's session creation in its own process, after a small model's: the first (fresh process),
# then ``rounds`` more; (wall, cpu) ms each.
_ORT_CHILD = """
import json, sys, time
import onnxruntime as ort
path, rounds, small = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
ort.InferenceSession(small, opts, providers=["CPUExecutionProvider"])
out = []
for _ in range(rounds + 1):
    w, c = time.perf_counter(), time.process_time()
    ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    out.append(((time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3))
print(json.dumps(out))
"""

# gpucore's first load of ``path`` in a new process, after one load of a small model.
_FRESH_CHILD = """
import json, sys, time
import gpucore.onnx as gx
from gpucore import _cpu
_cpu.set_num_threads(1)
gx.load(sys.argv[2])
w, c = time.perf_counter(), time.process_time()
gx.load(sys.argv[1])
print(json.dumps([((time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3)]))
"""


def _child(code: str, *args) -> list:
    env = dict(os.environ, PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["GPUCORE_NUM_THREADS"] = "1"
    env["GPUCORE_VULKAN_PREWARM"] = "0"  # no background thread in the CPU-time column
    res = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, env=env, timeout=600)  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"a timing child failed (exit {res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


STAGES = (  # (module, attribute, label): the functions timed, as the importer and model call them
    ("gpucore.onnx.importer", "read", "read"),
    ("gpucore.onnx.importer", "check", "check"),
    ("gpucore.onnx.importer", "capture", "capture"),
    ("gpucore.runtime.model", "check_shapes", "check_shapes"),
    ("gpucore.runtime.model", "run_passes", "passes"),
    ("gpucore.runtime.model", "make_plan", "planner"),
    ("gpucore.runtime.model", "CompiledExecutor", "executor"),
)


class _Timer:
    """Wraps the STAGES' functions for the duration of a ``with`` block: (wall, cpu) ms per
    label."""

    def __init__(self):
        self.times: dict = {}
        self._saved: list = []

    def __enter__(self):
        import importlib  # noqa: PLC0415

        for mod_name, attr, label in STAGES:
            mod = importlib.import_module(mod_name)
            fn = getattr(mod, attr)
            self._saved.append((mod, attr, fn))
            setattr(mod, attr, self._wrap(fn, label))
        return self

    def _wrap(self, fn, label):
        def timed(*args, **kwargs):
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                w0, c0 = self.times.get(label, (0.0, 0.0))
                w, c = (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3
                self.times[label] = (w0 + w, c0 + c)

        return timed

    def __exit__(self, *exc):
        for mod, attr, fn in self._saved:
            setattr(mod, attr, fn)
        return False


def _timed(fn) -> tuple:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3


def table(rounds: int, only: list) -> None:
    """Print the markdown table (module docstring)."""
    try:
        import onnxruntime  # noqa: F401, PLC0415
        import torch  # noqa: PLC0415
    except ImportError as e:
        print(f"- needs torch and onnxruntime ({e}): no table")
        return
    from onnx_models import _export, _models  # noqa: PLC0415

    import gpucore.onnx as gx  # noqa: PLC0415
    from gpucore import _cpu  # noqa: PLC0415

    _cpu.set_num_threads(1)
    torch.set_num_threads(1)
    labels = [s[2] for s in STAGES]
    print(f"- one thread each; median of {rounds} loads (after one uncounted); ms, wall / CPU")
    print()
    print(
        "| model | "
        + " | ".join(labels)
        + " | gpucore load | ORT load | gpucore, fresh process | ORT, fresh process |"
    )
    print("|---" * (len(labels) + 5) + "|")
    with tempfile.TemporaryDirectory() as d:
        small = os.path.join(d, "small.onnx")
        _export(torch, torch.nn.Linear(4, 4).eval(), torch.zeros(1, 4), small)
        for name, (model, x) in _models(torch).items():
            if only and not any(o.lower() in name.lower() for o in only):
                continue
            path = os.path.join(d, "m.onnx")
            _export(torch, model, x, path)
            fresh = [_child(_FRESH_CHILD, path, small)[0] for _ in range(max(1, rounds // 2))]
            ort_fresh, *ort_times = _child(_ORT_CHILD, path, rounds, small)
            gx.load(path)  # the uncounted load
            stages, gc = [], []
            load = functools.partial(gx.load, path)
            for _ in range(rounds):
                with _Timer() as t:
                    gc.append(_timed(load)[1:])
                stages.append(t.times)

            def med(pairs):
                w = statistics.median(p[0] for p in pairs)
                return f"{w:.1f} / {statistics.median(p[1] for p in pairs):.1f}"

            cells = [med([s.get(k, (0.0, 0.0)) for s in stages]) for k in labels]
            print(
                f"| {name} | " + " | ".join(cells)
                + f" | {med(gc)} | {med(ort_times)} | {med(fresh)} | {med([ort_fresh])} |"
            )  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="loads per model (after one warm-up)")
    p.add_argument("--model", action="append", default=[], help="only models whose name has this")
    args = p.parse_args(argv)
    share = CpuShare()
    table(args.rounds, args.model)
    print()
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
