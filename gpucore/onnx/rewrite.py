"""Rewrites of the ONNX graph before it is interpreted.

GELU: exporters write the exact GELU as ``x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5`` (the
products in any order). gpucore has no erf op, and the runtime fuses what gpucore's ops make, so
the pattern is recognised here, on the ONNX nodes, and becomes one node of the importer's own
domain that runs gpucore's exact ``gelu``.
"""

from __future__ import annotations

import math

import numpy as np

from .context import INTERNAL_DOMAIN
from .proto import ModelInfo, NodeInfo


def _scalar(info: ModelInfo, constants: dict, name: str):
    v = info.initializers.get(name)
    if v is None:
        v = constants.get(name)
    if v is None or v.size != 1 or v.dtype.kind != "f":
        return None
    return float(v.reshape(-1)[0])


def _close(v, want: float) -> bool:
    return v is not None and abs(v - want) <= 1e-4 * abs(want)


def fuse_gelu(info: ModelInfo) -> int:
    """Replace every exact-GELU pattern by one internal Gelu node; returns how many."""
    nodes = info.nodes
    producer = {o: n for n in nodes for o in n.outputs if o}
    readers: dict = {}
    for n in nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    outputs = {o.name for o in info.outputs}
    constants = {
        n.outputs[0]: n.attrs["value"]
        for n in nodes
        if n.op_type == "Constant" and isinstance(n.attrs.get("value"), np.ndarray)
    }

    def sole(name: str):
        r = readers.get(name, [])
        return r[0] if len(r) == 1 and name not in outputs else None

    def other(node, name: str):
        a, b = (node.inputs + ["", ""])[:2]
        return b if a == name else a if b == name else None

    removed, added = set(), {}
    for erf in nodes:
        if erf.op_type != "Erf" or erf.domain:
            continue
        scaled = producer.get(erf.inputs[0])
        if scaled is None or sole(scaled.outputs[0]) is not erf or len(scaled.inputs) != 2:
            continue
        x, c = scaled.inputs
        if scaled.op_type == "Div" and _close(_scalar(info, constants, c), math.sqrt(2)):
            pass
        elif scaled.op_type == "Mul" and _close(_scalar(info, constants, c), math.sqrt(0.5)):
            pass
        elif scaled.op_type == "Mul" and _close(_scalar(info, constants, x), math.sqrt(0.5)):
            x = c
        else:
            continue
        add = sole(erf.outputs[0])
        if add is None or add.op_type != "Add":
            continue
        if not _close(_scalar(info, constants, other(add, erf.outputs[0]) or ""), 1.0):
            continue
        mul = sole(add.outputs[0])
        if mul is None or mul.op_type != "Mul":
            continue
        o = other(mul, add.outputs[0])
        chain = [scaled, erf, add, mul]
        last = None
        if o == x:  # (x * (1 + erf)) * 0.5
            last = sole(mul.outputs[0])
            ok = last is not None and last.op_type == "Mul"
            ok = ok and _close(_scalar(info, constants, other(last, mul.outputs[0]) or ""), 0.5)
        elif o in producer and producer[o].op_type == "Mul" and sole(o) is mul:
            half = producer[o]  # (x * 0.5) * (1 + erf)
            ok = _close(_scalar(info, constants, other(half, x) or ""), 0.5)
            chain.insert(0, half)
            last = mul
        elif _close(_scalar(info, constants, o), 0.5):  # x * ((1 + erf) * 0.5)
            last = sole(mul.outputs[0])
            ok = last is not None and last.op_type == "Mul" and other(last, mul.outputs[0]) == x
        else:
            ok = False
        if not ok:
            continue
        if last not in chain:
            chain.append(last)
        if any(id(n) in removed for n in chain):
            continue
        removed.update(id(n) for n in chain)
        attrs = {"approximate": "none"}
        label = f"{last.label()}/gelu"
        added[id(last)] = NodeInfo("Gelu", label, [x], [last.outputs[0]], attrs, INTERNAL_DOMAIN)
    if added:
        info.nodes = [added.get(id(n), n) for n in nodes if id(n) not in removed or id(n) in added]
    return len(added)
