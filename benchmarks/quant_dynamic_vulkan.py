"""PyTorch-style ``quantize_dynamic`` MLPs compiled for Vulkan: the traced activation
quantization (before) against the fused float-input ``qlinear_dynamic`` shaders (after), with
the compiled CPU model beside them, in one run.

``python benchmarks/quant_dynamic_vulkan.py [--rounds R] [--quick] [--qkv]``

Columns, µs per call (``run_arrays``: upload, the recorded command buffer, download):

- ``cpu``: ``gpucore.compile(device="cpu")`` (one C program, two C calls per layer);
- ``vulkan (before)``: ``device="vulkan"`` with the passes a device without shaderFloat64 gets
  (``passes.vulkan_pipeline(False)``: each layer's quantization as ~20 primitive shaders around
  the int8 GEMM, what every device ran before the fused node had shaders);
- ``vulkan``: the full Vulkan pipeline (per layer: the range, PyTorch's parameters, the uint8
  rows and the int8 GEMM reading them: three or four dispatches).

``--qkv``: three quantize_dynamic Linears reading one input (attention's Q / K / V
projections), whose float-input nodes share one range pass and one uint8 quantization of x
(``vulkan``), against the same Linears on three inputs holding the same values (``apart``: each
node quantizes its own input, what the executor recorded for Q / K / V before it shared them).

On lavapipe (a CPU "device") the absolute times say little about a GPU; the dispatch counts
and the before / after ratio do. The calls alternate in rounds (``quant_models._paired``) and
the median round is reported. ``same bits`` checks both Vulkan models against the CPU model on a
fresh input.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import numpy as np
from quant_models import _paired  # the same alternating timer (run from benchmarks/)

import gpucore as gc
from gpucore import nn
from gpucore.quantization import quantize_dynamic

F32 = np.float32


@contextlib.contextmanager
def _without_float64(be):
    """The passes (and refusals) of a device without shaderFloat64, for a compile."""
    had = be.ctx.float64
    be.ctx.float64 = False
    try:
        yield
    finally:
        be.ctx.float64 = had


def _mlp(widths):
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(widths) - 2 else [])
    return nn.Sequential(*layers).eval()


def _dispatches(cm) -> int:
    return sum(ex.dispatches() for ex in cm.executors())


def row(be, widths, batch, rounds, min_time) -> dict:
    gc.manual_seed(0)
    q = quantize_dynamic(_mlp(widths), {nn.Linear})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, widths[0])).astype(F32)
    xt = gc.tensor(x)
    cpu = gc.compile(q, (xt,), device="cpu")
    with _without_float64(be):
        before = gc.compile(q, (xt,), device="vulkan")
    after = gc.compile(q, (xt,), device="vulkan")
    fns = {
        "cpu": lambda: cpu.run_arrays([x]),
        "before": lambda: before.run_arrays([x]),
        "after": lambda: after.run_arrays([x]),
    }
    with gc.no_grad():
        t = _paired(fns, rounds, min_time)
        fresh = rng.standard_normal((batch, widths[0])).astype(F32) * 3
        want = cpu.run_arrays([fresh])[0].tobytes()
        same = all(m.run_arrays([fresh])[0].tobytes() == want for m in (before, after))
    return {"t": t, "same": same, "dispatches": (_dispatches(before), _dispatches(after))}


def qkv_row(width, tokens, rounds, min_time) -> dict:
    gc.manual_seed(0)
    qkv = quantize_dynamic(nn.ModuleList([nn.Linear(width, width) for _ in range(3)]), {nn.Linear})

    def shared(x):
        return tuple(lin(x) for lin in qkv)

    def apart(a, b, c):
        return tuple(lin(v) for lin, v in zip(qkv, (a, b, c)))

    rng = np.random.default_rng(2)
    x = rng.standard_normal((tokens, width)).astype(F32)
    xt = gc.tensor(x)
    cpu = gc.compile(shared, (xt,), device="cpu")
    one = gc.compile(shared, (xt,), device="vulkan")
    three = gc.compile(apart, (xt, xt.clone(), xt.clone()), device="vulkan")
    fns = {
        "cpu": lambda: cpu.run_arrays([x]),
        "apart": lambda: three.run_arrays([x, x, x]),
        "shared": lambda: one.run_arrays([x]),
    }
    with gc.no_grad():
        t = _paired(fns, rounds, min_time)
        fresh = rng.standard_normal((tokens, width)).astype(F32) * 3
        want = [o.tobytes() for o in cpu.run_arrays([fresh])]
        same = [o.tobytes() for o in one.run_arrays([fresh])] == want
        same &= [o.tobytes() for o in three.run_arrays([fresh] * 3)] == want
    return {"t": t, "same": same, "dispatches": (_dispatches(three), _dispatches(one))}


def main_qkv(be, rounds, min_time) -> None:
    print(f"device {be.ctx.info.name}, load average {os.getloadavg()[0]:.1f}, median of "
          f"{rounds} alternating rounds, µs per call\n")  # fmt: skip
    print("| Q/K/V width | tokens | cpu | vulkan (apart) | vulkan (shared) | apart / shared "
          "| dispatches apart -> shared | same bits |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for width in (256, 768):
        for tokens in (1, 64):
            r = qkv_row(width, tokens, rounds, min_time)
            t = r["t"]
            print(f"| {width} | {tokens} | {t['cpu']:.1f} | {t['apart']:.1f} | "
                  f"{t['shared']:.1f} | {t['apart'] / t['shared']:.2f}x "
                  f"| {r['dispatches'][0]} -> {r['dispatches'][1]} | {r['same']} |")  # fmt: skip


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--qkv", action="store_true", help="Q / K / V Linears on one input")
    args = ap.parse_args(argv)
    be = gc.dispatch.vulkan_backend(allow_cpu=True)
    if be is None or not be.ctx.float64:
        raise SystemExit("needs a Vulkan device with shaderFloat64 (lavapipe has it)")
    min_time = 0.05 if args.quick else 0.2
    if args.qkv:
        main_qkv(be, args.rounds, min_time)
        return
    models = [("MLP 784-512-256-10", (784, 512, 256, 10)),
              ("MLP 1024x3 + 1024", (1024, 1024, 1024, 1024))]  # fmt: skip
    print(f"device {be.ctx.info.name}, load average {os.getloadavg()[0]:.1f}, median of "
          f"{args.rounds} alternating rounds, µs per call\n")  # fmt: skip
    print("| model | batch | cpu | vulkan (before) | vulkan | before / after | vulkan / cpu "
          "| dispatches before -> after | same bits |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, widths in models:
        for batch in (1, 64):
            r = row(be, widths, batch, args.rounds, min_time)
            t = r["t"]
            print(f"| {name} | {batch} | {t['cpu']:.1f} | {t['before']:.1f} | {t['after']:.1f} "
                  f"| {t['before'] / t['after']:.2f}x | {t['after'] / t['cpu']:.2f}x "
                  f"| {r['dispatches'][0]} -> {r['dispatches'][1]} | {r['same']} |")  # fmt: skip


if __name__ == "__main__":
    main()
