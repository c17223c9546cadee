"""Static post-training quantization of a compiled model (ONNX Runtime's ``quantize_static`` and
PyTorch's prepare / calibrate / convert, on gpucore's runtime graph).

    cm = gpucore.compile(model, example)                        # a float32 CompiledModel
    qm = gpucore.quantization.quantize_static(cm, batches)      # a new, int8 CompiledModel
    qm(x); qm.save("model.gcm"); gpucore.runtime.load("model.gcm")

1. The model's graph goes through the float passes (GEMM epilogues, batch norms folded into
   convolutions, ...), so ``Linear [+ ReLU]`` is one ``gemm`` and ``Conv2d [+ BN]`` one
   ``conv2d``.
2. Calibration: the float graph runs on every calibration batch with an observer
   (``activation_observer``, MinMaxObserver by default; HistogramObserver for outlier-robust
   ranges) on the input and output (after its ReLU) of every float32 gemm / conv2d with a constant
   weight. A tensor that reaches such a layer only through views and max pooling shares the
   parameters of the quantized tensor it comes from (max and reshapes commute with the
   quantization), so the chain stays in uint8.
3. ``insert_qdq`` writes the QDQ form (uint8 activations, affine per tensor; int8 weights,
   symmetric over [-127, 127], per output channel unless ``per_channel=False``), then
   ``QUANT_PIPELINE`` (gpucore/runtime/passes/quantize.py) moves dequantizes below views and
   pooling, drops quantize(dequantize) pairs and fuses ``DQ -> gemm / conv2d [-> ReLU] -> Q`` into
   ``qlinear`` / ``qconv2d`` nodes (the int8 GEMM with its requantizing epilogue; float32 out
   where no quantize follows, e.g. the logits).

The result is a ``CompiledModel`` whose graph holds the int8 weights (about 4x smaller saved),
run by the compiled executor as one C program (or the interpreted one, with the same bits), or
with ``device="vulkan"`` by the Vulkan executor: the int8 GEMM and byte shaders
(gpucore/runtime/executors/vulkan_quant.py), the same bits as the CPU for the int8 nodes
(float nodes between them, e.g. a gemm's GELU / sigmoid / tanh kept as its own node, are within
float32 rounding of the C kernels: the ``device`` argument of ``quantize_static``)
(``gpucore.runtime.load(path, device="vulkan")`` runs a saved one there too).
With dynamic axes, the calibration batches may have any sizes; the quantized graph is built at
the example sizes and at neighbouring ones and merged into one symbolic graph, as ``capture``
merges traces (a model whose quantized graph changes structure with the sizes is refused).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np

from .. import dtypes as D
from ..creation import from_numpy
from ..errors import ArgumentTypeError, DTypeError
from ..tensor import Tensor
from .observer import MinMaxObserver, ObserverBase

__all__ = ["quantize_static", "calibrate"]

_FN = "quantize_static"


def _targets(graph) -> list:
    """The float32 gemm / conv2d nodes with constant weights that can be quantized."""
    from ..runtime.passes.quantize import _quantizable  # noqa: PLC0415 - runtime is optional

    return [
        n
        for n in graph.order()
        if n.op in ("gemm", "conv2d") and _quantizable(graph, n, {n.inputs[0]: None})
    ]


def _observed(graph, targets: list) -> tuple[list, dict]:
    """(tensors to observe, {tensor: the observed tensor whose parameters it shares}): the
    input of every target, or where that input is a view / max pooling of a target's output
    (after its ReLU), that output; outputs read by no target stay float."""
    from ..runtime.ir.ops import op_info  # noqa: PLC0415

    outs = set()
    for node in targets:
        out = node.output
        reader = graph.sole_consumer(out)
        if node.op == "conv2d" and reader is not None and reader.op == "relu":
            out = reader.output
        if out not in graph.outputs:
            outs.add(out)
    names: list = []
    shared: dict = {}
    for node in targets:
        x = src = node.inputs[0]
        while src not in outs:  # back through views / max pooling read only there
            prod = graph.producer.get(src)
            if prod is None or graph.sole_consumer(prod.inputs[0]) is not prod:
                break
            if op_info(prod.op).view is None and prod.op != "max_pool2d":
                break
            src = prod.inputs[0]
        if src not in outs:
            src = x
        if src != x:
            shared[x] = src
        if src not in names:
            names.append(src)
    return names, shared


def _batches(data, n_inputs: int):
    if isinstance(data, (Tensor, np.ndarray)):
        raise ArgumentTypeError(
            f"{_FN}(): calibration_data must be an iterable of batches (a list of tensors, a "
            "DataLoader, ...), not one tensor: wrap it as [x]"
        )
    if not isinstance(data, Iterable):
        raise ArgumentTypeError(
            f"{_FN}(): calibration_data must be an iterable of batches, got {type(data).__name__}"
        )
    for item in data:
        if isinstance(item, (Tensor, np.ndarray)):
            yield [item]
        elif isinstance(item, (tuple, list)) and len(item) >= n_inputs:
            yield list(item[:n_inputs])  # (x, y) from a DataLoader: the labels are left out
        else:
            raise ArgumentTypeError(
                f"{_FN}(): each calibration batch must be a tensor or a tuple of at least "
                f"{n_inputs} tensors (the model's inputs), got {type(item).__name__}"
            )


def _make_observer(factory) -> ObserverBase:
    obs = factory() if callable(factory) else None
    if not isinstance(obs, ObserverBase):
        raise ArgumentTypeError(
            f"{_FN}(): activation_observer must be an observer class or factory (e.g. "
            f"gpucore.quantization.HistogramObserver), got {factory!r}"
        )
    if obs.dtype is not D.quint8:
        raise DTypeError(f"{_FN}(): the activation observer must observe quint8, got {obs.dtype}")
    return obs


def _float_graph(model, sizes: dict):
    """The model's graph for ``sizes``, through the float passes."""
    from ..runtime.capture.dynamic import specialize  # noqa: PLC0415
    from ..runtime.ir.shapes import check_shapes  # noqa: PLC0415
    from ..runtime.passes import FLOAT_PIPELINE, optimize  # noqa: PLC0415

    graph = specialize(model.symbolic, sizes) if model.symbols else model.symbolic.copy()
    # fresh names from 0 (a copy would continue the source's counter): every build of the same
    # sizes, and of other sizes, names its tensors alike, so calibration's names hold
    graph._names = itertools.count()
    check_shapes(graph)
    return optimize(graph, FLOAT_PIPELINE)


class _Probe:
    """The float graph for one set of sizes, run with the observed tensors as extra outputs."""

    def __init__(self, model, sizes: dict):
        from ..runtime.executors.cpu import CompiledExecutor  # noqa: PLC0415
        from ..runtime.planner.plan import plan  # noqa: PLC0415

        graph = _float_graph(model, sizes)
        self.names, self.shared = _observed(graph, _targets(graph))
        graph.outputs = list(graph.outputs) + [n for n in self.names if n not in graph.outputs]
        self.outputs = graph.outputs
        self.executor = CompiledExecutor(plan(graph))

    def run(self, arrays: list) -> dict:
        return dict(zip(self.outputs, self.executor.run(arrays)))


def calibrate(model, calibration_data, activation_observer=MinMaxObserver) -> tuple:
    """Run ``model``'s optimized float graph on the calibration batches with an observer on
    every tensor that static quantization quantizes; returns ({tensor: (scale, zero_point)},
    the dynamic sizes of the first batch, number of batches)."""
    probes: dict = {}
    observers: dict = {}
    shared: dict = {}
    first = None
    count = 0
    for batch in _batches(calibration_data, len(model.input_names)):
        arrays, sizes = model._check(batch)
        key = tuple(sorted(sizes.items()))
        if key not in probes:
            probes[key] = _Probe(model, sizes)
        probe = probes[key]
        first = sizes if first is None else first
        shared.update(probe.shared)
        outs = probe.run(arrays)
        for name in probe.names:
            if name not in observers:
                observers[name] = _make_observer(activation_observer)
            observers[name](from_numpy(np.ascontiguousarray(outs[name])))
        count += 1
    if count == 0:
        raise ValueError(f"{_FN}(): calibration_data gave no batch")
    qparams = {}
    for name, obs in observers.items():
        scale, zp = obs.calculate_qparams()
        qparams[name] = (float(scale.numpy().reshape(-1)[0]), int(zp.numpy().reshape(-1)[0]))
    for name, src in shared.items():
        qparams[name] = qparams[src]
    return qparams, first, count


def _quantized_graph(model, sizes: dict, qparams: dict, per_channel: bool):
    """The quantized graph for ``sizes`` (float passes, QDQ insertion, the quantized passes)."""
    from ..runtime.ir.shapes import check_shapes  # noqa: PLC0415
    from ..runtime.passes import optimize  # noqa: PLC0415
    from ..runtime.passes.quantize import QUANT_PIPELINE, insert_qdq  # noqa: PLC0415

    graph = _float_graph(model, sizes)
    insert_qdq(qparams, per_channel=per_channel)(graph)
    optimize(graph, QUANT_PIPELINE)
    check_shapes(graph)
    return graph


def _symbolic(model, sizes: dict, qparams: dict, per_channel: bool):
    """One quantized graph for every size of the dynamic axes: built at ``sizes``, at each
    symbol (and pair of symbols) one larger and at every symbol two larger, and merged as
    capture merges traces (sizes and integer attributes solved as SymInts; a graph whose
    structure changes with the sizes is refused)."""
    from ..runtime.capture.dynamic import _merge  # noqa: PLC0415 - the capture's own merge

    syms = sorted(sizes)
    monos = [()] + [(s,) for s in syms] + list(itertools.combinations(syms, 2))

    def at(bump: dict):
        return _quantized_graph(
            model, {s: v + bump.get(s, 0) for s, v in sizes.items()}, qparams, per_channel
        )

    base = at({})
    others = [at({s: 1 for s in mono}) for mono in monos[1:]]
    return _merge(base, others, at({s: 2 for s in syms}), dict(sizes), monos)


def quantize_static(
    model,
    calibration_data,
    *,
    per_channel: bool = True,
    activation_observer=MinMaxObserver,
    weight_dtype=D.qint8,
    activation_dtype=D.quint8,
    executor: str | None = None,
    device: str | None = None,
):
    """A new CompiledModel: ``model`` (a float32 ``gpucore.compile`` result) with its Linear /
    Conv2d layers quantized statically (module docstring).

    calibration_data: an iterable of batches, each a tensor (one-input models) or a tuple of
    the model's inputs (extra elements such as labels are ignored); their shapes must fit the
    model (any size of its dynamic axes). per_channel: one weight scale per output channel
    (else one per tensor). activation_observer: an observer class or factory for the
    activations (MinMaxObserver, HistogramObserver, ``MinMaxObserver.with_args(...)``),
    observing quint8. weight_dtype: gpucore.qint8; activation_dtype: gpucore.quint8 (the
    kernels' types). executor: "compiled" (default: the model's) or "interpreted" (CPU).
    device: where the quantized model runs (default: the model's), "cpu", "vulkan" (the int8
    shaders give the CPU's bits for the same inputs; float ops outside them, such as a gemm's
    GELU, sigmoid or tanh, which quantization keeps as a float node of its own, are within
    float32 rounding, ~1 ulp, of the C kernels, so what follows them agrees to that rounding)
    or "auto" (as ``gpucore.compile``); calibration always runs on the CPU."""
    from ..runtime.model import CompiledModel, _pick_device  # noqa: PLC0415

    if not isinstance(model, CompiledModel):
        raise ArgumentTypeError(
            f"{_FN}(): model must be a gpucore CompiledModel (gpucore.compile(module, example)), "
            f"got {type(model).__name__}; for eager modules see quantize_dynamic"
        )
    if weight_dtype is not D.qint8:
        raise DTypeError(f"{_FN}(): weight_dtype must be gpucore.qint8, got {weight_dtype!r}")
    if activation_dtype is not D.quint8:
        raise DTypeError(
            f"{_FN}(): activation_dtype must be gpucore.quint8, got {activation_dtype!r}"
        )
    qparams, sizes, _ = calibrate(model, calibration_data, activation_observer)
    if model.symbols:
        sizes = model._example_sizes or sizes
        graph = _symbolic(model, sizes, qparams, bool(per_channel))
    else:
        graph = _quantized_graph(model, {}, qparams, bool(per_channel))
    out = CompiledModel(
        graph,
        device=_pick_device(model.device if device is None else device),
        optimize=model.optimize,
        executor=executor or model.executor_kind,
        check_nan=model.check_nan,
    )
    if model.symbols:
        out._example_sizes = dict(sizes)
    out._executor(out._sizes_default())  # build now: errors surface here
    return out
