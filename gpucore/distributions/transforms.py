"""Transforms: invertible (or at least computable) maps between constrained spaces with the log
of their Jacobian's absolute determinant (torch.distributions.transforms).

The scalar bijections are rows of one table (``_pointwise``: forward, inverse, log|dy/dx|,
domain, codomain); the structural ones (compose, independent, reshape, affine, power, and the
vector and matrix maps in transforms_vector.py) are small classes on the same base.
"""

from __future__ import annotations

import copy
import math

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


class _LastPair:
    """The one (x, y) pair a caching transform remembers; its inverse reads the same pair."""

    __slots__ = ("x", "y")

    def __init__(self):
        self.x = self.y = None


class Transform:
    """A map y = T(x) with ``inv``, ``log_abs_det_jacobian(x, y)``, its ``domain`` and
    ``codomain`` constraints, ``bijective`` and (for monotone scalar maps) ``sign``.
    ``cache_size=1`` remembers the last pair, so ``T.inv(T(x)) is x``.

    A subclass writes ``_call`` and ``_inverse``; the cache, the inverse view and
    ``with_cache`` (a shallow copy with a fresh memory; ``_recache`` re-caches held parts)
    come from here."""

    bijective = False
    domain = C.real
    codomain = C.real

    def __init__(self, cache_size: int = 0):
        self._cache_size = _checked_cache_size(cache_size)
        self._memo = _LastPair() if cache_size else None
        self._inverse_view = None

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse map (one object per transform, whose ``inv`` is this transform)."""
        if self._inverse_view is None:
            self._inverse_view = _InverseTransform(self)
        return self._inverse_view

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign")

    def with_cache(self, cache_size: int = 1):
        """This map remembering its last pair (1) or nothing (0)."""
        if _checked_cache_size(cache_size) == self._cache_size:
            return self
        twin = copy.copy(self)
        twin._cache_size = cache_size
        twin._memo = _LastPair() if cache_size else None
        twin._inverse_view = None
        twin._recache(cache_size)
        return twin

    def _recache(self, cache_size: int) -> None:
        """Give held transforms the cache setting of a new copy (composites override)."""

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def _through_memo(self, value, forward: bool):
        memo = self._memo
        if memo is None:
            return self._call(value) if forward else self._inverse(value)
        if forward:
            if value is not memo.x:
                memo.y, memo.x = self._call(value), value
            return memo.y
        if value is not memo.y:
            memo.x, memo.y = self._inverse(value), value
        return memo.x

    def __call__(self, x):
        return self._through_memo(x, True)

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


def _checked_cache_size(n):
    if n not in (0, 1):
        raise ValueError(f"cache_size must be 0 or 1, got {n}")
    return n


class _InverseTransform(Transform):
    """``T.inv``: T read backwards (domain and codomain swapped, the log-determinant negated),
    sharing T's cache."""

    def __init__(self, forward: Transform):
        super().__init__()
        self._cache_size = forward._cache_size
        self._forward = forward
        self._inverse_view = forward

    domain = property(lambda self: self._forward.codomain)
    codomain = property(lambda self: self._forward.domain)
    bijective = property(lambda self: self._forward.bijective)
    sign = property(lambda self: self._forward.sign)

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._forward == other._forward

    __hash__ = object.__hash__

    def __call__(self, y):
        return self._forward._through_memo(y, False)

    def _call(self, y):
        return self._forward._inverse(y)

    def _inverse(self, x):
        return self._forward._call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._forward.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._forward.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._forward.forward_shape(shape)

    def __repr__(self):
        return f"_InverseTransform({self._forward!r})"


def _event_ranks(parts) -> tuple[int, int]:
    """(input, output) event rank of ``parts`` applied in order. The rank reaching part i is the
    input rank plus the shifts (codomain rank - domain rank) of the parts before it, and must be
    at least part i's domain rank: the input rank is the smallest that satisfies every part."""
    rank_in, shift = 0, 0
    for p in parts:
        rank_in = max(rank_in, p.domain.event_dim - shift)
        shift += p.codomain.event_dim - p.domain.event_dim
    return rank_in, rank_in + shift


def _widened(constraint, rank: int):
    extra = rank - constraint.event_dim
    return C.independent(constraint, extra) if extra > 0 else constraint


class ComposeTransform(Transform):
    """``parts`` applied in order; log-determinants add, each summed over the event dimensions
    it is nested in."""

    def __init__(self, parts, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)
        self._recache(cache_size)

    def _recache(self, cache_size):
        if cache_size:
            self.parts = [p.with_cache(cache_size) for p in self.parts]

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        return _widened(self.parts[0].domain, _event_ranks(self.parts)[0]) if self.parts else C.real

    @property
    def codomain(self):
        if not self.parts:
            return C.real
        return _widened(self.parts[-1].codomain, _event_ranks(self.parts)[1])

    bijective = property(lambda self: all(p.bijective for p in self.parts))

    @property
    def sign(self):
        return math.prod((p.sign for p in self.parts), start=1)

    @property
    def inv(self):
        # the parts' inverses in reverse order, itself a composition (whose inv is this one)
        if self._inverse_view is None:
            backwards = ComposeTransform([p.inv for p in reversed(self.parts)])
            backwards._inverse_view = self
            self._inverse_view = backwards
        return self._inverse_view

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return gc.zeros_like(x)
        rank = _event_ranks(self.parts)[0]
        total, value, last = 0, x, len(self.parts) - 1
        for i, p in enumerate(self.parts):
            nxt = y if i == last else p(value)
            total = total + _sum_rightmost(
                p.log_abs_det_jacobian(value, nxt), rank - p.domain.event_dim
            )
            rank += p.codomain.event_dim - p.domain.event_dim
            value = nxt
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
        self.base_transform = base_transform
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self._recache(cache_size)

    def _recache(self, cache_size):
        self.base_transform = self.base_transform.with_cache(cache_size)

    def _wider(self, constraint):
        return C.independent(constraint, self.reinterpreted_batch_ndims)

    domain = property(lambda self: self._wider(self.base_transform.domain))
    codomain = property(lambda self: self._wider(self.base_transform.codomain))
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        inner = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(inner, self.reinterpreted_batch_ndims)

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
