"""Elementwise ops: unary math and activations, binary arithmetic, comparisons, where, clamp,
dtype casts and copies. Each op is one ``defop`` with its shape rule and backward."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..errors import DTypeError
from ..tensor import Tensor
from .common import as_operands, broadcast_shapes, method, scalar_tensor
from .registry import apply, defop, mark_elementwise, record


def _same(x, *_, **__):
    return (x.shape, x.dtype)


def _float_result(x, **_):
    # exp/log/... of an integer tensor give float32, as PyTorch.
    return (x.shape, x.dtype if x.dtype.is_floating_point else D.float32)


# ----------------------------------------------------------------------------- unary ops
def _no_bool(op):
    def check(*operands):
        for t in operands:
            if isinstance(t, Tensor) and t.dtype is D.bool_:
                raise DTypeError(
                    f"{op} of a bool tensor is not supported (as in PyTorch); use logical_not() / "
                    "logical_xor(), or convert with .int() or .float() first"
                )

    return check


_check_neg = _no_bool("neg (unary -)")
_check_sub = _no_bool("sub (the - operator)")


def _neg_infer(x):
    _check_neg(x)
    return (x.shape, x.dtype)


NEG = defop("neg", infer=_neg_infer, backward=lambda ctx, g: -g)
ABS = defop("abs", infer=_same, save_inputs=(0,), backward=lambda ctx, g: g * ctx.saved[0].sign())
SIGN = defop("sign", infer=_same, backward=lambda ctx, g: g * 0)
EXP = defop("exp", infer=_float_result, save_outputs=(0,), backward=lambda ctx, g: g * ctx.saved[0])
LOG = defop("log", infer=_float_result, save_inputs=(0,), backward=lambda ctx, g: g / ctx.saved[0])
SQRT = defop(
    "sqrt", infer=_float_result, save_outputs=(0,), backward=lambda ctx, g: g / (2 * ctx.saved[0])
)
SIN = defop(
    "sin", infer=_float_result, save_inputs=(0,), backward=lambda ctx, g: g * ctx.saved[0].cos()
)
COS = defop(
    "cos", infer=_float_result, save_inputs=(0,), backward=lambda ctx, g: -g * ctx.saved[0].sin()
)
LOG1P = defop(
    "log1p", infer=_float_result, save_inputs=(0,), backward=lambda ctx, g: g / (ctx.saved[0] + 1)
)
RECIPROCAL = defop(
    "reciprocal",
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: -g * ctx.saved[0] * ctx.saved[0],
)
RELU = defop(
    "relu",
    infer=_same,
    save_inputs=(0,),
    backward=lambda ctx, g: apply(RELU_BACKWARD, g, ctx.saved[0]),
)
SIGMOID = defop(
    "sigmoid",
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: apply(SIGMOID_BACKWARD, g, ctx.saved[0]),
)
TANH = defop(
    "tanh",
    infer=_float_result,
    save_outputs=(0,),
    backward=lambda ctx, g: apply(TANH_BACKWARD, g, ctx.saved[0]),
)
GELU = defop(
    "gelu",
    infer=_float_result,
    save_inputs=(0,),
    backward=lambda ctx, g: apply(GELU_BACKWARD, g, ctx.saved[0], **ctx.attrs),
)

# Backward kernels of the activations are ops too, so second derivatives work.
RELU_BACKWARD = defop(
    "relu_backward",
    infer=_same,
    save_inputs=(1,),
    backward=lambda ctx, gg: (apply(RELU_BACKWARD, gg, ctx.saved[0]), None),
)


def _sigmoid_bwd_bwd(ctx, gg):
    g, y = ctx.saved
    return apply(SIGMOID_BACKWARD, gg, y), gg * g * (1 - 2 * y)


def _tanh_bwd_bwd(ctx, gg):
    g, y = ctx.saved
    return apply(TANH_BACKWARD, gg, y), gg * g * (-2 * y)


_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_second(x: Tensor, approximate: str) -> Tensor:
    """d²/dx² gelu(x), written in ops so third derivatives exist too."""
    if approximate == "tanh":
        c = 0.044715
        u = _SQRT_2_PI * (x + c * x * x * x)
        du = _SQRT_2_PI * (1 + 3 * c * x * x)
        d2u = _SQRT_2_PI * 6 * c * x
        t = u.tanh()
        sech2 = 1 - t * t
        return sech2 * (du + 0.5 * x * (d2u - 2 * t * du * du))
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return pdf * (2 - x * x)


def _gelu_bwd_bwd(ctx, gg):
    g, x = ctx.saved
    approximate = ctx.attrs["approximate"]
    return apply(GELU_BACKWARD, gg, x, approximate=approximate), gg * g * _gelu_second(
        x, approximate
    )


SIGMOID_BACKWARD = defop(
    "sigmoid_backward", infer=_same, save_inputs=(0, 1), backward=_sigmoid_bwd_bwd
)
TANH_BACKWARD = defop("tanh_backward", infer=_same, save_inputs=(0, 1), backward=_tanh_bwd_bwd)
GELU_BACKWARD = defop("gelu_backward", infer=_same, save_inputs=(0, 1), backward=_gelu_bwd_bwd)


def _unary(op):
    def fn(input: Tensor) -> Tensor:
        return apply(op, input)

    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name}, as torch.{op.name}."
    return fn


neg = method("neg", "negative", "__neg__")(_unary(NEG))
abs = method("abs", "__abs__")(_unary(ABS))  # noqa: A001 - PyTorch's name
sign = method("sign")(_unary(SIGN))
exp = method("exp")(_unary(EXP))
log = method("log")(_unary(LOG))
sqrt = method("sqrt")(_unary(SQRT))
sin = method("sin")(_unary(SIN))
cos = method("cos")(_unary(COS))
reciprocal = method("reciprocal")(_unary(RECIPROCAL))
relu = method("relu")(_unary(RELU))
sigmoid = method("sigmoid")(_unary(SIGMOID))
tanh = method("tanh")(_unary(TANH))


@method("gelu")
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU: ``x * Phi(x)`` (approximate='none', erf form) or the tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply(GELU, input, approximate=approximate)


@method("rsqrt")
def rsqrt(input: Tensor) -> Tensor:
    """1 / sqrt(x)."""
    return input.sqrt().reciprocal()


@method("isnan")
def isnan(input: Tensor) -> Tensor:
    """True where the element is NaN (a bool tensor)."""
    return input != input


@method("isinf")
def isinf(input: Tensor) -> Tensor:
    """True where the element is +inf or -inf."""
    return input.abs() == math.inf


@method("isfinite")
def isfinite(input: Tensor) -> Tensor:
    """True where the element is neither NaN nor infinite."""
    return logical_not(isnan(input) | isinf(input))


@method("square")
def square(input: Tensor) -> Tensor:
    """x * x, elementwise."""
    return input * input


@method("log1p")
def log1p(input: Tensor) -> Tensor:
    """log(1 + x), accurate for tiny x (where ``(x + 1).log()`` rounds to 0)."""
    return apply(LOG1P, input)


@method("softplus")
def softplus(input: Tensor) -> Tensor:
    """log(1 + exp(x)), computed stably as max(x, 0) + log1p(exp(-|x|)); the gradient at 0 is 1/2
    (maximum splits ties)."""
    return maximum(input, 0.0) + (-input.abs()).exp().log1p()


# ----------------------------------------------------------------------------- binary ops
def _binfer(name, result=None):
    def infer(a, b):
        sa = a._data.shape
        shape = sa if sa == b._data.shape else broadcast_shapes(name, sa, b._data.shape)
        return (shape, result if result is not None else a._dtype)

    return infer


def _div_infer(a, b):
    shape = broadcast_shapes("div", a.shape, b.shape)
    return (shape, a.dtype if a.dtype.is_floating_point else D.float32)


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


ADD = defop("add", infer=_binfer("add"), backward=lambda ctx, g: (g, g))
SUB = defop("sub", infer=_binfer("sub"), backward=lambda ctx, g: (g, -g))
MUL = defop(
    "mul", infer=_binfer("mul"), save_inputs=(0, 1), save_for={0: (1,), 1: (0,)},
    backward=_mul_bwd,
)
DIV = defop(
    "div", infer=_div_infer, save_inputs=(0, 1), save_for={0: (1,), 1: (0, 1)}, backward=_div_bwd
)
POW = defop("pow", infer=_binfer("pow"), save_inputs=(0, 1), save_outputs=(0,), backward=_pow_bwd)
MAXIMUM = defop(
    "maximum",
    infer=_binfer("maximum"),
    save_inputs=(0, 1),
    backward=_minmax_bwd(lambda a, b: a > b),
)
MINIMUM = defop(
    "minimum",
    infer=_binfer("minimum"),
    save_inputs=(0, 1),
    backward=_minmax_bwd(lambda a, b: a < b),
)

# Same shape and float dtype in, same out, kernel(out, *arrays): the registry's fast lane.
mark_elementwise(NEG, ABS, SIGN, EXP, LOG, SQRT, SIN, COS, LOG1P, RECIPROCAL, RELU, SIGMOID, TANH,
                 GELU, RELU_BACKWARD, SIGMOID_BACKWARD, TANH_BACKWARD, GELU_BACKWARD, ADD, SUB, MUL,
                 DIV, POW, MAXIMUM, MINIMUM)

_CMP = {}
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _CMP[_name] = defop(_name, infer=_binfer(_name, D.bool_))


def _binary(op, doc):
    fast = op.fast

    def fn(input, other) -> Tensor:
        if fast is not None:
            # the fast lane straight from the operator: no operand promotion, no registry call
            out = fast[0](fast[1], input, other)
            if out is not None:
                if _grad_state.enabled and (input.requires_grad or other.requires_grad):
                    record(op, (input, other), (out,), {})
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


@method("add")
def add(input, other, *, alpha=1) -> Tensor:
    """input + alpha * other, with broadcasting and type promotion."""
    if alpha != 1:
        other = other * alpha
    a, b = as_operands("add", input, other)
    return apply(ADD, a, b)


@method("sub", "subtract")
def sub(input, other, *, alpha=1) -> Tensor:
    """input - alpha * other."""
    _check_sub(input, other)
    if alpha != 1:
        other = other * alpha
    a, b = as_operands("sub", input, other)
    return apply(SUB, a, b)


mul = method("mul", "multiply")(_binary(MUL, "Elementwise product with broadcasting."))
div = method("div", "divide", "true_divide")(_binary(DIV, "True division (ints give float32)."))
maximum = method("maximum")(_binary(MAXIMUM, "Elementwise maximum; NaN propagates."))
minimum = method("minimum")(_binary(MINIMUM, "Elementwise minimum; NaN propagates."))


@method("pow")
def pow(input, exponent) -> Tensor:  # noqa: A001 - PyTorch's name
    """input ** exponent, elementwise, with broadcasting."""
    a, b = as_operands("pow", input, exponent)
    return apply(POW, a, b)


eq = method("eq", "__eq__")(_binary(_CMP["eq"], "Elementwise ==, a bool tensor."))
ne = method("ne", "__ne__")(_binary(_CMP["ne"], "Elementwise !=, a bool tensor."))
lt = method("lt", "less", "__lt__")(_binary(_CMP["lt"], "Elementwise <, a bool tensor."))
le = method("le", "less_equal", "__le__")(_binary(_CMP["le"], "Elementwise <=, a bool tensor."))
gt = method("gt", "greater", "__gt__")(_binary(_CMP["gt"], "Elementwise >, a bool tensor."))
ge = method("ge", "greater_equal", "__ge__")(
    _binary(_CMP["ge"], "Elementwise >=, a bool tensor.")
)


def _cmp_operator(fn):
    # Operators return NotImplemented for foreign operands, so ``t == None`` is False (as in
    # PyTorch) and ``t < "a"`` raises Python's usual TypeError; the functions stay strict.
    def op(self, other):
        if not isinstance(other, (Tensor, numbers.Number, np.ndarray, np.generic)):
            return NotImplemented
        return fn(self, other)

    op.__name__ = fn.__name__
    return op


for _n, _f in (("__eq__", eq), ("__ne__", ne), ("__lt__", lt), ("__le__", le), ("__gt__", gt),
               ("__ge__", ge)):
    setattr(Tensor, _n, _cmp_operator(_f))


def _swap(fn):
    return lambda self, other: fn(other, self)


Tensor.__add__ = _add_operator
Tensor.__radd__ = _swap(_add_operator)
Tensor.__sub__ = _sub_operator
Tensor.__rsub__ = _swap(_sub_operator)
Tensor.__mul__ = mul
Tensor.__rmul__ = _swap(mul)
Tensor.__truediv__ = div
Tensor.__rtruediv__ = _swap(div)
Tensor.__pow__ = pow
Tensor.__rpow__ = _swap(pow)


# ----------------------------------------------------------------------------- logical
def _logical(name):
    op = defop(name, infer=lambda a, b: (broadcast_shapes(name, a.shape, b.shape), D.bool_))

    def fn(input, other) -> Tensor:
        a, b = input, other
        if not isinstance(b, Tensor):
            b = scalar_tensor(bool(b), D.bool_)
        return apply(op, a.to(D.bool_), b.to(D.bool_))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name[8:].upper()} of the operands' truth values, a bool tensor."
    return op, fn


LOGICAL_AND, logical_and = _logical("logical_and")
LOGICAL_OR, logical_or = _logical("logical_or")
LOGICAL_XOR, logical_xor = _logical("logical_xor")
LOGICAL_NOT = defop("logical_not", infer=lambda x: (x.shape, D.bool_))


def logical_not(input: Tensor) -> Tensor:
    """Elementwise NOT of the truth values (nonzero is True), a bool tensor."""
    return apply(LOGICAL_NOT, input)


for _n, _f in (("logical_and", logical_and), ("logical_or", logical_or),
               ("logical_xor", logical_xor), ("logical_not", logical_not)):
    setattr(Tensor, _n, _f)


def _bool_only(name, fn):
    def op(self, other):
        if self.dtype is not D.bool_:
            raise DTypeError(f"operator {name} is supported on bool tensors only, got {self.dtype}")
        return fn(self, other)

    return op


Tensor.__and__ = _bool_only("&", logical_and)
Tensor.__or__ = _bool_only("|", logical_or)
Tensor.__xor__ = _bool_only("^", logical_xor)


def _invert(self: Tensor) -> Tensor:
    if self.dtype is not D.bool_:
        raise DTypeError(f"operator ~ is supported on bool tensors only, got {self.dtype}")
    return logical_not(self)


Tensor.__invert__ = _invert


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
)


def where(condition: Tensor, input, other) -> Tensor:
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (broadcast)."""
    if not isinstance(condition, Tensor) or condition.dtype is not D.bool_:
        raise DTypeError(
            f"where: condition must be a bool tensor, got "
            f"{condition.dtype if isinstance(condition, Tensor) else type(condition).__name__}"
        )
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        from ..creation import tensor

        input = tensor(input)  # two Python scalars: the first sets the default dtype
    a, b = as_operands("where", input, other)
    return apply(WHERE, condition, a, b)


# PyTorch's method form: x.where(condition, y) == where(condition, x, y).
Tensor.where = lambda self, condition, other: where(condition, self, other)


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


CLAMP = defop("clamp", infer=_same, save_inputs=(0,), backward=_clamp_bwd)


@method("clamp", "clip")
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
            dt = D.scalar_result(dt, bound)  # int tensor, float bound -> float32 (PyTorch)
    if dt is not input.dtype:
        input = input.to(dt)
    return apply(CLAMP, input, min=min, max=max)


# ----------------------------------------------------------------------------- casts, copies
def _to_bwd(ctx, g):
    return g  # the engine casts the gradient back to the input's dtype


TO_DTYPE = defop("to_dtype", infer=lambda x, dtype: (x.shape, dtype), backward=_to_bwd)
CLONE = defop("clone", infer=_same, backward=lambda ctx, g: g)


@method("clone")
def clone(input: Tensor) -> Tensor:
    """A contiguous copy that stays in the graph."""
    return apply(CLONE, input)


@method("contiguous")
def contiguous(input: Tensor) -> Tensor:
    """self when already C-contiguous, else a contiguous copy."""
    return input if input._data.flags.c_contiguous else apply(CLONE, input)


def _to(self: Tensor, *args, dtype=None, device=None, copy: bool = False, **_kw) -> Tensor:
    """Convert dtype and/or device: ``to(float64)``, ``to('cpu')``, ``to('cpu', float16)``;
    ``to(other)`` takes other's dtype and device, as PyTorch."""
    for a in args:
        if isinstance(a, (D.dtype, type)) or (isinstance(a, str) and a in D.BY_NAME):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            device = a
    target = None
    if device is not None:
        from ..tensor import device as _device

        target = _device(device).type
    if dtype is not None:
        dt = D.as_dtype(dtype)
        if dt is not self.dtype:
            # The cast first: it may run on either backend (a Vulkan kernel takes few dtypes),
            # so the move after it puts the result where it belongs: the explicit device, else
            # where the input was (a dtype change never changes the device, as in PyTorch).
            if target is None:
                target = self.device.type
            self = apply(TO_DTYPE, self, dtype=dt)
            copy = False
    if target is not None and target != self.device.type:
        self = to_device(self, target)
        copy = False
    return self.clone() if copy else self


Tensor.to = _to
Tensor.type = lambda self, dtype=None: (str(self.dtype) if dtype is None else _to(self, dtype))
Tensor.float = lambda self: _to(self, D.float32)
Tensor.double = lambda self: _to(self, D.float64)
Tensor.half = lambda self: _to(self, D.float16)
Tensor.bfloat16 = lambda self: _to(self, D.bfloat16)
Tensor.long = lambda self: _to(self, D.int64)
Tensor.int = lambda self: _to(self, D.int32)
Tensor.bool = lambda self: _to(self, D.bool_)
Tensor.byte = lambda self: _to(self, D.uint8)
Tensor.char = lambda self: _to(self, D.int8)
Tensor.cpu = lambda self: _to(self, "cpu")
Tensor.vulkan = lambda self: _to(self, "vulkan")


def _to_device_bwd(ctx, g):
    return to_device(g, ctx.attrs["source"])


TO_DEVICE = defop("to_device", backward=_to_device_bwd)


def to_device(input: Tensor, device: str) -> Tensor:
    """A copy of ``input`` on 'cpu' or 'vulkan' (differentiable: the gradient moves back)."""
    from .. import dispatch
    from ..backends.cpu import empty_array
    from .registry import record

    src = input.device.type
    if device == "cpu":
        host = input._host()
        data = empty_array(host.shape, host.dtype)
        np.copyto(data, host)
        out = Tensor._wrap(data, input._dtype)
    else:
        vb = dispatch.vulkan_backend(required=True)
        # np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them shape (1,))
        out = Tensor._wrap(vb.upload(np.require(input._host(), requirements="C"), input._dtype),
                           input._dtype, dev=vb)
    if dispatch._trace.records is not None:
        dispatch.record("to_device", device, out.shape)
    if _grad_state.enabled and out._dtype.is_floating_point:
        record(TO_DEVICE, (input,), (out,), {"source": src, "device": device})
    return out
