"""The structure of a model's outputs: how a graph's flat outputs nest into what the model
returned.

A graph's outputs are a flat list (as ONNX's and ``torch.onnx.export``'s): an LSTM's
``(output, (h_n, c_n))`` is captured as three outputs, depth first. The capture records the
nesting as a tree (``Graph.output_tree``) so that a compiled model can return the model's own
structure again. A tree is JSON as it is (the saved model keeps it):

- ``"tensor"``: one output (the next one in the flat order);
- ``{"tuple": [tree, ...]}``, ``{"list": [tree, ...]}``: a tuple / list of subtrees;
- ``{"dict": [[key, tree], ...]}``: a dict with str keys, in its order.

``None`` (graphs that were not captured: ONNX imports, models saved before the tree existed)
means the old rule: one output as it is, several as a flat tuple. Tuple and dict subclasses
(namedtuples, ``OrderedDict``) come back as plain tuples and dicts.

Capture and the loader hold a tree to the same bounds: containers nest ``MAX_DEPTH`` deep, and a
tree holds at most ``max_entries(outputs)`` entries (a saved file is untrusted input).
"""

from __future__ import annotations

import reprlib

TENSOR = "tensor"
_KINDS = {"tuple": tuple, "list": list}
# Containers nest at most this deep (the outermost at depth 0): capture refuses deeper results,
# the loader deeper trees, with the same rule (``container_too_deep``).
MAX_DEPTH = 64
# A tree holds at most this many entries (tensors and containers) per output, plus EXTRA_ENTRIES
# (empty containers hold none): a saved file cannot make every call build millions of objects.
ENTRIES_PER_OUTPUT = 4
EXTRA_ENTRIES = 4096
_SHORT = reprlib.Repr()  # error messages: a bounded repr of a possibly huge bad entry
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring = 2, 3, 2, 30


def container_too_deep(depth: int) -> bool:
    """Whether a container at ``depth`` (the outermost at 0) is nested too deeply."""
    return depth >= MAX_DEPTH


def max_entries(outputs: int) -> int:
    """The most entries a tree of ``outputs`` outputs may hold."""
    return ENTRIES_PER_OUTPUT * outputs + EXTRA_ENTRIES


def leaf_count(tree, outputs: int | None = None) -> int:
    """The number of outputs ``tree`` holds (ValueError for anything that is not a tree, or,
    ``outputs`` given, for a tree of more than ``max_entries(outputs)`` entries: the walk stops
    there)."""
    budget = [max_entries(outputs) if outputs is not None else None]
    try:
        return _count(tree, 0, budget)
    except _TooMany:
        raise ValueError(
            f"output_tree: more than {max_entries(outputs)} entries (tensors and containers) "
            f"for a graph of {outputs} output(s)"
        ) from None


class _TooMany(Exception):
    pass


def _count(tree, depth: int, budget: list) -> int:
    if budget[0] is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMany
    if tree == TENSOR:
        return 1
    if isinstance(tree, dict) and len(tree) == 1:
        ((kind, body),) = tree.items()
        if isinstance(body, list) and container_too_deep(depth):
            raise ValueError(f"output_tree: nested too deeply (more than {MAX_DEPTH} levels)")
        if kind in _KINDS and isinstance(body, list):
            return sum(_count(t, depth + 1, budget) for t in body)
        if kind == "dict" and isinstance(body, list):
            keys = set()
            total = 0
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                    raise ValueError("output_tree: a dict item must be [str key, tree]")
                if item[0] in keys:
                    raise ValueError(f"output_tree: dict key {_SHORT.repr(item[0])} repeats")
                keys.add(item[0])
                total += _count(item[1], depth + 1, budget)
            return total
    # (a short repr: a bad entry may be huge)
    raise ValueError(f"output_tree: unknown entry {_SHORT.repr(tree)}")


def unflatten(tree, values: list):
    """``values`` (one per graph output, in order) in the structure ``tree`` describes; with
    ``tree`` None, the old rule (the module docstring)."""
    if tree is None:
        return values[0] if len(values) == 1 else tuple(values)
    if tree is TENSOR or tree == TENSOR:  # (the common case, per call: no walk)
        return values[0]
    it = iter(values)
    out = _build(tree, it)
    if next(it, None) is not None:
        raise ValueError("unflatten: more values than the output tree holds")
    return out


def _build(tree, it):
    if tree == TENSOR:
        return next(it)
    ((kind, body),) = tree.items()
    if kind == "dict":
        return {k: _build(t, it) for k, t in body}
    return _KINDS[kind](_build(t, it) for t in body)
