"""The main demo: a small CNN (or MLP) learns scikit-learn's 8x8 handwritten digits.

    python -m gpucore.examples.digits [--model cnn|mlp] [--device auto|cpu|vulkan]
                                      [--epochs N] [--batch-size B] [--lr LR] [--seed S] [--out DIR]

The 1797 images ship inside scikit-learn (``sklearn.datasets.load_digits``, no download); 20% are
held out for testing (the split depends only on --seed). The script trains with Adam and a cosine
learning-rate schedule, shows a progress bar per epoch (tqdm when installed, else a plain text
bar), prints which backend ran the large and the small ops of one training step, saves a
checkpoint (model + optimizer state + epoch) with ``gpucore.save``, reloads it into a fresh model
and checks that its predictions are identical, and writes a training-curve PNG when matplotlib is
installed. Install the extras with ``pip install gpucore[examples]``; ``tools/demo.sh`` does.

``train()`` is the reusable part (tests call it with fewer epochs).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import gpucore as gc
import gpucore.nn as nn

# Per model: default epochs, batch size, learning rate, and the test accuracy it must reach.
DEFAULTS = {
    "cnn": {"epochs": 8, "batch_size": 32, "lr": 3e-3, "target": 0.97},
    "mlp": {"epochs": 15, "batch_size": 32, "lr": 3e-3, "target": 0.95},
}
TEST_FRACTION = 0.2


# --------------------------------------------------------------------------------------------
# data and models


def load_data(seed: int = 0, test_fraction: float = TEST_FRACTION):
    """The digits as float32 (N, 1, 8, 8) images standardised with the training set's mean and
    std, int64 labels, split into (x_train, y_train, x_test, y_test) numpy arrays by a
    permutation drawn from ``seed``."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError(
            "the digits demo needs scikit-learn (it ships the dataset): "
            "pip install 'gpucore[examples]' or pip install scikit-learn"
        ) from None
    digits = load_digits()
    x = digits.images.astype(np.float32)[:, None]  # (1797, 1, 8, 8), values 0..16
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(), x[train].std()
    x = (x - mean) / std
    return x[train], y[train], x[test], y[test]


def build_model(kind: str = "cnn") -> nn.Module:
    """The demo's models; parameters are drawn from gpucore's generator (seed it first)."""
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),  # 16 x 8 x 8
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),  # 32 x 8 x 8
            nn.ReLU(),
            nn.MaxPool2d(2),  # 32 x 4 x 4
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 10),
        )
    if kind == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(64, 128),
            nn.ReLU(),
            nn.Linear(128, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )
    raise ValueError(f"build_model: kind must be 'cnn' or 'mlp', got {kind!r}")


def predict(model: nn.Module, x: np.ndarray) -> np.ndarray:
    """Logits for the images ``x`` as a float32 numpy array (eval mode, no autograd)."""
    model.eval()
    with gc.no_grad():
        return model(gc.from_numpy(np.ascontiguousarray(x))).numpy().copy()


# --------------------------------------------------------------------------------------------
# progress bar


class _TextBar:
    """The part of tqdm's interface the demo uses, as a one-line text bar (on a terminal it
    redraws in place; otherwise it prints the finished line once)."""

    def __init__(self, total: int, desc: str, file=None, width: int = 24):
        self.total, self.desc, self.n, self.width = total, desc, 0, width
        self.file = file or sys.stderr
        self.postfix = ""
        self.start = time.perf_counter()
        self.tty = hasattr(self.file, "isatty") and self.file.isatty()
        self._last = 0.0
        self._width = 0

    def _line(self) -> str:
        done = int(self.width * self.n / max(self.total, 1))
        bar = "#" * done + "." * (self.width - done)
        secs = time.perf_counter() - self.start
        return f"{self.desc} [{bar}] {self.n}/{self.total} {secs:4.1f}s {self.postfix}"

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if self.tty and (now - self._last > 0.1 or self.n >= self.total):
            self._last = now
            self._draw(self._line())

    def _draw(self, line: str) -> None:
        # pad over the end of a longer previous line
        self.file.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.file.flush()

    def set_postfix_str(self, s: str, refresh: bool = True) -> None:
        self.postfix = s

    def close(self) -> None:
        if self.tty:
            self._draw(self._line())
        else:
            self.file.write(self._line())
        self.file.write("\n")
        self.file.flush()


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _TextBar(total, desc)
    return tqdm(total=total, desc=desc, leave=True, dynamic_ncols=True)


# --------------------------------------------------------------------------------------------
# training


@dataclass
class TrainResult:
    model: nn.Module
    optimizer: gc.optim.Optimizer
    kind: str
    epochs: int
    test_accuracy: float
    seconds: float  # training time, evaluation included
    steps: int
    history: list = field(default_factory=list)  # per epoch: loss, train_acc, test_acc, lr
    trace: list = field(default_factory=list)  # trace_ops records of the second training step
    data: tuple = ()  # (x_train, y_train, x_test, y_test)


def _enter_device(device: str):
    if device not in ("auto", "cpu", "vulkan"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'vulkan', got {device!r}")
    return gc.device_policy(device)


def train(
    kind: str = "cnn",
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int = 0,
    device: str = "auto",
    progress: bool = True,
    distributed: bool = False,
) -> TrainResult:
    """Train a fresh ``kind`` model on the digits; returns the model, its optimizer, the test
    accuracy after the last epoch and the per-epoch history. Deterministic for a given seed on
    a given backend.

    ``distributed``: data-parallel over the ranks of the initialized process group (launched
    with ``mpirun``): every rank takes its share of each batch of ``batch_size`` and
    DistributedDataParallel averages the gradients, so the model trains as one process would."""
    d = DEFAULTS[kind] if kind in DEFAULTS else None
    if d is None:
        raise ValueError(f"train: kind must be 'cnn' or 'mlp', got {kind!r}")
    epochs = d["epochs"] if epochs is None else epochs
    batch_size = d["batch_size"] if batch_size is None else batch_size
    lr = d["lr"] if lr is None else lr
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise ValueError("train: epochs and batch_size must be >= 1 and lr > 0")

    x_train, y_train, x_test, y_test = load_data(seed)
    with _enter_device(device):
        gc.manual_seed(seed)
        model = build_model(kind)
        if device == "vulkan":
            model.to("vulkan")
        rank, world, net = 0, 1, model
        if distributed:
            # gpucore.distributed is only needed for --distributed
            from .. import distributed as dist  # noqa: PLC0415
            from ..nn.parallel import DistributedDataParallel  # noqa: PLC0415

            rank, world = dist.get_rank(), dist.get_world_size()
            net = DistributedDataParallel(model)
            progress = progress and rank == 0
        opt = gc.optim.Adam(model.parameters(), lr=lr)
        sched = gc.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
        loss_fn = nn.CrossEntropyLoss()
        shuffle = np.random.default_rng(seed + 1)
        n = len(x_train)
        per_epoch = math.ceil(n / batch_size)
        history, trace, steps = [], [], 0
        trace_step = 1 if per_epoch * epochs > 1 else 0  # step 0 also creates the Adam state
        t0 = time.perf_counter()
        for epoch in range(1, epochs + 1):
            model.train()
            order = shuffle.permutation(n)
            bar = _progress(per_epoch, f"epoch {epoch:2d}/{epochs}", progress)
            loss_sum, correct, seen = 0.0, 0, 0
            for i in range(0, n, batch_size):
                idx = order[i : i + batch_size]
                if world > 1:
                    if len(idx) < world:  # a last batch too small to share: every rank skips it
                        continue
                    idx = np.array_split(idx, world)[rank]
                xb = gc.from_numpy(x_train[idx])
                yb = gc.from_numpy(y_train[idx])
                if steps == trace_step:  # which backend runs each op of one whole step
                    with gc.dispatch.trace_ops() as trace:
                        logits, loss = _step(net, opt, loss_fn, xb, yb)
                else:
                    logits, loss = _step(net, opt, loss_fn, xb, yb)
                steps += 1
                with gc.no_grad():
                    hits = (logits.argmax(1) == yb).sum().item()
                loss_sum += loss.item() * len(idx)
                correct += hits
                seen += len(idx)
                if bar is not None:
                    bar.set_postfix_str(
                        f"loss {loss_sum / seen:.4f}  acc {correct / seen:.3f}", refresh=False
                    )
                    bar.update(1)
            if world > 1:  # the epoch's loss and accuracy over every rank's share
                totals = gc.tensor([loss_sum, float(correct), float(seen)], dtype=gc.float64)
                dist.all_reduce(totals)
                loss_sum, correct, seen = totals.tolist()
            cur_lr = opt.param_groups[0]["lr"]
            sched.step()
            test_acc = float((predict(model, x_test).argmax(1) == y_test).mean())
            history.append(
                {
                    "epoch": epoch,
                    "loss": loss_sum / seen,
                    "train_acc": correct / seen,
                    "test_acc": test_acc,
                    "lr": cur_lr,
                }
            )
            if bar is not None:
                bar.set_postfix_str(
                    f"loss {loss_sum / seen:.4f}  acc {correct / seen:.3f}  test acc {test_acc:.3f}"
                )
                bar.close()
        seconds = time.perf_counter() - t0
    return TrainResult(
        model,
        opt,
        kind,
        epochs,
        history[-1]["test_acc"],
        seconds,
        steps,
        history,
        trace,
        (x_train, y_train, x_test, y_test),
    )


def _step(model, opt, loss_fn, xb, yb):
    logits = model(xb)
    loss = loss_fn(logits, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return logits, loss


# --------------------------------------------------------------------------------------------
# checkpoint, report, plot


def save_checkpoint(result: TrainResult, path: str) -> None:
    """Model and optimizer state, epoch and model kind in one safetensors file."""
    gc.save(
        {
            "kind": result.kind,
            "epoch": result.epochs,
            "model": result.model.state_dict(),
            "optimizer": result.optimizer.state_dict(),
            "test_accuracy": result.test_accuracy,
        },
        path,
    )


def load_checkpoint(path: str, device: str = "auto"):
    """A fresh model and Adam optimizer with the checkpoint's state, and the checkpoint dict."""
    ckpt = gc.load(path)
    with _enter_device(device):
        model = build_model(ckpt["kind"])
        model.load_state_dict(ckpt["model"])
        if device == "vulkan":
            model.to("vulkan")
        opt = gc.optim.Adam(model.parameters())
        opt.load_state_dict(ckpt["optimizer"])
    return model, opt, ckpt


def check_round_trip(result: TrainResult, path: str, device: str = "auto") -> tuple[bool, int]:
    """Save, reload into a fresh model, and compare test-set logits bit for bit.
    Returns (identical, number of test images)."""
    save_checkpoint(result, path)
    x_test = result.data[2]
    with _enter_device(device):
        before = predict(result.model, x_test)
        model, _, _ = load_checkpoint(path, device)
        after = predict(model, x_test)
    return bool(np.array_equal(before, after)), len(x_test)


def backend_report(trace: list, threshold: int | None = None) -> str:
    """Which backend ran each op of one training step, and a line for large and small ops."""
    threshold = gc.dispatch.get_threshold() if threshold is None else threshold
    calls = collections.Counter((op, be) for op, be, _ in trace)
    largest: dict = {}
    for op, be, shape in trace:
        numel = math.prod(shape)
        if numel >= largest.get((op, be), (-1, ()))[0]:
            largest[(op, be)] = (numel, shape)
    lines = [
        f"  {'op':24s} {'backend':8s} {'calls':>5s}  largest output",
        f"  {'-' * 24} {'-' * 8} {'-' * 5}  {'-' * 22}",
    ]
    for (op, be), c in sorted(calls.items(), key=lambda kv: (-largest[kv[0]][0], kv[0])):
        numel, shape = largest[(op, be)]
        dims = "x".join(map(str, shape)) or "scalar"
        lines.append(f"  {op:24s} {be:8s} {c:5d}  {numel:>8d} ({dims})")
    big = collections.Counter(be for _, be, s in trace if math.prod(s) >= threshold)
    small = collections.Counter(be for _, be, s in trace if math.prod(s) < threshold)

    def fmt(c):
        return ", ".join(f"{n} on {be}" for be, n in sorted(c.items())) or "none"

    lines.append(f"  large ops (output >= {threshold} elements): {fmt(big)}")
    lines.append(f"  small ops (output <  {threshold} elements): {fmt(small)}")
    return "\n".join(lines)


def plot_history(history: list, path: str, title: str) -> bool:
    """Loss and accuracy per epoch as a PNG; False (silently) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ep = [h["epoch"] for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    a1.plot(ep, [h["loss"] for h in history], "o-")
    a1.set_xlabel("epoch")
    a1.set_ylabel("training loss")
    a1.set_yscale("log")
    a2.plot(ep, [h["train_acc"] for h in history], "o-", label="train")
    a2.plot(ep, [h["test_acc"] for h in history], "s-", label="test")
    a2.set_xlabel("epoch")
    a2.set_ylabel("accuracy")
    a2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _where_ops_run(device: str) -> str:
    if device == "cpu":
        return "every op in the C extension (--device cpu)"
    if gc.vulkan.is_available() or device == "vulkan":
        dev = gc.vulkan.current_device() if device == "auto" else None
        name = dev.get("name", "?") if dev else "the Vulkan device"
        if device == "vulkan":
            return "every op with a shader on the Vulkan device (--device vulkan)"
        return (
            f"ops with >= {gc.dispatch.get_threshold()} elements on {name}, "
            "smaller ones in the C extension"
        )
    why = gc.vulkan.unavailable_reason() or "no usable Vulkan device"
    return f"everything in the C extension ({why.split(';')[0]})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gpucore.examples.digits",
        description="Train a small CNN or MLP on scikit-learn's 8x8 digits with gpucore.",
    )
    ap.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    ap.add_argument(
        "--device",
        choices=("auto", "cpu", "vulkan"),
        default="auto",
        help="auto: big ops on a GPU when there is one (default)",
    )
    ap.add_argument("--epochs", type=int, help="default: 8 (cnn), 15 (mlp)")
    ap.add_argument("--batch-size", type=int, help="default: 32")
    ap.add_argument("--lr", type=float, help="Adam learning rate, cosine-annealed (default 3e-3)")
    ap.add_argument("--seed", type=int, default=0, help="data split, init and shuffling")
    ap.add_argument("--out", default="digits_out", help="folder for checkpoint and curve")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel over MPI: mpirun -np N python -m gpucore.examples.digits "
        "--distributed (rank 0 prints, checkpoints and draws)",
    )
    args = ap.parse_args(argv)
    if args.distributed:
        return _main_distributed(args)
    return _run(args)


def _run(args) -> int:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print(
            "this demo needs scikit-learn (it ships the digits): pip install 'gpucore[examples]'",
            file=sys.stderr,
        )
        return 2
    if args.device == "vulkan" and not gc.dispatch.vulkan_backend(allow_cpu=True):
        print(f"--device vulkan: {gc.vulkan.unavailable_reason()}", file=sys.stderr)
        return 2

    d = DEFAULTS[args.model]
    print(
        f"gpucore {gc.__version__}: {args.model.upper()} on the 8x8 digits "
        f"(1797 images, {TEST_FRACTION:.0%} held out, seed {args.seed})"
    )
    print(f"backend: {_where_ops_run(args.device)}")
    res = train(
        args.model,
        args.epochs,
        args.batch_size,
        args.lr,
        args.seed,
        args.device,
        progress=not args.no_progress,
        distributed=getattr(args, "rank", None) is not None,
    )
    ms = res.seconds / res.steps * 1e3
    ok = res.test_accuracy >= d["target"]
    epochs = f"{res.epochs} epoch" + ("s" if res.epochs > 1 else "")
    verdict = "reached" if ok else "NOT reached"
    print(
        f"\ntest accuracy {res.test_accuracy:.2%} after {epochs} "
        f"(target {d['target']:.0%}: {verdict}); "
        f"trained in {res.seconds:.1f} s, {res.steps} steps, {ms:.1f} ms per step"
    )

    print("\nops of one training step (forward + backward + Adam update):")
    print(backend_report(res.trace))
    if getattr(args, "rank", 0) != 0:
        return 0

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, f"digits_{args.model}.safetensors")
    same, n_test = check_round_trip(res, ckpt, args.device)
    print(
        f"\ncheckpoint: {ckpt} ({os.path.getsize(ckpt) / 1024:.0f} KiB: model + Adam state + "
        f"epoch {res.epochs})"
    )
    if same:
        print(
            f"reloaded into a fresh model: predictions identical on all {n_test} test images "
            "(logits bit-exact)"
        )
    else:
        print(
            "reloaded into a fresh model: predictions DIFFER from the trained model's",
            file=sys.stderr,
        )
    png = os.path.join(args.out, f"digits_{args.model}_curve.png")
    if plot_history(res.history, png, f"gpucore {args.model.upper()} on 8x8 digits"):
        print(f"training curve: {png}")
    return 0 if same else 1


def _main_distributed(args) -> int:
    # gpucore.distributed is only needed for --distributed
    from .. import distributed as dist  # noqa: PLC0415

    dist.init_process_group()
    args.rank = dist.get_rank()
    if args.rank == 0:
        print(f"data-parallel on {dist.get_world_size()} ranks (MPI); rank 0 reports")
    # rank 0 alone prints, checkpoints and draws: the others train silently
    out = sys.stdout
    if args.rank != 0:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - restored below
    try:
        code = _run(args)
    finally:
        if sys.stdout is not out:
            sys.stdout.close()
            sys.stdout = out
    dist.destroy_process_group()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
