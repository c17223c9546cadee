"""The handler table: ``HANDLERS[op_type] = handler(ctx, node, inputs) -> outputs``, one file
per family, mirroring gpucore/ops (a handler's docstring says what it supports)."""

from . import (
    attention,
    bitwise,
    creation,
    elementwise,
    indexing,
    joining,
    linalg,
    nn,
    pool,
    qlinear,
    quantize,
    reduce,
    resize,
    shape,
    unary,
)

HANDLERS: dict = {}
_FAMILIES = (
    attention, bitwise, creation, elementwise, indexing, joining, linalg, nn, pool, qlinear,
    quantize, reduce, resize, shape, unary,
)  # fmt: skip
for _family in _FAMILIES:
    for _op, _fn in _family.HANDLERS.items():
        if _op in HANDLERS:
            raise RuntimeError(f"gpucore.onnx: {_op} is handled twice")
        HANDLERS[_op] = _fn
