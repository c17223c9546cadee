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
run by the compiled executor as one C program (or the interpreted one, with the same bits). It
runs on the CPU: the Vulkan executor refuses the quantized nodes (DeviceError naming the node).
Models with dynamic axes are not supported yet (compile with fixed sizes; the calibration
batches must have those sizes).
"""

from __future__ import annotations

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


def calibrate(model, calibration_data, activation_observer=MinMaxObserver) -> tuple:
    """Run ``model``'s optimized float graph on the calibration batches with an observer on
    every tensor that static quantization quantizes; returns (graph, {tensor: (scale,
    zero_point)}, number of batches)."""
    from ..runtime.executors.cpu import CompiledExecutor  # noqa: PLC0415
    from ..runtime.ir.shapes import check_shapes  # noqa: PLC0415
    from ..runtime.passes import optimize  # noqa: PLC0415
    from ..runtime.planner.plan import plan  # noqa: PLC0415

    graph = model.symbolic.copy()
    check_shapes(graph)
    optimize(graph)
    targets = _targets(graph)
    names, shared = _observed(graph, targets)
    probe = graph.copy()
    extra = [n for n in names if n not in probe.outputs]
    probe.outputs = list(probe.outputs) + extra
    executor = CompiledExecutor(plan(probe))
    observers = {n: _make_observer(activation_observer) for n in names}
    count = 0
    for batch in _batches(calibration_data, len(model.input_names)):
        arrays, _ = model._check(batch)
        outs = dict(zip(probe.outputs, executor.run(arrays)))
        for name, obs in observers.items():
            obs(from_numpy(np.ascontiguousarray(outs[name])))
        count += 1
    if count == 0:
        raise ValueError(f"{_FN}(): calibration_data gave no batch")
    qparams = {}
    for name, obs in observers.items():
        scale, zp = obs.calculate_qparams()
        qparams[name] = (float(scale.numpy().reshape(-1)[0]), int(zp.numpy().reshape(-1)[0]))
    for name, src in shared.items():
        qparams[name] = qparams[src]
    return graph, qparams, count


def quantize_static(
    model,
    calibration_data,
    *,
    per_channel: bool = True,
    activation_observer=MinMaxObserver,
    weight_dtype=D.qint8,
    activation_dtype=D.quint8,
    executor: str | None = None,
):
    """A new CompiledModel: ``model`` (a float32 ``gpucore.compile`` result) with its Linear /
    Conv2d layers quantized statically (module docstring).

    calibration_data: an iterable of batches, each a tensor (one-input models) or a tuple of
    the model's inputs (extra elements such as labels are ignored); their shapes must be the
    compiled ones. per_channel: one weight scale per output channel (else one per tensor).
    activation_observer: an observer class or factory for the activations (MinMaxObserver,
    HistogramObserver, ``MinMaxObserver.with_args(...)``), observing quint8. weight_dtype:
    gpucore.qint8; activation_dtype: gpucore.quint8 (the kernels' types). executor: "compiled"
    (default: the model's) or "interpreted"."""
    from ..runtime.ir.shapes import check_shapes  # noqa: PLC0415
    from ..runtime.model import CompiledModel  # noqa: PLC0415
    from ..runtime.passes import optimize  # noqa: PLC0415
    from ..runtime.passes.quantize import QUANT_PIPELINE, insert_qdq  # noqa: PLC0415

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
    if model.symbols:
        raise ValueError(
            f"{_FN}(): the model has dynamic axes {model.symbols}; static quantization needs "
            "fixed sizes: compile it without dynamic_axes"
        )
    graph, qparams, _ = calibrate(model, calibration_data, activation_observer)
    insert_qdq(qparams, per_channel=bool(per_channel))(graph)
    optimize(graph, QUANT_PIPELINE)
    check_shapes(graph)
    out = CompiledModel(
        graph,
        device="cpu",
        optimize=model.optimize,
        executor=executor or model.executor_kind,
        check_nan=model.check_nan,
    )
    out._executor({})  # build now: errors surface here
    return out
