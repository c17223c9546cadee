"""The runtime's op table: what the passes, the planner and the executors know about each op.

Every gpucore registry op is a runtime op (``op_info(name)`` makes its entry on first use), so
every captured graph can run; the runtime's fused ops (gpucore/runtime/ir/fused.py) are declared
with ``defruntime``. An entry holds, once:

- ``evaluate(arrays, attrs, dtypes) -> array``: the reference, used by constant folding and
  the tests (registry ops run their CPU kernel through the registry; fused ops have a numpy
  formula);
- ``run(out, arrays, attrs, scratch, dtypes)``: the kernel writing into planned memory
  (interpreted executor);
- ``lower(out, arrays, attrs, scratch) -> [(binding, args), ...] | None``: the same work as
  calls of ``gpucore._cpu`` bindings, which the compiled executor records into one C program
  (None: the node stays a Python step);
- ``view``: a function making the output as a view of input 0 (view ops); the planner aliases
  it when the view is contiguous or every reader accepts the strides (``strided_inputs``);
- ``inplace``: whether the output may take the memory of a same-shaped input that dies here;
- ``scratch(attrs, in_specs, out_spec) -> [(shape, numpy dtype), ...]``: per-node workspace
  (the unused outputs of a multi-output registry op are its scratch).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ... import _cpu
from ...autograd.grad_mode import no_grad
from ...backends.cpu import BACKEND as _CPU
from ...backends.cpu.kernels import KERNELS
from ...backends.cpu.kernels.common import BINARY
from ...dtypes import bfloat16, float16
from ...ops.registry import REGISTRY, apply_on_general
from ...tensor import Tensor

_LOW = (float16, bfloat16)


class RuntimeOp:
    """One entry of the runtime op table (see the module docstring)."""

    __slots__ = ("name", "evaluate", "run", "lower", "view", "inplace", "scratch", "strided_inputs")

    def __init__(
        self,
        name: str,
        evaluate: Callable,
        run: Callable | None = None,
        lower: Callable | None = None,
        view: Callable | None = None,
        inplace: bool = False,
        scratch: Callable | None = None,
        strided_inputs: Callable | None = None,
    ):
        self.name = name
        self.evaluate = evaluate
        self.run = run
        self.lower = lower
        self.view = view
        self.inplace = inplace
        self.scratch = scratch
        # strided_inputs(attrs, index, array) -> whether input ``index`` may be a strided view
        # with ``array``'s layout (read in place, no copy)
        self.strided_inputs = strided_inputs

    def __repr__(self) -> str:
        return f"<runtime op {self.name}>"


OPS: dict[str, RuntimeOp] = {}
# Registry op name -> lowering (filled by gpucore/runtime/ir/lowering.py)
LOWERINGS: dict[str, Callable] = {}


def defruntime(name: str, **kw) -> RuntimeOp:
    """Declare a runtime-only op (a fused op); see the module docstring for the fields."""
    if name in OPS or name in REGISTRY:
        raise ValueError(f"runtime op {name!r} is declared twice")
    op = RuntimeOp(name, **kw)
    OPS[name] = op
    return op


def op_info(name: str) -> RuntimeOp:
    """The runtime entry of op ``name`` (KeyError for an unknown op)."""
    op = OPS.get(name)
    if op is None:
        op = _registry_entry(REGISTRY[name])
        OPS[name] = op
    return op


# --------------------------------------------------------------------------- registry ops
def _attrs(attrs: dict) -> tuple[dict, int]:
    """The op's own attributes, and which of its outputs the node is."""
    if "output_index" in attrs:
        a = dict(attrs)
        return a, a.pop("output_index")
    return attrs, 0


def _registry_entry(rop) -> RuntimeOp:
    name = rop.name

    def evaluate(arrays, attrs, dtypes):
        a, index = _attrs(attrs)
        if rop.view is not None:
            return np.array(rop.view(arrays[0], **a))
        tensors = [
            Tensor._wrap(np.require(x, requirements="C"), dt) for x, dt in zip(arrays, dtypes)
        ]
        with no_grad():
            out = apply_on_general(_CPU, rop, tuple(tensors), a)
        out = out[index] if isinstance(out, tuple) else out
        return np.array(out._host())

    kern = KERNELS.get(name)

    def run(out, arrays, attrs, scratch, dtypes):
        a, index = _attrs(attrs)
        if kern is None or any(d in _LOW for d in dtypes) or out.dtype == np.float16:
            np.copyto(out, evaluate(arrays, attrs, dtypes))
            return
        if "output_index" in attrs:
            outs = list(scratch[:index]) + [out] + list(scratch[index:])
            kern(outs, *arrays, **a)
        else:
            kern(out, *arrays, **a)

    def scratch(attrs, in_specs, out_spec):
        if "output_index" not in attrs:
            return []
        a, index = _attrs(attrs)
        fake = [TensorSpec(s, d) for s, d in in_specs]
        specs = rop.infer(*fake, **a)
        return [(tuple(s), d.np) for i, (s, d) in enumerate(specs) if i != index]

    view = None
    if rop.view is not None:

        def view(arr, attrs):
            return rop.view(arr, **attrs)

    lower = LOWERINGS.get(name)
    return RuntimeOp(
        name,
        evaluate,
        run=None if rop.view is not None else run,
        lower=lower,
        view=view,
        inplace=bool(rop.elementwise),
        scratch=scratch,
        strided_inputs=_any_layout if name in STRIDED_OK else None,
    )


def _any_layout(attrs, index, arr) -> bool:
    return True


# Registry ops whose kernels (and lowerings) read operands of any strides as they are: the
# broadcasting binary kernel, where, copies, cat (copies into slices) and gather (an embedding's
# index arrives expanded: a stride-0 view, read as it is).
STRIDED_OK = frozenset(BINARY) | {"where", "clone", "cat", "gather"}


def proto_array(shape: tuple, itemsize: int) -> np.ndarray:
    """A data-less C-contiguous array of ``shape`` with ``itemsize``-byte items over a one-item
    buffer: view functions applied to it give a view's layout (shape, strides, and the offset
    from its data pointer, which is the buffer's start) for free, whatever the size."""
    strides = []
    acc = itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    base = np.zeros(1, np.dtype(f"V{itemsize}"))
    return np.lib.stride_tricks.as_strided(base, shape, tuple(reversed(strides)), writeable=False)


def data_start(arr: np.ndarray) -> int:
    """The address of ``arr``'s first element (prototypes compare these for offsets)."""
    return arr.__array_interface__["data"][0]


class TensorSpec:
    """A tensor without data: what infer rules and ``Backend.supports`` read of an operand
    (shape, dtype, ndim, numel, and ``_data``: a data-less array of the right shape)."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = self._dtype = dtype
        self.ndim = len(self.shape)
        self._data = np.lib.stride_tricks.as_strided(
            np.zeros(1, dtype.np), self.shape, (0,) * self.ndim
        )

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def dim(self) -> int:
        return self.ndim

    def size(self, d=None):
        return self.shape if d is None else self.shape[d]


def run_calls(calls) -> None:
    """Execute a lowering's ``[(binding, args), ...]`` from Python (the interpreted executor)."""
    for fn, args in calls:
        getattr(_cpu, fn)(*args)
