"""Dynamic axes: one captured graph for every size of the axes the user names.

``dynamic_axes`` follows ``torch.onnx.export``: ``{input name: {axis: symbol}}`` or ``{input
name: [axis, ...]}`` (symbols then named ``<input>_<axis>``); inputs may also be given by
position. The model is traced at the example sizes, once more per symbol with that symbol's size
one larger and per pair of symbols with both one larger, and once with every symbol two larger.
Each shape entry and integer attribute that differs between the traces becomes a polynomial
whose monomials are products of distinct symbols (a ``SymInt``: ``B * T`` is one), solved from
the first traces and checked against the last; a graph whose structure, float attributes or
constants change with a size cannot serve every size and is refused with CaptureError naming the
node. ``specialize`` makes the plain graph for given sizes.

``shapes_only=True`` traces without running the kernels of input-dependent ops (trace.py), and
falls back to executing traces when the model reads such a value on the host.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..ir.graph import Graph
from ..ir.symbolic import SymInt, evaluate
from .trace import CaptureError, ValuesNeeded, default_input_names, trace


def normalize_axes(dynamic_axes, input_names: list) -> dict:
    """``{(input index, axis): symbol}`` from the torch.onnx.export-style argument."""
    out = {}
    if not dynamic_axes:
        return out
    for key, axes in dynamic_axes.items():
        if isinstance(key, int):
            if not 0 <= key < len(input_names):
                raise CaptureError(f"dynamic_axes: input index {key} is out of range")
            index = key
        elif key in input_names:
            index = input_names.index(key)
        else:
            raise CaptureError(
                f"dynamic_axes: {key!r} is not an input name (the inputs are {input_names})"
            )
        if isinstance(axes, dict):
            items = list(axes.items())
        else:
            items = [(a, f"{input_names[index]}_{a}") for a in axes]
        for axis, symbol in items:
            out[(index, int(axis))] = str(symbol)
    return out


def _resized(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    """x with ``axis`` resized to ``size`` (values repeated cyclically)."""
    if x.shape[axis] == 0:
        raise CaptureError("dynamic_axes: an example input has size 0 on a dynamic axis")
    return np.take(x, np.arange(size) % x.shape[axis], axis=axis)


def capture(
    fn,
    example_inputs,
    dynamic_axes=None,
    input_names=None,
    *,
    strict=False,
    sources=None,
    shapes_only=False,
    bake_values=False,
) -> Graph:
    """The graph of ``fn`` with symbolic sizes for ``dynamic_axes`` (see the module
    docstring); without dynamic axes, the plain trace. strict, sources, shapes_only, bake_values: as
    ``trace``'s, but a shapes-only capture that needs values runs again executing."""
    if shapes_only:
        try:
            return _capture(
                fn, example_inputs, dynamic_axes, input_names, strict, sources, True, bake_values
            )
        except ValuesNeeded:
            if sources is not None:
                sources.clear()
    return _capture(
        fn, example_inputs, dynamic_axes, input_names, strict, sources, False, bake_values
    )


def _capture(
    fn, example_inputs, dynamic_axes, input_names, strict, sources, shapes_only, bake_values
):
    examples = (
        list(example_inputs) if isinstance(example_inputs, (tuple, list)) else [example_inputs]
    )
    names = input_names or default_input_names(fn, len(examples))
    base = trace(
        fn,
        examples,
        names,
        strict=strict,
        sources=sources,
        shapes_only=shapes_only,
        bake_values=bake_values,
    )
    axes = normalize_axes(dynamic_axes, names)
    if not axes:
        return base
    arrays = [_host(x) for x in examples]
    values: dict = {}
    for (i, axis), sym in axes.items():
        shape = arrays[i].shape
        if not -len(shape) <= axis < len(shape):
            raise CaptureError(f"dynamic_axes: input {names[i]!r} has no axis {axis}")
        size = shape[axis]
        if values.setdefault(sym, size) != size:
            raise CaptureError(
                f"dynamic_axes: symbol {sym!r} has sizes {values[sym]} and {size} in the examples"
            )

    def traced(bump) -> Graph:
        xs = list(arrays)
        for (i, axis), sym in axes.items():
            if sym in bump:
                xs[i] = _resized(xs[i], axis, values[sym] + bump[sym])
        return trace(fn, xs, names, strict=strict, shapes_only=shapes_only, bake_values=bake_values)

    syms = sorted(values)
    monos = [()] + [(s,) for s in syms] + list(itertools.combinations(syms, 2))
    others = [traced({s: 1 for s in mono}) for mono in monos[1:]]
    check = traced({s: 2 for s in syms})
    return _merge(base, others, check, values, monos)


def _host(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else np.asarray(x._host())


def _solver(values: dict, monos: list):
    """fit(vals) -> (const, {monomial: coef}) from the values at the traced sizes (the traces
    bump the monomials' symbols by one), or None when no integer polynomial fits."""
    sizes = [{s: values[s] + (1 if s in mono else 0) for s in values} for mono in monos]
    a = np.array([[math.prod(sz[s] for s in m) for m in monos] for sz in sizes], np.float64)
    inv = np.linalg.inv(a)

    def fit(vals: list):
        coefs = inv @ np.array(vals[: len(monos)], np.float64)
        rounded = np.rint(coefs)
        if not np.allclose(coefs, rounded, atol=1e-6):
            return None
        return int(rounded[0]), {m: int(c) for m, c in zip(monos[1:], rounded[1:])}

    return fit


def _merge(base: Graph, others: list, check: Graph, values: dict, monos: list) -> Graph:
    graphs = [base, *others, check]
    nodes = [g.order() for g in graphs]
    fit = _solver(values, monos)
    for ns in nodes[1:]:
        if len(ns) != len(nodes[0]) or any(
            a.op != b.op or a.inputs != b.inputs for a, b in zip(nodes[0], ns)
        ):
            raise CaptureError(
                "dynamic_axes: the model runs different ops at different sizes of the dynamic "
                "axes, so one graph cannot serve them all; capture it at a fixed size"
            )

    if any(g.output_tree != base.output_tree for g in graphs):
        raise CaptureError(
            "dynamic_axes: the model returns differently nested outputs at different sizes of "
            "the dynamic axes; capture it at a fixed size"
        )

    def merge(where: str, vals: list):
        v0 = vals[0]
        if isinstance(v0, (bool, np.bool_)) or not isinstance(v0, (int, np.integer)):
            if isinstance(v0, (tuple, list)) and all(
                isinstance(v, type(v0)) and len(v) == len(v0) for v in vals
            ):
                return type(v0)(merge(where, list(col)) for col in zip(*vals))
            if isinstance(v0, dict) and all(
                isinstance(v, dict) and v.keys() == v0.keys() for v in vals
            ):
                return {k: merge(where, [v[k] for v in vals]) for k in v0}
            if isinstance(v0, slice) and all(isinstance(v, slice) for v in vals):
                fields = ("start", "stop", "step")
                return slice(*[merge(where, [getattr(v, f) for v in vals]) for f in fields])
            if all(_same(v, v0) for v in vals):
                return v0
            raise CaptureError(
                f"dynamic_axes: {where} changes with the dynamic sizes ({vals[0]!r} vs "
                f"{vals[1]!r}) in a way a graph cannot express; capture at a fixed size"
            )
        if all(v == v0 for v in vals):
            return int(v0)
        solved = fit(vals)
        sym = SymInt(*solved) if solved is not None else None
        if sym is None or sym.eval({s: values[s] + 2 for s in values}) != vals[-1]:
            raise CaptureError(
                f"dynamic_axes: {where} is not a linear function of the dynamic sizes (nor of "
                f"products of distinct ones): {vals}; capture at a fixed size"
            )
        return sym

    out = Graph()
    for name, info in base.tensors.items():
        infos = [g.tensors.get(name) for g in graphs]
        if any(i is None for i in infos):
            raise CaptureError(f"dynamic_axes: tensor {name!r} exists at one size only")
        shape = tuple(merge(f"the shape of {name!r}", [list(i.shape) for i in infos]))
        if info.data is not None:
            if not all(np.array_equal(i.data, info.data) for i in infos):
                raise CaptureError(
                    f"dynamic_axes: constant {name!r} (shape {info.shape}) changes with the "
                    "dynamic sizes: the model creates a tensor from a size inside forward(); "
                    "compute it from the input with tensor ops, or capture at a fixed size"
                )
            out.add_tensor(name, info.shape, info.dtype, info.data)
        elif name not in base.producer:
            out.add_tensor(name, shape, info.dtype)
    out.inputs = list(base.inputs)
    for k, node in enumerate(nodes[0]):
        attrs = merge(f"attribute of node {node.output} ({node.op})", [ns[k].attrs for ns in nodes])
        info = base.tensors[node.output]
        shape = tuple(
            merge(
                f"the shape of {node.output!r}",
                [list(g.tensors[node.output].shape) for g in graphs],
            )
        )
        out.add_node(node.op, node.inputs, shape, info.dtype, attrs, node.output)
    out.outputs = list(base.outputs)
    out.output_tree = base.output_tree
    out.validate()
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different
        return False


def specialize(graph: Graph, sizes: dict) -> Graph:
    """A copy of ``graph`` with every symbolic size evaluated for ``sizes``."""
    g = Graph()
    for name, info in graph.tensors.items():
        if name not in graph.producer:
            g.add_tensor(name, evaluate(info.shape, sizes), info.dtype, info.data)
    g.inputs = list(graph.inputs)
    for node in graph.order():
        info = graph.tensors[node.output]
        g.add_node(
            node.op,
            node.inputs,
            evaluate(info.shape, sizes),
            info.dtype,
            evaluate(node.attrs, sizes),
            node.output,
        )
    g.outputs = list(graph.outputs)
    g.output_tree = graph.output_tree
    return g
