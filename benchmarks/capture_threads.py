"""Eager ops of one thread while another thread is inside a graph capture (runtime/capture/
trace.py's per-thread router; ``registry.capturing``): they should cost what they cost alone.

Run from the repository root::

    python benchmarks/capture_threads.py [--rounds N]

µs of thread CPU time (``time.thread_time``) per call of small float32 eager ops under
``no_grad``, medians over rounds; each round times every op alone, then again while another
thread is parked inside ``gpucore.compile`` of a function (its capture running), so a noisy
stretch of the machine hits both columns alike. The results of both columns are checked equal
bit for bit.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("capture_threads.py")

import argparse  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isdir(os.path.join(_ROOT, "gpucore")) and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # benchmark the checkout this script lives in

import gpucore as gc  # noqa: E402
import gpucore.nn.functional as F  # noqa: E402


def _ops() -> dict:
    gc.manual_seed(0)
    a, b = gc.randn(4, 16, 64), gc.randn(4, 16, 64)
    q, k, v = (gc.randn(2, 4, 33, 16) for _ in range(3))
    img = gc.randn(2, 3, 17, 17)
    h, w, bias = gc.randn(64, 48), gc.randn(48), gc.randn(48)
    return {
        "a + b (4,16,64)": lambda: a + b,
        "a.reshape(64, 64)": lambda: a.reshape(64, 64),
        "exp(a)": lambda: gc.exp(a),
        "softmax (64,48)": lambda: F.softmax(h, -1),
        "layer_norm (64,48)": lambda: F.layer_norm(h, (48,), w, bias),
        "avg_pool2d (2,3,17,17)": lambda: F.avg_pool2d(img, 3, 2, 1),
        "sdpa (2,4,33,16)": lambda: F.scaled_dot_product_attention(q, k, v),
    }


def _time_all(ops: dict, calls: int) -> tuple[dict, dict]:
    """({name: µs per call}, {name: the result's array}) in the calling thread."""
    us, out = {}, {}
    with gc.no_grad():
        for name, fn in ops.items():
            out[name] = np.array(fn().numpy())
            t0 = time.thread_time()
            for _ in range(calls):
                fn()
            us[name] = (time.thread_time() - t0) / calls * 1e6
    return us, out


def _during_capture(ops: dict, calls: int) -> tuple[dict, dict]:
    """_time_all in a thread while another thread's capture is parked inside the function."""
    inside, done = threading.Barrier(2, timeout=120), threading.Barrier(2, timeout=120)
    got = {}

    def fn(x):
        inside.wait()
        done.wait()
        return x * 2.0

    def other():
        inside.wait()
        try:
            got["r"] = _time_all(ops, calls)
        finally:
            done.wait()

    threads = [
        threading.Thread(target=lambda: gc.compile(fn, (gc.randn(2, 2),), device="cpu")),
        threading.Thread(target=other),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got["r"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="rounds (medians over them)")
    p.add_argument("--calls", type=int, default=300, help="calls of each op per round")
    args = p.parse_args(argv)
    share = CpuShare()
    ops = _ops()
    alone, during = {n: [] for n in ops}, {n: [] for n in ops}
    equal = {n: True for n in ops}
    for _ in range(args.rounds):
        (us_a, out_a), (us_d, out_d) = _time_all(ops, args.calls), _during_capture(ops, args.calls)
        for n in ops:
            alone[n].append(us_a[n])
            during[n].append(us_d[n])
            equal[n] &= np.array_equal(out_a[n], out_d[n])
    print(f"- µs of thread CPU time per call, medians of {args.rounds} rounds of {args.calls}")
    print()
    print("| op | alone | while another thread captures | ratio | same bits |")
    print("|---|---|---|---|---|")
    for n in ops:
        a, d = statistics.median(alone[n]), statistics.median(during[n])
        print(f"| {n} | {a:.2f} | {d:.2f} | {d / a:.2f} | {'yes' if equal[n] else 'NO'} |")
    print()
    print(load_note(share.others(), "during the run"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
