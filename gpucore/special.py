"""gpucore.special: PyTorch's torch.special names, signatures and semantics.

Every function takes ``out=`` (a tensor of the result's shape whose dtype can hold the result; not
with autograd, as PyTorch) and computes integer and bool inputs in the default floating dtype. Most
are the top-level ops under their special names (``expit`` is sigmoid, ``psi`` digamma, ``gammaln``
lgamma, ``gammainc`` igamma, ``multigammaln`` mvlgamma); the Bessel, Airy, zeta, incomplete gamma,
erfcx, ndtri, entr and polynomial functions are registry ops with C kernels on the host
(gpucore/ops/bessel.py, transcendental.py, polynomials.py; cpu/special*.c: in double, float32
rounded once, except the polynomials, which run in the element type as PyTorch's; a Vulkan tensor's
result comes back as a host tensor, as for sort); ndtr, log_ndtr and xlog1py are compositions here
(every backend). float16/bfloat16 inputs are refused where PyTorch refuses them. Gradients where
PyTorch has them; the functions PyTorch does not differentiate (the Bessel functions J, Y and K,
Airy, the polynomials) give outputs that do not require grad, and zeta's and igamma's first-argument
gradients raise as PyTorch's do.
"""

from __future__ import annotations

import math

from . import dtypes as D
from .autograd.grad_mode import is_grad_enabled
from .errors import ArgumentTypeError, DTypeError, ShapeError
from .ops import bessel as _b
from .ops import nn as _nn
from .ops import pointwise as _pw
from .ops import polynomials as _poly
from .ops import transcendental as _tr
from .ops.api import checked, type_name
from .ops.common import as_operands, float_input
from .ops.elementwise import where
from .ops.registry import apply
from .tensor import Tensor
from .typeinfo import can_cast

_SQRT1_2 = 1 / math.sqrt(2)


def _out(name: str, result: Tensor, out) -> Tensor:
    """result, or result written into ``out`` (PyTorch's out= contract, without resizing)."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise ArgumentTypeError(f"{name}(): argument 'out' must be Tensor, not {type_name(out)}")
    if is_grad_enabled() and (result._requires_grad or out._requires_grad):
        raise ValueError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad"
        )
    if not can_cast(result.dtype, out.dtype):
        raise DTypeError(
            f"{name}(): result type {result.dtype} can't be cast to the desired output type "
            f"{out.dtype}"
        )
    if tuple(out.shape) != tuple(result.shape):
        raise ShapeError(
            f"{name}(): out has shape {tuple(out.shape)} but the result has shape "
            f"{tuple(result.shape)}; pass an out of the result's shape (gpucore does not resize)"
        )
    out.copy_(result)
    return out


def _unary(name: str, fn):
    """The special form of a one-input function: float promotion and out=."""

    def f(input: Tensor, *, out: Tensor | None = None) -> Tensor:
        return _out(name, fn(float_input(input)), out)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.special.{name}: elementwise, integers in the default floating dtype."
    return checked(f"special.{name}", f)


def _binary(name: str, fn, names=("input", "other"), promote: bool = True):
    """The special form of a two-input function (``promote=False``: fn promotes itself)."""

    def f(input, other, *, out: Tensor | None = None) -> Tensor:
        a, b = as_operands(f"special.{name}", input, other, names)
        if promote:
            a, b = float_input(a), float_input(b)
        return _out(name, fn(a, b), out)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.special.{name}({names[0]}, {names[1]}): elementwise with broadcasting."
    return checked(f"special.{name}", f)


def _op(op):
    return lambda x: apply(op, x)


def _ndtr(x: Tensor) -> Tensor:
    return 0.5 * (x * -_SQRT1_2).erfc()


def _log_ndtr(x: Tensor) -> Tensor:
    """log(ndtr(x)): log1p(-ndtr(-x)) where ndtr(x) is near 1, and log(erfcx(-x/sqrt2)/2) -
    x^2/2 in the lower tail (no underflow); each branch sees only its own arguments, so the
    other's gradient stays finite. float16/bfloat16 refused, as PyTorch (through erfcx)."""
    if x.dtype is D.float16 or x.dtype is D.bfloat16:
        raise DTypeError(f"log_ndtr(): not implemented for {x.dtype} (as PyTorch); use .float()")
    lo = x.clamp(max=-1.0)
    hi = x.clamp(min=-1.0)
    tail = (apply(_tr.ERFCX, lo * -_SQRT1_2) * 0.5).log() - lo * lo * 0.5
    body = (-_ndtr(-hi)).log1p()
    return where(x < -1.0, tail, body)


def _xlog1py(a: Tensor, b: Tensor) -> Tensor:
    """a * log1p(b), 0 where a is 0 (unless b is NaN), as torch.special.xlog1py: a's gradient is
    log1p(b) but 0 where a is 0 and b <= -1 (PyTorch's formula)."""
    zero = (a == 0) & (b <= -1)  # 0 * log1p(b) is 0 without help where b > -1
    safe = where(zero, b.new_zeros(()), b)
    return a * safe.log1p()


# ------------------------------------------------------------------ one input
airy_ai = _unary("airy_ai", _op(_b.AIRY_AI))
bessel_j0 = _unary("bessel_j0", _op(_b.J0))
bessel_j1 = _unary("bessel_j1", _op(_b.J1))
bessel_y0 = _unary("bessel_y0", _op(_b.Y0))
bessel_y1 = _unary("bessel_y1", _op(_b.Y1))
# PyTorch's modified_bessel_i0/i1 are i0/i1 without gradients and without half precision
modified_bessel_i0 = _unary(
    "modified_bessel_i0", _b.full_precision_only("modified_bessel_i0", _op(_b.I0))
)
modified_bessel_i1 = _unary(
    "modified_bessel_i1", _b.full_precision_only("modified_bessel_i1", _op(_b.I1))
)
modified_bessel_k0 = _unary("modified_bessel_k0", _op(_b.K0))
modified_bessel_k1 = _unary("modified_bessel_k1", _op(_b.K1))
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0", _op(_b.K0E))
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1", _op(_b.K1E))
spherical_bessel_j0 = _unary("spherical_bessel_j0", _op(_b.SPHERICAL_J0))
i0 = _unary("i0", _op(_b.I0))
i0e = _unary("i0e", _op(_b.I0E))
i1 = _unary("i1", _op(_b.I1))
i1e = _unary("i1e", _op(_b.I1E))
erfcx = _unary("erfcx", _op(_tr.ERFCX))
ndtri = _unary("ndtri", _op(_tr.NDTRI))
ndtr = _unary("ndtr", _ndtr)
log_ndtr = _unary("log_ndtr", _log_ndtr)
entr = _unary("entr", _op(_tr.ENTR))
digamma = _unary("digamma", Tensor.digamma)
psi = _unary("psi", Tensor.digamma)
gammaln = _unary("gammaln", Tensor.lgamma)
erf = _unary("erf", Tensor.erf)
erfc = _unary("erfc", Tensor.erfc)
erfinv = _unary("erfinv", Tensor.erfinv)
exp2 = _unary("exp2", Tensor.exp2)
expm1 = _unary("expm1", Tensor.expm1)
log1p = _unary("log1p", Tensor.log1p)
expit = _unary("expit", Tensor.sigmoid)
sinc = _unary("sinc", _pw.sinc)


def round(input: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A001 - PyTorch's name
    """torch.special.round: to the nearest integer, halves to even (integers keep their dtype)."""
    return _out("round", input.round(), out)


round = checked("special.round", round)  # noqa: A001

# ------------------------------------------------------------------ two inputs
xlogy = _binary("xlogy", _pw.xlogy)
xlog1py = _binary("xlog1py", _xlog1py)
zeta = _binary("zeta", lambda a, b: apply(_tr.ZETA, a, b))
gammainc = _binary("gammainc", _tr.igamma, promote=False)
gammaincc = _binary("gammaincc", _tr.igammac, promote=False)


def _poly_fn(name: str):
    op = _poly.POLYNOMIALS[name]
    return _binary(name, lambda x, n: apply(op, x, n), ("input", "n"))


chebyshev_polynomial_t = _poly_fn("chebyshev_polynomial_t")
chebyshev_polynomial_u = _poly_fn("chebyshev_polynomial_u")
chebyshev_polynomial_v = _poly_fn("chebyshev_polynomial_v")
chebyshev_polynomial_w = _poly_fn("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _poly_fn("shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _poly_fn("shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _poly_fn("shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _poly_fn("shifted_chebyshev_polynomial_w")
hermite_polynomial_h = _poly_fn("hermite_polynomial_h")
hermite_polynomial_he = _poly_fn("hermite_polynomial_he")
laguerre_polynomial_l = _poly_fn("laguerre_polynomial_l")
legendre_polynomial_p = _poly_fn("legendre_polynomial_p")


# ------------------------------------------------------------------ other signatures
def _logit(input: Tensor, eps: float | None = None, *, out: Tensor | None = None) -> Tensor:
    """torch.special.logit: log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    return _out("logit", _tr.logit(input, eps), out)


def _polygamma(n: int, input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """torch.special.polygamma: the n-th derivative of digamma."""
    return _out("polygamma", _tr.polygamma(n, input), out)


def _multigammaln(input: Tensor, p: int, *, out: Tensor | None = None) -> Tensor:
    """torch.special.multigammaln: the log of the multivariate gamma function (torch.mvlgamma)."""
    return _out("multigammaln", _tr.mvlgamma(input, p), out)


def _logsumexp(input: Tensor, dim, keepdim: bool = False, *, out: Tensor | None = None) -> Tensor:
    """torch.special.logsumexp: log(sum(exp(input))) along dim, computed stably."""
    return _out("logsumexp", _nn.logsumexp(float_input(input), dim, keepdim), out)


def _softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """torch.special.softmax: softmax along dim (in ``dtype`` if given)."""
    return _nn.softmax(input if dtype is not None else float_input(input), dim, dtype)


def _log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """torch.special.log_softmax: log of softmax along dim (in ``dtype`` if given)."""
    return _nn.log_softmax(input if dtype is not None else float_input(input), dim, dtype)


logit = checked("special.logit", _logit)
polygamma = checked("special.polygamma", _polygamma)
multigammaln = checked("special.multigammaln", _multigammaln)
logsumexp = checked("special.logsumexp", _logsumexp)
softmax = checked("special.softmax", _softmax)
log_softmax = checked("special.log_softmax", _log_softmax)
for _f, _n in (
    (logit, "logit"),
    (polygamma, "polygamma"),
    (multigammaln, "multigammaln"),
    (logsumexp, "logsumexp"),
    (softmax, "softmax"),
    (log_softmax, "log_softmax"),
):
    _f.__name__ = _f.__qualname__ = _n
del _f, _n


__all__ = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammainc",
    "gammaincc",
    "gammaln",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
    "zeta",
]
