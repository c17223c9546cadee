"""Host time per training step on the Vulkan device: eager recording vs one captured graph
replayed (gpucore.vulkan.graph, issue 18), as a markdown table.

    python benchmarks/replay.py                  # train.py's MLP (batch 64), CNN, dropout MLP
    python benchmarks/replay.py --only mlp64 --steps 20 --rounds 3
    python benchmarks/train.py --replay          # the same, after train.py's CPU table

Each row runs the same step on a device-resident model from the same weights (cross-entropy,
Adam; every op on the device, device_policy('vulkan'); a CPU-type device such as lavapipe
counts): copy a new batch into the device input tensors, then either record the step op by op
from Python (eager: forward, backward, optimizer step, with Adam's fused kernel or with
``capturable=True``, whose update is a composition of ops) or ``g.replay()`` the capturable step
captured once after warm-up steps (the dropout MLP's replays draw fresh masks: each writes the
generator's position into the graph's device buffer first). Each step ends with
``gpucore.vulkan.synchronize()``.

Columns: ``host ms`` is the CPU time of the calling (Python) thread per step: recording,
submitting, the batch copies, and the driver's work on that thread, but not the time it sleeps
waiting for the device; ``wall ms`` includes the wait. On lavapipe the "device" is the same
CPU, so wall time mostly measures the shaders on the CPU and barely moves; the host column is
what a real GPU would leave. ``g.replay() host µs``: the replay call alone (submitting the
pending batch copies, then the graph). Medians over rounds of eager and replayed blocks in turn.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

import train_models  # noqa: E402
from bench_env import CpuShare, load_note  # noqa: E402

import gpucore  # noqa: E402
import gpucore.nn as nn  # noqa: E402
import gpucore.nn.functional as F  # noqa: E402

CASES = {
    "mlp64": ("MLP 784-512-256-10, batch 64", (64, 784)),
    "cnn": ("CNN conv16-pool-conv32-pool-fc, 28x28, batch 64", (64, 1, 28, 28)),
    "mlp_small": ("MLP 64-80-10, batch 64 (the test's)", (64, 64)),
    "mlp_dropout": ("MLP 784-512-256-10 with Dropout(0.2) x2, batch 64", (64, 784)),
}


def model_for(name: str):
    if name == "mlp_small":
        return nn.Sequential(nn.Linear(64, 80), nn.ReLU(), nn.Linear(80, 10))
    if name == "cnn":
        return train_models.cnn(nn)
    # mlp_dropout: captured sampling, fresh masks per replay (graphs/rng.py)
    return train_models.mlp(nn, dropout=0.2 if name == "mlp_dropout" else 0.0)


def run_case(name: str, args) -> list[list[str]]:
    title, shape = CASES[name]
    rng = np.random.default_rng(0)
    batches = [
        (
            gpucore.tensor(rng.standard_normal(shape).astype(np.float32)),
            gpucore.tensor(rng.integers(0, 10, shape[0]).astype(np.int64)),
        )
        for _ in range(4)
    ]
    x = gpucore.zeros(*shape).to("vulkan")
    y = gpucore.zeros(shape[0], dtype=gpucore.int64).to("vulkan")
    count = [0]

    def load():
        xb, yb = batches[count[0] % len(batches)]
        count[0] += 1
        x.copy_(xb)
        y.copy_(yb)

    def trainer(capturable: bool):
        gpucore.manual_seed(0)
        with gpucore.device_policy("cpu"):
            model = model_for(name)
        model = model.to("vulkan")
        opt = gpucore.optim.Adam(model.parameters(), lr=1e-3, capturable=capturable)

        def eager():
            load()
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        return model, opt, eager

    submit = []  # host time of the g.replay() call alone
    with gpucore.device_policy("vulkan"):
        _, _, fused = trainer(capturable=False)  # the fused Adam kernel: eager's best
        model, opt, eager = trainer(capturable=True)
        for _ in range(args.warmup):
            for fn in (fused, eager):
                fn()
                gpucore.vulkan.synchronize()
        g = gpucore.vulkan.VulkanGraph()
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        with gpucore.vulkan.graph(g):
            static_loss = F.cross_entropy(model(x), y)
            static_loss.backward()
            opt.step()
        capture_ms = (time.perf_counter() - t0) * 1e3
        commands = g.dispatches

        def replay():
            load()
            t = time.thread_time()
            g.replay()
            submit.append(time.thread_time() - t)

        modes = {
            "eager, Adam (fused kernel)": fused,
            "eager, Adam(capturable=True)": eager,
            "replayed graph": replay,
        }
        counts = {}
        for label, fn in modes.items():
            m = gpucore.vulkan.mark()
            fn()
            gpucore.vulkan.synchronize()
            counts[label] = gpucore.vulkan.stats(since=m)
        times = {k: ([], []) for k in modes}
        for _ in range(args.rounds):
            for label, fn in modes.items():
                host, wall = times[label]
                for _ in range(args.steps):
                    h0, w0 = time.thread_time(), time.perf_counter()
                    fn()
                    gpucore.vulkan.synchronize()
                    host.append(time.thread_time() - h0)
                    wall.append(time.perf_counter() - w0)
    g.reset()
    med = {
        k: (statistics.median(h) * 1e3, statistics.median(w) * 1e3) for k, (h, w) in times.items()
    }
    base = med["replayed graph"][0]
    rows = []
    for label in modes:
        c = counts[label]
        rows.append(
            [
                title,
                label,
                f"{med[label][0]:.2f}",
                f"{med[label][0] / base:.1f}x",
                f"{med[label][1]:.1f}",
                f"{c['dispatches']} / {c['submits']}",
            ]
        )
    rows[-1][-1] += (
        f" (g.replay(): {statistics.median(submit) * 1e6:.0f} µs; capture {capture_ms:.0f} ms, "
        f"{commands} commands)"
    )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=list(CASES), help="run only this case")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per block (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="blocks per mode (default 3)")
    ap.add_argument("--warmup", type=int, default=3, help="eager steps before the capture")
    args = ap.parse_args(argv)
    be = gpucore.dispatch.vulkan_backend(required=True)
    print("## Captured training step vs eager recording on the Vulkan device\n")
    print(f"- device: {be.ctx.info.name} ({be.ctx.info.type}); {os.cpu_count()} logical CPUs")
    print(
        f"- {time.strftime('%Y-%m-%d %H:%M:%S')}; Adam(capturable=True), cross-entropy, a new "
        f"batch copied in each step; median of {args.rounds} rounds x {args.steps} steps per "
        f"mode, after {args.warmup} warm-up steps"
    )
    share = CpuShare()
    cases = args.only or ["mlp64", "cnn", "mlp_dropout"]
    rows = [r for name in cases for r in run_case(name, args)]
    headers = [
        "case",
        "step",
        "host ms",
        "host / replay's",
        "wall ms",
        "recorded dispatches / submits per step",
    ]
    print()
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(
        "\nRecorded dispatches: commands recorded from Python per step (with a replay, only the "
        "two batch copies; the graph's own commands were recorded once, at capture)."
    )
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
