"""Dynamic quantization (``quantize_dynamic``) of MLPs: gpucore eager, gpucore compiled, and
PyTorch's ``torch.ao.quantization.quantize_dynamic`` on the same weights, side by side.

``python benchmarks/quant_dynamic.py [--threads N] [--rounds R] [--quick]``

Models: MLP 784-512-256-10 and 1024-1024-1024-1024 (ReLU between), every Linear int8 per channel
(PyTorch's per_channel_dynamic_qconfig in both libraries), batch 1 and 64. Columns, µs per call:

- ``eager``: the gpucore ``quantize_dynamic`` model called on a tensor;
- ``compiled (before)``: ``gpucore.compile`` of it with the runtime's pipeline minus
  ``fuse_traced_dynamic_linear`` and ``fuse_dynamic_linear_relu`` (what gpucore did before they
  existed: each layer's activation quantization as ~20 primitive nodes around the int8 GEMM);
- ``compiled``: the full pipeline (one float-input ``qlinear_dynamic`` per layer, the ReLU in
  its epilogue: two C calls per layer in the one C program), called through ``run_arrays``;
- ``torch``: PyTorch's quantized model under ``torch.inference_mode``.

The four calls alternate in rounds (``quant_models._paired``: each timed over ``min_time``
seconds per round) and the median round is reported: the machine is shared, so only ratios
within one run mean much. ``same bits`` checks compiled == eager on a fresh input.
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np
from quant_models import _paired  # the same alternating timer (run from benchmarks/)

import gpucore as gc
from gpucore import nn
from gpucore.quantization import quantize_dynamic
from gpucore.runtime import passes

F32 = np.float32


@contextlib.contextmanager
def _pipeline_before():
    """gpucore.compile with the dynamic-Linear fusions left out of the CPU pipeline."""
    from gpucore.runtime.passes import dynamic_linear as dl  # noqa: PLC0415

    skip = (dl.fuse_traced_dynamic_linear, dl.fuse_dynamic_linear_relu)
    old = passes.optimize.__defaults__
    passes.optimize.__defaults__ = (tuple(p for p in passes.PIPELINE if p not in skip), old[1])
    try:
        yield
    finally:
        passes.optimize.__defaults__ = old


def _mlp(widths):
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(widths) - 2 else [])
    return nn.Sequential(*layers).eval()


def _torch_quantized(model):
    import torch  # noqa: PLC0415

    mods = []
    for m in model:
        is_linear = isinstance(m, nn.Linear)
        mods.append(
            torch.nn.Linear(m.in_features, m.out_features) if is_linear else torch.nn.ReLU()
        )
    tm = torch.nn.Sequential(*mods).eval()
    tm.load_state_dict(
        {k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()}
    )
    return torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)


def row(name, widths, batch, rounds, min_time) -> dict:
    gc.manual_seed(0)
    model = _mlp(widths)
    q = quantize_dynamic(model, {nn.Linear})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, widths[0])).astype(F32)
    xt = gc.tensor(x)
    with _pipeline_before():
        before = gc.compile(q, (xt,), device="cpu")
    after = gc.compile(q, (xt,), device="cpu")
    fns = {
        "eager": lambda: q(xt),
        "before": lambda: before.run_arrays([x]),
        "compiled": lambda: after.run_arrays([x]),
    }
    try:
        import torch  # noqa: PLC0415

        tq, tx = _torch_quantized(model), torch.from_numpy(x)
        torch.set_num_threads(gc._cpu.info()["threads"])

        def call_torch():
            with torch.inference_mode():
                return tq(tx)

        fns["torch"] = call_torch
    except ImportError:
        tq = None
    with gc.no_grad():
        t = _paired(fns, rounds, min_time)
        fresh = rng.standard_normal((batch, widths[0])).astype(F32) * 3
        same = after.run_arrays([fresh])[0].tobytes() == q(gc.tensor(fresh)).numpy().tobytes()
    ops = [n.op for ex in after.executors() for n in (s.node for s in ex.plan.steps)]
    nodes_before = sum(len(ex.plan.steps) for ex in before.executors())
    return {"name": name, "batch": batch, "t": t, "same": same,
            "nodes": (nodes_before, len(ops))}  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    gc.set_num_threads(args.threads)
    min_time = 0.05 if args.quick else 0.2
    models = [("MLP 784-512-256-10", (784, 512, 256, 10)),
              ("MLP 1024x3 + 1024", (1024, 1024, 1024, 1024))]  # fmt: skip
    print(f"threads {args.threads}, median of {args.rounds} alternating rounds, µs per call\n")
    print(
        "| model | batch | eager | compiled (before) | compiled | torch | compiled vs before "
        "| compiled vs eager | torch / compiled | nodes before -> after | same bits |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, widths in models:
        for batch in (1, 64):
            r = row(name, widths, batch, args.rounds, min_time)
            t = r["t"]
            tt = t.get("torch")
            torch_cells = (f"{tt:.1f}", f"{tt / t['compiled']:.2f}x") if tt else ("-", "-")
            print(f"| {name} | {batch} | {t['eager']:.1f} | {t['before']:.1f} | "
                  f"{t['compiled']:.1f} | {torch_cells[0]} | {t['before'] / t['compiled']:.2f}x | "
                  f"{t['eager'] / t['compiled']:.2f}x | {torch_cells[1]} | "
                  f"{r['nodes'][0]} -> {r['nodes'][1]} | {r['same']} |")  # fmt: skip


if __name__ == "__main__":
    main()
