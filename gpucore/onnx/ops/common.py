"""What the handler families share: the table decorator and reading axes."""

from __future__ import annotations

from types import SimpleNamespace

from ...ops import FUNCTIONS

# gpucore's op functions (gc.add, gc.where, gc.cat, ...): the same table ``gpucore.<name>`` is
# filled from, without importing the gpucore package's __init__ here
gc = SimpleNamespace(**FUNCTIONS)


def table():
    """(HANDLERS, handles): a family's {op type: handler} and the decorator that fills it."""
    handlers: dict = {}

    def handles(*op_types):
        def deco(fn):
            for op in op_types:
                handlers[op] = fn
            return fn

        return deco

    return handlers, handles


def axes_input(ctx, ins: list, index: int, attr: str = "axes"):
    """Axes given as input ``index`` (newer opsets) or as attribute ``attr`` (older ones);
    None when neither is there."""
    from_attr = ctx.attr(attr, None)
    if len(ins) > index and ins[index] is not None:
        return ctx.ints(ins[index], attr)
    return None if from_attr is None else [int(a) for a in from_attr]


def normalize_axes(ctx, axes, rank: int) -> list:
    """``axes`` made non-negative, checked, without repeats."""
    out = [ctx.axis(a, rank) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.invalid(f"axes {list(axes)} repeat an axis")
    return out
