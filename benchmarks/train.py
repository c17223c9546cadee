"""Training-step benchmark: ms per step, gpucore CPU vs PyTorch CPU side by side in one run.

Run from the repository root (after ``python setup.py build_ext --inplace`` or tools/test.sh)::

    python benchmarks/train.py              # every case, 3 rounds (about a minute)
    python benchmarks/train.py --quick      # fewer steps and rounds: a smoke run
    python benchmarks/train.py --only cnn   # cases: mlp64, mlp256, cnn, lstm_lm, bigru, gpt
    python benchmarks/train.py --no-torch   # gpucore alone
    python benchmarks/train.py --no-profile # leave out the gpucore per-op profile
    python benchmarks/train.py --transfers  # also: bytes per step on the Vulkan device under
                                            # 'auto', residency off vs on (transfers.py)
    python benchmarks/train.py --replay     # also: host time per step on the Vulkan device,
                                            # eager vs a captured step replayed (replay.py)
    GPUCORE_NUM_THREADS=1 python benchmarks/train.py --threads 1 --cpu-time  # one thread each,
                                            # CPU time per step (a shared machine)

Cases (DESIGN.md / issues 5 and 14), random data, Adam (lr 1e-3), cross-entropy loss:

- MLP 784-512-256-10 (ReLU), batch 64 and 256;
- CNN conv(1->16, 3x3, pad 1)-ReLU-maxpool2-conv(16->32, 3x3, pad 1)-ReLU-maxpool2-
  Linear(32*7*7 -> 10) on 1x28x28 inputs, batch 64;
- LSTM language model (issue 14): Embedding(10000, 256)-LSTM(256, 256, 2 layers)-
  Linear(256 -> 10000) on 35 steps x batch 20 of token ids, a next-token loss per position;
- bidirectional GRU classifier: GRU(128, 256, 2 layers, bidirectional) on 35 steps x batch 20,
  Linear(512 -> 10) on the last step's output.
- GPT: gpucore.examples.chargpt's model (4 pre-norm blocks, d 128, 4 heads, causal
  scaled_dot_product_attention, tied output layer, vocabulary 96), context 64, batch 32, AdamW
  (lr 1e-3); PyTorch runs the same architecture (TorchGPT) from the same weights.

A step is zero_grad + forward + loss + backward + optimizer step, on one fixed batch. The PyTorch
models start from gpucore's initial weights (copied), and the first three losses of both are
compared (``check`` column). PyTorch runs twice: with its default Adam (a per-parameter loop on
the CPU) and with ``fused=True`` (one kernel for all parameters); the ratio column is gpucore's
time divided by the faster of the two (1.0 is parity, above 1 gpucore is slower).

Timing: warm-up steps first, then each library runs blocks of steps in turn (rounds), with a
pause between libraries so one library's spinning worker threads do not slow the next; every
step is timed on its own and the table shows the median over all timed steps. PyTorch uses
``torch.set_num_threads(2)`` (``--threads N``); gpucore runs every op in its C extension
(GPUCORE_DEVICE=cpu). OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE slow numpy on our machines and are
read when OpenBLAS loads, so the script re-executes itself without them before numpy is imported.

After the table, ``gpucore.profiler()`` shows where one gpucore step of each case spends its
time, per op; what the ops do not account for is Python, autograd bookkeeping and allocation.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import REEXEC_MARK, CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("train.py")

import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

# The CPU benchmark: every gpucore op in the C extension, even where a Vulkan device exists.
os.environ["GPUCORE_DEVICE"] = "cpu"

import train_models  # noqa: E402

import gpucore  # noqa: E402
import gpucore.nn as gnn  # noqa: E402
import gpucore.nn.functional as GF  # noqa: E402

try:
    import torch
except ImportError:  # the PyTorch columns are left out
    torch = None

CASES = {
    "mlp64": ("MLP 784-512-256-10, batch 64", "mlp", 64),
    "mlp256": ("MLP 784-512-256-10, batch 256", "mlp", 256),
    "cnn": ("CNN conv16-pool-conv32-pool-fc, 28x28, batch 64", "cnn", 64),
    "lstm_lm": ("LSTM LM emb256-LSTM256x2-fc10000, seq 35, batch 20", "lstm_lm", 20),
    "bigru": ("BiGRU 128-256x2-fc10, seq 35, batch 20", "bigru", 20),
    "gpt": ("GPT 4 blocks d128 4 heads, context 64, batch 32, AdamW", "gpt", 32),
}
# Reference medians from DESIGN.md (PyTorch 2.13 CPU, 2 threads, same machine type).
DESIGN_TORCH_MS = {"mlp64": "4.3 (1.47 fused)", "mlp256": "7.0", "cnn": "7.3", "gpt": "—"}
SEQ, VOCAB = 35, 10000
GPT_SHAPE = {"vocab": 96, "context": 64, "layers": 4, "d": 128, "heads": 4}


def rnn_model(lib, kind: str):
    """The recurrent cases' models in gpucore.nn or torch.nn (``lib``): same state-dict keys."""

    class LanguageModel(lib.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.Embedding(VOCAB, 256)
            self.rnn = lib.LSTM(256, 256, num_layers=2)
            self.head = lib.Linear(256, VOCAB)

        def forward(self, x):
            return self.head(self.rnn(self.emb(x))[0]).reshape(-1, VOCAB)

    class BiGRU(lib.Module):
        def __init__(self):
            super().__init__()
            self.rnn = lib.GRU(128, 256, num_layers=2, bidirectional=True)
            self.head = lib.Linear(512, 10)

        def forward(self, x):
            return self.head(self.rnn(x)[0][-1])

    return LanguageModel() if kind == "lstm_lm" else BiGRU()


# --------------------------------------------------------------------------------------------
# models


class FlatGPT(gnn.Module):
    """chargpt's GPT with its logits flattened to [batch * context, vocab] for the loss."""

    def __init__(self):
        super().__init__()
        from gpucore.examples.chargpt import GPT  # noqa: PLC0415

        self.gpt = GPT(**GPT_SHAPE)

    def forward(self, idx):
        out = self.gpt(idx)
        return out.reshape(-1, out.shape[-1])


def gpucore_model(kind: str):
    if kind in ("lstm_lm", "bigru"):
        return rnn_model(gnn, kind)
    if kind == "gpt":
        return FlatGPT()
    return train_models.mlp(gnn) if kind == "mlp" else train_models.cnn(gnn)


def torch_gpt():
    """chargpt's GPT in PyTorch, with the same parameter names."""
    tnn, tf = torch.nn, torch.nn.functional
    v, t, n, d, h = (GPT_SHAPE[k] for k in ("vocab", "context", "layers", "d", "heads"))

    class Attn(tnn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = (z.view(b, s, h, d // h).transpose(1, 2) for z in self.qkv(x).split(d, dim=2))
            y = tf.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, s, d))

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = tnn.LayerNorm(d), Attn(), tnn.LayerNorm(d)
            self.fc, self.act, self.out = tnn.Linear(d, 4 * d), tnn.GELU(), tnn.Linear(4 * d, d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(self.act(self.fc(self.ln2(x))))

    class GPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(v, d), tnn.Embedding(t, d)
            self.blocks = tnn.ModuleList([Block() for _ in range(n)])
            self.ln_f = tnn.LayerNorm(d)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            return tf.linear(self.ln_f(x), self.tok.weight).reshape(-1, v)

    class Flat(tnn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = GPT()

        def forward(self, idx):
            return self.gpt(idx)

    return Flat()


def torch_model(kind: str, init: dict):
    """The same architecture in PyTorch, with gpucore's initial weights (same state-dict keys)."""
    tnn = torch.nn
    if kind in ("lstm_lm", "bigru"):
        m = rnn_model(tnn, kind)
    elif kind == "gpt":
        m = torch_gpt()
    else:
        m = train_models.mlp(tnn) if kind == "mlp" else train_models.cnn(tnn)
    m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()})
    return m


def make_case(kind: str, batch: int, seed: int = 0):
    """gpucore model, initial weights as numpy, and one random batch (x, labels) as numpy."""
    gpucore.manual_seed(seed)
    model = gpucore_model(kind)
    init = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(seed)
    if kind == "lstm_lm":  # token ids [seq, batch]; the next token at every position
        x = rng.integers(0, VOCAB, (SEQ, batch)).astype(np.int64)
        return model, init, x, rng.integers(0, VOCAB, SEQ * batch).astype(np.int64)
    if kind == "gpt":  # characters and the next ones
        ids = rng.integers(0, GPT_SHAPE["vocab"], (batch, GPT_SHAPE["context"] + 1))
        return model, init, ids[:, :-1].copy(), ids[:, 1:].reshape(-1).copy()
    shape = {"mlp": (batch, 784), "bigru": (SEQ, batch, 128)}.get(kind, (batch, 1, 28, 28))
    x = rng.standard_normal(shape, dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    return model, init, x, y


def gpucore_step_fn(model, x: np.ndarray, y: np.ndarray, kind: str = "mlp"):
    adam = gpucore.optim.AdamW if kind == "gpt" else gpucore.optim.Adam
    opt = adam(model.parameters(), lr=1e-3)
    xt, yt = gpucore.from_numpy(x), gpucore.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = GF.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return step


def torch_step_fn(kind: str, init: dict, x: np.ndarray, y: np.ndarray, fused: bool):
    model = torch_model(kind, init)
    adam = torch.optim.AdamW if kind == "gpt" else torch.optim.Adam
    opt = adam(model.parameters(), lr=1e-3, fused=fused or None)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    loss_fn = torch.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return step


# --------------------------------------------------------------------------------------------
# timing and formatting


def settle() -> None:
    """Lets the previous library's worker threads stop spinning before the next one is timed."""
    gc.collect()
    time.sleep(0.3)


# The step clock: wall time, or with --cpu-time the calling thread's CPU time (for one-thread
# runs on a shared machine, where other processes' load would otherwise land in the numbers).
CLOCK = [time.perf_counter]


def time_steps(step, n: int) -> list[float]:
    clock = CLOCK[0]
    out = []
    for _ in range(n):
        t = clock()
        step()
        out.append(clock() - t)
    return out


def fmt_ms(s: float | None) -> str:
    if s is None:
        return "—"
    ms = s * 1e3
    return f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A markdown table; the first ``left`` columns are text (left-aligned), the rest numbers."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = (
        "|"
        + "|".join(
            ("-" * (w + 2)) if i < left else ("-" * (w + 1) + ":") for i, w in enumerate(widths)
        )
        + "|"
    )
    body = [
        "| "
        + " | ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        )
        + " |"
        for r in rows
    ]
    return "\n".join([line, sep, *body])


def progress(msg: str) -> None:
    print(f"  ... {msg}", file=sys.stderr, flush=True)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# --------------------------------------------------------------------------------------------
# the benchmark


def check_losses(g_step, t_step, n: int = 3) -> str:
    """Runs ``n`` steps of each from the same weights; the largest loss difference."""
    g = [float(g_step().item()) for _ in range(n)]
    t = [float(t_step().item()) for _ in range(n)]
    err = max(abs(a - b) for a, b in zip(g, t))
    return "ok" if err <= 1e-4 * max(1.0, abs(t[0])) else f"MISMATCH {err:.2g}"


def run_case(name: str, args) -> tuple[list[str], object]:
    title, kind, batch = CASES[name]
    model, init, x, y = make_case(kind, batch)
    steps = {"gpucore": gpucore_step_fn(model, x, y, kind)}
    check = "—"
    if torch is not None:
        steps["torch"] = torch_step_fn(kind, init, x, y, fused=False)
        steps["torch fused"] = torch_step_fn(kind, init, x, y, fused=True)
        check = check_losses(steps["gpucore"], steps["torch"])
    for lib, step in steps.items():
        progress(f"{name}: warm-up {lib}")
        time_steps(step, args.warmup)
    times: dict[str, list[float]] = {lib: [] for lib in steps}
    for r in range(args.rounds):
        for lib, step in steps.items():
            settle()
            progress(f"{name}: round {r + 1}/{args.rounds} {lib}")
            times[lib] += time_steps(step, args.steps)
    med = {lib: statistics.median(ts) for lib, ts in times.items()}
    t_best = min((med[k] for k in ("torch", "torch fused") if k in med), default=None)
    ratio = "—" if t_best is None else f"{med['gpucore'] / t_best:.2f}"
    row = [
        title,
        fmt_ms(med["gpucore"]),
        fmt_ms(med.get("torch")),
        fmt_ms(med.get("torch fused")),
        ratio,
        check,
        DESIGN_TORCH_MS.get(name, "—"),
    ]
    profile = None
    if not args.no_profile:
        settle()
        step = steps["gpucore"]
        n = args.profile_steps
        with gpucore.profiler() as p:
            t = time.perf_counter()
            for _ in range(n):
                step()
            wall = (time.perf_counter() - t) / n
        profile = (title, p, n, wall, med["gpucore"])
    return row, profile


def print_profile(title: str, p, steps: int, wall: float, median: float) -> None:
    """Per-step averages over the ``steps`` profiled steps."""
    rows = p.summary()  # (op, backend, calls, cpu_ms, gpu_ms, dispatches), by total time
    in_ops = sum(r[3] for r in rows) / steps
    calls = sum(r[2] for r in rows) // steps
    print(f"\n#### {title}\n")
    rest = max(0.0, wall * 1e3 - in_ops)
    print(
        f"Profiled step (mean of {steps}): {wall * 1e3:.2f} ms (timed median "
        f"{median * 1e3:.2f} ms); its {calls} op calls take {in_ops:.2f} ms, the other "
        f"{rest:.2f} ms is Python, autograd and allocation outside the ops.\n"
    )
    out = []
    for op, be, n, cpu_ms, _gpu, _nd in rows:
        ms = cpu_ms / steps
        share = ms / (wall * 1e3) if wall > 0 else 0.0
        out.append([op, be, str(n // steps), f"{ms:.3f}", f"{share:.0%}"])
    print(table(["op", "backend", "calls per step", "ms per step", "share of step"], out, left=2))


def main(argv=None) -> int:
    global torch
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds (a smoke run)")
    ap.add_argument("--only", action="append", choices=list(CASES), help="run only this case")
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch columns")
    ap.add_argument("--no-profile", action="store_true", help="leave out the gpucore profile")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument(
        "--cpu-time",
        action="store_true",
        help="time each step by this thread's CPU time (with --threads 1 and "
        "GPUCORE_NUM_THREADS=1: both libraries on one thread, robust to a shared machine)",
    )
    ap.add_argument("--warmup", type=int, help="untimed steps per library (default 10, quick 3)")
    ap.add_argument("--rounds", type=int, help="blocks per library (default 3, quick 2)")
    ap.add_argument("--steps", type=int, help="timed steps per block (default 30, quick 8)")
    ap.add_argument("--profile-steps", type=int, help="profiled steps (default 5, quick 2)")
    ap.add_argument(
        "--transfers", action="store_true", help="also bytes per step under 'auto' (transfers.py)"
    )
    ap.add_argument(
        "--replay", action="store_true", help="also eager vs replayed steps (replay.py)"
    )
    args = ap.parse_args(argv)
    args.warmup = args.warmup or (3 if args.quick else 10)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.steps = args.steps or (8 if args.quick else 30)
    args.profile_steps = args.profile_steps or (2 if args.quick else 5)
    if args.no_torch:
        torch = None
    if torch is not None:
        torch.set_num_threads(args.threads)
    if args.cpu_time:
        CLOCK[0] = time.thread_time

    unset = os.environ.get(REEXEC_MARK)
    print(f"## gpucore training step vs PyTorch, CPU{' (--quick)' if args.quick else ''}\n")
    print(
        f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )
    print(
        f"- gpucore {gpucore.__version__} ({os.path.dirname(gpucore.__file__)}), "
        f"GPUCORE_DEVICE=cpu (policy {gpucore.get_device_policy()})"
    )
    if torch is not None:
        print(
            f"- torch {torch.__version__}, torch.set_num_threads({args.threads}) -> "
            f"{torch.get_num_threads()} thread(s)"
        )
    if args.cpu_time:
        print(
            "- steps timed by the calling thread's CPU time (--cpu-time; gpucore threads: "
            f"{gpucore._cpu.info()['threads']}): work on other threads is not counted"
        )
    if torch is None:
        print("- torch: not importable (or --no-torch), its columns are left out")
    print(
        f"- numpy {np.__version__}; "
        + (
            f"re-executed with {unset} unset"
            if unset
            else "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE not set"
        )
    )
    print(
        f"- {time.strftime('%Y-%m-%d %H:%M:%S')}; Adam lr 1e-3, cross-entropy, random data; "
        f"median of {args.rounds} rounds x {args.steps} steps per library after "
        f"{args.warmup} warm-up steps"
    )
    probe = CpuShare()
    time.sleep(0.5)
    print(load_note(probe.others(), "in the 0.5 s before the run"))

    share = CpuShare()
    t0 = time.perf_counter()
    rows, profiles = [], []
    for name in args.only or list(CASES):
        row, prof = run_case(name, args)
        rows.append(row)
        if prof is not None:
            profiles.append(prof)
    print("\n### ms per training step (median; lower is better)\n")
    print(
        table(
            [
                "case",
                "gpucore",
                "torch",
                "torch fused Adam",
                "gpucore / best torch",
                "check",
                "DESIGN.md torch",
            ],
            rows,
        )
    )
    print(
        "\n`check`: the first three losses of gpucore and torch (default Adam) from the same "
        "weights agree to 1e-4 relative."
    )
    print(f"\nTotal {time.perf_counter() - t0:.0f} s.")
    print(load_note(share.others(), "during the run"))
    if profiles:
        print("\n### Where a gpucore step spends its time (gpucore.profiler())")
        for prof in profiles:
            print_profile(*prof)
    if args.transfers:  # device rows: each residency setting in its own process
        import transfers

        print()
        sys.stdout.flush()
        transfers.main([a for n in (args.only or []) for a in ("--only", n)])
    if args.replay:  # device rows (replay.py runs every op under device_policy('vulkan'))
        import replay

        print()
        replay.main([a for n in (args.only or []) if n in replay.CASES for a in ("--only", n)])
    return 1 if any(r[5].startswith("MISMATCH") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
