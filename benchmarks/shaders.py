"""Shader micro-benchmarks on the Vulkan device, with the CPU path beside them, as markdown tables.

    python benchmarks/shaders.py             # GEMM N = 64..1024, elementwise on 16M floats, ...
    python benchmarks/shaders.py --quick     # N = 64..256, 1M floats, fewer repeats (~1 minute)
    python benchmarks/shaders.py --cold      # Mesa's on-disk shader cache off: real compile times
    python benchmarks/shaders.py --only gemm --png gemm.png

Sections: gemm (GFLOP/s per variant and size, from timestamp queries and from wall time; gpucore
on the CPU and numpy beside), qgemm (the int8 GEMM shader's GOP/s, integer-dot and plain
modules, beside the float GEMM shader on the same shapes and the C extension's int8 GEMM),
elementwise (add, relu: GB/s), half (float16 / bfloat16 against float32: GEMM GFLOP/s and
elementwise elements/s, timed in alternating rounds), dispatch (cost per dispatch with one
submit per op vs a batched chain of 100), pipelines (creation time per shader variant). A
CPU-type device (Mesa's lavapipe) is allowed here (GPUCORE_VULKAN_ALLOW_CPU=1). Tables go to
stdout, progress to stderr; the GEMM plot goes to a PNG when matplotlib is installed.

Every number is the median of the repeats. "ts" columns use the device's timestamp queries (the
shader alone); "wall" columns include recording, submission and the wait, and are timed in
separate runs with the timestamp queries off. On a CPU device the
other processes on the machine compete with the driver's threads: the header reports the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("GPUCORE_VULKAN_ALLOW_CPU", "1")
if "--cold" in sys.argv:
    os.environ["MESA_SHADER_CACHE_DISABLE"] = "true"  # read when the driver loads

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

import gpucore  # noqa: E402
import gpucore.nn.functional as F  # noqa: E402
from gpucore.backends.vulkan.kernels import KERNELS, local_size  # noqa: E402
from gpucore.backends.vulkan.kernels import gemm as G  # noqa: E402
from gpucore.backends.vulkan.kernels import qgemm as Q  # noqa: E402

SECTIONS = ("gemm", "qgemm", "elementwise", "half", "dispatch", "pipelines")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt(x, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if isinstance(x, (int, np.integer)):
        return str(x)
    if x == 0 or not np.isfinite(x):
        return str(x)
    mag = int(np.floor(np.log10(abs(x))))
    return f"{x:,.{max(0, digits - 1 - mag)}f}"


def table(headers: list, rows: list) -> str:
    rows = [[fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |",
        "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|",
    ]
    out += ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join(out)


class Bench:
    def __init__(self, be, quick: bool):
        self.be = be
        self.ctx = be.ctx
        self.stream = be.ctx.stream
        self.quick = quick

    def time(self, fn, reps: int):
        """(median device seconds from timestamps, median wall seconds) of ``fn(); sync``.

        Wall time comes from separate runs with profiling off: on lavapipe each timestamp
        query flushes the driver's pipeline and cost ~35 µs per timed dispatch (a 100-dispatch
        relu chain went from ~19 to ~52 µs per dispatch), which would be charged to the wall
        column as if it were the runtime's own overhead."""
        fn()
        self.stream.synchronize()  # warm-up: pipeline creation and first-use compilation
        dev, wall = [], []
        for _ in range(reps):
            self.stream.profile = []
            fn()
            self.stream.synchronize()
            dev.append(sum(t for _, t in self.stream.profile))
            self.stream.profile = None
            t0 = time.perf_counter()
            fn()
            self.stream.synchronize()
            wall.append(time.perf_counter() - t0)
        return statistics.median(dev), statistics.median(wall)

    def upload(self, a: np.ndarray) -> np.ndarray:
        return self.be.upload(np.ascontiguousarray(a, np.float32), None)


def host_time(fn, reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


# ----------------------------------------------------------------------------- sections
def bench_gemm(b: Bench, args) -> tuple:
    sizes = [64, 128, 256] if args.quick else [64, 128, 256, 512, 1024]
    reps = 3 if args.quick else 5
    budget = 5.0 if args.quick else 20.0  # seconds one multiply may take before a size is skipped
    rng = np.random.default_rng(0)
    auto = G.choose_variant(b.ctx)
    variants = [auto] + [v for v in G.VARIANTS if v != auto]
    rate: dict = {v: None for v in variants}
    mats = {
        n: (
            rng.standard_normal((n, n)).astype(np.float32),
            rng.standard_normal((n, n)).astype(np.float32),
        )
        for n in sizes
    }
    rows = {n: [n] for n in sizes}
    curves: dict = {v: [] for v in variants}
    # Device first, then the CPU libraries: their threads and the driver's would compete.
    for n in sizes:
        A, B = mats[n]
        flops = 2.0 * n**3
        ref = A.astype(np.float64) @ B
        a, bb = b.upload(A), b.upload(B)
        out = b.be.empty_array((n, n), np.float32)
        for v in variants:
            if rate[v] is not None and flops / rate[v] > budget:
                rows[n] += ["skip", "skip"]
                curves[v].append(None)
                continue
            log(f"gemm {v} N={n}")
            ts, wall = b.time(
                lambda v=v, a=a, bb=bb, out=out: G.gemm(b.be, out, a, bb, variant=v), reps
            )
            err = np.linalg.norm(b.be.host_view(out) - ref) / np.linalg.norm(ref)
            if err > 1e-4:
                raise SystemExit(f"gemm {v} N={n}: relative error {err:.2e}")
            rate[v] = flops / ts
            rows[n] += [flops / ts / 1e9, flops / wall / 1e9]
            curves[v].append(flops / ts / 1e9)
    curves["gpucore CPU"], curves["numpy"] = [], []
    for n in sizes:
        A, B = mats[n]
        flops = 2.0 * n**3
        log(f"gemm CPU N={n}")
        with gpucore.device_policy("cpu"):
            ta, tb = gpucore.tensor(A), gpucore.tensor(B)
            t_cpu = host_time(lambda ta=ta, tb=tb: ta @ tb, reps)
        t_np = host_time(lambda A=A, B=B: A @ B, reps)
        rows[n] += [flops / t_cpu / 1e9, flops / t_np / 1e9]
        curves["gpucore CPU"].append(flops / t_cpu / 1e9)
        curves["numpy"].append(flops / t_np / 1e9)
    headers = ["N"]
    for v in variants:
        mark = " (auto)" if v == auto else ""
        headers += [f"{v}{mark} ts", f"{v} wall"]
    headers += ["gpucore CPU", "numpy"]
    text = (
        "### GEMM, float32 N x N x N, GFLOP/s\n\n"
        + table(headers, list(rows.values()))
        + f"\n\n'skip': the previous size predicted more than {budget:.0f} s per multiply."
    )
    return text, (sizes, curves)


def bench_qgemm(b: Bench, args) -> str:
    """The int8 GEMM shader (float32 epilogue: zero point, per-channel scales, bias, as the
    dynamically quantized Linear) per module against the float GEMM shader (auto variant) on
    the same m x n x k, timed in alternating rounds, checked against ``_cpu.qgemm`` bit for bit;
    the C extension's int8 GEMM beside them. GOP/s and GFLOP/s both count 2 * m * n * k."""
    shapes = [(s, s, s) for s in ((64, 128, 256) if args.quick else (64, 128, 256, 512))]
    shapes += [(1, 1024, 1024), (128, 768, 768)]
    reps = 3 if args.quick else 5
    rows = [_qgemm_row(b, m, n, k, reps) for m, n, k in shapes]
    headers = ["m x n x k", "int8 dot ts", "int8 dot wall", "int8 plain ts", "int8 plain wall",
               "float ts", "float wall", "int8 / float (ts)", "C int8 (CPU)"]  # fmt: skip
    note = (
        "A CPU-type device (lavapipe): not GPU numbers. The driver runs the shaders as vector "
        "code on the host's cores and has no int8 dot product unit to map the instruction to "
        "(the two modules measure alike); the C extension runs on the same cores."
        if b.ctx.is_cpu
        else "GOP/s of the int8 shader, GFLOP/s of the float one."
    )
    return (
        "### Int8 GEMM shader (float32 epilogue) vs float GEMM shader, GOP/s | GFLOP/s\n\n"
        + table(headers, rows)
        + "\n\n"
        + note
    )


def _qgemm_row(b: Bench, m: int, n: int, k: int, reps: int) -> list:
    from gpucore import _cpu

    mods = (["dot"] if Q.has_integer_dot(b.ctx) else []) + ["plain"]
    rng = np.random.default_rng(2)
    a8 = rng.integers(0, 256, (m, k), dtype=np.uint8)
    w8 = rng.integers(-127, 128, (n, k), dtype=np.int8)
    ws = (rng.random(n) * 0.01 + 0.001).astype(np.float32)
    qargs = (0.02, 128, ws, rng.standard_normal(n).astype(np.float32), False, 1.0, 0)
    pq = _cpu.qgemm_pack(w8, k, n, 1)
    want = np.empty((m, n), np.float32)
    _cpu.qgemm(a8, pq, want, m, *qargs)
    a, qw = b.be.upload(a8, None), Q.pack_weight(b.be, w8)
    out = b.be.empty_array((m, n), np.float32)
    fa, fw = b.upload(rng.standard_normal((m, k))), b.upload(rng.standard_normal((n, k)))
    fout = b.be.empty_array((m, n), np.float32)
    fns = {f"q_{d}": (lambda d=d: Q.qgemm(b.be, a, qw, out, *qargs, dot=d == "dot"))
           for d in mods}  # fmt: skip
    fns["float"] = lambda: G.gemm(b.be, fout, fa, fw.T)
    got: dict = {name: ([], []) for name in fns}
    log(f"qgemm {m}x{n}x{k}")
    for _ in range(reps):
        for name, fn in fns.items():
            ts, wall = b.time(fn, 1)
            got[name][0].append(ts)
            got[name][1].append(wall)
            if name.startswith("q_") and not np.array_equal(b.be.host_view(out), want):
                raise SystemExit(f"qgemm {name} {m}x{n}x{k}: differs from _cpu.qgemm")
    ops = 2.0 * m * n * k
    med = {name: (ops / statistics.median(t) / 1e9, ops / statistics.median(wt) / 1e9)
           for name, (t, wt) in got.items()}  # fmt: skip
    t_cpu = host_time(lambda: _cpu.qgemm(a8, pq, want, m, *qargs), reps)
    row = [f"{m}x{n}x{k}"]
    for d in ("dot", "plain"):
        row += list(med[f"q_{d}"]) if f"q_{d}" in med else ["—", "—"]
    best = max(med[f"q_{d}"][0] for d in mods)
    return row + [*med["float"], f"{best / med['float'][0]:.2f}x", ops / t_cpu / 1e9]


def bench_elementwise(b: Bench, args) -> str:
    n = (1 << 20) if args.quick else (1 << 24)
    reps = 3 if args.quick else 5
    rng = np.random.default_rng(1)
    X = rng.standard_normal(n).astype(np.float32)
    Y = rng.standard_normal(n).astype(np.float32)
    rows = []
    out = np.empty_like(X)
    numpy_ops = {"add": lambda: np.add(X, Y, out=out), "relu": lambda: np.maximum(X, 0, out=out)}
    for name, nbytes, expr in (("add", 12, lambda x, y: x + y), ("relu", 8, lambda x, y: x.relu())):
        if name not in KERNELS:
            rows.append([name, "no kernel", "—", "—", "—", "—"])
            continue
        log(f"elementwise {name}")
        with gpucore.device_policy("vulkan"):
            x = gpucore.tensor(X).to("vulkan")
            y = gpucore.tensor(Y).to("vulkan")
            ts, wall = b.time(lambda e=expr, x=x, y=y: e(x, y), reps)
        with gpucore.device_policy("cpu"):
            xc, yc = gpucore.tensor(X), gpucore.tensor(Y)
            t_cpu = host_time(lambda e=expr, x=xc, y=yc: e(x, y), reps)
        t_np = host_time(numpy_ops[name], reps)
        gb = nbytes * n / 1e9
        rows.append([name, gb / ts, gb / wall, gb / t_cpu, gb / t_np, ts * 1e3])
    return (
        f"### Elementwise, {n / 2**20:.0f}M float32, GB/s (bytes read + written)\n\n"
        + table(
            ["op", "vulkan ts", "vulkan wall", "gpucore CPU", "numpy out=", "vulkan ts ms"], rows
        )
        + "\n\nThe vulkan and gpucore CPU columns allocate their output per call (reused "
        "device blocks / malloc); numpy writes into a preallocated array."
    )


def bench_half(b: Bench, args) -> str:
    """float16 / bfloat16 storage against float32 on the same shapes, in alternating rounds:
    GEMM (gemm_half.spv: half A and B, float32 accumulation and C) and add / relu (binary.comp,
    unary.comp: half loads and stores, float32 arithmetic), softmax, cross-entropy and layer_norm
    (their shaders read and write halves, float32 inside), all through the registry ops on
    device tensors (the GEMM rows include the rounding of C to the half type)."""
    sizes = [128, 256] if args.quick else [256, 512]
    n = (1 << 20) if args.quick else (1 << 22)
    reps = 3 if args.quick else 5
    rng = np.random.default_rng(2)
    dts = {"float32": gpucore.float32, "float16": gpucore.float16, "bfloat16": gpucore.bfloat16}

    def alternate(fns: dict) -> dict:
        for fn in fns.values():  # warm-up: pipeline creation
            b.time(fn, 1)
        runs: dict = {k: ([], []) for k in fns}
        for _ in range(reps):
            for k, fn in fns.items():
                ts, wall = b.time(fn, 1)
                runs[k][0].append(ts)
                runs[k][1].append(wall)
        return {k: (statistics.median(t), statistics.median(w)) for k, (t, w) in runs.items()}

    rows = []
    with gpucore.device_policy("vulkan"):
        for m in sizes:
            A, B = rng.standard_normal((2, m, m)).astype(np.float32)
            ts = {k: (gpucore.tensor(A).to(d).to("vulkan"), gpucore.tensor(B).to(d).to("vulkan"))
                  for k, d in dts.items()}  # fmt: skip
            log(f"half gemm N={m}")
            res = alternate({k: (lambda a=a, c=c: a @ c) for k, (a, c) in ts.items()})
            gf = 2.0 * m**3 / 1e9
            rows.append(
                [f"matmul N={m}", "GFLOP/s"] + [gf / res[k][i] for k in dts for i in (0, 1)]
            )
        X, Y = rng.standard_normal((2, n)).astype(np.float32)
        for name, expr in (("add", lambda x, y: x + y), ("relu", lambda x, y: x.relu())):
            ts = {k: (gpucore.tensor(X).to(d).to("vulkan"), gpucore.tensor(Y).to(d).to("vulkan"))
                  for k, d in dts.items()}  # fmt: skip
            log(f"half elementwise {name}")
            res = alternate({k: (lambda x=x, y=y, e=expr: e(x, y)) for k, (x, y) in ts.items()})
            g = n / 1e9
            rows.append(
                [f"{name} {n >> 20}M", "Gelem/s"] + [g / res[k][i] for k in dts for i in (0, 1)]
            )
        # softmax.comp, cross_entropy.comp, layer_norm.comp: half loads and stores themselves
        r, c = (256, 1024) if args.quick else (1024, 1024)
        X = rng.standard_normal((r, c)).astype(np.float32)
        tgt = gpucore.tensor(rng.integers(0, c, r)).to("vulkan")
        nn_ops = {
            "softmax": lambda x, w: F.softmax(x, -1),
            "cross_entropy": lambda x, w: F.cross_entropy(x, tgt, reduction="none"),
            "layer_norm": lambda x, w: F.layer_norm(x, (c,), w, w),
        }
        for name, expr in nn_ops.items():
            ts = {k: (gpucore.tensor(X).to(d).to("vulkan"), gpucore.ones(c, dtype=d).to("vulkan"))
                  for k, d in dts.items()}  # fmt: skip
            log(f"half {name}")
            res = alternate({k: (lambda x=x, w=w, e=expr: e(x, w)) for k, (x, w) in ts.items()})
            g = r * c / 1e9
            rows.append(
                [f"{name} {r}x{c}", "Gelem/s"] + [g / res[k][i] for k in dts for i in (0, 1)]
            )
    note = (
        "A CPU-type device (lavapipe): these are CPU numbers. The driver runs the shaders as "
        "vector code on the host's cores; half storage halves the bytes moved but each 16-bit "
        "value is widened and rounded with integer instructions (half.glsl), which a CPU pays "
        "in full, so half is not expected to be faster here. On a GPU the bandwidth-bound rows "
        "are the ones to watch."
        if b.ctx.is_cpu
        else "Half rows move half the bytes of float32 ones."
    )
    headers = ["op", "unit"] + [f"{k} {c}" for k in dts for c in ("ts", "wall")]
    return (
        "### Half precision against float32 (device tensors, alternating rounds)\n\n"
        + table(headers, rows)
        + "\n\n"
        + note
    )


def bench_dispatch(b: Bench, args) -> str:
    if "relu" not in KERNELS:
        return "### Dispatch cost\n\nno relu kernel: skipped"
    n, chain = 4096, 100
    reps = 3 if args.quick else 7
    be, stream = b.be, b.stream
    x = b.upload(np.linspace(-1, 1, n))
    y = be.empty_array((n,), np.float32)
    relu = KERNELS["relu"]

    def kernel_chain(k, sync_each):
        src, dst = x, y
        for _ in range(k):
            relu(be, dst, src)  # each reads what the previous wrote: a barrier between each
            if sync_each:
                stream.synchronize()
            src, dst = dst, src

    with gpucore.device_policy("vulkan"):
        t = gpucore.tensor(np.linspace(-1, 1, n).astype(np.float32)).to("vulkan")

        def op_chain(k, sync_each):
            v = t
            for _ in range(k):
                v = v.relu()
                if sync_each:
                    gpucore.vulkan.synchronize()
            return v

        rows = []
        fuse0 = stream.fuse
        for fuse in (False, True):  # fusion forced on too (off by default on CPU devices)
            stream.fuse = fuse
            tag = "fused" if fuse else "one dispatch per op"
            for level, fn in (
                ("kernel (relu launch)", kernel_chain),
                ("op (Tensor.relu)", op_chain),
            ):
                log(f"dispatch: {level}, {tag}")
                # the profiler times ops one by one: device timestamps only for unfused rows
                if fuse:
                    single = host_time(lambda fn=fn: fn(chain, True), reps)
                    batch = host_time(lambda fn=fn: (fn(chain, False), stream.synchronize()), reps)
                else:
                    _, single = b.time(lambda fn=fn: fn(chain, True), reps)
                    ts, batch = b.time(lambda fn=fn: fn(chain, False), reps)
                d1 = stream.stats["dispatches"]
                fn(chain, False)
                stream.synchronize()
                per_chain = stream.stats["dispatches"] - d1
                rows.append(
                    [
                        level,
                        tag,
                        single / chain * 1e6,
                        batch / chain * 1e6,
                        None if fuse else ts / chain * 1e6,
                        per_chain,
                    ]
                )
        stream.fuse = fuse0
    st = gpucore.vulkan.stats()
    return (
        f"### Dispatch cost, relu on {n} floats, chain of {chain} dependent ops, µs per op\n\n"
        + table(
            [
                "level",
                "fusion",
                "submit+wait per op",
                "batched",
                "device ts",
                "dispatches per chain",
            ],
            rows,
        )
        + "\n\n'batched': recording, submission (early submits while the device idles) and "
        "the final wait. 'device ts': the sum of per-dispatch timestamp intervals (unfused; "
        "the profiler times ops one by one). Stream counters so far: "
        f"{st.get('dispatches')} dispatches, {st.get('submits')} submits, "
        f"{st.get('barriers')} barriers."
    )


def bench_pipelines(b: Bench, args) -> str:
    from gpucore.backends.vulkan.pipelines import PipelineCache

    ctx, be = b.ctx, b.be
    sg = G.subgroup_shuffle_size(ctx) or 8
    # (label, shader, bindings, specialization constants, workgroup size)
    cases = [("unary relu", "unary", 3, (5, 0), local_size(be))]
    if G.subgroup_shuffle_size(ctx):
        for tm, tn, bmode in ((32, 2, 2), (32, 2, 3), (8, 1, 0)):
            cases.append(
                (
                    f"gemm regblock TM={tm} TN={tn} BMODE={bmode}",
                    "gemm",
                    5,
                    (0, 4, 4, 4, tm, tn, 0, bmode, sg),
                    sg * 4,
                )
            )
    for bm, bn, bk, tm, tn in G.TILED_CONFIGS[:2]:
        cases.append(
            (
                f"gemm tiled {bm}x{bn}x{bk} {tm}x{tn}",
                "gemm",
                5,
                (1, bm, bn, bk, tm, tn, 2, 2, 8),
                (bm // tm) * (bn // tn),
            )
        )
    x = b.upload(np.zeros(4096))
    rows = []
    for label, shader, nb, spec, local in cases:
        log(f"pipeline {label}")
        cache = PipelineCache(ctx.vk, ctx.device)  # a fresh VkPipelineCache: no reuse
        t0 = time.perf_counter()
        pipe = cache.get(shader, nb, spec, local)
        t_create = time.perf_counter() - t0
        # lavapipe compiles at first use: time the first dispatch against the second
        push = np.zeros(32, np.uint32)  # M = N = K = 0 for gemm, n = 0 for unary: no work
        binds = [be.operand(x).binding(i == 2) for i in range(nb)]
        firsts = []
        for _ in range(2):
            t0 = time.perf_counter()
            b.stream.dispatch(
                pipe, binds, push[:25] if shader == "gemm" else push[:4], (1, 1, 1), keep=(x,)
            )
            b.stream.synchronize()
            firsts.append(time.perf_counter() - t0)
        cache.destroy()
        rows.append([label, t_create * 1e3, (firsts[0] - firsts[1]) * 1e3])
    cache_state = (
        "off (--cold)"
        if os.environ.get("MESA_SHADER_CACHE_DISABLE")
        else "on (a warm cache hides compile time; --cold turns it off)"
    )
    return (
        "### Pipeline creation, ms\n\n"
        + table(["pipeline", "vkCreateComputePipelines", "extra on first dispatch"], rows)
        + f"\n\nMesa on-disk shader cache: {cache_state}. gpucore creates each pipeline "
        f"once per process (so far: {ctx.pipelines.created} pipelines, "
        f"{ctx.pipelines.create_seconds * 1e3:.0f} ms)."
    )


def plot(path: str, data) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib not installed: no PNG)"
    sizes, curves = data
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, ys in curves.items():
        pts = [(s, y) for s, y in zip(sizes, ys) if y is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N (N x N x N)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return f"GEMM plot written to {path}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    ap.add_argument("--cold", action="store_true", help="turn Mesa's on-disk shader cache off")
    ap.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections")
    ap.add_argument("--png", default="shaders_gemm.png", help="where the GEMM plot goes")
    args = ap.parse_args(argv)
    be = gpucore.dispatch.vulkan_backend(allow_cpu=True)
    if be is None:
        print("no Vulkan device: " + (gpucore.vulkan.unavailable_reason() or "unknown reason"))
        return 1
    ctx = be.ctx
    b = Bench(be, args.quick)
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"## gpucore shader benchmarks{' (--quick)' if args.quick else ''}\n")
    print(
        f"- device: {ctx.info.name} ({ctx.info.type}, driver {ctx.info.driver}, Vulkan "
        f"{ctx.info.api_version}); subgroup {ctx.subgroup_size}, shared memory "
        f"{ctx.limits['maxComputeSharedMemorySize'] // 1024} KiB; GEMM auto variant: "
        f"{G.choose_variant(ctx)}"
    )
    print(f"- host: {os.cpu_count()} CPUs, load average {load0:.2f} at start")
    sections = args.only or list(SECTIONS)
    plot_data = None
    for s in sections:
        print()
        if s == "gemm":
            text, plot_data = bench_gemm(b, args)
        else:
            text = globals()[f"bench_{s}"](b, args)
        print(text, flush=True)
    if plot_data is not None:
        print("\n" + plot(args.png, plot_data))
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nload average at the end: {load1:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
