"""The saved-model file: graph and weights in one ``gpucore.save`` (safetensors) file.

    {"format": "gpucore.runtime", "version": 1,
     "graph": "<JSON: inputs, outputs, tensors (shape, dtype), nodes (op, inputs, output, attrs),
               output_tree (optional: how the outputs nest, ir/output_tree.py)>",
     "options": "<JSON: device, optimize, executor, check_nan>",
     "weights": {constant name: Tensor, ...},
     "capi": {...}}   (optional: the compiled CPU program for the C API, see c_program.py)

The graph is the captured one (symbolic sizes included); loading re-runs passes and planning,
which are deterministic and fast, so the file stays valid when they improve. Reading goes
through ``gpucore.load`` (checksums, header limits) and then validates every field of the
graph: a hostile or corrupt file raises SerializationError naming the file and the field, never
crashes, and allocates nothing its own data does not back.
"""

from __future__ import annotations

import json
import math

import numpy as np

from .. import dtypes as D
from ..errors import SerializationError
from ..ops.registry import REGISTRY
from ..tensor import Tensor
from . import c_program
from .ir.graph import Graph, GraphError
from .ir.ops import OPS
from .ir.output_tree import leaf_count
from .ir.symbolic import SymInt

FORMAT = "gpucore.runtime"
VERSION = 1
MAX_NODES = 1_000_000
MAX_DEPTH = 16


# ---------------------------------------------------------------------------- encoding
def _enc(v, where: str):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$float": repr(v)}
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return _enc(v.item(), where)
    if isinstance(v, tuple):
        return {"$tuple": [_enc(x, where) for x in v]}
    if isinstance(v, list):
        return [_enc(x, where) for x in v]
    if isinstance(v, dict):
        return {"$dict": [[_enc(k, where), _enc(x, where)] for k, x in v.items()]}
    if isinstance(v, slice):
        return {"$slice": [_enc(v.start, where), _enc(v.stop, where), _enc(v.step, where)]}
    if v is Ellipsis:
        return {"$ellipsis": True}
    if isinstance(v, SymInt):
        return {"$sym": [v.const, [[list(mono), c] for mono, c in v.coefs]]}
    if isinstance(v, D.dtype):
        return {"$dtype": v.name}
    raise SerializationError(f"save: {where} holds a {type(v).__name__}, which has no encoding")


def _dec(v, where: str, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError(f"{where} is nested too deeply")
    if v is None or isinstance(v, (bool, int, str, float)):
        return v
    if isinstance(v, list):
        return [_dec(x, where, depth + 1) for x in v]
    if not isinstance(v, dict) or len(v) != 1:
        raise ValueError(f"{where}: unknown value {str(v)[:60]}")
    ((tag, body),) = v.items()
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$tuple" and isinstance(body, list):
        return tuple(_dec(x, where, depth + 1) for x in body)
    if tag == "$dict" and isinstance(body, list):
        out = {}
        for item in body:
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
                raise ValueError(f"{where}: bad dict item")
            out[item[0]] = _dec(item[1], where, depth + 1)
        return out
    if tag == "$slice" and isinstance(body, list) and len(body) == 3:
        return slice(*(_dec(x, where, depth + 1) for x in body))
    if tag == "$ellipsis":
        return Ellipsis
    if tag == "$sym" and isinstance(body, list) and len(body) == 2:
        const, coefs = body
        if not _is_int(const) or not isinstance(coefs, list):
            raise ValueError(f"{where}: bad symbolic size")
        pairs = {}
        for c in coefs:
            if not (isinstance(c, list) and len(c) == 2 and isinstance(c[0], list)) or not (
                _is_int(c[1]) and 0 < len(c[0]) <= 8 and all(isinstance(n, str) for n in c[0])
            ):
                raise ValueError(f"{where}: bad symbolic size")
            pairs[tuple(c[0])] = c[1]
        return SymInt(const, pairs)
    if tag == "$dtype" and body in D.BY_NAME:
        return D.BY_NAME[body]
    raise ValueError(f"{where}: unknown tag {tag!r}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def graph_to_json(graph: Graph) -> str:
    tensors = {
        name: {
            "shape": _enc(tuple(t.shape), name),
            "dtype": t.dtype.name,
            "const": t.data is not None,
        }
        for name, t in graph.tensors.items()
    }
    nodes = [
        {
            "op": n.op,
            "inputs": n.inputs,
            "output": n.output,
            "attrs": _enc(n.attrs, f"node {n.output} ({n.op})"),
        }
        for n in graph.order()
    ]
    doc = {"inputs": graph.inputs, "outputs": graph.outputs, "tensors": tensors, "nodes": nodes}
    if graph.output_tree is not None:
        doc["output_tree"] = graph.output_tree  # JSON as it is (ir/output_tree.py)
    return json.dumps(doc)


def save_model(model, path) -> None:
    """Write ``model`` (a CompiledModel) to ``path`` atomically (see the module docstring)."""
    g = model.symbolic
    arrays = {
        n: np.require(t.data, requirements="C") for n, t in g.tensors.items() if t.data is not None
    }
    weights = {name: Tensor._wrap(a, g.tensors[name].dtype) for name, a in arrays.items()}
    options = {
        "device": model.device,
        "optimize": model.optimize,
        "executor": model.executor_kind,
        "check_nan": model.check_nan,
    }
    from ..io import save as _save  # noqa: PLC0415 - lazy: gpucore.io is not needed to infer

    _save(
        {
            "format": FORMAT,
            "version": VERSION,
            "graph": graph_to_json(g),
            "options": json.dumps(options),
            "weights": weights,
            **_c_section(model, arrays),
        },
        path,
    )


def _c_section(model, arrays: dict) -> dict:
    """{"capi": the compiled program for the C API (c_program.py)}, or {} when the model cannot
    run from C; never fails the save (the Python loader ignores the section)."""
    try:
        sec = c_program.section(model, arrays)
    except Exception:  # noqa: BLE001 - an optional section: the file stays valid without it
        sec = None
    return {"capi": sec} if sec else {}


# ---------------------------------------------------------------------------- decoding
def _shape(value, where: str) -> tuple:
    if not isinstance(value, tuple) or len(value) > 8:
        raise ValueError(f"{where}: shape must be a tuple of at most 8 sizes")
    for d in value:
        if isinstance(d, SymInt):
            continue
        if not _is_int(d) or d < 0:
            raise ValueError(f"{where}: bad size {d!r}")
    return value


def graph_from_json(text: str, weights: dict) -> Graph:
    """The Graph a saved file describes, every field validated (ValueError says which)."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("graph: not an object")
    for key, kind in (("inputs", list), ("outputs", list), ("tensors", dict), ("nodes", list)):
        if not isinstance(doc.get(key), kind):
            raise ValueError(f"graph: field {key!r} missing or of the wrong type")
    if len(doc["nodes"]) > MAX_NODES:
        raise ValueError("graph: too many nodes")
    g = Graph()
    produced = {n.get("output") for n in doc["nodes"] if isinstance(n, dict)}
    for name, t in doc["tensors"].items():
        if not isinstance(t, dict) or t.get("dtype") not in D.BY_NAME:
            raise ValueError(f"tensor {name!r}: bad entry")
        shape = _shape(_dec(t.get("shape"), f"tensor {name!r}"), f"tensor {name!r}")
        dtype = D.BY_NAME[t["dtype"]]
        if name in produced:
            continue
        if t.get("const"):
            w = weights.get(name)
            if not isinstance(w, Tensor) or tuple(w.shape) != shape or w.dtype is not dtype:
                raise ValueError(f"constant {name!r}: no weight of shape {shape} and {dtype.name}")
            # a copy the graph owns, read-only: the compiled executor packs such weights once
            g.add_constant(np.array(w._host()), name=name, dtype=dtype)
        else:
            g.add_tensor(name, shape, dtype)
    for name in doc["inputs"]:
        if not isinstance(name, str) or name not in g.tensors or g.tensors[name].data is not None:
            raise ValueError(f"graph input {name!r} is not a declared non-constant tensor")
        g.inputs.append(name)
    for i, n in enumerate(doc["nodes"]):
        where = f"node {i}"
        if not isinstance(n, dict) or not isinstance(n.get("op"), str):
            raise ValueError(f"{where}: bad entry")
        op = n["op"]
        if op not in OPS and op not in REGISTRY:
            raise ValueError(f"{where}: unknown op {op!r}")
        ins, out = n.get("inputs"), n.get("output")
        if not isinstance(ins, list) or not all(isinstance(x, str) for x in ins):
            raise ValueError(f"{where}: bad inputs")
        t = doc["tensors"].get(out) if isinstance(out, str) else None
        if t is None:
            raise ValueError(f"{where}: output {out!r} is not declared")
        attrs = _dec(n.get("attrs"), where)
        if not isinstance(attrs, dict):
            raise ValueError(f"{where}: attrs must be a dict")
        shape = _shape(_dec(t["shape"], f"tensor {out!r}"), f"tensor {out!r}")
        try:
            g.add_node(op, ins, shape, D.BY_NAME[t["dtype"]], attrs, out)
        except GraphError as e:
            raise ValueError(f"{where}: {e}") from None
    for name in doc["outputs"]:
        if not isinstance(name, str) or name not in g.producer:
            raise ValueError(f"graph output {name!r} is not a node's output")
        g.outputs.append(name)
    tree = doc.get("output_tree")  # absent in files saved before it was kept: None, the old rule
    if tree is not None:
        # (ValueError naming what is wrong, the walk bounded by the outputs; validate() checks
        # the count)
        leaf_count(tree, len(g.outputs))
        g.output_tree = tree
    g.validate()
    return g


def load_model(path) -> tuple[Graph, dict]:
    """The graph and options saved at ``path`` (SerializationError for anything wrong)."""
    from ..io import load as _load  # noqa: PLC0415 - lazy: gpucore.io is not needed to infer

    obj = _load(path)
    source = str(path)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise SerializationError(f"{source}: not a gpucore.runtime model file")
    if obj.get("version") != VERSION:
        raise SerializationError(
            f"{source}: model file version {obj.get('version')!r}; this gpucore reads {VERSION}"
        )
    try:
        weights = obj.get("weights")
        if not isinstance(weights, dict):
            raise ValueError("weights missing")
        graph = graph_from_json(obj.get("graph"), weights)
        options = json.loads(obj.get("options") or "{}")
        if not isinstance(options, dict):
            raise ValueError("options must be an object")
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise SerializationError(f"{source}: corrupt model file: {e}") from None
    opts = {
        "device": options.get("device", "cpu"),
        "optimize": bool(options.get("optimize", True)),
        "executor": options.get("executor", "compiled"),
        "check_nan": bool(options.get("check_nan", False)),
    }
    if opts["device"] not in ("cpu", "vulkan") or opts["executor"] not in (
        "compiled",
        "interpreted",
    ):
        raise SerializationError(f"{source}: corrupt model file: bad options {options}")
    return graph, opts
