"""``quantize_dynamic``: PyTorch's post-training dynamic quantization of a model
(``torch.ao.quantization.quantize_dynamic``).

Every submodule whose type is in ``qconfig_spec`` (or whose qualified name is) and which has a
dynamically quantized version in ``mapping`` is replaced by it, made with ``from_float``:
``nn.Linear`` -> ``gpucore.quantization.dynamic.Linear``, ``nn.LSTM`` / ``nn.GRU`` ->
``dynamic_rnn.LSTM`` / ``GRU`` (int8 W_ih and W_hh). The model is switched to eval mode; with
``inplace=False`` (the default) it is deep-copied first and left untouched.
"""

from __future__ import annotations

import copy

from .. import dtypes as D
from ..errors import ArgumentTypeError, DTypeError
from ..nn.module import Module
from ..nn.modules.linear import Linear as FloatLinear
from ..nn.modules.rnn import GRU as FloatGRU
from ..nn.modules.rnn import LSTM as FloatLSTM
from . import dynamic, dynamic_rnn

__all__ = ["quantize_dynamic", "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS"]

DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS = {
    FloatLinear: dynamic.Linear,
    FloatLSTM: dynamic_rnn.LSTM,
    FloatGRU: dynamic_rnn.GRU,
}


def _spec(qconfig_spec, mapping) -> tuple[set, set]:
    """(module types, qualified names) to quantize."""
    fn = "quantize_dynamic"
    if qconfig_spec is None:
        return set(mapping), set()
    if isinstance(qconfig_spec, dict):
        items = list(qconfig_spec)  # PyTorch's {type or name: qconfig}; the qconfig is fixed here
    elif isinstance(qconfig_spec, (set, frozenset, list, tuple)):
        items = list(qconfig_spec)
    else:
        raise ArgumentTypeError(
            f"{fn}(): qconfig_spec must be a set of module types and/or submodule names (e.g. "
            f"{{gpucore.nn.Linear}}), got {type(qconfig_spec).__name__}"
        )
    types, names = set(), set()
    for item in items:
        if isinstance(item, str):
            names.add(item)
        elif isinstance(item, type) and issubclass(item, Module):
            if item not in mapping:
                supported = ", ".join(f"gpucore.nn.{t.__name__}" for t in mapping)
                raise ValueError(
                    f"{fn}(): {item.__name__} has no dynamically quantized version; supported: "
                    f"{supported}"
                )
            types.add(item)
        else:
            raise ArgumentTypeError(
                f"{fn}(): qconfig_spec entries must be gpucore.nn.Module types or submodule "
                f"names, got {item!r}"
            )
    return types, names


def _swap(module: Module, prefix: str, types: set, names: set, mapping: dict) -> Module:
    """``module`` or its quantized replacement, its children swapped recursively."""
    kind = type(module)
    if kind in mapping and (kind in types or prefix in names):
        return mapping[kind].from_float(module)
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        full = f"{prefix}.{name}" if prefix else name
        new = _swap(child, full, types, names, mapping)
        if new is not child:
            module._modules[name] = new
    return module


def quantize_dynamic(
    model: Module,
    qconfig_spec=None,
    dtype=D.qint8,
    mapping: dict | None = None,
    inplace: bool = False,
) -> Module:
    """The model with its ``nn.Linear``, ``nn.LSTM`` and ``nn.GRU`` layers (or those
    ``qconfig_spec`` names: a set of types and/or qualified submodule names) replaced by
    dynamically quantized ones: int8
    weights per output channel, activations quantized per call (see
    ``gpucore.quantization.dynamic``). ``dtype``: gpucore.qint8 (the only one supported).
    ``mapping``: float type -> quantized type (default ``DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS``).
    ``inplace=False`` quantizes a deep copy. As ``torch.ao.quantization.quantize_dynamic``."""
    fn = "quantize_dynamic"
    if not isinstance(model, Module):
        raise ArgumentTypeError(
            f"{fn}(): model must be a gpucore.nn.Module, got {type(model).__name__}"
        )
    if dtype is not D.qint8:
        raise DTypeError(
            f"{fn}(): dtype must be gpucore.qint8 (int8 weights); got {dtype!r}. float16 dynamic "
            "quantization is not implemented: use model.half() for float16 weights"
        )
    if mapping is None:
        mapping = DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS
    elif not isinstance(mapping, dict):
        raise ArgumentTypeError(
            f"{fn}(): mapping must be a dict of float module type -> quantized module type"
        )
    types, names = _spec(qconfig_spec, mapping)
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    return _swap(model, "", types, names, mapping)
