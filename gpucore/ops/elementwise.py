"""Elementwise ops with broadcasting: binary arithmetic, comparisons, logical ops, where, clamp,
dtype casts, copies and device moves (the unary math and activations are in unary.py). Each op
is one ``defop`` with its shape rule, backward and samples.

kernels: backends/cpu/kernels/elementwise.py (cpu/binary.c, cpu/copy.c),
backends/vulkan/kernels/elementwise.py (shaders/binary.comp, where.comp, copy.comp)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import dispatch
from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..backends.cpu import empty_array
from ..creation import tensor
from ..errors import DTypeError
from ..memory_formats import contiguous_format, preserve_format, to_format
from ..memory_formats import like as format_like
from ..tensor import Tensor
from ..tensor import device as _device
from .api import public, tensor_member
from .common import as_operands, broadcast_shapes, float_operands, no_bool, scalar_tensor
from .common import host_quiet as _host_quiet
from .common import same_result as _same
from .registry import CAPTURE, _fast_elementwise, apply, capturing, defop, record
from .samples import Sample, away_from, binary, bools, halves, uniform
from .special import div_rounded

_check_sub = no_bool("sub (the - operator)")


# ----------------------------------------------------------------------------- binary ops
def _binfer(name, result=None):
    def infer(a, b):
        sa = a._data.shape
        shape = sa if sa == b._data.shape else broadcast_shapes(name, sa, b._data.shape)
        return (shape, result if result is not None else a._dtype)

    return infer


def _div_infer(a, b):
    shape = broadcast_shapes("div", a.shape, b.shape)
    return (shape, a.dtype if a.dtype.is_floating_point else D.default_float())


def _mul_bwd(ctx, g):
    a, b = ctx.saved
    need_a, need_b = ctx.needs_input_grad
    return (g * b if need_a else None), (g * a if need_b else None)


def _div_bwd(ctx, g):
    a, b = ctx.saved
    need_a, need_b = ctx.needs_input_grad
    ga = g / b if need_a else None
    gb = -g * a / (b * b) if need_b else None
    return ga, gb


def _pow_bwd(ctx, g):
    a, b, out = ctx.saved
    need_a, need_b = ctx.needs_input_grad
    ga = gb = None
    if need_a:
        ga = where(b == 0, scalar_tensor(0.0, g.dtype), g * b * a ** (b - 1))
    if need_b:
        # d/db a**b = a**b * log(a); PyTorch takes it as 0 where a == 0 and b >= 0.
        safe = where(a == 0, scalar_tensor(1.0, a.dtype), a)
        gb = where((a == 0) & (b >= 0), scalar_tensor(0.0, g.dtype), g * out * safe.log())
    return ga, gb


def _minmax_bwd(pick_first):
    def bwd(ctx, g):
        a, b = ctx.saved
        first = pick_first(a, b)
        tie = a == b
        half = g * 0.5
        zero = scalar_tensor(0.0, g.dtype)
        ga = where(tie, half, where(first, g, zero))
        gb = where(tie, half, where(first, zero, g))
        return ga, gb

    return bwd


ADD = defop(
    "add",
    samples=binary(np.add),
    elementwise=True,
    infer=_binfer("add"),
    backward=lambda ctx, g: (g, g),
)
SUB = defop(
    "sub",
    samples=binary(np.subtract),
    elementwise=True,
    infer=_binfer("sub"),
    backward=lambda ctx, g: (g, -g),
)
MUL = defop(
    "mul",
    samples=binary(np.multiply),
    elementwise=True,
    infer=_binfer("mul"),
    save_inputs=(0, 1),
    save_for={0: (1,), 1: (0,)},
    backward=_mul_bwd,
)
DIV = defop(
    "div",
    samples=binary(np.divide, low_b=0.5, high_b=2.0),
    elementwise=True,
    infer=_div_infer,
    save_inputs=(0, 1),
    save_for={0: (1,), 1: (0, 1)},
    backward=_div_bwd,
)
POW = defop(
    "pow",
    samples=binary(np.power, low=0.5, high=2.0),
    elementwise=True,
    infer=_binfer("pow"),
    save_inputs=(0, 1),
    save_outputs=(0,),
    backward=_pow_bwd,
)
MAXIMUM = defop(
    "maximum",
    samples=binary(np.maximum),
    elementwise=True,
    infer=_binfer("maximum"),
    save_inputs=(0, 1),
    backward=_minmax_bwd(lambda a, b: a > b),
)
MINIMUM = defop(
    "minimum",
    samples=binary(np.minimum),
    elementwise=True,
    infer=_binfer("minimum"),
    save_inputs=(0, 1),
    backward=_minmax_bwd(lambda a, b: a < b),
)


_CMP_NP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _compare_samples(ref):
    return lambda: [
        Sample(halves(3, 5, seed=1), halves(3, 5, seed=2), ref=ref),
        Sample(halves(2, 3, 4, seed=3), halves(3, 1, seed=4), ref=ref),
        Sample(halves(4100, seed=5), halves(4100, seed=6), ref=ref),
    ]


def _logical_samples(ref):
    return lambda: [
        Sample(bools(3, 5, seed=1), bools(3, 5, seed=2), ref=ref),
        Sample(bools(2, 1, seed=3), bools(1, 4, seed=4), ref=ref),
    ]


_CMP = {}
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _CMP[_name] = defop(
        _name, infer=_binfer(_name, D.bool_), samples=_compare_samples(_CMP_NP[_name])
    )


def _binary(op, doc):
    fast = op.fast

    def fn(input, other) -> Tensor:
        if fast is not None and (CAPTURE[0] is None or not capturing()):
            # the fast lane straight from the operator: no operand promotion, no registry call
            # (a number operand too: an immediate, made a Tensor only for a graph that saves it)
            out = fast[0](fast[1], input, other)
            if out is not None:
                if _grad_state.enabled and (
                    getattr(input, "_requires_grad", False)
                    or getattr(other, "_requires_grad", False)
                ):
                    record(op, as_operands(op.name, input, other), (out,), {})
                return out
        a, b = as_operands(op.name, input, other)
        return apply(op, a, b)

    fn.__name__ = op.name
    fn.__doc__ = doc
    return fn


# The operators (``+``, ``-``): no alpha keyword to check on the hot path.
_add_operator = _binary(ADD, "input + other")
_sub_plain = _binary(SUB, "input - other")


def _sub_operator(input, other) -> Tensor:
    _check_sub(input, other)
    return _sub_plain(input, other)


@public("add", inplace=True, saves_self=False)
def add(input, other, *, alpha=1) -> Tensor:
    """input + alpha * other, with broadcasting and type promotion."""
    if alpha != 1:
        other = other * alpha
    a, b = as_operands("add", input, other)
    return apply(ADD, a, b)


@public("sub", "subtract", inplace=True, saves_self=False)
def sub(input, other, *, alpha=1) -> Tensor:
    """input - alpha * other."""
    _check_sub(input, other)
    if alpha != 1:
        other = other * alpha
    a, b = as_operands("sub", input, other)
    return apply(SUB, a, b)


mul = public("mul", "multiply", inplace=True)(
    _binary(MUL, "Elementwise product with broadcasting.")
)
_div_plain = _binary(DIV, "")


@public("div", "divide", "true_divide", inplace=True)
def div(input, other, *, rounding_mode=None) -> Tensor:
    """True division (ints give the default floating dtype); ``rounding_mode`` "trunc" or "floor"
    rounds the quotient (integers then stay integers), as torch.div."""
    if rounding_mode is not None:
        return div_rounded(input, other, rounding_mode)
    return _div_plain(*float_operands(input, other))


maximum = public("maximum")(_binary(MAXIMUM, "Elementwise maximum; NaN propagates."))
minimum = public("minimum")(_binary(MINIMUM, "Elementwise minimum; NaN propagates."))


@public("pow", inplace=True)
def pow(input, exponent) -> Tensor:  # noqa: A001 - PyTorch's name
    """input ** exponent, elementwise, with broadcasting. Integer tensor exponents may be
    negative (1 ** -e = 1, (-1) ** -e = +-1, else 0, as PyTorch); a negative Python integer
    exponent of an integer tensor raises ValueError, as PyTorch's RuntimeError."""
    a, b = as_operands("pow", input, exponent, ("input", "exponent"))
    if (
        isinstance(input, Tensor)
        and not isinstance(exponent, Tensor)
        and not a.dtype.is_floating_point
        and exponent < 0
    ):
        raise ValueError(
            f"pow(): integers to negative integer powers are not allowed ({a.dtype} tensor to "
            f"the power {exponent}); use a floating input (input.double() ** {exponent})"
        )
    return apply(POW, a, b)


eq = public("eq")(_binary(_CMP["eq"], "Elementwise ==, a bool tensor."))
ne = public("ne", "not_equal")(_binary(_CMP["ne"], "Elementwise !=, a bool tensor."))
lt = public("lt", "less")(_binary(_CMP["lt"], "Elementwise <, a bool tensor."))
le = public("le", "less_equal")(_binary(_CMP["le"], "Elementwise <=, a bool tensor."))
gt = public("gt", "greater")(_binary(_CMP["gt"], "Elementwise >, a bool tensor."))
ge = public("ge", "greater_equal")(_binary(_CMP["ge"], "Elementwise >=, a bool tensor."))


def _cmp_operator(fn):
    # Operators return NotImplemented for foreign operands, so ``t == None`` is False (as in
    # PyTorch) and ``t < "a"`` raises Python's usual TypeError; the functions stay strict.
    def op(self, other):
        if not isinstance(other, (Tensor, numbers.Number, np.ndarray, np.generic)):
            return NotImplemented
        return fn(self, other)

    op.__name__ = fn.__name__
    return op


for _n, _f in (
    ("__eq__", eq),
    ("__ne__", ne),
    ("__lt__", lt),
    ("__le__", le),
    ("__gt__", gt),
    ("__ge__", ge),
):
    tensor_member(_n, _cmp_operator(_f))


def _swap(fn):  # the reflected operator (``2 - t``)
    return lambda self, other: fn(other, self)


_OPERATORS = [("__add__", _add_operator), ("__sub__", _sub_operator), ("__mul__", mul)]
for _n, _f in _OPERATORS + [("__truediv__", div), ("__pow__", pow)]:
    tensor_member(_n, _f)
    tensor_member("__r" + _n[2:], _swap(_f))


# ----------------------------------------------------------------------------- logical
def _logical(name):
    op = defop(
        name,
        infer=lambda a, b: (broadcast_shapes(name, a.shape, b.shape), D.bool_),
        samples=_logical_samples(getattr(np, name)),
    )

    def fn(input, other) -> Tensor:
        a, b = input, other
        if type(a) is not Tensor or type(b) is not Tensor:
            a, b = as_operands(name, a, b)  # numbers and arrays become tensors; others raise
        return apply(op, a.to(D.bool_), b.to(D.bool_))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name[8:].upper()} of the operands' truth values, a bool tensor."
    return op, public(name)(fn)


LOGICAL_AND, logical_and = _logical("logical_and")
LOGICAL_OR, logical_or = _logical("logical_or")
LOGICAL_XOR, logical_xor = _logical("logical_xor")
LOGICAL_NOT = defop(
    "logical_not",
    infer=lambda x: (x.shape, D.bool_),
    samples=lambda: [
        Sample(bools(3, 5), ref=np.logical_not),
        Sample(np.array([0.0, -1.5, 0.0, 2.0]), ref=np.logical_not),
    ],
)


@public("logical_not")
def logical_not(input: Tensor) -> Tensor:
    """Elementwise NOT of the truth values (nonzero is True), a bool tensor."""
    return apply(LOGICAL_NOT, input)


# The operators & | ^ ~ << >> are the bitwise ops' (ops/bitwise.py): on bool tensors they are
# the logical ops, as PyTorch's.


# ----------------------------------------------------------------------------- where, clamp
def _where_bwd(ctx, g):
    (cond,) = ctx.saved
    zero = scalar_tensor(0.0, g.dtype)
    return None, where(cond, g, zero), where(cond, zero, g)


WHERE = defop(
    "where",
    infer=lambda c, a, b: (broadcast_shapes("where", c.shape, a.shape, b.shape), a.dtype),
    save_inputs=(0,),
    backward=_where_bwd,
    samples=lambda: [
        Sample(bools(3, 5), uniform(3, 5, seed=1), uniform(3, 5, seed=2), ref=np.where),
        Sample(bools(3, 1), uniform(1, 4, seed=3), uniform(3, 4, seed=4), ref=np.where),
        Sample(bools(4100), uniform(4100, seed=5), uniform(4100, seed=6), ref=np.where, grad=False),
    ],
)


@public("where", method=False)
def where(condition: Tensor, input, other) -> Tensor:
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (broadcast)."""
    if not isinstance(condition, Tensor) or condition.dtype is not D.bool_:
        raise DTypeError(
            f"where: condition must be a bool tensor, got "
            f"{condition.dtype if isinstance(condition, Tensor) else type(condition).__name__}"
        )
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = tensor(input)  # two Python scalars: the first sets the default dtype
    a, b = as_operands("where", input, other, position=2)
    return apply(WHERE, condition, a, b)


# PyTorch's method form: x.where(condition, y) == where(condition, x, y).
tensor_member("where", lambda self, condition, other: where(condition, self, other))


def _clamp_bwd(ctx, g):
    (x,) = ctx.saved
    lo, hi = ctx.attrs["min"], ctx.attrs["max"]
    mask = None
    if lo is not None:
        mask = x >= lo
    if hi is not None:
        m2 = x <= hi
        mask = m2 if mask is None else mask & m2
    return where(mask, g, scalar_tensor(0.0, g.dtype))


CLAMP = defop(
    "clamp",
    infer=_same,
    save_inputs=(0,),
    backward=_clamp_bwd,
    samples=lambda: [
        Sample(
            away_from(uniform(3, 5, seed=1), (-0.5, 0.5)),
            min=-0.5,
            max=0.5,
            ref=lambda x, min, max: np.clip(x, min, max),
        ),  # noqa: A006
        Sample(
            away_from(uniform(4100, seed=2), (0.25,)),
            min=None,
            max=0.25,
            grad=False,
            ref=lambda x, min, max: np.minimum(x, max),
        ),  # noqa: A006
    ],
)


@public("clamp", "clip", inplace=True)
def clamp(input: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 - PyTorch's names
    """Limit values to [min, max]; the gradient passes where min <= x <= max. NaN propagates."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        # where, not maximum/minimum: at a tie the gradient goes to the input (maximum would
        # split it), and a bound gets it only where it is the result, as PyTorch.
        out = input
        if min is not None:
            out = where(out < min, min, out)
        if max is not None:
            out = where(out > max, max, out)
        return out
    dt = input.dtype
    for bound in (min, max):
        if bound is not None:
            dt = D.scalar_result(dt, bound)  # int tensor, float bound -> default float
    if dt is not input.dtype:
        input = input.to(dt)
    return apply(CLAMP, input, min=min, max=max)


# ----------------------------------------------------------------------------- casts, copies
def _to_bwd(ctx, g):
    return g  # the engine casts the gradient back to the input's dtype


TO_DTYPE = defop(
    "to_dtype",
    infer=lambda x, dtype: (x.shape, dtype),
    backward=_to_bwd,
    samples=lambda: [
        Sample(uniform(3, 5, seed=1), dtype=D.float64, ref=lambda x, dtype: x, on_vulkan=False),
        Sample(
            uniform(4100, low=-50, high=50, seed=2),
            dtype=D.int32,
            grad=False,
            ref=lambda x, dtype: np.trunc(x).astype(np.int32),
        ),
    ],
)
CLONE = defop(
    "clone",
    infer=_same,
    backward=lambda ctx, g: g,
    samples=lambda: [
        Sample(uniform(3, 5, seed=1), ref=np.copy),
        Sample(uniform(4100, seed=2), ref=np.copy),
    ],
)


@public("clone")
def clone(input: Tensor, *, memory_format=None) -> Tensor:
    """A copy that stays in the graph (a channels-last input stays so: preserve_format)."""
    out = apply(CLONE, input)
    if memory_format is None and (input._data.ndim < 4 or input._data.flags.c_contiguous):
        return out  # preserve_format of a row-major (or low-rank) tensor: the copy as it is
    return format_like(out, input, memory_format, "clone")


@public("contiguous", function=False)
def contiguous(input: Tensor, memory_format=None) -> Tensor:
    """self when dense (row-major, or in memory_format's order), else a dense copy (host floats:
    the registry's fast lane)."""
    if memory_format is not None and memory_format is not contiguous_format:
        return to_format(input, memory_format, "contiguous")
    if input._data.flags.c_contiguous:
        return input
    hooked = CAPTURE[0] is not None and capturing()
    out = None if hooked else _fast_elementwise(CLONE, (input,), {})
    return apply(CLONE, input) if out is None else out


def _to(self: Tensor, *args, dtype=None, device=None, copy=False, memory_format=None, **_kw):
    """Convert dtype and/or device: ``to(float64)``, ``to('cpu')``, ``to('cpu', float16)``;
    ``to(other)`` takes other's dtype and device, as PyTorch; memory_format: the layout."""
    for a in args:
        if isinstance(a, (D.dtype, type)) or (isinstance(a, str) and a in D.BY_NAME):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            device = a
    target = None
    if device is not None:
        target = _device(device).type
    if dtype is not None:
        dt = D.as_dtype(dtype)
        if dt is not self.dtype:
            # The cast first: it may run on either backend (a Vulkan kernel takes few dtypes),
            # so the move after it puts the result where it belongs: the explicit device, else
            # where the input was (a dtype change never changes the device, as in PyTorch).
            if target is None:
                target = self.device.type
            if dt is D.uint32 and self.dtype in (D.float16, D.bfloat16):
                # PyTorch converts 16-bit floats to uint32 through int64 (NaN gives 0)
                self = apply(TO_DTYPE, self, dtype=D.int64)
            self = apply(TO_DTYPE, self, dtype=dt)
            copy = False
    if target is not None and target != self.device.type:
        self = to_device(self, target)
        copy = False
    out = self.clone() if copy else self
    return out if memory_format in (None, preserve_format) else to_format(out, memory_format, "to")


tensor_member("to", _to)
tensor_member("float", lambda self: _to(self, D.float32))
tensor_member("double", lambda self: _to(self, D.float64))
tensor_member("half", lambda self: _to(self, D.float16))
tensor_member("bfloat16", lambda self: _to(self, D.bfloat16))
tensor_member("long", lambda self: _to(self, D.int64))
tensor_member("int", lambda self: _to(self, D.int32))
tensor_member("short", lambda self: _to(self, D.int16))
tensor_member("bool", lambda self: _to(self, D.bool_))
tensor_member("byte", lambda self: _to(self, D.uint8))
tensor_member("char", lambda self: _to(self, D.int8))
tensor_member("cpu", lambda self: _to(self, "cpu"))
tensor_member("vulkan", lambda self: _to(self, "vulkan"))


def _to_device_bwd(ctx, g):
    return to_device(g, ctx.attrs["source"])


TO_DEVICE = defop(
    "to_device",
    backward=_to_device_bwd,
    samples=lambda: [
        Sample(uniform(3, 5, seed=1), ref=lambda x: x, call=lambda op, x: to_device(x, "cpu"))
    ],
)


def to_device(input: Tensor, device: str) -> Tensor:
    """A copy of ``input`` on 'cpu' or 'vulkan' (differentiable: the gradient moves back)."""
    src = input.device.type
    if device == "cpu":
        host = _host_quiet(input)  # a capture rebinds out to input below
        data = empty_array(host.shape, host.dtype)
        np.copyto(data, host)
        out = Tensor._wrap(data, input._dtype)
    else:
        vb = dispatch.vulkan_backend(required=True)
        # np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them shape (1,))
        out = Tensor._wrap(
            vb.upload(np.require(_host_quiet(input), requirements="C"), input._dtype),
            input._dtype,
            dev=vb,
        )
    if dispatch._trace.records is not None:
        dispatch.record("to_device", device, out.shape)
    tracer = capturing()
    if tracer is not None:
        tracer.rebind(out, input)  # a captured graph has no devices: the same value
    if _grad_state.enabled and out._dtype.is_floating_point:
        record(TO_DEVICE, (input,), (out,), {"source": src, "device": device})
    return out
