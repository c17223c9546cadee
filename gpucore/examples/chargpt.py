"""The second demo: a small character-level GPT learns to write Python, trained on the Python
standard library's own source files.

    python -m gpucore.examples.chargpt [--steps N] [--batch-size B] [--context T] [--layers L]
                                       [--d-model D] [--heads H] [--lr LR] [--corpus-mb MB]
                                       [--device auto|cpu|vulkan] [--seed S] [--out DIR]
                                       [--sample-chars N] [--temperature T] [--top-k K]

The corpus is offline: the ``.py`` files under ``sysconfig.get_paths()['stdlib']`` (its test
suite and GUI packages left out), read in sorted order up to --corpus-mb megabytes; the last 10%
is held out for validation. Characters outside printable ASCII become '?' (tabs four spaces),
a vocabulary of 96.

The model: token and position embeddings, pre-norm transformer blocks (LayerNorm ->
causal self-attention through ``F.scaled_dot_product_attention(..., is_causal=True)``, the fused
kernels; LayerNorm -> GELU MLP; residuals), a final LayerNorm and an output layer tied to the
token embedding. AdamW with warm-up and cosine decay, gradient clipping at 1. The script shows a
progress bar (tqdm when installed), estimates the validation loss every --eval-every steps,
checks it reaches TARGET_VAL_LOSS, saves a checkpoint (config, vocabulary, model and optimizer
state) with ``gpucore.save``, reloads it into a fresh model and checks the logits are identical,
writes the loss curve as a PNG (matplotlib's plot when installed, else a plain drawing of the
curves), and samples text (multinomial over the softmax at a
temperature, restricted to the top-k characters).

``train()`` is the reusable part (tests call it with a tiny configuration).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field

import numpy as np

import gpucore as gc
import gpucore.nn as nn
import gpucore.nn.functional as F

from .digits import _enter_device, _progress

# printable ASCII and newline: every other character is mapped to '?'
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
_UNKNOWN = VOCAB.index("?")
_SKIP = {"test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3", "site-packages"}
# The validation loss (nats per character) the default run must reach. Measured on the 2-core
# AVX2 machine (seed 0, the defaults below): 4.41 at the start, 2.45 / 2.10 / 1.91 / 1.86 after
# 100 / 300 / 500 / 600 steps (training loss 1.57); a step takes ~0.55 s of CPU time on one
# thread, so 600 steps are a few minutes on two idle cores (25 min on the shared machine here).
TARGET_VAL_LOSS = 2.0


@dataclass
class Config:
    layers: int = 4
    d_model: int = 128
    heads: int = 4
    context: int = 64
    batch_size: int = 32
    steps: int = 600
    lr: float = 3e-3
    weight_decay: float = 0.1
    warmup: int = 100
    corpus_mb: float = 2.0
    eval_every: int = 100
    eval_batches: int = 20
    seed: int = 0


# --------------------------------------------------------------------------------------------
# data


def corpus_files(root: str | None = None) -> list[str]:
    """The standard library's .py files in sorted order (its test suites, GUI and vendored
    packages left out, at any depth)."""
    root = root or sysconfig.get_paths()["stdlib"]
    out = []
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and d != "__pycache__")
        out += [os.path.join(base, f) for f in files if f.endswith(".py")]
    return sorted(out)


def load_corpus(max_mb: float = 2.0, root: str | None = None) -> np.ndarray:
    """The corpus as uint8 token ids (indices into VOCAB), at most ``max_mb`` MB of text."""
    limit = int(max_mb * 1e6)
    table = np.full(256, _UNKNOWN, np.uint8)
    for i, ch in enumerate(VOCAB):
        table[ord(ch)] = i
    chunks, size = [], 0
    for path in corpus_files(root):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read().replace("\t", "    ")
        except OSError:
            continue
        raw = np.frombuffer(text.encode("ascii", errors="replace"), np.uint8)
        chunks.append(table[raw[: limit - size]])
        size += len(chunks[-1])
        if size >= limit:
            break
    if not chunks:
        raise RuntimeError("chargpt: no Python source files found under the standard library")
    return np.concatenate(chunks)


def split(data: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    n = int(len(data) * (1 - val_fraction))
    return data[:n], data[n:]


def encode(text: str) -> list[int]:
    return [VOCAB.index(c) if c in VOCAB else _UNKNOWN for c in text]


def decode(ids) -> str:
    return "".join(VOCAB[int(i)] for i in ids)


def get_batch(data: np.ndarray, batch: int, context: int, rng) -> tuple[gc.Tensor, gc.Tensor]:
    """Random windows of ``context`` characters (x) and the same shifted by one (y), int64."""
    start = rng.integers(0, len(data) - context - 1, batch)
    idx = start[:, None] + np.arange(context + 1)[None, :]
    win = data[idx].astype(np.int64)
    return gc.from_numpy(np.ascontiguousarray(win[:, :-1])), gc.from_numpy(
        np.ascontiguousarray(win[:, 1:])
    )


# --------------------------------------------------------------------------------------------
# the model


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        if d % heads:
            raise ValueError(f"d_model {d} must be a multiple of heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: gc.Tensor) -> gc.Tensor:
        b, t, d = x.shape
        h = self.heads
        # one projection split into q, k, v (their gradients meet in one cat), each viewed as
        # [B, H, T, hd]
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in self.qkv(x).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.out = nn.Linear(4 * d, d)

    def forward(self, x: gc.Tensor) -> gc.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(self.act(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token + position embeddings, ``layers`` pre-norm blocks, a final LayerNorm, and logits
    from the token embedding itself (weight tying)."""

    def __init__(self, vocab: int, context: int, layers: int, d: int, heads: int):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        # GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                std = (
                    0.02 / math.sqrt(2 * layers)
                    if name.endswith(("proj.weight", "out.weight"))
                    else 0.02
                )
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx: gc.Tensor) -> gc.Tensor:
        t = idx.shape[1]
        if t > self.context:
            raise ValueError(f"GPT: sequence of {t} tokens exceeds the context {self.context}")
        pos = gc.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.tok.weight)  # tied output layer


def build_model(cfg: Config) -> GPT:
    return GPT(len(VOCAB), cfg.context, cfg.layers, cfg.d_model, cfg.heads)


def loss_of(model: GPT, x: gc.Tensor, y: gc.Tensor) -> gc.Tensor:
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def estimate_loss(model: GPT, data: np.ndarray, cfg: Config, batches: int) -> float:
    """Mean loss over ``batches`` fixed random batches of ``data`` (eval mode, no autograd)."""
    rng = np.random.default_rng(12345)
    model.eval()
    with gc.no_grad():
        tot = sum(
            loss_of(model, *get_batch(data, cfg.batch_size, cfg.context, rng)).item()
            for _ in range(batches)
        )
    model.train()
    return tot / batches


# --------------------------------------------------------------------------------------------
# training


@dataclass
class TrainResult:
    model: GPT
    optimizer: gc.optim.Optimizer
    config: Config
    val_loss: float
    seconds: float
    steps: int
    history: list = field(default_factory=list)  # (step, train loss (mean since last), val loss)
    data: tuple = ()  # (train ids, val ids)


def _lr_factor(step: int, cfg: Config) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def train(cfg: Config | None = None, device: str = "auto", progress: bool = True) -> TrainResult:
    """Train a fresh GPT on the corpus; returns the model, its optimizer, the final validation
    loss and the history. Deterministic for a given config on a given backend."""
    cfg = cfg or Config()
    train_ids, val_ids = split(load_corpus(cfg.corpus_mb))
    rng = np.random.default_rng(cfg.seed)
    with _enter_device(device):
        gc.manual_seed(cfg.seed)
        model = build_model(cfg)
        if device == "vulkan":
            model.to("vulkan")
        decay = [p for p in model.parameters() if p.ndim >= 2]
        rest = [p for p in model.parameters() if p.ndim < 2]
        opt = gc.optim.AdamW(
            [
                {"params": decay, "weight_decay": cfg.weight_decay},
                {"params": rest, "weight_decay": 0.0},
            ],
            lr=cfg.lr,
            betas=(0.9, 0.95),
        )
        sched = gc.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, cfg))
        history = [(0, float("nan"), estimate_loss(model, val_ids, cfg, cfg.eval_batches))]
        bar = _progress(cfg.steps, "training", progress)
        run_loss, run_n = 0.0, 0
        t0 = time.perf_counter()
        for step in range(1, cfg.steps + 1):
            x, y = get_batch(train_ids, cfg.batch_size, cfg.context, rng)
            loss = loss_of(model, x, y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            run_loss += loss.item()
            run_n += 1
            if step % cfg.eval_every == 0 or step == cfg.steps:
                val = estimate_loss(model, val_ids, cfg, cfg.eval_batches)
                history.append((step, run_loss / run_n, val))
                run_loss, run_n = 0.0, 0
            if bar is not None:
                last = history[-1]
                bar.set_postfix_str(f"loss {loss.item():.3f}  val {last[2]:.3f}", refresh=False)
                bar.update(1)
        seconds = time.perf_counter() - t0
        if bar is not None:
            bar.close()
    return TrainResult(
        model, opt, cfg, history[-1][2], seconds, cfg.steps, history, (train_ids, val_ids)
    )


# --------------------------------------------------------------------------------------------
# sampling, checkpoint, plot


def sample(
    model: GPT,
    prompt: str = "\n",
    chars: int = 300,
    temperature: float = 0.8,
    top_k: int | None = 20,
    seed: int = 0,
) -> str:
    """``chars`` characters continuing ``prompt``: softmax of the last logits at
    ``temperature``, restricted to the ``top_k`` most likely characters, sampled with
    gpucore.multinomial (gpucore's generator, seeded with ``seed``)."""
    if not temperature > 0:
        raise ValueError(f"sample: temperature must be > 0, got {temperature}")
    gc.manual_seed(seed)
    ids = encode(prompt) or [0]
    dev = next(iter(model.parameters())).device
    model.eval()
    with gc.no_grad():
        for _ in range(chars):
            ctx = gc.tensor([ids[-model.context :]], dtype=gc.int64, device=dev)
            logits = model(ctx)[0, -1] / temperature
            if top_k is not None and top_k < logits.shape[0]:
                kth = gc.topk(logits, top_k)[0][-1]
                logits = gc.where(logits < kth, float("-inf"), logits)
            probs = F.softmax(logits, dim=-1)
            ids.append(int(gc.multinomial(probs, 1).item()))
    model.train()
    return decode(ids[len(encode(prompt)) :] if prompt else ids)


def save_checkpoint(result: TrainResult, path: str) -> None:
    """Config, vocabulary, model and optimizer state, step and validation loss in one file."""
    gc.save(
        {
            "config": asdict(result.config),
            "vocab": VOCAB,
            "step": result.steps,
            "val_loss": result.val_loss,
            "model": result.model.state_dict(),
            "optimizer": result.optimizer.state_dict(),
        },
        path,
    )


def load_checkpoint(path: str, device: str = "auto"):
    """A fresh GPT and AdamW with the checkpoint's state, and the checkpoint dict."""
    ckpt = gc.load(path)
    if ckpt["vocab"] != VOCAB:
        raise ValueError("chargpt: the checkpoint's vocabulary differs from this version's")
    cfg = Config(**ckpt["config"])
    with _enter_device(device):
        model = build_model(cfg)
        model.load_state_dict(ckpt["model"])
        if device == "vulkan":
            model.to("vulkan")
        decay = [p for p in model.parameters() if p.ndim >= 2]
        rest = [p for p in model.parameters() if p.ndim < 2]
        opt = gc.optim.AdamW([{"params": decay}, {"params": rest}], lr=cfg.lr)
        opt.load_state_dict(ckpt["optimizer"])
    return model, opt, ckpt


def check_round_trip(result: TrainResult, path: str, device: str = "auto") -> bool:
    """Save, reload into a fresh model, and compare logits on validation windows bit for bit."""
    save_checkpoint(result, path)
    x, _ = get_batch(result.data[1], 4, result.config.context, np.random.default_rng(1))
    with _enter_device(device):
        result.model.eval()
        with gc.no_grad():
            before = result.model(x).numpy().copy()
        model, _, _ = load_checkpoint(path, device)
        model.eval()
        with gc.no_grad():
            after = model(x).numpy().copy()
        result.model.train()
    return bool(np.array_equal(before, after))


def _png(path: str, rgb: np.ndarray) -> None:
    """rgb (H, W, 3) uint8 written as a PNG (zlib and the PNG chunk layout, no dependencies)."""
    import struct  # noqa: PLC0415
    import zlib  # noqa: PLC0415

    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw.tobytes(), 9)))
        f.write(chunk(b"IEND", b""))


def _plot_plain(history: list, path: str, target: float | None) -> None:
    """The loss curves without matplotlib: train (blue) and validation (orange) polylines over
    the steps, the target as a grey line, in a plain frame (no text)."""
    w, h, m = 480, 320, 20
    img = np.full((h, w, 3), 255, np.uint8)
    img[m, m : w - m] = img[h - m, m : w - m] = img[m : h - m, m] = img[m : h - m, w - m] = 0
    curves = [
        ([(s, t) for s, t, _ in history if not math.isnan(t)], (31, 119, 180)),
        ([(s, v) for s, _, v in history], (255, 127, 14)),
    ]
    ys = [y for pts, _ in curves for _, y in pts] + ([target] if target is not None else [])
    lo, hi = min(ys) - 0.05, max(ys) + 0.05
    x_hi = max(1, max(s for s, _, _ in history))

    def px(step, y):
        return m + (w - 2 * m) * step / x_hi, h - m - (h - 2 * m) * (y - lo) / (hi - lo)

    if target is not None:
        ty = int(round(px(0, target)[1]))
        img[ty, m : w - m : 6] = img[ty, m + 1 : w - m : 6] = (128, 128, 128)
    for pts, color in curves:
        for (s0, y0), (s1, y1) in zip(pts, pts[1:]):
            (x0, v0), (x1, v1) = px(s0, y0), px(s1, y1)
            for t in np.linspace(0.0, 1.0, 200):
                x, y = int(round(x0 + t * (x1 - x0))), int(round(v0 + t * (v1 - v0)))
                img[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2] = color
    _png(path, img)


def plot_history(history: list, path: str, title: str, target: float | None = None) -> bool:
    """Training and validation loss per step as a PNG (matplotlib's, with axes and labels, when
    it is installed; else a plain drawing of the curves). False when there is nothing to draw."""
    if len(history) < 2:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _plot_plain(history, path, target)
        return True
    fig, ax = plt.subplots(figsize=(6, 3.8))
    tr = [(s, t) for s, t, _ in history if not math.isnan(t)]
    ax.plot([s for s, _ in tr], [t for _, t in tr], "o-", label="train (mean since last)")
    ax.plot([s for s, _, _ in history], [v for _, _, v in history], "s-", label="validation")
    if target is not None:
        ax.axhline(target, color="gray", ls="--", lw=1, label=f"target {target}")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / character)")
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    d = Config()
    ap = argparse.ArgumentParser(
        prog="python -m gpucore.examples.chargpt",
        description="Train a small character-level GPT on the Python standard library's source.",
    )
    ap.add_argument("--steps", type=int, default=d.steps)
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--context", type=int, default=d.context, help="characters per window")
    ap.add_argument("--layers", type=int, default=d.layers)
    ap.add_argument("--d-model", type=int, default=d.d_model)
    ap.add_argument("--heads", type=int, default=d.heads)
    ap.add_argument("--lr", type=float, default=d.lr, help="AdamW peak learning rate")
    ap.add_argument("--corpus-mb", type=float, default=d.corpus_mb, help="MB of source to read")
    ap.add_argument("--eval-every", type=int, default=d.eval_every)
    ap.add_argument("--device", choices=("auto", "cpu", "vulkan"), default="auto")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--out", default="chargpt_out", help="folder for checkpoint and curve")
    ap.add_argument("--sample-chars", type=int, default=400)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--prompt", default="def ")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.device == "vulkan" and not gc.dispatch.vulkan_backend(allow_cpu=True):
        print(f"--device vulkan: {gc.vulkan.unavailable_reason()}", file=sys.stderr)
        return 2
    cfg = Config(
        layers=args.layers,
        d_model=args.d_model,
        heads=args.heads,
        context=args.context,
        batch_size=args.batch_size,
        steps=args.steps,
        lr=args.lr,
        corpus_mb=args.corpus_mb,
        eval_every=args.eval_every,
        seed=args.seed,
    )
    n_params = sum(p.numel() for p in build_model(cfg).parameters())
    print(
        f"gpucore {gc.__version__}: a character-level GPT ({cfg.layers} layers, d {cfg.d_model}, "
        f"{cfg.heads} heads, context {cfg.context}, {n_params / 1e6:.2f} M parameters) on "
        f"{cfg.corpus_mb:g} MB of the standard library's Python source"
    )
    res = train(cfg, args.device, progress=not args.no_progress)
    print("\n  step  train loss  val loss")
    for step, tr, val in res.history:
        print(f"  {step:4d}  {tr:10.3f}  {val:8.3f}")
    ms = res.seconds / res.steps * 1e3
    ok = res.val_loss <= TARGET_VAL_LOSS
    print(
        f"\nvalidation loss {res.val_loss:.3f} nats/char after {res.steps} steps (target "
        f"{TARGET_VAL_LOSS}: {'reached' if ok else 'NOT reached'}); trained in "
        f"{res.seconds:.0f} s, {ms:.0f} ms per step"
    )
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "chargpt.safetensors")
    same = check_round_trip(res, ckpt, args.device)
    print(
        f"checkpoint: {ckpt} ({os.path.getsize(ckpt) / 1024:.0f} KiB: config, vocabulary, model, "
        f"AdamW state); reloaded model's logits {'identical' if same else 'DIFFER'}"
    )
    png = os.path.join(args.out, "chargpt_curve.png")
    if plot_history(res.history, png, "gpucore char-GPT on Python source", TARGET_VAL_LOSS):
        print(f"loss curve: {png}")
    text = sample(res.model, args.prompt, args.sample_chars, args.temperature, args.top_k)
    print(f"\nsample (temperature {args.temperature}, top-k {args.top_k}):\n")
    print(args.prompt + text)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
