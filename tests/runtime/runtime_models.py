"""Models and helpers shared by the runtime tests: the benchmark models (MLP, transformer
block, a small CNN with batch norm), a U-Net-like CNN and a token language model (the ops
deployed vision and text models add: cat, upsampling, padding, average pooling, clamp-based and
log1p-based activations, embedding lookups), and ``run_graph`` (a graph through the interpreted or
compiled executor without the CompiledModel layer)."""

import math

import numpy as np

import gpucore
import gpucore.nn.functional as F
from gpucore import nn
from gpucore.runtime.executors.cpu import CompiledExecutor, InterpretedExecutor
from gpucore.runtime.planner.plan import plan


def mlp(width: int = 16, seed: int = 0):
    gpucore.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
    )


class Block(nn.Module):
    """The benchmark's transformer block (pre-norm, fused QKV, 4x MLP with GELU); causal adds
    the usual upper-triangular -inf mask."""

    def __init__(self, d: int = 16, heads: int = 4, causal: bool = False, approximate="none"):
        super().__init__()
        self.h, self.causal, self.approximate = heads, causal, approximate
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        if self.causal:
            mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
            att = att + gpucore.tensor(mask)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=self.approximate))


def block(d=16, heads=4, seed=0, **kw):
    gpucore.manual_seed(seed)
    return Block(d, heads, **kw)


def cnn(seed: int = 0):
    """conv-BN-ReLU-pool twice, then a classifier (BN statistics randomised, eval mode)."""
    gpucore.manual_seed(seed)
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten(),
        nn.Linear(8, 5),
    )
    rng = np.random.default_rng(seed)
    for mod in m:
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.copy_(gpucore.tensor(rng.normal(size=8).astype(np.float32)))
            mod.running_var.copy_(gpucore.tensor(rng.uniform(0.5, 2, 8).astype(np.float32)))
            with gpucore.no_grad():
                mod.weight.copy_(gpucore.tensor(rng.normal(size=8).astype(np.float32)))
                mod.bias.copy_(gpucore.tensor(rng.normal(size=8).astype(np.float32)))
    return m.eval()


class TinyUNet(nn.Module):
    """A skip connection joined by cat after nearest upsampling, reflection padding, average
    pooling, and the activations that clamp (ReLU6, Hardswish) or use log1p (Softplus)."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6())
        self.mid = nn.Sequential(nn.AvgPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.Hardswish())
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(16, 4, 3), nn.Softplus())

    def forward(self, x):
        a = self.down(x)
        return F.elu(self.head(gpucore.cat([a, self.up(self.mid(a))], 1)))


def unet(seed: int = 0):
    gpucore.manual_seed(seed)
    return TinyUNet().eval()


class TinyLM(nn.Module):
    """Token and position embeddings, one causal block, a tied output head: int64 ids in."""

    def __init__(self, vocab: int = 20, d: int = 16, context: int = 8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.block, self.ln = Block(d, 4, causal=True), nn.LayerNorm(d)

    def forward(self, ids):
        pos = gpucore.arange(ids.shape[1])
        h = self.ln(self.block(self.tok(ids) + self.pos(pos)))
        return h @ self.tok.weight.transpose(0, 1)


def lm(seed: int = 0):
    gpucore.manual_seed(seed)
    return TinyLM().eval()


def token_ids(batch: int, length: int, vocab: int = 20, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, (batch, length))


def eager(model, *inputs) -> np.ndarray:
    with gpucore.no_grad():
        return model(*[gpucore.tensor(x) for x in inputs]).numpy()


def run_graph(graph, inputs, executor="interpreted"):
    """The outputs of ``graph`` (planned as it is) for numpy ``inputs``."""
    cls = InterpretedExecutor if executor == "interpreted" else CompiledExecutor
    return cls(plan(graph)).run([np.ascontiguousarray(x) for x in inputs])


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
