"""Export the digits model for examples/c/predict.c: a compiled model file plus test images.

    python examples/c/export_digits.py [--checkpoint digits_out/digits_cnn.safetensors]
                                       [--out digits_c] [--epochs 3]

Loads the checkpoint ``python -m gpucore.examples.digits`` saved (without one, trains a CNN for
``--epochs`` epochs first), compiles it for one image at a time on the CPU, and writes to
``--out``: ``digits.gcm`` (the runtime's saved model, with the C section gc_model_load reads),
``images.f32`` (the held-out images, float32 [N, 1, 8, 8], C order), ``labels.i64`` (their int64
labels) and ``python_predictions.i64`` (what gpucore in Python predicts, for comparison).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import gpucore as gc
from gpucore.examples import digits, serve


def export(out: str, checkpoint: str | None, epochs: int, seed: int = 0) -> str:
    if checkpoint and os.path.exists(checkpoint):
        model, _ = serve.load_model(checkpoint, seed)
    else:
        print(f"no checkpoint: training the CNN for {epochs} epochs first", file=sys.stderr)
        res = digits.train("cnn", epochs=epochs, seed=seed, device="cpu", progress=False)
        model = res.model.eval()
    _, _, x_test, y_test = digits.load_data(seed)
    x_test = np.ascontiguousarray(x_test, np.float32)
    compiled = gc.compile(model, (x_test[:1],), device="cpu")  # one image per run
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "digits.gcm")
    compiled.save(path)
    x_test.tofile(os.path.join(out, "images.f32"))
    np.ascontiguousarray(y_test, np.int64).tofile(os.path.join(out, "labels.i64"))
    with gc.no_grad():
        pred = model(gc.tensor(x_test)).numpy().argmax(axis=1).astype(np.int64)
    pred.tofile(os.path.join(out, "python_predictions.i64"))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--checkpoint", default=os.path.join("digits_out", "digits_cnn.safetensors"))
    ap.add_argument("--out", default="digits_c")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args(argv)
    print(export(args.out, args.checkpoint, args.epochs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
