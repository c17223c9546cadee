"""Serve the digits model: compile the main demo's checkpoint and answer predictions from threads.

    python -m gpucore.examples.serve [--checkpoint digits_out/digits_cnn.safetensors]
                                     [--threads 8] [--requests 2000] [--device auto|cpu|vulkan]

Loads the checkpoint the digits demo saved (``python -m gpucore.examples.digits``; without one,
a model is trained for a few epochs first), compiles it with ``gpucore.compile`` (a dynamic
batch axis: one compiled model serves requests of any size), saves and reloads the compiled
model as a deployment would, then answers single-image requests of the held-out images from
several threads at once through one ``InferenceSession``. It checks every answer against eager
gpucore and prints the accuracy and the session's statistics (calls, mean / p50 / p99 latency).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np

import gpucore as gc
from gpucore import runtime
from gpucore.examples import digits


def load_model(checkpoint: str | None, seed: int = 0):
    """The digits model from ``checkpoint``, or a CNN trained for a few epochs without one."""
    if checkpoint and os.path.exists(checkpoint):
        model, _, ckpt = digits.load_checkpoint(checkpoint, device="cpu")
        return model.eval(), ckpt["kind"]
    print("no checkpoint: training the CNN for 3 epochs first", file=sys.stderr)
    res = digits.train("cnn", epochs=3, seed=seed, device="cpu", progress=False)
    return res.model.eval(), "cnn"


def serve(model, images: np.ndarray, threads: int, requests: int, device: str) -> dict:
    """Compile ``model``, round-trip it through a file, answer ``requests`` single-image
    requests from ``threads`` threads; returns predictions, mismatches and the session stats."""
    example = np.ascontiguousarray(images[:2], np.float32)
    compiled = gc.compile(model, (example,), device=device, dynamic_axes={0: {0: "batch"}})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "digits.gcm")
        compiled.save(path)
        session = runtime.InferenceSession(path, providers=[compiled.device, "cpu"])
    name = session.get_inputs()[0].name
    with gc.no_grad():
        eager = model(gc.tensor(np.ascontiguousarray(images, np.float32))).numpy()
    answers = np.full(requests, -1)
    mismatches = []
    lock = threading.Lock()

    def worker(k: int):
        for r in range(k, requests, threads):
            i = r % len(images)
            (logits,) = session.run(None, {name: images[i : i + 1].astype(np.float32)})
            answers[r] = int(logits.argmax())
            if not np.allclose(logits[0], eager[i], rtol=1e-4, atol=1e-5):
                with lock:
                    mismatches.append(i)

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "answers": answers,
        "mismatches": mismatches,
        "stats": session.stats(),
        "wall_s": wall,
        "device": session.get_providers()[0],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpucore.examples.serve", description=__doc__)
    ap.add_argument("--checkpoint", default=os.path.join("digits_out", "digits_cnn.safetensors"))
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--device", choices=("auto", "cpu", "vulkan"), default="auto")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.requests < 1:
        ap.error("--threads and --requests must be at least 1")
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("this demo needs scikit-learn: pip install 'gpucore[examples]'", file=sys.stderr)
        return 2
    model, kind = load_model(args.checkpoint, args.seed)
    _, _, x_test, y_test = digits.load_data(args.seed)
    res = serve(model, x_test, args.threads, args.requests, args.device)
    labels = y_test[np.arange(args.requests) % len(y_test)]
    acc = float((res["answers"] == labels).mean())
    st = res["stats"]
    print(f"{kind.upper()} served on {res['device']} by {args.threads} threads")
    print(
        f"{st['calls']} requests in {res['wall_s']:.2f} s ({st['calls'] / res['wall_s']:.0f}/s), "
        f"accuracy {acc:.1%}"
    )
    print(
        f"latency per request: mean {st['mean_ms']:.3f} ms, p50 {st['p50_ms']:.3f} ms, "
        f"p99 {st['p99_ms']:.3f} ms"
    )
    if res["mismatches"]:
        print(f"{len(res['mismatches'])} answers differ from eager gpucore", file=sys.stderr)
        return 1
    print("every answer equals eager gpucore's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
