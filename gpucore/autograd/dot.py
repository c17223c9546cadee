"""Export an autograd graph as Graphviz DOT (``dot -Tpng graph.dot -o graph.png``)."""

from __future__ import annotations

import os

from .graph import AccumulateGrad


def to_dot(tensor) -> str:
    """The DOT text of the graph that produced ``tensor``."""
    lines = ["digraph autograd {", '  node [shape=box, fontname="monospace"];']
    root = tensor.grad_fn
    ids: dict = {}

    def nid(n):
        if n not in ids:
            ids[n] = f"n{len(ids)}"
        return ids[n]

    out_id = "out"
    lines.append(
        f'  {out_id} [label="output {tuple(tensor.shape)} {tensor.dtype.name}", '
        "style=filled, fillcolor=lightblue];"
    )
    if root is None:
        lines.append("}")
        return "\n".join(lines)
    lines.append(f"  {nid(root)} -> {out_id};")
    seen = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if isinstance(n, AccumulateGrad):
            leaf = n.leaf
            desc = "freed" if leaf is None else f"{tuple(leaf.shape)} {leaf.dtype.name}"
            label = f"AccumulateGrad\\nleaf {desc}"
            lines.append(f'  {nid(n)} [label="{label}", style=filled, fillcolor=lightgrey];')
            continue
        lines.append(f'  {nid(n)} [label="{n.name()}"];')
        for i, e in enumerate(n.next):
            if e is None:
                continue
            shape = n.in_meta[i][0]
            lines.append(f'  {nid(e)} -> {nid(n)} [label="{tuple(shape)}"];')
            stack.append(e)
    lines.append("}")
    return "\n".join(lines)


def export_dot(tensor, path) -> str:
    """Write the graph of ``tensor`` to ``path`` as DOT; returns the text."""
    text = to_dot(tensor)
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return text
