"""Transforms: invertible (or at least computable) maps between constrained spaces with the log
of their Jacobian's absolute determinant (torch.distributions.transforms).

The scalar bijections are rows of one table (``_pointwise``: forward, inverse, log|dy/dx|,
domain, codomain); the structural ones (compose, independent, reshape, affine, power, and the
vector and matrix maps in transforms_vector.py) are small classes on the same base.
"""

from __future__ import annotations

import math
import weakref

import gpucore as gc
import gpucore.nn.functional as F
from gpucore.ops.common import broadcast_shapes

from . import constraints as C

__all__ = [
    "Transform",
    "ComposeTransform",
    "IndependentTransform",
    "ReshapeTransform",
    "AffineTransform",
    "PowerTransform",
    "ExpTransform",
    "SigmoidTransform",
    "TanhTransform",
    "SoftplusTransform",
    "AbsTransform",
    "identity_transform",
]


def _sum_rightmost(x, n: int):
    return x.reshape(tuple(x.shape[: x.dim() - n]) + (-1,)).sum(-1) if n > 0 else x


class Transform:
    """A map y = T(x) with ``inv``, ``log_abs_det_jacobian(x, y)``, its ``domain`` and
    ``codomain`` constraints, ``bijective`` and (for monotone scalar maps) ``sign``.
    ``cache_size=1`` remembers the last pair, so ``T.inv(T(x)) is x``."""

    bijective = False
    domain = C.real
    codomain = C.real

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached = (None, None)
        self._inv = None

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign")

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} has no forward map")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} has no inverse")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} has no log_abs_det_jacobian")

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform (what ``.inv`` returns); it holds the original."""

    def __init__(self, transform: Transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def with_cache(self, cache_size=1):
        return self._inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def __repr__(self):
        return f"_InverseTransform({self._inv!r})"


class ComposeTransform(Transform):
    """``parts`` applied in order; log-determinants add, each summed over the event dimensions
    it is nested in."""

    def __init__(self, parts, cache_size: int = 0):
        self.parts = [p.with_cache(cache_size) for p in parts] if cache_size else list(parts)
        super().__init__(cache_size=cache_size)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return C.real
        dom = self.parts[0].domain
        need = self.parts[-1].codomain.event_dim
        for p in reversed(self.parts):
            need = max(need + p.domain.event_dim - p.codomain.event_dim, p.domain.event_dim)
        return C.independent(dom, need - dom.event_dim) if need > dom.event_dim else dom

    @property
    def codomain(self):
        if not self.parts:
            return C.real
        cod = self.parts[-1].codomain
        need = self.parts[0].domain.event_dim
        for p in self.parts:
            need = max(need + p.codomain.event_dim - p.domain.event_dim, p.codomain.event_dim)
        return C.independent(cod, need - cod.event_dim) if need > cod.event_dim else cod

    bijective = property(lambda self: all(p.bijective for p in self.parts))

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self):
        inv = self._inv() if self._inv is not None else None
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = weakref.ref(inv)
            inv._inv = weakref.ref(self)
        return inv

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size)

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return gc.zeros_like(x)
        xs = [x]
        for p in self.parts[:-1]:
            xs.append(p(xs[-1]))
        xs.append(y)
        total = 0
        event_dim = self.domain.event_dim
        for p, a, b in zip(self.parts, xs[:-1], xs[1:]):
            term = _sum_rightmost(p.log_abs_det_jacobian(a, b), event_dim - p.domain.event_dim)
            total = total + term
            event_dim += p.codomain.event_dim - p.domain.event_dim
        return total

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return shape

    def __repr__(self):
        inner = ",\n    ".join(repr(p) for p in self.parts)
        return f"ComposeTransform(\n    {inner}\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """``base_transform`` with its last ``reinterpreted_batch_ndims`` batch dimensions treated
    as event dimensions (its log-determinant summed over them)."""

    def __init__(self, base_transform, reinterpreted_batch_ndims: int, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    domain = property(
        lambda self: C.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)
    )
    codomain = property(
        lambda self: C.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)
    )
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size)

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(
            self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims
        )

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` to ``out_shape`` (same number of elements)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape, self.out_shape = gc.Size(in_shape), gc.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    domain = property(lambda self: C.independent(C.real, len(self.in_shape)))
    codomain = property(lambda self: C.independent(C.real, len(self.out_shape)))

    def with_cache(self, cache_size=1):
        return (
            self
            if self._cache_size == cache_size
            else ReshapeTransform(self.in_shape, self.out_shape, cache_size)
        )

    def _call(self, x):
        return x.reshape(tuple(x.shape[: x.dim() - len(self.in_shape)]) + tuple(self.out_shape))

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[: y.dim() - len(self.out_shape)]) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[: x.dim() - len(self.in_shape)]))

    def _swap(self, shape, a, b):
        if len(shape) < len(a) or tuple(shape[len(shape) - len(a) :]) != tuple(a):
            raise ValueError(f"Shape mismatch: expected {tuple(shape)} to end with {tuple(a)}")
        return gc.Size(tuple(shape[: len(shape) - len(a)]) + tuple(b))

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)


class AffineTransform(Transform):
    """y = loc + scale * x, elementwise over ``event_dim`` event dimensions."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def domain(self):
        return C.real if self._event_dim == 0 else C.independent(C.real, self._event_dim)

    codomain = domain
    event_dim = property(lambda self: self._event_dim)

    @property
    def sign(self):
        s = self.scale
        return s.sign() if isinstance(s, gc.Tensor) else (1 if s > 0 else -1 if s < 0 else 0)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, gc.Tensor) or isinstance(b, gc.Tensor):
                if not bool(gc.as_tensor(a).eq(gc.as_tensor(b)).all()):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = object.__hash__

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        s = self.scale
        if isinstance(s, gc.Tensor):
            out = s.abs().log()
        else:
            out = gc.full_like(x, math.log(abs(s)))
        out = out.expand(broadcast_shapes("AffineTransform", tuple(out.shape), tuple(x.shape)))
        return _sum_rightmost(out, self._event_dim)

    def _param_shape(self, shape):
        parts = [tuple(shape)] + [
            tuple(v.shape) for v in (self.loc, self.scale) if isinstance(v, gc.Tensor)
        ]
        return gc.Size(broadcast_shapes("AffineTransform", *parts))

    forward_shape = _param_shape
    inverse_shape = _param_shape


class PowerTransform(Transform):
    """y = x ** exponent on the positive reals."""

    domain = C.positive
    codomain = C.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent if isinstance(exponent, gc.Tensor) else gc.tensor(float(exponent))

    sign = property(lambda self: self.exponent.sign())

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size)

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(self.exponent.eq(other.exponent).all())

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return gc.Size(broadcast_shapes("PowerTransform", tuple(shape), tuple(self.exponent.shape)))

    inverse_shape = forward_shape


def _clip_unit(p):
    """Keep a probability strictly inside (0, 1) at the dtype's resolution."""
    fi = gc.finfo(p.dtype)
    return p.clamp(min=fi.tiny, max=1.0 - fi.eps)


def _pointwise(name, doc, domain, codomain, forward, inverse, ladj, bijective=True, sign=1):
    """A scalar transform class from its formulas (one row of the table below)."""

    def _eq(self, other):
        return type(self) is type(other)

    body = {
        "__doc__": doc,
        "domain": domain,
        "codomain": codomain,
        "bijective": bijective,
        "_call": lambda self, x: forward(x),
        "_inverse": lambda self, y: inverse(y),
        "log_abs_det_jacobian": lambda self, x, y: ladj(x, y),
        "__eq__": _eq,
        "__hash__": object.__hash__,
        "__module__": __name__,
    }
    if sign is not None:
        body["sign"] = sign
    return type(name, (Transform,), body)


def _no_ladj(x, y):
    raise NotImplementedError("AbsTransform is not bijective: no log_abs_det_jacobian")


ExpTransform = _pointwise(
    "ExpTransform", "y = exp(x).", C.real, C.positive, gc.exp, gc.log, lambda x, y: x
)
SigmoidTransform = _pointwise(
    "SigmoidTransform",
    "y = 1 / (1 + exp(-x)), kept inside (0, 1).",
    C.real,
    C.unit_interval,
    lambda x: _clip_unit(x.sigmoid()),
    lambda y: (lambda p: p.log() - (-p).log1p())(_clip_unit(y)),
    lambda x, y: -F.softplus(-x) - F.softplus(x),
)
TanhTransform = _pointwise(
    "TanhTransform",
    "y = tanh(x).",
    C.real,
    C.interval(-1.0, 1.0),
    gc.tanh,
    gc.atanh,
    lambda x, y: 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x)),
)
SoftplusTransform = _pointwise(
    "SoftplusTransform",
    "y = log(1 + exp(x)).",
    C.real,
    C.positive,
    F.softplus,
    lambda y: y + (-(-y).expm1()).log(),
    lambda x, y: -F.softplus(-x),
)
AbsTransform = _pointwise(
    "AbsTransform", "y = |x|.", C.real, C.positive, gc.abs, lambda y: y, _no_ladj, False, None
)
