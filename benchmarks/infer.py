"""Inference benchmark of gpucore's runtime (gpucore.runtime.compile) vs PyTorch and ONNX Runtime.

Run from the repository root (after ``python setup.py build_ext --inplace`` or tools/test.sh)::

    python benchmarks/infer.py                  # every section (about 2 minutes on 2 cores)
    python benchmarks/infer.py --quick          # small configurations, few repeats (~20 s)
    python benchmarks/infer.py --only mlp --only resnet   # mlp, transformer, resnet, vulkan-replay
    python benchmarks/infer.py --no-torch       # leave out the PyTorch eager column
    python benchmarks/infer.py --threads 1      # every library on 1 thread (ResNet always is)

µs (ms for ResNet-18) per forward call, float32, median over repeats, for: gpucore eager (under
``no_grad``), the compiled model with the interpreted executor (a Python loop over the kernels)
and with the compiled executor (one C call per run), PyTorch eager (``inference_mode``) and ONNX
Runtime (CPU execution provider, the model exported from the same PyTorch weights). Ratio columns
are **gpucore compiled time ÷ other time**; the check column compares the compiled model's output
with PyTorch's. The vulkan-replay section times a 30-op graph on the Vulkan device, eager vs a
replayed command buffer.

Every library runs in its own process (``--worker <lib> <configs>`` prints JSON timings; the
main process drives them and prints the tables), so that thread pools and allocators do not
interfere. A preparing process builds each PyTorch model with a fixed seed and writes its state
dict (numpy), the input and the ONNX file to a temporary directory that every worker reads: all
libraries run the same weights on the same input. Libraries take turns in rounds (the order
rotates), and inside the gpucore worker the three modes alternate repeat by repeat.

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE slow numpy/OpenBLAS on our machines and are read when
OpenBLAS loads, so the script re-executes itself without them before numpy is imported (the
workers inherit the cleaned environment).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import REEXEC_MARK, CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("infer.py")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)  # models.py, infer_workers.py

from infer_workers import (  # noqa: E402
    CONFIGS,
    DEFAULT_THREADS,
    MODE_LIB,
    MODES,
    QUICK,
    RESULT_MARK,
    VK_BATCH,
    VK_LAYERS,
    VK_WIDTH,
    out_path,
    progress,
    worker_main,
)

CPU_SECTIONS = ("mlp", "transformer", "resnet")
SECTIONS = (*CPU_SECTIONS, "vulkan-replay")

# --------------------------------------------------------------------------------------------
# driver (main process)


def run_worker(lib: str, names: list, args, tmp: str) -> dict:
    """Runs ``--worker lib names`` in a fresh interpreter; its stderr passes through. A crash or
    an unreadable answer comes back as {"crash": message}."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        lib,
        ",".join(names) or "-",
        "--dir",
        tmp,
        "--repeats",
        str(args.repeats),
        "--target",
        str(args.target),
    ]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=_ROOT)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    return {"crash": f"worker {lib} exited with status {proc.returncode} and no result"}


def settle() -> None:
    """A pause between libraries, so that the last process's threads are gone for good."""
    time.sleep(0.3)


def fmt(x, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if x == 0 or not np.isfinite(x):
        return str(x)
    mag = int(np.floor(np.log10(abs(x))))
    return f"{x:,.{max(0, digits - 1 - mag)}f}"


def table(headers: list, rows: list) -> str:
    rows = [[fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    body = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join([line, sep, *body])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Output check: max |compiled - torch| <= TOL_REL * max |torch| (see README: float32 results of
# different summation orders and of BN folding differ by ~1e-6 relative; a wrong op by ~1).
TOL_REL = 1e-4
PROBLEMS: list = []


def compare(name: str, mode: str, ref_mode: str, tmp: str) -> tuple:
    """(max abs diff, max abs diff / max |ref|) of mode's output vs ref_mode's; None if absent."""
    a, b = out_path(tmp, name, mode), out_path(tmp, name, ref_mode)
    if not (os.path.exists(a) and os.path.exists(b)):
        return None, None
    got, ref = np.load(a).astype(np.float64), np.load(b).astype(np.float64)
    if got.shape != ref.shape:
        PROBLEMS.append(f"{name}: {mode} output has shape {got.shape}, {ref_mode} {ref.shape}")
        return float("inf"), float("inf")
    diff = float(np.abs(got - ref).max())
    return diff, diff / max(float(np.abs(ref).max()), 1e-30)


def cpu_sections(names: list, args, tmp: str, have: dict) -> None:
    libs = ["gpucore"]
    if have["torch"] and not args.no_torch:
        libs.append("torch")
    if have["ort"]:
        libs.append("ort")
    samples = {n: {m: [] for m in MODES} for n in names}
    errors = {n: {} for n in names}
    for rnd in range(args.rounds):
        order = libs[rnd % len(libs) :] + libs[: rnd % len(libs)]
        for lib in order:
            settle()
            progress(f"round {rnd + 1}/{args.rounds}: {lib}")
            out = run_worker(lib, names, args, tmp)
            if "crash" in out:
                for n in names:
                    for m in MODES:
                        if MODE_LIB[m] == lib:
                            errors[n][m] = out["crash"]
                continue
            for n, res in out["results"].items():
                for m, r in res.items():
                    if m == "compile_s":
                        continue
                    if "error" in r:
                        errors[n][m] = r["error"]
                    else:
                        samples[n][m] += r["times"]

    libs_shown = set(libs)
    shown = [m for m in MODES if MODE_LIB[m] in libs_shown]  # columns of libraries timed
    ref_mode = "ref" if have["torch"] else "gc_eager"  # "ref": PyTorch eager, from prep
    ref_label = "torch" if have["torch"] else "gpucore eager"
    for section in CPU_SECTIONS:
        rows = []
        sec_names = [n for n in names if CONFIGS[n].section == section]
        if not sec_names:
            continue
        unit, scale = ("ms", 1e3) if section == "resnet" else ("µs", 1e6)
        for n in sec_names:
            med = {m: statistics.median(s) if s else None for m, s in samples[n].items()}
            cells = []
            for m in shown:
                if med[m] is not None:
                    cells.append(med[m] * scale)
                elif m in errors[n]:
                    cells.append("error")
                else:
                    cells.append(None)
            comp = med["gc_compiled"]
            r_ort = comp / med["ort"] if comp and med["ort"] else None
            r_torch = comp / med["torch"] if comp and med["torch"] else None
            diff, rel = compare(n, "gc_compiled", ref_mode, tmp)
            ok = "—" if rel is None else ("ok" if rel <= TOL_REL else "FAIL")
            if rel is not None and rel > TOL_REL:
                PROBLEMS.append(
                    f"{n}: compiled output differs from {ref_label} by {diff:.3g} "
                    f"({rel:.3g} of max |{ref_label}|, tolerance {TOL_REL})"
                )
            for other in ("gc_eager", "gc_interp", "torch", "ort"):  # the rest, reported when wrong
                d2, r2 = compare(n, other, ref_mode, tmp)
                if other != ref_mode and r2 is not None and r2 > TOL_REL:
                    PROBLEMS.append(
                        f"{n}: {other} output differs from {ref_label} by {d2:.3g} "
                        f"({r2:.3g} relative)"
                    )
            for m, e in errors[n].items():
                PROBLEMS.append(f"{n}: {m}: {e}")
            ratios = [r_ort] if "ort" in libs_shown else []
            ratios += [r_torch] if "torch" in libs_shown else []
            diff_cell = "—" if diff is None else f"{diff:.2e}"
            rows.append([CONFIGS[n].label, *cells, *ratios, diff_cell, ok])
        names_of = {"gc_eager": "gc eager", "gc_interp": "gc interp",
                    "gc_compiled": "gc compiled", "torch": "torch", "ort": "ORT"}  # fmt: skip
        heads = ["config", *(f"{names_of[m]} {unit}" for m in shown)]
        heads += ["compiled/ORT"] if "ort" in libs_shown else []
        heads += ["compiled/torch"] if "torch" in libs_shown else []
        heads += [f"max abs diff vs {ref_label}", "check"]
        print(f"\n### {SECTION_TITLES[section]}\n\n{SECTION_NOTES[section]}\n")
        print(table(heads, rows), flush=True)


SECTION_TITLES = {
    "mlp": "MLP: Linear-ReLU-Linear-ReLU-Linear, width W",
    "transformer": "Transformer block (pre-LN, 4 heads, MLP 4x with exact GELU), input B x T x d",
    "resnet": "ResNet-18 (torchvision layout), batch 1, 224x224, ONE thread for every library",
    "vulkan-replay": (
        f"Vulkan: replayed command buffer vs eager recording, 30-op graph "
        f"({VK_LAYERS} x tanh(h @ W + b), h {VK_BATCH} x {VK_WIDTH})"
    ),
}
_RATIO_NOTE = (
    "Median µs per forward call. gc = gpucore: eager under `no_grad` (Tensor in, Tensor out), "
    "`interp` / `compiled` = `gpucore.runtime.compile(...)` with the interpreted / compiled "
    "executor, called as `run_arrays([x])` (numpy in, fresh numpy out); torch eager under "
    "`inference_mode`; ORT = onnxruntime CPU EP, `sess.run(None, {'x': x})`. Ratio columns: "
    "**gpucore compiled time ÷ other time** (> 1 means gpucore is slower)."
)
SECTION_NOTES = {
    "mlp": _RATIO_NOTE,
    "transformer": _RATIO_NOTE,
    "resnet": _RATIO_NOTE.replace("Median µs", "Median ms")
    + " BatchNorm running statistics are random (folding them is exercised).",
}


def vulkan_section(args, tmp: str) -> None:
    print(f"\n### {SECTION_TITLES['vulkan-replay']}\n")
    settle()
    progress("vulkan-replay")
    out = run_worker("vulkan", [], args, tmp)
    if "crash" in out:
        PROBLEMS.append(f"vulkan-replay: {out['crash']}")
        print(f"Not measured: {out['crash']}.")
        return
    if "skip" in out:
        print(f"Skipped: no Vulkan device ({out['skip']}).")
        return
    res = out["results"]
    err = out.get("err", {})
    note = (
        f"Device: {out['device']} (GPUCORE_VULKAN_ALLOW_CPU=1); eager ran {out['ops']} ops on "
        f"{', '.join(out['eager_backends'])}. µs per call with the result read back to numpy "
        f"(`graph(x).numpy()` eager, `run_arrays([x])` replayed): wall time, and CPU time of the "
        f"calling thread (the host's own cost; the driver's threads excluded). The CPU compiled "
        f"executor on the same graph is beside them. Ratio: **replay ÷ eager**. The check "
        f"compares each output with a float64 numpy reference (max abs error)."
    )
    print(note + "\n")
    if "replay_error" in out:
        print(f"Replay: **not built yet** (`compile(..., device='vulkan')` raised "
              f"{out['replay_error']}).\n")  # fmt: skip

    def cell(mode, key):
        r = res.get(mode, {})
        if key == "wall":
            return statistics.median(r["times"]) * 1e6 if r.get("times") else None
        return r["thread_cpu"] * 1e6 if "thread_cpu" in r else None

    e_wall, e_cpu = cell("eager", "wall"), cell("eager", "cpu")
    r_wall, r_cpu = cell("replay", "wall"), cell("replay", "cpu")
    rows = [[
        "30 ops",
        e_wall,
        e_cpu,
        r_wall if r_wall is not None else "not built yet",
        r_cpu if r_cpu is not None else "—",
        r_wall / e_wall if r_wall and e_wall else None,
        r_cpu / e_cpu if r_cpu and e_cpu else None,
        cell("cpu_compiled", "wall"),
        ", ".join(f"{k} {v:.2g}" for k, v in err.items()),
    ]]  # fmt: skip
    heads = [
        "graph",
        "eager wall µs",
        "eager host CPU µs",
        "replay wall µs",
        "replay host CPU µs",
        "replay/eager wall",
        "replay/eager CPU",
        "CPU compiled µs",
        "max abs err",
    ]
    print(table(heads, rows), flush=True)
    for mode, e in err.items():
        if e > 1e-4:  # tanh keeps values in [-1, 1]: float32 errors stay ~1e-6
            PROBLEMS.append(f"vulkan-replay: {mode} differs from numpy by {e:.3g}")
    for mode in ("replay", "cpu_compiled"):
        if out.get(f"{mode}_broken"):
            PROBLEMS.append(f"vulkan-replay: {mode}: {out[f'{mode}_error']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small configurations, few repeats")
    p.add_argument("--only", action="append", choices=SECTIONS, help="run only this section")
    p.add_argument("--no-torch", action="store_true", help="leave out the PyTorch eager column")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help=f"threads of every library (default {DEFAULT_THREADS}; ResNet-18 always 1)",
    )
    p.add_argument("--worker", nargs=2, metavar=("LIB", "CONFIGS"), help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.add_argument("--repeats", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--target", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.rounds = 2 if args.quick else 3
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    if args.target is None:
        args.target = 0.02 if args.quick else 0.05
    if args.worker:
        return worker_main(args)

    sections = args.only or list(SECTIONS)
    names = [
        n for n, c in CONFIGS.items() if c.section in sections and (not args.quick or n in QUICK)
    ]
    tmp = tempfile.mkdtemp(prefix="gpucore-infer-")
    t0 = time.perf_counter()
    try:
        progress("preparing models (PyTorch weights, inputs, ONNX export)")
        info = run_worker("prep", names, args, tmp)
        if "crash" in info:
            print(f"infer.py: preparing the models failed: {info['crash']}", file=sys.stderr)
            return 1
        have = {"torch": info.get("torch") is not None, "ort": info.get("ort") is not None}
        if not have["torch"]:
            have["ort"] = False  # the ONNX files come from torch.onnx.export
        print(f"## gpucore inference runtime benchmark{' (--quick)' if args.quick else ''}\n")
        print(
            f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}"
        )
        print(f"- {info.get('gpucore')}; GPUCORE_DEVICE=cpu in the CPU sections")
        print(f"- {info.get('torch') or 'torch: not importable (no torch or ORT columns)'}")
        print(f"- {info.get('ort') or 'onnxruntime: not importable (no ORT column)'}")
        threads = args.threads or DEFAULT_THREADS
        print(
            f"- threads: {threads} for every library (gpucore set_num_threads, "
            f"torch.set_num_threads, ORT intra_op_num_threads), 1 for ResNet-18; each library "
            f"in its own process, {args.rounds} rounds x {args.repeats} repeats, libraries "
            f"alternating"
        )
        unset = os.environ.get(REEXEC_MARK)
        print(f"- {'re-executed with ' + unset + ' unset' if unset else 'OPENBLAS_* not set'}")
        print(f"- {time.strftime('%Y-%m-%d %H:%M:%S')}; medians over repeats after a warm-up")
        for n, e in info.get("export_errors", {}).items():
            PROBLEMS.append(f"{n}: ONNX export failed: {e}")
        probe = CpuShare(children=True)
        time.sleep(0.5)
        print(load_note(probe.others(), "in the 0.5 s before the run"), flush=True)
        share = CpuShare(children=True)
        if names:
            cpu_sections(names, args, tmp, have)
        if "vulkan-replay" in sections:
            vulkan_section(args, tmp)
        print(f"\nTotal benchmark time {time.perf_counter() - t0:.0f} s.")
        print(load_note(share.others(), "during the run"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if PROBLEMS:
        print("\n**Problems (output checks, errors):**\n")
        for msg in PROBLEMS:
            print(f"- {msg}")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
