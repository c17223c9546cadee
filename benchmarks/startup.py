"""Process start to first result on Vulkan, with cold and warm pipeline caches, as a markdown table.

    python benchmarks/startup.py               # 3 rounds
    python benchmarks/startup.py --rounds 5

Each run is a fresh interpreter that imports gpucore, builds the digits demo's CNN
(gpucore.examples.digits.build_model) and runs one Adam training step on a batch of 32 under
device_policy('vulkan'), then prints the loss: the time from spawning it to that line is the
"first result". Cold: an empty cache directory (XDG_CACHE_HOME, where gpucore's pipeline cache
and Mesa's shader cache both live by default); warm: the same directory again. The second pair
turns Mesa's own shader cache off (MESA_SHADER_CACHE_DISABLE), so that only gpucore's
VkPipelineCache file (backends/vulkan/pipeline_store.py) can make the warm run faster. "warm +
prewarm" runs warm again with GPUCORE_VULKAN_PREWARM=1: the pipelines the previous runs used are
created on a background thread from device start (the default on GPUs; off by default on a
CPU-type device such as lavapipe, where it competes with the kernels for the cores). Medians of
the rounds, cold and warm runs alternating; "pipelines" is the time spent in
vkCreateComputePipelines (gpucore.vulkan.stats()['pipeline_seconds']).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import numpy as np
import gpucore as gc
from gpucore.examples.digits import build_model
import gpucore.nn.functional as F
gc.manual_seed(0)
model = build_model("cnn")
opt = gc.optim.Adam(model.parameters(), lr=1e-3)
x = gc.tensor(np.random.default_rng(0).standard_normal((32, 1, 8, 8)).astype(np.float32))
y = gc.tensor(np.arange(32) % 10)
with gc.device_policy("vulkan"):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    value = loss.item()
s = gc.vulkan.stats()
print("first", value, s["pipeline_seconds"], s["pipeline_cache_bytes"], flush=True)
"""


def run_child(cache_dir: str, mesa_cache: bool, prewarm: bool = False) -> tuple[float, float, int]:
    """(seconds from spawn to the first result, seconds creating pipelines, cache bytes read)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCORE_", "MESA_SHADER"))}
    env["XDG_CACHE_HOME"] = cache_dir
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if not mesa_cache:
        env["MESA_SHADER_CACHE_DISABLE"] = "true"
    env["GPUCORE_VULKAN_PREWARM"] = "1" if prewarm else "0"
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        text=True,
    )  # fmt: skip
    line = p.stdout.readline()
    took = time.perf_counter() - t0
    _, err = p.communicate(timeout=600)
    if not line.startswith("first") or p.returncode != 0:
        raise SystemExit(f"the child failed (exit {p.returncode}): {err[-2000:]}")
    _, _, pipe_s, loaded = line.split()
    return took, float(pipe_s), int(loaded)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    configs = {"gpucore + Mesa caches": True, "gpucore cache only (Mesa's off)": False}
    kinds = ("cold", "warm", "warm + prewarm")
    res = {name: {k: [] for k in kinds} for name in configs}
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        for name, mesa in configs.items():
            with tempfile.TemporaryDirectory(prefix="gpucore-startup-") as d:
                for kind in kinds:
                    res[name][kind].append(run_child(d, mesa, prewarm=kind.endswith("prewarm")))
                    print(f"round {r} {name} {kind}: {res[name][kind][-1]}", file=sys.stderr)
    print("## Process start to first result (digits CNN, one training step on Vulkan)\n")
    print(
        "| caches | cold s | warm s | warm speed-up | warm + prewarm s | speed-up "
        "| pipelines cold s | warm s | warm + prewarm s | bytes read |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in configs:
        cold, warm, pre = (res[name][k] for k in kinds)
        c, w, wp = (statistics.median(t for t, _, _ in runs) for runs in (cold, warm, pre))
        pc, pw, pp = (statistics.median(p for _, p, _ in runs) for runs in (cold, warm, pre))
        loaded = statistics.median(n for _, _, n in warm)
        print(
            f"| {name} | {c:.2f} | {w:.2f} | {c / w:.2f}x | {wp:.2f} | {c / wp:.2f}x | {pc:.2f} "
            f"| {pw:.2f} | {pp:.2f} | {loaded:.0f} |"
        )
    print(f"\nmedians of {args.rounds} rounds; load average {load0:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at the end (other processes share the cores)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
