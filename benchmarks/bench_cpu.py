"""CPU benchmarks: gpucore vs numpy (and PyTorch when importable), printed as markdown tables.

Run from the repository root (after ``python setup.py build_ext --inplace``)::

    python benchmarks/bench_cpu.py            # everything (minutes while the kernels are plain C)
    python benchmarks/bench_cpu.py --quick    # smaller sizes, fewer repeats (< 1 minute)
    python benchmarks/bench_cpu.py --only gemm --only overhead
    python benchmarks/bench_cpu.py --only gemm --threads 1 --cpu-time   # on a busy machine
    python benchmarks/bench_cpu.py --only block --only pool   # bench_cpu_ops.py: vs PyTorch

Every number is the median over repeats of a timeit-style loop (warm-up first). Ratio columns are
``gpucore time / other time`` everywhere (for throughput tables this equals other throughput /
gpucore throughput): 1.0 is parity, 4.0 means gpucore takes four times as long.

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE halve numpy's speed on our machines and are read when
OpenBLAS loads, so if either is set the script re-executes itself without them before numpy is
imported.
"""

from __future__ import annotations

import os
import sys

_BAD_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_REEXEC_MARK = "GPUCORE_BENCH_REEXECED"


def _threads_arg(argv: list[str]) -> str | None:
    """The value of --threads, read before numpy loads (OpenBLAS reads its thread count then)."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


_THREADS = _threads_arg(sys.argv[1:])
_bad = [k for k in _BAD_ENV if k in os.environ]
_set_threads = _THREADS is not None and os.environ.get("OPENBLAS_NUM_THREADS") != _THREADS
if _bad or _set_threads:
    if "numpy" in sys.modules:  # too late: OpenBLAS already read the environment
        sys.exit("bench_cpu: numpy was imported before the OPENBLAS_* variables could be changed")
    _env = {k: v for k, v in os.environ.items() if k not in _BAD_ENV}
    if _set_threads:
        _env["OPENBLAS_NUM_THREADS"] = _THREADS
    _env[_REEXEC_MARK] = ",".join(_bad)
    sys.stdout.flush()
    sys.stderr.flush()
    # orig_argv keeps "-m benchmarks.bench_cpu" and interpreter flags intact.
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], _env)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402
from bench_env import CpuShare, load_note  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

# This is the CPU benchmark: keep every gpucore op on the C extension even where a Vulkan device
# would be picked (the variable is read when gpucore is imported).
os.environ["GPUCORE_DEVICE"] = "cpu"

import gpucore  # noqa: E402

try:
    import torch
except ImportError:  # the PyTorch columns are left out
    torch = None

TORCH_THREADS = 2
# the clock of bench(): wall time, or the calling thread's CPU time (--cpu-time, one thread)
CLOCK = time.perf_counter


# --------------------------------------------------------------------------------------------
# timing


def bench(stmt: str, ns: dict, *, target: float, repeat: int, budget: float) -> float:
    """Median seconds per execution of ``stmt`` (timeit-style: gc off, loop in compiled code).

    One warm-up execution, then the loop count is doubled until one repeat takes >= ``target``
    seconds; then up to ``repeat`` repeats (at least 3) within about ``budget`` seconds.
    """
    timer = timeit.Timer(stmt, timer=CLOCK, globals=ns)
    timer.timeit(1)  # warm-up: first touch of buffers, lazy initialisation
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= target or number >= 1 << 24:
            break
        number *= 2 if t <= 0 else max(2, min(10, int(target / t) + 1))
    reps = max(3, min(repeat, int(budget / max(t, 1e-9))))
    times = [t] + timer.repeat(repeat=reps - 1, number=number)
    gc.collect()
    return statistics.median(times) / number


class Cfg:
    def __init__(self, quick: bool):
        self.quick = quick
        # per-repeat target time and repeat counts: large ops vs tiny (per-op overhead) ops
        self.big = dict(target=0.02, repeat=5 if quick else 9, budget=0.6 if quick else 4.0)
        self.tiny = dict(
            target=0.02 if quick else 0.1, repeat=7 if quick else 21, budget=0.3 if quick else 3.0
        )


# --------------------------------------------------------------------------------------------
# formatting


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x == 0 or not np.isfinite(x):
        return str(x)
    mag = int(np.floor(np.log10(abs(x))))
    dec = max(0, digits - 1 - mag)
    return f"{x:,.{dec}f}"


def ratio(gc_time: float, other_time: float | None) -> str:
    return "—" if other_time is None else fmt(gc_time / other_time, 3)


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    body = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join([line, sep, *body])


PROBLEMS: list[str] = []


def check(name: str, got, want, rtol: float, atol: float) -> str:
    """Compares a gpucore result with numpy's; returns the table cell and records failures."""
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        PROBLEMS.append(f"{name}: shape {got.shape}, numpy gives {want.shape}")
        return "SHAPE"
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        err = float(np.nanmax(np.abs(got - want)))
        PROBLEMS.append(
            f"{name}: {int(bad.sum())} of {bad.size} elements differ from numpy "
            f"(max abs err {err:.3g}, rtol {rtol}, atol {atol})"
        )
        return "MISMATCH"
    return "ok"


def section(title: str, note: str) -> None:
    print(f"\n### {title}\n\n{note}\n", flush=True)


def progress(msg: str) -> None:
    print(f"  ... {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# benchmarks


def settle() -> None:
    """Lets the previous library's worker threads stop spinning before the next one is timed
    (with 2 cores, OpenBLAS and OpenMP threads still spinning halve the next library's speed)."""
    gc.collect()
    time.sleep(0.3)


def run_libs(jobs: dict[str, list], opts: dict, what: str) -> dict[str, list]:
    """Times every (stmt, namespace) of each library, one library at a time; None stays None."""
    out = {}
    for lib, items in jobs.items():
        settle()
        progress(f"{what}: {lib}")
        out[lib] = [None if it is None else bench(it[0], it[1], **opts) for it in items]
    return out


def bench_gemm(cfg: Cfg, rng: np.random.Generator) -> None:
    squares = (64, 128, 256, 512) if cfg.quick else (64, 128, 256, 512, 1024, 2048)
    shapes = [(n, n, n) for n in squares] + [(64, 784, 512), (256, 784, 512), (64, 512, 10)]
    arrays = [
        (
            rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32),
        )
        for m, k, n in shapes
    ]
    jobs = {
        "gpucore": [
            ("a @ b", {"a": gpucore.from_numpy(a), "b": gpucore.from_numpy(b)}) for a, b in arrays
        ],
        "numpy": [("a @ b", {"a": a, "b": b}) for a, b in arrays],
    }
    if torch is not None:
        jobs["torch"] = [
            ("a @ b", {"a": torch.from_numpy(a), "b": torch.from_numpy(b)}) for a, b in arrays
        ]
    t = run_libs(jobs, cfg.big, "gemm")

    heads = ["M x K x N", "gpucore GFLOP/s", "numpy GFLOP/s", "gc/np time"]
    if torch is not None:
        heads += ["torch GFLOP/s", "gc/torch time"]
    heads.append("check")
    rows = []
    for i, ((m, k, n), (a, b)) in enumerate(zip(shapes, arrays)):
        flop = 2.0 * m * n * k
        t_gc, t_np = t["gpucore"][i], t["numpy"][i]
        row = [
            f"{m} x {k} x {n}",
            fmt(flop / t_gc / 1e9),
            fmt(flop / t_np / 1e9),
            ratio(t_gc, t_np),
        ]
        if torch is not None:
            row += [fmt(flop / t["torch"][i] / 1e9), ratio(t_gc, t["torch"][i])]
        # float32 accumulation over k terms: the error grows like sqrt(k)
        got = gpucore.from_numpy(a) @ gpucore.from_numpy(b)
        row.append(
            check(
                f"gemm {m}x{k}x{n}",
                got,
                a.astype(np.float64) @ b,
                rtol=1e-3,
                atol=1e-4 * np.sqrt(k),
            )
        )
        rows.append(row)
    section(
        "SGEMM (float32, C = A @ B, A is M x K, B is K x N, all contiguous)",
        "GFLOP/s = 2·M·N·K / median time. Ratio columns: **gpucore time ÷ other time** "
        "(= other GFLOP/s ÷ gpucore GFLOP/s; > 1 means gpucore is slower).",
    )
    print(table(heads, rows), flush=True)


def _sigmoid64(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# name, bytes per element moved (reads + writes), gpucore stmt, numpy stmt, torch stmt,
# numpy-with-out= stmt, float64 reference
ELEMENTWISE = [
    ("add", 12, "a + b", "a + b", "a + b", "np.add(a, b, out=o)", lambda a, b: a + b),
    ("mul", 12, "a * b", "a * b", "a * b", "np.multiply(a, b, out=o)", lambda a, b: a * b),
    (
        "relu",
        8,
        "gpucore.relu(a)",
        "np.maximum(a, 0)",
        "torch.relu(a)",
        "np.maximum(a, 0, out=o)",
        lambda a, b: np.maximum(a, 0),
    ),
    (
        "exp",
        8,
        "gpucore.exp(a)",
        "np.exp(a)",
        "torch.exp(a)",
        "np.exp(a, out=o)",
        lambda a, b: np.exp(a),
    ),
    (
        "tanh",
        8,
        "gpucore.tanh(a)",
        "np.tanh(a)",
        "torch.tanh(a)",
        "np.tanh(a, out=o)",
        lambda a, b: np.tanh(a),
    ),
    (
        "sigmoid",
        8,
        "gpucore.sigmoid(a)",
        "1 / (1 + np.exp(-a))",
        "torch.sigmoid(a)",
        None,
        lambda a, b: _sigmoid64(a),
    ),
]


def bench_elementwise(cfg: Cfg, rng: np.random.Generator) -> None:
    n = (1 << 20) if cfg.quick else (1 << 24)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    o = np.empty_like(a)
    g_ns = {"a": gpucore.from_numpy(a), "b": gpucore.from_numpy(b), "gpucore": gpucore}
    n_ns = {"a": a, "b": b, "o": o, "np": np}
    jobs = {
        "gpucore": [(op[2], g_ns) for op in ELEMENTWISE],
        "numpy": [(op[3], n_ns) for op in ELEMENTWISE],
    }
    if torch is not None:
        t_ns = {"a": torch.from_numpy(a), "b": torch.from_numpy(b), "torch": torch}
        jobs["torch"] = [(op[4], t_ns) for op in ELEMENTWISE]
    jobs["numpy out="] = [(op[5], n_ns) if op[5] else None for op in ELEMENTWISE]
    t = run_libs(jobs, cfg.big, "elementwise")

    heads = ["op", "gpucore GB/s", "numpy GB/s", "gc/np time"]
    if torch is not None:
        heads += ["torch GB/s", "gc/torch time"]
    heads += ["numpy out= GB/s", "check"]
    rows = []
    sub = slice(0, 1 << 16)  # correctness check on a prefix, against float64
    a64, b64 = a[sub].astype(np.float64), b[sub].astype(np.float64)
    for i, (name, bpe, s_gc, *_, ref) in enumerate(ELEMENTWISE):
        nbytes = bpe * n
        t_gc, t_np = t["gpucore"][i], t["numpy"][i]
        row = [name, fmt(nbytes / t_gc / 1e9), fmt(nbytes / t_np / 1e9), ratio(t_gc, t_np)]
        if torch is not None:
            row += [fmt(nbytes / t["torch"][i] / 1e9), ratio(t_gc, t["torch"][i])]
        t_out = t["numpy out="][i]
        row.append("—" if t_out is None else fmt(nbytes / t_out / 1e9))
        got = eval(s_gc, dict(g_ns))  # our own fixed statements
        row.append(
            check(f"elementwise {name}", got.numpy()[sub], ref(a64, b64), rtol=2e-6, atol=1e-7)
        )
        rows.append(row)
    section(
        f"Elementwise, {n:,} float32 elements ({n * 4 / 2**20:.0f} MiB per tensor)",
        "GB/s counts bytes read + written (binary ops 12 B/element, unary 8 B/element). "
        "gpucore, numpy and torch all **allocate a fresh output on every call** (at this size "
        "fresh pages fault in at a few GB/s, which caps every library); `numpy out=` writes "
        "into a preallocated buffer and shows the kernel alone (no ratio taken). numpy has "
        "no sigmoid: `1 / (1 + np.exp(-a))` (four passes, still counted as 8 B/element). "
        "Ratio columns: **gpucore time ÷ other time** (> 1 means gpucore is slower).",
    )
    print(table(heads, rows), flush=True)


def _np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def bench_softmax(cfg: Cfg, rng: np.random.Generator) -> None:
    x = rng.standard_normal((256, 1000), dtype=np.float32) * 3
    gx = gpucore.from_numpy(x)
    jobs = {
        "gpucore": [("gpucore.softmax(x, 1)", {"x": gx, "gpucore": gpucore})],
        "numpy": [("f(x)", {"x": x, "f": _np_softmax})],
    }
    if torch is not None:
        jobs["torch"] = [("torch.softmax(x, 1)", {"x": torch.from_numpy(x), "torch": torch})]
    t = {k: v[0] for k, v in run_libs(jobs, cfg.big, "softmax").items()}

    heads = ["shape", "gpucore µs", "numpy µs", "gc/np time"]
    row = [
        "256 x 1000, dim=1",
        fmt(t["gpucore"] * 1e6),
        fmt(t["numpy"] * 1e6),
        ratio(t["gpucore"], t["numpy"]),
    ]
    if torch is not None:
        heads += ["torch µs", "gc/torch time"]
        row += [fmt(t["torch"] * 1e6), ratio(t["gpucore"], t["torch"])]
    heads += ["gpucore GB/s", "check"]
    row.append(fmt(8 * x.size / t["gpucore"] / 1e9))
    row.append(
        check(
            "softmax",
            gpucore.softmax(gx, 1),
            _np_softmax(x.astype(np.float64)),
            rtol=1e-5,
            atol=1e-9,
        )
    )
    section(
        "Softmax (float32)",
        "Median µs per call; numpy is the usual stable composition "
        "`e = exp(x - max); e / sum(e)`. gpucore GB/s counts 8 B/element (read x, write y). "
        "Ratio columns: **gpucore time ÷ other time** (> 1 means gpucore is slower).",
    )
    print(table(heads, [row]), flush=True)


def bench_overhead(cfg: Cfg, rng: np.random.Generator) -> None:
    a = rng.standard_normal(64, dtype=np.float32)
    b = rng.standard_normal(64, dtype=np.float32)

    def pair(mod, rg):
        x = mod.from_numpy(a.copy())
        x.requires_grad_(rg)
        return ("a + b", {"a": x, "b": mod.from_numpy(b.copy())})

    jobs = {
        "gpucore": [pair(gpucore, False), pair(gpucore, True)],
        "numpy": [("a + b", {"a": a, "b": b}), None],
    }
    if torch is not None:
        jobs["torch"] = [pair(torch, False), pair(torch, True)]
    t = run_libs(jobs, cfg.tiny, "overhead")

    heads = ["a + b, 64 float32", "gpucore µs", "numpy µs", "gc/np time"]
    if torch is not None:
        heads += ["torch µs", "gc/torch time"]
    rows = []
    for i, label in enumerate(["no grad", "requires_grad=True (a only)"]):
        t_gc, t_np = t["gpucore"][i], t["numpy"][i]
        row = [label, fmt(t_gc * 1e6), "—" if t_np is None else fmt(t_np * 1e6), ratio(t_gc, t_np)]
        if torch is not None:
            row += [fmt(t["torch"][i] * 1e6), ratio(t_gc, t["torch"][i])]
        rows.append(row)
    section(
        "Per-op overhead",
        "Median µs per `a + b` on two 64-element float32 tensors (timeit loop, gc off, "
        "result discarded). With requires_grad each call also records a graph node; numpy "
        "has no autograd. Ratio columns: **gpucore time ÷ other time** (> 1 means gpucore "
        "is slower).",
    )
    print(table(heads, rows), flush=True)


# --------------------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_name() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        return "unknown BLAS"


def _load_note(share: float | None, when: str) -> str:
    return load_note(share, when, " (multi-threaded numpy and torch most of all)")


def gpucore_backend() -> str:
    """Which backend ran a 65536-element add (from gpucore.dispatch.trace_ops when present)."""
    trace = getattr(getattr(gpucore, "dispatch", None), "trace_ops", None)
    if trace is None:
        return "unknown"
    x = gpucore.from_numpy(np.ones(1 << 16, np.float32))
    with trace() as ops:
        x + x
    names = sorted({str(r[1]) for r in ops})
    if names != ["cpu"]:
        PROBLEMS.append(f"gpucore ran a 65536-element add on {names}, not only on the CPU")
    return ", ".join(names) or "unknown"


def header(cfg: Cfg) -> None:
    unset = os.environ.get(_REEXEC_MARK)
    blas_threads = os.environ.get("OPENBLAS_NUM_THREADS")
    blas_threads = (
        f"OPENBLAS_NUM_THREADS={blas_threads}" if blas_threads else "OpenBLAS default threads"
    )
    env_note = (
        f"re-executed with {unset} unset"
        if unset
        else "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE not set"
    )
    print(f"## gpucore CPU benchmarks{' (--quick)' if cfg.quick else ''}\n")
    print(
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )
    print(
        f"- gpucore {gpucore.__version__} ({gpucore.__file__}): "
        f"{gpucore.backend_info().get('cpu')}; GPUCORE_DEVICE=cpu, ops ran on: {gpucore_backend()}"
    )
    print(f"- numpy {np.__version__} ({blas_name()}, {blas_threads}); {env_note}")
    if torch is not None:
        print(
            f"- torch {torch.__version__}, torch.set_num_threads({TORCH_THREADS}) "
            f"-> {torch.get_num_threads()} thread(s)"
        )
    else:
        print("- torch: not importable, its columns are left out")
    clock = "the calling thread's CPU time" if CLOCK is time.thread_time else "wall time"
    print(f"- {time.strftime('%Y-%m-%d %H:%M:%S')}; medians over repeats after a warm-up, {clock}")
    probe = CpuShare()
    time.sleep(0.5)
    print(_load_note(probe.others(), "in the 0.5 s before the run"))


def main(argv=None) -> int:
    sections = {
        "gemm": bench_gemm,
        "elementwise": bench_elementwise,
        "softmax": bench_softmax,
        "overhead": bench_overhead,
    }
    from bench_cpu_ops import sections as op_sections  # block, pool: bench_cpu_ops.py

    sections.update(op_sections(sys.modules[__name__]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer repeats (finishes in under a minute)",
    )
    p.add_argument(
        "--only", action="append", choices=list(sections), help="run only this section (repeatable)"
    )
    p.add_argument("--no-torch", action="store_true", help="leave out the PyTorch columns")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for gpucore (set_num_threads), numpy/OpenBLAS (OPENBLAS_NUM_THREADS, set "
        "by re-executing) and torch (default: gpucore's and OpenBLAS's own defaults, torch 2)",
    )
    p.add_argument(
        "--cpu-time",
        action="store_true",
        help="time by the calling thread's CPU time (time.thread_time) instead of wall time: "
        "with --threads 1 (every library then runs on the calling thread), the numbers hold on "
        "a machine that other processes keep busy",
    )
    args = p.parse_args(argv)
    if args.cpu_time and args.threads != 1:
        p.error("--cpu-time counts only the calling thread: use it with --threads 1")

    global torch, TORCH_THREADS, CLOCK
    if args.cpu_time:
        CLOCK = time.thread_time
    if args.threads is not None:
        TORCH_THREADS = args.threads
        gpucore.set_num_threads(args.threads)
    if args.no_torch:
        torch = None
    if torch is not None:
        torch.set_num_threads(TORCH_THREADS)

    cfg = Cfg(args.quick)
    header(cfg)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    share = CpuShare()
    for name in args.only or list(sections):
        sections[name](cfg, rng)
    print(f"\nTotal benchmark time {time.perf_counter() - t0:.0f} s.")
    print(_load_note(share.others(), "during the run"))
    if PROBLEMS:
        print("\n**Correctness problems (gpucore vs numpy):**\n")
        for msg in PROBLEMS:
            print(f"- {msg}")
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
