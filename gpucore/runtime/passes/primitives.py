"""Rewrites into ops that the compiled executors run natively: an op whose CPU kernel is a
sequence of other kernels becomes that sequence, so the C program (and a saved model's C
section, cpu/capi) needs no node kind of its own for it and the bits stay the eager kernel's.

- ``clamp(x, min, max)`` of a float tensor: ``maximum(x, min)`` then ``minimum(., max)`` against
  scalar constants of x's dtype (what backends/cpu/kernels/elementwise.py's clamp computes).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph


def split_clamp(graph: Graph) -> bool:
    """Float ``clamp`` into ``maximum`` / ``minimum`` of scalar constants."""
    changed = False
    for node in list(graph.order()):
        info = graph.tensors[node.output]
        if node.op != "clamp" or not info.dtype.is_floating_point:
            continue
        if graph.tensors[node.inputs[0]].dtype is not info.dtype:
            continue
        src = node.inputs[0]
        for op, bound in (("maximum", node.attrs.get("min")), ("minimum", node.attrs.get("max"))):
            if bound is not None:
                c = graph.add_constant(np.asarray(bound, info.dtype.np), dtype=info.dtype)
                src = graph.add_node(op, [src, c], info.shape, info.dtype).output
        graph.bypass(node, src)
        changed = True
    return changed
