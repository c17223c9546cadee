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
"""

from __future__ import annotations

TENSOR = "tensor"
_KINDS = {"tuple": tuple, "list": list}
MAX_DEPTH = 64


def leaf_count(tree) -> int:
    """The number of outputs ``tree`` holds (ValueError for anything that is not a tree)."""
    return _count(tree, 0)


def _count(tree, depth: int) -> int:
    if depth > MAX_DEPTH:
        raise ValueError("output tree is nested too deeply")
    if tree == TENSOR:
        return 1
    if isinstance(tree, dict) and len(tree) == 1:
        ((kind, body),) = tree.items()
        if kind in _KINDS and isinstance(body, list):
            return sum(_count(t, depth + 1) for t in body)
        if kind == "dict" and isinstance(body, list):
            keys = set()
            total = 0
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                    raise ValueError("output tree: a dict item must be [str key, tree]")
                if item[0] in keys:
                    raise ValueError(f"output tree: dict key {item[0]!r} repeats")
                keys.add(item[0])
                total += _count(item[1], depth + 1)
            return total
    raise ValueError(f"output tree: unknown entry {str(tree)[:60]}")


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
