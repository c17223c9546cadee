"""``InferenceSession``: ONNX Runtime's interface over a compiled model, with statistics.

    sess = gpucore.runtime.InferenceSession("model.gcm")        # or a CompiledModel
    sess.get_inputs()[0].name, .shape, .type                     # as onnxruntime's NodeArg
    outputs = sess.run(None, {"x": batch})                       # numpy arrays
    sess.stats()                                                 # calls, mean / p50 / p99 ms

``run`` may be called from many threads at once: each concurrent run takes its own arena and
program from the executor's pool; the statistics are updated under a lock after the run.
"""

from __future__ import annotations

import threading
from time import perf_counter

import numpy as np

from ..dispatch import vulkan_backend
from ..errors import SerializationError
from .format import load_model
from .model import CompiledModel, InputError, _pick_device

_TYPE_NAMES = {
    "float32": "tensor(float)",
    "float64": "tensor(double)",
    "float16": "tensor(float16)",
    "bfloat16": "tensor(bfloat16)",
    "int64": "tensor(int64)",
    "int32": "tensor(int32)",
    "int16": "tensor(int16)",
    "int8": "tensor(int8)",
    "uint8": "tensor(uint8)",
    "uint16": "tensor(uint16)",
    "uint32": "tensor(uint32)",
    "uint64": "tensor(uint64)",
    "bool": "tensor(bool)",
}
_PROVIDERS = {
    "vulkan": "vulkan",
    "cpu": "cpu",
    "VulkanExecutionProvider": "vulkan",
    "CPUExecutionProvider": "cpu",
}
MAX_SAMPLES = 100_000  # latencies kept for the percentiles (the oldest are dropped)


class NodeArg:
    """An input or output's name, shape (symbolic sizes as strings) and type string."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name: str, shape: tuple, dtype):
        self.name = name
        self.shape = list(shape)
        self.type = _TYPE_NAMES.get(dtype.name, f"tensor({dtype.name})")

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


def load(path, *, device: str = "auto", executor: str | None = None) -> CompiledModel:
    """The CompiledModel that ``CompiledModel.save`` wrote to ``path``.

    Raises SerializationError naming the file for anything corrupt or hostile in it. An ONNX
    model (a path ending in .onnx, or the bytes of one) goes to ``gpucore.onnx.load``."""
    if isinstance(path, (bytes, bytearray, memoryview)) or str(path).lower().endswith(".onnx"):
        from ..onnx import load as load_onnx  # lazy: it imports onnx, an optional dependency

        device = "auto" if device == "saved" else device
        return load_onnx(path, device=device, **({"executor": executor} if executor else {}))
    graph, opts = load_model(path)
    opts["device"] = _pick_device(device) if device != "saved" else opts["device"]
    if executor is not None:
        opts["executor"] = executor
    model = CompiledModel(graph, **opts)
    try:
        model._executor(_default_sizes(model))
    except (ValueError, TypeError, KeyError, IndexError) as e:
        # a graph that passed the file checks but cannot be planned: corrupt or hostile
        raise SerializationError(f"{path}: the saved graph is invalid: {e}") from None
    return model


def _default_sizes(model: CompiledModel) -> dict:
    return {s: 1 for s in model.symbols}


class InferenceSession:
    """Run a compiled model with onnxruntime.InferenceSession's interface.

    ``model_or_path``: a CompiledModel or the path of a saved one. ``providers``: the devices
    in order of preference, "vulkan" / "cpu" (ONNX Runtime's names ``VulkanExecutionProvider`` /
    ``CPUExecutionProvider`` are accepted); the first usable one runs the model (the default
    picks a real GPU when there is one). ``enable_profiling``: time every node (``stats()``
    reports them; the nodes then run one by one, through the interpreted executor).
    ``check_nan``: reject inputs holding NaN.
    """

    def __init__(
        self,
        model_or_path,
        providers=None,
        *,
        enable_profiling: bool = False,
        check_nan: bool | None = None,
        executor: str | None = None,
    ):
        device = self._device(providers)
        if enable_profiling:
            executor = "interpreted"  # per-node times: the kernels one by one
        if isinstance(model_or_path, CompiledModel):
            model = model_or_path
            want = (
                model.device if device == "auto" else _pick_device(device),
                executor or model.executor_kind,
                model.check_nan if check_nan is None else bool(check_nan),
            )
            if want != (model.device, model.executor_kind, model.check_nan):
                # a model of its own: the caller's CompiledModel is not changed
                model = CompiledModel(
                    model.symbolic,
                    device=want[0],
                    optimize=model.optimize,
                    executor=want[1],
                    check_nan=want[2],
                )
        elif hasattr(model_or_path, "named_parameters"):
            raise TypeError(
                "InferenceSession: pass a CompiledModel or a saved model's path; compile the "
                "module first: gpucore.compile(model, example_inputs)"
            )
        else:
            model = load(model_or_path, device=device, executor=executor)
            if check_nan is not None:
                model.check_nan = check_nan
        self.model = model
        self._lock = threading.Lock()
        self._profiling = enable_profiling
        self.reset_stats()

    @staticmethod
    def _device(providers) -> str:
        """The device of the first usable provider ("auto" when none is named). Naming
        "vulkan" asks for Vulkan even on a CPU-type device (lavapipe), as device="vulkan"."""
        if providers is None:
            return "auto"
        if isinstance(providers, str):
            providers = [providers]
        for p in providers:
            name = p[0] if isinstance(p, tuple) else p
            if name not in _PROVIDERS:
                raise ValueError(
                    f"InferenceSession: unknown provider {name!r}; use 'vulkan' or 'cpu'"
                )
            if _PROVIDERS[name] == "cpu" or vulkan_backend(required=False, allow_cpu=True):
                return _PROVIDERS[name]
        return "cpu"

    def get_providers(self) -> list:
        return [
            "VulkanExecutionProvider" if self.model.device == "vulkan" else "CPUExecutionProvider"
        ]

    def get_inputs(self) -> list:
        return [NodeArg(n, *self.model.input_spec(n)) for n in self.model.input_names]

    def get_outputs(self) -> list:
        return [NodeArg(n, *self.model.output_spec(n)) for n in self.model.output_names]

    def run(self, output_names, input_feed: dict, run_options=None) -> list:
        """The outputs named ``output_names`` (None: all) as numpy arrays, for ``input_feed``
        ({input name: array or Tensor}): a flat list, as ONNX Runtime's (a model's nested
        outputs depth first, ``output_0``, ``output_1``...; ``CompiledModel.__call__`` is what
        rebuilds the nesting)."""
        if not isinstance(input_feed, dict):
            raise InputError("InferenceSession.run: input_feed must be a dict {name: array}")
        names = self.model.input_names
        unknown = [k for k in input_feed if k not in names]
        if unknown:
            raise InputError(
                f"InferenceSession.run: unknown input {unknown[0]!r}; the model's inputs are "
                f"{names}"
            )
        missing = [n for n in names if n not in input_feed]
        if missing:
            raise InputError(f"InferenceSession.run: input {missing[0]!r} is missing")
        wanted = self.model.output_names if output_names is None else list(output_names)
        bad = [n for n in wanted if n not in self.model.output_names]
        if bad:
            raise InputError(
                f"InferenceSession.run: unknown output {bad[0]!r}; the outputs are "
                f"{self.model.output_names}"
            )
        t0 = perf_counter()
        arrays, sizes = self.model._check([input_feed[n] for n in names])
        ex = self.model._executor(sizes)
        if self._profiling and ex.profile is None:
            ex.profile = {}
        outs = ex.run(arrays)
        dt = perf_counter() - t0
        with self._lock:
            self._calls += 1
            self._times.append(dt)
            if len(self._times) > MAX_SAMPLES:
                del self._times[: len(self._times) - MAX_SAMPLES]
        by_name = dict(zip(self.model.output_names, outs))
        return [by_name[n] for n in wanted]

    def stats(self) -> dict:
        """calls, mean_ms, p50_ms, p99_ms over the runs since the last reset, and with
        profiling on, ``nodes``: {node: {"calls", "total_ms", "mean_ms"}}."""
        with self._lock:
            times = np.array(self._times) * 1e3
            calls = self._calls
        out = {
            "calls": calls,
            "mean_ms": float(times.mean()) if calls else 0.0,
            "p50_ms": float(np.percentile(times, 50)) if calls else 0.0,
            "p99_ms": float(np.percentile(times, 99)) if calls else 0.0,
        }
        if self._profiling:
            nodes: dict = {}
            for ex in self.model.executors():
                for name, (n, secs) in (ex.profile or {}).items():
                    rec = nodes.setdefault(name, {"calls": 0, "total_ms": 0.0})
                    rec["calls"] += n
                    rec["total_ms"] += secs * 1e3
            for rec in nodes.values():
                rec["mean_ms"] = rec["total_ms"] / rec["calls"] if rec["calls"] else 0.0
            out["nodes"] = nodes
        return out

    def reset_stats(self) -> None:
        with self._lock:
            self._calls = 0
            self._times: list = []
        for ex in self.model.executors():
            if ex.profile is not None:
                ex.profile = {}
