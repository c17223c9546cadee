"""bench_cpu.py's per-op sections (issue 19), gpucore vs PyTorch eager side by side in one run:

- ``block``: the ops of a small transformer block at (4, 16, 64) float32, no grad (layer_norm,
  split into 3 views, a Python-scalar multiply, ``a + b``, softmax over the last dim, batched
  ``q @ k.transpose(-2, -1)``, ``transpose(0, 1).reshape``), µs per call;
- ``norms``: the normalization ops and softmax at (4, 16, 64) float32 (and batch_norm at the
  CNN's (64, 16, 28, 28)), forward without grad and forward + backward, µs per call;
- ``pool``: the CNN's layers at batch 64 (max / avg pooling 2x2 at 16x28x28 and 32x14x14,
  conv2d 3x3 1->16 and 16->32), forward and forward + backward, µs per call.

Each section takes bench_cpu's helpers (``h``: bench, run_libs, table, section, fmt, ratio)
so the timing rules are the same; kept apart from bench_cpu.py for its line cap.
"""

from __future__ import annotations

import numpy as np

import gpucore
import gpucore.nn.functional as GF

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None


def _block_jobs(rng):
    x = rng.standard_normal((4, 16, 64), dtype=np.float32)
    y = rng.standard_normal((4, 16, 192), dtype=np.float32)
    q, k = (rng.standard_normal((4, 16, 64), dtype=np.float32) for _ in range(2))
    w, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    stmts = [
        ("layer_norm", "F.layer_norm(x, (64,), w, b)"),
        ("split into 3 views", "y.split(64, -1)"),
        ("x * 0.125", "x * 0.125"),
        ("x + q", "x + q"),
        ("softmax(x, -1)", "F.softmax(x, -1)"),
        ("q @ k.transpose(-2, -1)", "q @ k.transpose(-2, -1)"),
        ("x.transpose(0, 1).reshape(16, 256)", "x.transpose(0, 1).reshape(16, 256)"),
    ]
    arrays = {"x": x, "y": y, "q": q, "k": k, "w": w, "b": b}
    jobs = {
        "gpucore": [
            (s, dict({n: gpucore.from_numpy(a) for n, a in arrays.items()}, F=GF)) for _, s in stmts
        ]
    }
    if torch is not None:
        jobs["torch"] = [
            (s, dict({n: torch.from_numpy(a) for n, a in arrays.items()}, F=TF)) for _, s in stmts
        ]
    return [name for name, _ in stmts], jobs


def _rows(h, names, t):
    rows = []
    for i, name in enumerate(names):
        row = [name, h.fmt(t["gpucore"][i] * 1e6)]
        if "torch" in t:
            row += [h.fmt(t["torch"][i] * 1e6), h.ratio(t["gpucore"][i], t["torch"][i])]
        rows.append(row)
    heads = ["op", "gpucore µs"] + (["torch µs", "gc/torch time"] if "torch" in t else [])
    return heads, rows


def bench_block(h, cfg, rng) -> None:
    with gpucore.no_grad():
        names, jobs = _block_jobs(rng)
        if torch is not None:
            with torch.no_grad():
                t = h.run_libs(jobs, cfg.tiny, "block")
        else:
            t = h.run_libs(jobs, cfg.tiny, "block")
    h.section(
        "Transformer-block ops ((4, 16, 64) float32, no grad)",
        "Median µs per call (timeit loop). Ratio: **gpucore time ÷ torch time** (> 1 means "
        "gpucore is slower).",
    )
    print(h.table(*_rows(h, names, t)), flush=True)


def _pool_jobs(rng):
    cases = []
    for shape in ((64, 16, 28, 28), (64, 32, 14, 14)):
        cases += [
            (f"max_pool2d 2x2 {shape}", "F.max_pool2d(x, 2)", shape, None),
            (f"max_pool2d fwd+bwd {shape}", "F.max_pool2d(xg, 2).sum().backward()", shape, None),
            (f"avg_pool2d 2x2 {shape}", "F.avg_pool2d(x, 2)", shape, None),
        ]
    for shape, o in (((64, 1, 28, 28), 16), ((64, 16, 14, 14), 32)):
        cases += [
            (f"conv2d 3x3 {shape}->{o}", "F.conv2d(x, w, bias, padding=1)", shape, o),
            (
                f"conv2d fwd+bwd {shape}->{o}",
                "F.conv2d(xg, wg, bias, padding=1).sum().backward()",
                shape,
                o,
            ),
        ]
    jobs = {"gpucore": []}
    if torch is not None:
        jobs["torch"] = []
    for _, stmt, shape, o in cases:
        x = rng.standard_normal(shape, dtype=np.float32)
        arrays = {"x": x}
        if o is not None:
            arrays["w"] = rng.standard_normal((o, shape[1], 3, 3), dtype=np.float32) * 0.1
            arrays["bias"] = rng.standard_normal(o, dtype=np.float32)
        for lib, mod, F in (("gpucore", gpucore, GF), ("torch", torch, None)):
            if lib not in jobs:
                continue
            ns = {n: mod.from_numpy(a.copy()) for n, a in arrays.items()}
            ns["xg"] = mod.from_numpy(x.copy()).requires_grad_()
            if o is not None:
                ns["wg"] = ns["w"].detach().clone().requires_grad_()
            ns["F"] = F if F is not None else TF
            jobs[lib].append((stmt, ns))
    return [c[0] for c in cases], jobs


def bench_pool(h, cfg, rng) -> None:
    names, jobs = _pool_jobs(rng)
    t = h.run_libs(jobs, cfg.big, "pool")
    h.section(
        "CNN layers (float32, batch 64: the train.py CNN's pools and convolutions)",
        "Median µs per call. Ratio: **gpucore time ÷ torch time** (> 1 means gpucore is slower).",
    )
    print(h.table(*_rows(h, names, t)), flush=True)


_NORM_STMTS = [
    ("layer_norm", "F.layer_norm(x, (64,), w, b)"),
    ("rms_norm", "F.rms_norm(x, (64,), w)"),
    ("group_norm 4 groups", "F.group_norm(x, 4, c, c)"),
    ("batch_norm training", "F.batch_norm(x, rm, rv, c, c, True)"),
    ("batch_norm eval", "F.batch_norm(x, rm, rv, c, c, False)"),
    ("softmax(x, -1)", "F.softmax(x, -1)"),
    ("log_softmax(x, -1)", "F.log_softmax(x, -1)"),
]


def _norm_jobs(rng):
    cases = [(name, stmt, (4, 16, 64)) for name, stmt in _NORM_STMTS]
    cases.append(("batch_norm training", _NORM_STMTS[3][1], (64, 16, 28, 28)))
    jobs = {"gpucore": []}
    if torch is not None:
        jobs["torch"] = []
    names = []
    for grad in (False, True):
        for name, stmt, shape in cases:
            names.append(f"{name} {shape}" + (" fwd+bwd" if grad else ""))
            x = rng.standard_normal(shape, dtype=np.float32)
            arrays = {"x": x, "w": rng.standard_normal(64, dtype=np.float32)}
            arrays["b"] = rng.standard_normal(64, dtype=np.float32)
            arrays["c"] = rng.standard_normal(16, dtype=np.float32)
            arrays["rm"], arrays["rv"] = np.zeros(16, np.float32), np.ones(16, np.float32)
            for lib, mod, F in (("gpucore", gpucore, GF), ("torch", torch, None)):
                if lib not in jobs:
                    continue
                ns = {n: mod.from_numpy(a.copy()) for n, a in arrays.items()}
                ns["F"] = F if F is not None else TF
                if grad:
                    ns["x"].requires_grad_()
                    ns["w"].requires_grad_()
                    ns["c"].requires_grad_()
                jobs[lib].append((f"({stmt}).sum().backward()" if grad else stmt, ns))
    return names, jobs


def bench_norms(h, cfg, rng) -> None:
    names, jobs = _norm_jobs(rng)
    t = h.run_libs(jobs, cfg.tiny, "norms")
    h.section(
        "Normalization ops and softmax (float32; forward without grad, and forward + backward)",
        "Median µs per call. Ratio: **gpucore time ÷ torch time** (> 1 means gpucore is slower).",
    )
    print(h.table(*_rows(h, names, t)), flush=True)


def sections(h) -> dict:
    """The sections for bench_cpu.main, bound to its helpers."""
    return {
        "block": lambda cfg, rng: bench_block(h, cfg, rng),
        "pool": lambda cfg, rng: bench_pool(h, cfg, rng),
        "norms": lambda cfg, rng: bench_norms(h, cfg, rng),
    }
