"""The worker processes of benchmarks/infer.py: one library each, timings out as JSON.

``python benchmarks/infer.py --worker <lib> <config,...>`` runs ``worker_main`` here (infer.py
first unsets OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, before numpy loads). Libraries: ``prep``
(PyTorch: builds each model with a fixed seed, writes weights, input, ONNX file and the reference
output to ``--dir``), ``gpucore`` (eager, interpreted and compiled executors), ``torch``, ``ort``,
``vulkan`` (the vulkan-replay section). The last stdout line is ``RESULT_MARK`` + JSON.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
import traceback
import warnings

import models
import numpy as np

# --------------------------------------------------------------------------------------------
# configurations

SEED = 0
DEFAULT_THREADS = 2
RESULT_MARK = "@@infer-result "


class Config:
    def __init__(self, name, section, label, kind, shape, threads=None, **kw):
        self.name = name
        self.section = section
        self.label = label
        self.kind = kind  # mlp / transformer / resnet
        self.shape = shape  # the input's shape
        self.threads = threads  # None: --threads (default 2); ResNet-18: 1 for every library
        self.kw = kw

    def build(self, ns):
        if self.kind == "mlp":
            return models.mlp(ns, self.kw["width"])
        if self.kind == "transformer":
            return models.transformer_block(ns, self.kw["d"], heads=4)
        return models.resnet18(ns)


def _configs() -> dict:
    out = []
    for width, batches in ((512, (1, 32, 128)), (2048, (1, 32))):
        for b in batches:
            out.append(
                Config(f"mlp{width}_b{b}", "mlp", f"W {width}, batch {b}", "mlp", (b, width),
                       width=width)
            )  # fmt: skip
    for b, t, d in ((1, 16, 64), (4, 16, 64), (4, 64, 128), (4, 128, 256)):
        out.append(
            Config(f"tb_{b}x{t}x{d}", "transformer", f"B {b}, T {t}, d {d}", "transformer",
                   (b, t, d), d=d)
        )  # fmt: skip
    out.append(
        Config("resnet18_b1", "resnet", "batch 1, 3x224x224", "resnet", (1, 3, 224, 224),
               threads=1)
    )  # fmt: skip
    return {c.name: c for c in out}


CONFIGS = _configs()
QUICK = ("mlp512_b1", "mlp512_b32", "tb_1x16x64", "tb_4x16x64")
GPUCORE_MODES = ("gc_eager", "gc_interp", "gc_compiled")
MODES = (*GPUCORE_MODES, "torch", "ort")
MODE_LIB = {"gc_eager": "gpucore", "gc_interp": "gpucore", "gc_compiled": "gpucore",
            "torch": "torch", "ort": "ort"}  # fmt: skip

# The 30-op graph of the vulkan-replay section: 10 x (matmul, add, tanh) on a (16, 64) input.
VK_BATCH, VK_WIDTH, VK_LAYERS = 16, 64, 10


def progress(msg: str) -> None:
    print(f"  ... {msg}", file=sys.stderr, flush=True)


def err_text(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:300]


# --------------------------------------------------------------------------------------------
# timing (in the workers)


def _loop(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - t0


def measure(fns: dict, *, repeats: int, target: float, out: dict) -> None:
    """Median-ready samples: seconds per call of each callable in ``fns``, ``repeats`` samples
    each; every sample is a loop of ``n`` calls lasting about ``target`` seconds (n found per
    callable after a warm-up). The callables alternate sample by sample, in a rotating order.
    Fills ``out[mode] = {"times": [...]}`` (or ``{"error": ...}`` when a callable raised)."""
    number = {}
    for mode, fn in fns.items():
        try:
            t = _loop(fn, 1)  # warm-up: lazy initialisation, first touch of buffers
            if t < target:
                _loop(fn, 2)
            n = 1
            while True:
                t = _loop(fn, n)
                if t >= target or n >= 1 << 20:
                    break
                n *= max(2, min(10, int(target / max(t, 1e-9)) + 1))
            number[mode] = n
            out[mode] = {"times": [], "number": n}
        except Exception as e:
            traceback.print_exc()
            out[mode] = {"error": err_text(e)}
    live = [m for m in fns if m in number]
    gc.collect()
    gc.disable()
    try:
        for r in range(repeats):
            for mode in live[r % len(live) :] + live[: r % len(live)] if live else []:
                out[mode]["times"].append(_loop(fns[mode], number[mode]) / number[mode])
    finally:
        gc.enable()


def _paths(d: str, cfg: str) -> dict:
    return {
        "weights": os.path.join(d, f"{cfg}.weights.npz"),
        "input": os.path.join(d, f"{cfg}.input.npy"),
        "onnx": os.path.join(d, f"{cfg}.onnx"),
    }


def out_path(d: str, cfg: str, mode: str) -> str:
    return os.path.join(d, f"{cfg}.out.{mode}.npy")


def _save_out(d, cfg, mode, y) -> None:
    np.save(out_path(d, cfg, mode), np.asarray(y, dtype=np.float32))


# --------------------------------------------------------------------------------------------
# workers


def worker_prep(names: list, args) -> dict:
    """Builds each PyTorch model with a fixed seed; writes weights, input and ONNX file."""
    info: dict = {"prepared": []}
    for name in names:  # the inputs, with or without PyTorch
        x = np.random.default_rng(SEED).standard_normal(CONFIGS[name].shape, dtype=np.float32)
        np.save(_paths(args.dir, name)["input"], x)
    try:
        import gpucore  # noqa: PLC0415

        cpu = gpucore.backend_info().get("cpu") or {}
        kernel = cpu.get("gemm", {}).get("float32", {}).get("kernel", "?")
        info["gpucore"] = f"gpucore {gpucore.__version__}: C extension {cpu.get('isa')}, {kernel}"
    except Exception as e:
        info["gpucore"] = f"gpucore not importable ({err_text(e)})"
    try:
        import onnxruntime  # noqa: PLC0415

        info["ort"] = f"onnxruntime {onnxruntime.__version__}"
    except ImportError:
        info["ort"] = None
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        info["torch"] = None
        return info
    info["torch"] = f"torch {torch.__version__}"
    torch.set_num_threads(DEFAULT_THREADS)
    ns = models.namespace(torch.nn)
    for name in names:
        cfg = CONFIGS[name]
        p = _paths(args.dir, name)
        torch.manual_seed(SEED)
        model = cfg.build(ns)
        if cfg.kind == "resnet":
            models.randomize_batchnorm(torch, model, torch.randn(2, *cfg.shape[1:]))
        model.eval()
        np.savez(p["weights"], **models.state_to_numpy(model.state_dict()))
        x = np.load(p["input"])
        with torch.inference_mode():  # the reference output of the checks
            _save_out(args.dir, name, "ref", model(torch.from_numpy(x)).numpy())
        if info["ort"] is not None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.onnx.export(
                        model,
                        (torch.from_numpy(x),),
                        p["onnx"],
                        input_names=["x"],
                        output_names=["y"],
                        dynamo=False,
                    )
            except Exception as e:
                traceback.print_exc()
                info.setdefault("export_errors", {})[name] = err_text(e)
        info["prepared"].append(name)
    return info


def _threads(cfg: Config, args) -> int:
    return cfg.threads or args.threads or DEFAULT_THREADS


def worker_gpucore(names: list, args) -> dict:
    os.environ["GPUCORE_DEVICE"] = "cpu"  # every eager op in the C extension
    import gpucore  # noqa: PLC0415
    import gpucore.nn  # noqa: PLC0415
    import gpucore.runtime as rt  # noqa: PLC0415

    ns = models.namespace(gpucore.nn)
    results = {}
    for name in names:
        cfg = CONFIGS[name]
        p = _paths(args.dir, name)
        gpucore.set_num_threads(_threads(cfg, args))
        progress(f"gpucore {name} ({gpucore.get_num_threads()} threads)")
        x = np.load(p["input"])
        res = results[name] = {}
        if os.path.exists(p["weights"]):
            model = cfg.build(ns)
            with np.load(p["weights"]) as w:
                models.load_numpy_state(gpucore, model, dict(w))
        else:  # no PyTorch: gpucore's own seeded initialisation
            gpucore.manual_seed(SEED)
            model = cfg.build(ns)
        model.eval()
        xt = gpucore.from_numpy(x)

        def eager(model=model, xt=xt):
            with gpucore.no_grad():
                return model(xt)

        fns = {"gc_eager": eager}
        _save_out(args.dir, name, "gc_eager", eager().numpy())
        for mode, executor in (("gc_interp", "interpreted"), ("gc_compiled", "compiled")):
            try:
                t0 = time.perf_counter()
                cm = rt.compile(model, (xt,), device="cpu", executor=executor)
                res.setdefault("compile_s", {})[mode] = time.perf_counter() - t0
                _save_out(args.dir, name, mode, cm.run_arrays([x])[0])
                fns[mode] = lambda cm=cm, x=x: cm.run_arrays([x])
            except Exception as e:
                traceback.print_exc()
                res[mode] = {"error": err_text(e)}
        measure(fns, repeats=_repeats(cfg, args), target=args.target, out=res)
    return {"results": results}


def worker_torch(names: list, args) -> dict:
    import torch  # noqa: PLC0415

    torch.set_num_interop_threads(1)
    ns = models.namespace(torch.nn)
    results = {}
    for name in names:
        cfg = CONFIGS[name]
        p = _paths(args.dir, name)
        torch.set_num_threads(_threads(cfg, args))
        progress(f"torch {name} ({torch.get_num_threads()} threads)")
        model = cfg.build(ns)
        with np.load(p["weights"]) as w:
            model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
        model.eval()
        xt = torch.from_numpy(np.load(p["input"]))
        res = results[name] = {}
        with torch.inference_mode():
            _save_out(args.dir, name, "torch", model(xt).numpy())
            measure(
                {"torch": lambda model=model, xt=xt: model(xt)},
                repeats=_repeats(cfg, args),
                target=args.target,
                out=res,
            )
    return {"results": results}


def worker_ort(names: list, args) -> dict:
    import onnxruntime as ort  # noqa: PLC0415

    results = {}
    for name in names:
        cfg = CONFIGS[name]
        p = _paths(args.dir, name)
        res = results[name] = {}
        if not os.path.exists(p["onnx"]):
            res["ort"] = {"error": "no ONNX file (the export failed)"}
            continue
        n = _threads(cfg, args)
        progress(f"onnxruntime {name} ({n} intra-op threads)")
        so = ort.SessionOptions()
        so.intra_op_num_threads = n
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(p["onnx"], so, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: np.load(p["input"])}
        _save_out(args.dir, name, "ort", sess.run(None, feed)[0])
        measure(
            {"ort": lambda sess=sess, feed=feed: sess.run(None, feed)},
            repeats=_repeats(cfg, args),
            target=args.target,
            out=res,
        )
    return {"results": results}


def _repeats(cfg: Config, args) -> int:
    return max(2, args.repeats // 2) if cfg.kind == "resnet" else args.repeats


def worker_vulkan(names: list, args) -> dict:
    """Eager recording vs a replayed command buffer for the 30-op graph on the Vulkan device."""
    os.environ["GPUCORE_DEVICE"] = "vulkan"
    os.environ["GPUCORE_VULKAN_ALLOW_CPU"] = "1"  # Mesa lavapipe counts as a device here
    import gpucore  # noqa: PLC0415
    import gpucore.runtime as rt  # noqa: PLC0415
    from gpucore import dispatch  # noqa: PLC0415

    be = dispatch.vulkan_backend(allow_cpu=True)
    if be is None:
        return {"skip": gpucore.vulkan.unavailable_reason() or "no Vulkan device"}
    info = {"device": f"{be.ctx.info.name} ({be.ctx.info.type})"}
    rng = np.random.default_rng(SEED)
    scale = np.float32(1.0 / np.sqrt(VK_WIDTH))  # a float64 scalar would make float64 weights
    ws = [rng.standard_normal((VK_WIDTH, VK_WIDTH), dtype=np.float32) * scale
          for _ in range(VK_LAYERS)]  # fmt: skip
    bs = [rng.standard_normal(VK_WIDTH, dtype=np.float32) / 10 for _ in range(VK_LAYERS)]
    x = rng.standard_normal((VK_BATCH, VK_WIDTH), dtype=np.float32)
    gws = [gpucore.from_numpy(w) for w in ws]
    gbs = [gpucore.from_numpy(b) for b in bs]

    def graph(h):
        for w, b in zip(gws, gbs):
            h = gpucore.tanh(h @ w + b)
        return h

    ref = x.astype(np.float64)
    for w, b in zip(ws, bs):
        ref = np.tanh(ref @ w + b)
    xt = gpucore.from_numpy(x)
    with dispatch.trace_ops() as ops:
        y_eager = graph(xt).numpy()
    info["ops"] = len(ops)
    info["eager_backends"] = sorted({str(r[1]) for r in ops})
    info["err"] = {"eager": float(np.abs(y_eager - ref).max())}
    fns = {"eager": lambda: graph(xt).numpy()}  # numpy(): waits for the device, reads back
    for mode, device in (("replay", "vulkan"), ("cpu_compiled", "cpu")):
        try:
            cm = rt.compile(graph, (xt,), device=device)
            info["err"][mode] = float(np.abs(cm.run_arrays([x])[0] - ref).max())
            fns[mode] = lambda cm=cm, x=x: cm.run_arrays([x])
        except Exception as e:
            if not isinstance(e, ImportError):  # ImportError: the executor is not written yet
                traceback.print_exc()
                info[f"{mode}_broken"] = True
            info[f"{mode}_error"] = err_text(e)
    res: dict = {}
    measure(fns, repeats=args.repeats, target=args.target, out=res)
    for mode, fn in fns.items():  # host CPU time of the calling thread, per call
        if "number" in res.get(mode, {}):
            n = res[mode]["number"]
            samples = []
            for _ in range(3):
                t0 = time.thread_time()
                _loop(fn, n)
                samples.append((time.thread_time() - t0) / n)
            res[mode]["thread_cpu"] = statistics.median(samples)
    info["results"] = res
    return info


WORKERS = {
    "prep": worker_prep,
    "gpucore": worker_gpucore,
    "torch": worker_torch,
    "ort": worker_ort,
    "vulkan": worker_vulkan,
}


def worker_main(args) -> int:
    lib, names = args.worker
    names = [n for n in names.split(",") if n not in ("", "-")]
    bad = [n for n in names if n not in CONFIGS]
    if lib not in WORKERS or bad:
        sys.exit(f"infer.py --worker: unknown library {lib!r} or configurations {bad}")
    out = WORKERS[lib](names, args)
    sys.stdout.flush()
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0
