"""Resize (opset 11 on): every resized axis becomes a static interpolation matrix applied with a
matmul (nearest, linear and cubic resizing are separable), so one composition covers every mode,
coordinate transformation, antialias and rounding rule. The matrices are ONNX's own: its
reference evaluator resizes each one-hot vector of an axis at load time (fast: the reference is
vectorised; an axis of n in, m out costs n small runs), which keeps gpucore's results equal to
the specification's wherever the ONNX reference is.
"""

from __future__ import annotations

import functools

import numpy as np

from ..proto import require_onnx
from .common import gc, table

HANDLERS, handles = table()

_ATTRS = {  # attribute: default (opset 19's), all passed to the reference node
    "antialias": 0,
    "coordinate_transformation_mode": "half_pixel",
    "cubic_coeff_a": -0.75,
    "exclude_outside": 0,
    "extrapolation_value": 0.0,
    "keep_aspect_ratio_policy": "stretch",
    "mode": "nearest",
    "nearest_mode": "round_prefer_floor",
}


@functools.lru_cache(maxsize=256)
def _reference(n: int, key: tuple, attrs: tuple, extrapolate: float, ones: bool) -> np.ndarray:
    """ONNX's reference Resize of one axis: [m, n] (column j: one-hot j resized), or, with
    ``ones``, [m] the resize of zeros with ``extrapolate`` as the extrapolation value.

    ``key``: (kind, value, roi, partner); a partner (its size, its requested size) is the axis
    that sets the common scale of a keep_aspect_ratio_policy, resized alongside as the
    reference does (its rows sum to 1: column 0 of the result is this axis's)."""
    onnx = require_onnx()
    from onnx.reference import ReferenceEvaluator  # lazy: only Resize needs the reference

    helper = onnx.helper
    kind, value, roi, partner = key
    kwargs = dict(attrs)
    kwargs["extrapolation_value"] = extrapolate
    if partner is None:
        kwargs["keep_aspect_ratio_policy"] = "stretch"
    inputs = ["x", "roi", "s"] if kind == "scales" else ["x", "roi", "", "sz"]
    node = helper.make_node("Resize", inputs, ["y"], **kwargs)
    shape = [n] if partner is None else [n, partner[0]]
    sizes = [value] if partner is None else [value, partner[1]]
    roi = list(roi) if partner is None else [roi[0], 0.0, roi[1], 1.0]
    ins = [helper.make_tensor_value_info("x", 1, shape)]
    graph = helper.make_graph([node], "axis", ins, [helper.make_tensor_value_info("y", 1, None)], [
        onnx.numpy_helper.from_array(np.array(roi, np.float32), "roi"),
        onnx.numpy_helper.from_array(np.array([value], np.float32), "s"),
        onnx.numpy_helper.from_array(np.array(sizes, np.int64), "sz"),
    ])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    ev = ReferenceEvaluator(model)

    def run(v: np.ndarray) -> np.ndarray:
        x = v if partner is None else np.repeat(v[:, None], partner[0], 1)
        y = ev.run(None, {"x": x})[0]
        return (y if partner is None else y[:, 0]).astype(np.float64)

    if ones:
        return run(np.zeros(n, np.float32))
    return np.stack([run(e) for e in np.eye(n, dtype=np.float32)], 1)


@handles("Resize")
def resize(ctx, node, ins):
    """Resize(X, roi, scales, sizes; every mode and attribute of opset 19) of a float tensor."""
    if ctx.opset < 11:
        raise ctx.unsupported("Resize before opset 11 (its coordinate rules differ)")
    x = ctx.tensor(ins[0])
    if not x.dtype.is_floating_point:
        raise ctx.unsupported(f"Resize of a {x.dtype.name} tensor (floating point only)")
    attrs = {k: ctx.attr(k, d) for k, d in _ATTRS.items()}
    ins = list(ins) + [None] * (4 - len(ins))
    roi, scales, sizes = ins[1:4]
    dims = [int(s) for s in x.shape]
    rank = len(dims)
    axes = [ctx.axis(int(a), rank) for a in (ctx.attr("axes", None) or range(rank))]
    if sizes is not None and ctx.static(sizes, "sizes").size:
        kind, values = "sizes", ctx.ints(sizes, "sizes")
        partners = [None] * len(values)
        policy = attrs["keep_aspect_ratio_policy"]
        if policy != "stretch":  # the axis whose ratio is the common scale: the partner
            ratios = [v / dims[a] for v, a in zip(values, axes)]
            lead = ratios.index(min(ratios) if policy == "not_larger" else max(ratios))
            partners = [
                None if i == lead else (dims[axes[lead]], values[lead]) for i in range(len(axes))
            ]
    elif scales is not None:
        kind, values = "scales", [float(s) for s in ctx.static(scales, "scales").reshape(-1)]
        partners = [None] * len(values)
    else:
        raise ctx.invalid("neither scales nor sizes is given")
    if len(values) != len(axes):
        raise ctx.invalid(f"{len(values)} {kind} for axes {axes}")
    crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"
    box = ctx.static(roi, "roi").reshape(-1).tolist() if crop and roi is not None else None
    frozen = tuple(sorted(attrs.items()))
    y, outside = x, None
    for i, (a, v) in enumerate(zip(axes, values)):
        span = (box[i], box[i + len(axes)]) if box else (0.0, 1.0)
        key = (kind, v, span, partners[i])
        if kind == "scales" and v == 1.0 and not crop:
            continue
        m = _reference(dims[a], key, frozen, 0.0, False)
        moved = y.movedim(a, -1) if a != rank - 1 else y
        out = moved.matmul(ctx.tensor(np.ascontiguousarray(m.T).astype(x.dtype.np)))
        y = out.movedim(-1, a) if a != rank - 1 else out
        if crop and attrs["extrapolation_value"] != 0.0:
            ext = _reference(dims[a], key, frozen, 1.0, True)  # 1 where extrapolated
            shape = [1] * rank
            shape[a] = ext.size
            inside = 1.0 - ext.reshape(shape)
            outside = inside if outside is None else outside * inside
    if outside is not None:
        fill = (1.0 - outside) * float(attrs["extrapolation_value"])
        y = y + ctx.tensor(np.ascontiguousarray(fill).astype(x.dtype.np))
    return y


@handles("Upsample")
def upsample(ctx, node, ins):
    """Upsample(X, scales; mode) (opsets 7 to 9): nearest by integer scales, each element
    repeated (what ONNX's reference supports)."""
    mode = ctx.attr("mode", "nearest")
    x = ctx.tensor(ins[0])
    scales = ctx.attr("scales", None) if ctx.opset < 9 else None
    if scales is None:
        scales = ctx.static(ins[1], "scales").reshape(-1).tolist()
    if mode != "nearest" or any(float(s) != int(s) or s < 1 for s in scales):
        raise ctx.unsupported(f"Upsample mode={mode!r} by scales {scales} (nearest, integers)")
    for axis, s in enumerate(int(s) for s in scales):
        if s > 1:
            x = gc.repeat_interleave(x, s, dim=axis)
    return x
