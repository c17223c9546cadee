"""A BERT-base-style encoder layer in FP32 vs INT8 (``python benchmarks/quant.py --bert``): gpucore,
PyTorch and ONNX Runtime from the same weights, side by side in one run.

The layer: d 768, 12 heads, FFN 3072 with exact GELU, post-LN as BERT, the Q / K / V / output
projections as separate Linears (as Hugging Face's BertLayer), random weights (seed 0), input
[batch, tokens, 768]. Rows, each library's FP32 model against its own INT8 ones:

- gpucore: ``gpucore.runtime.compile`` (one C program on the CPU) of the float model; INT8
  dynamic = ``quantize_dynamic(model, {nn.Linear})`` compiled (each Linear one float-input
  ``qlinear_dynamic`` node: int8 weights per channel, activations quantized per call); INT8
  static = ``quantize_static`` of the compiled float model, calibrated on four random batches
  (every Linear int8 with per-channel weights; the FFN's GELU runs in float between them).
- PyTorch: eager under ``inference_mode``; INT8 dynamic = ``torch.ao.quantization.quantize_dynamic``
  of the same modules (per-channel qconfig, as gpucore's).
- ONNX Runtime: ``torch.onnx.export`` of the PyTorch model (``dynamo=False``) on the CPU provider
  with all graph optimizations; INT8 dynamic = ``onnxruntime.quantization.quantize_dynamic``
  (per-channel int8 weights) of that file.

Every call of every library alternates in rounds and the median round is reported (µs per call),
with every library on the same number of threads. "x ORT FP32" = ONNX Runtime's FP32 time / the
INT8 time (issue 15's target for gpucore's dynamic row: >= 2.3x with cosine >= 0.9998). Size:
the saved file (gpucore ``.save`` of the compiled model; ``torch.save`` of the state dict; the
.onnx file). cos: cosine of the INT8 output against the same library's FP32 output on a fresh
input.
"""

from __future__ import annotations

import io
import os
import tempfile

import numpy as np
from quant_models import _cos, _paired  # the same timer and cosine (run from benchmarks/)

import gpucore as gc
import gpucore.nn.functional as F
from gpucore import nn
from gpucore.quantization import quantize_dynamic, quantize_static

D, HEADS, FFN = 768, 12, 3072


class BertLayer(nn.Module):
    """Self-attention with separate Q/K/V/output Linears, then the FFN; post-LN residuals."""

    def __init__(self, d: int = D, heads: int = HEADS, ffn: int = FFN):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        b, t, d = x.shape

        def split(y):
            return y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        a = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)))
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


def _torch_layer(model):
    import torch  # noqa: PLC0415

    class TorchBertLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = HEADS
            self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D) for _ in range(4))
            self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
            self.up, self.down = torch.nn.Linear(D, FFN), torch.nn.Linear(FFN, D)

        def forward(self, x):
            b, t, d = x.shape

            def split(y):
                return y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

            a = torch.nn.functional.scaled_dot_product_attention(
                split(self.q(x)), split(self.k(x)), split(self.v(x))
            )
            x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
            return self.ln2(x + self.down(torch.nn.functional.gelu(self.up(x))))

    tm = TorchBertLayer().eval()
    sd = model.state_dict()
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in sd.items()})
    return tm


def prepare_gpucore(model, x, x2, calib, d) -> dict:
    xt = gc.tensor(x)
    fm = gc.runtime.compile(model, (xt,), device="cpu")
    dq = gc.runtime.compile(quantize_dynamic(model, {nn.Linear}), (xt,), device="cpu")
    sq = quantize_static(fm, [gc.tensor(c) for c in calib])
    calls = {"f": lambda: fm(xt), "dyn": lambda: dq(xt), "stat": lambda: sq(xt)}
    with gc.no_grad():
        x2t = gc.tensor(x2)
        outs = {k: m(x2t).numpy() for k, m in (("f", fm), ("dyn", dq), ("stat", sq))}
    sizes = {}
    for k, m in (("f", fm), ("dyn", dq), ("stat", sq)):
        p = os.path.join(d, f"{k}.gcm")
        m.save(p)
        sizes[k] = os.path.getsize(p)
    return {"calls": calls, "size": sizes, "out": outs}


def prepare_torch(model, x, x2, calib, d) -> dict | None:
    try:
        import torch  # noqa: PLC0415
        from torch.ao.quantization import per_channel_dynamic_qconfig  # noqa: PLC0415
    except ImportError:
        return None
    tm = _torch_layer(model)
    qm = torch.ao.quantization.quantize_dynamic(
        _torch_layer(model), {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8
    )
    xt, x2t = torch.from_numpy(x), torch.from_numpy(x2)

    def call(m, a=xt):
        with torch.inference_mode():
            return m(a)

    calls = {"f": lambda: call(tm), "dyn": lambda: call(qm)}
    outs = {"f": call(tm, x2t).numpy(), "dyn": call(qm, x2t).numpy()}
    sizes = {}
    for k, m in (("f", tm), ("dyn", qm)):
        buf = io.BytesIO()
        torch.save(m.state_dict(), buf)
        sizes[k] = buf.tell()
    return {"calls": calls, "size": sizes, "out": outs}


def prepare_ort(model, x, x2, calib, d, threads=1) -> dict | None:
    try:
        import onnxruntime as ort  # noqa: PLC0415
        import torch  # noqa: PLC0415
        from onnxruntime import quantization as oq  # noqa: PLC0415
    except ImportError:
        return None
    fpath, qpath = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
    torch.onnx.export(_torch_layer(model), (torch.from_numpy(x),), fpath, input_names=["x"],
                      output_names=["y"], dynamo=False)  # fmt: skip
    oq.quantize_dynamic(fpath, qpath, per_channel=True, weight_type=oq.QuantType.QInt8)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    fs = ort.InferenceSession(fpath, opts, providers=["CPUExecutionProvider"])
    qs = ort.InferenceSession(qpath, opts, providers=["CPUExecutionProvider"])
    calls = {"f": lambda: fs.run(None, {"x": x}), "dyn": lambda: qs.run(None, {"x": x})}
    outs = {"f": fs.run(None, {"x": x2})[0], "dyn": qs.run(None, {"x": x2})[0]}
    return {"calls": calls, "size": {"f": os.path.getsize(fpath), "dyn": os.path.getsize(qpath)},
            "out": outs}  # fmt: skip


def table(shapes=((1, 128), (1, 32)), rounds: int = 5, min_time: float = 0.3, threads: int = 1):
    """Prints the markdown table (module docstring)."""
    gc.set_num_threads(threads)
    try:
        import torch  # noqa: PLC0415

        torch.set_num_threads(threads)
    except ImportError:
        pass
    gc.manual_seed(0)
    model = BertLayer().eval()
    rng = np.random.default_rng(0)
    print(f"- {threads} thread(s) for every library; µs per call, median of {rounds} rounds\n")
    print("| input | library | FP32 µs | INT8 | INT8 µs | speed-up | x ORT FP32 | FP32 MB | "
          "INT8 MB | size ratio | cos(INT8, FP32) |")  # fmt: skip
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for b, tok in shapes:
        x, x2 = (rng.standard_normal((b, tok, D)).astype(np.float32) for _ in range(2))
        calib = [rng.standard_normal((b, tok, D)).astype(np.float32) for _ in range(4)]
        results = {}
        libs = (("ONNX Runtime", prepare_ort), ("gpucore", prepare_gpucore),
                ("PyTorch", prepare_torch))  # fmt: skip
        with tempfile.TemporaryDirectory() as d:
            for lib, fn in libs:
                kw = {"threads": threads} if fn is prepare_ort else {}
                r = fn(model, x, x2, calib, d, **kw)
                if r is not None:
                    results[lib] = r
            # every call of every library alternates within each round: the ratios compare
            # the same moments of a shared machine
            flat = {(lib, k): f for lib, r in results.items() for k, f in r["calls"].items()}
            times = _paired(flat, rounds, min_time)
        for lib, r in results.items():
            r["t"] = {k: times[(lib, k)] for k in r["calls"]}
        ort_f = results["ONNX Runtime"]["t"]["f"] if results.get("ONNX Runtime") else None
        for lib, r in results.items():
            if r is None:
                continue
            tf, sf = r["t"]["f"], r["size"]["f"]
            for kind, label in (("dyn", "dynamic"), ("stat", "static")):
                if kind not in r["t"]:
                    continue
                tq, sq = r["t"][kind], r["size"][kind]
                vs_ort = f"{ort_f / tq:.2f}x" if ort_f else "-"
                print(f"| {b} x {tok} | {lib} | {tf:.0f} | {label} | {tq:.0f} | {tf / tq:.2f}x | "
                      f"{vs_ort} | {sf / 2**20:.2f} | {sq / 2**20:.2f} | {sf / sq:.2f}x | "
                      f"{_cos(r['out'][kind], r['out']['f']):.6f} |", flush=True)  # fmt: skip
