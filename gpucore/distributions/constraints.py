"""Constraints: the sets a parameter or a sample must lie in (torch.distributions.constraints).

A constraint is a predicate over the last ``event_dim`` dimensions of a tensor: ``check(value)``
returns a bool tensor of the remaining (batch) shape. The scalar sets are one class each with
their bounds; the names users import (``real``, ``positive``, ``simplex``, ...) are instances.
Class names and reprs follow PyTorch's (``_GreaterThan`` prints ``GreaterThan(lower_bound=0.0)``)
so that code inspecting them, and error messages, read the same.
"""

from __future__ import annotations

import gpucore as gc

from ..tensor import Tensor

__all__ = [
    "Constraint",
    "MixtureSameFamilyConstraint",
    "boolean",
    "cat",
    "corr_cholesky",
    "dependent",
    "dependent_property",
    "greater_than",
    "greater_than_eq",
    "half_open_interval",
    "independent",
    "integer_interval",
    "interval",
    "is_dependent",
    "less_than",
    "lower_cholesky",
    "lower_triangular",
    "multinomial",
    "nonnegative",
    "nonnegative_integer",
    "one_hot",
    "positive",
    "positive_definite",
    "positive_integer",
    "positive_semidefinite",
    "real",
    "real_vector",
    "simplex",
    "square",
    "stack",
    "symmetric",
    "unit_interval",
]


class Constraint:
    """A set of valid values: ``check(value)`` says, per batch element, whether ``value`` lies
    in it. ``is_discrete`` marks integer-valued sets; ``event_dim`` is how many rightmost
    dimensions form one element of the set."""

    is_discrete = False
    event_dim = 0
    _bounds: tuple = ()  # attribute names shown by repr, in order

    def check(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)}" for k in self._bounds)
        return f"{type(self).__name__.lstrip('_')}({inner})"


class _Dependent(Constraint):
    """A placeholder whose set depends on other values (a distribution's support that follows
    its parameters); it cannot be checked by itself."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(
            is_discrete=self._is_discrete if is_discrete is NotImplemented else is_discrete,
            event_dim=self._event_dim if event_dim is NotImplemented else event_dim,
        )

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether ``constraint`` is a dependent placeholder (never checked by itself)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property computing a constraint from the instance (a distribution's support over its
    parameters); on the class it stands for a dependent constraint."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """``base`` applied elementwise and required of all of the last ``reinterpreted_batch_ndims``
    dimensions together."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        if not isinstance(base_constraint, Constraint) or reinterpreted_batch_ndims < 0:
            raise TypeError("independent(base, n): a Constraint and a count n >= 0")
        self.base_constraint, self.reinterpreted_batch_ndims = (
            base_constraint,
            reinterpreted_batch_ndims,
        )

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        ok = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if ok.dim() < n:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        return ok.reshape(tuple(ok.shape[: ok.dim() - n]) + (-1,)).all(-1) if n else ok

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamilyConstraint(Constraint):
    """A mixture's support: its components' support, reduced over the mixture dimension."""

    def __init__(self, base_constraint: Constraint):
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        ok = self.base_constraint.check(value)
        return ok.reshape(tuple(ok.shape[: ok.dim() - self.event_dim]) + (-1,)).all(-1)

    def __repr__(self):
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


# ------------------------------------------------------------------ scalar sets


class _Real(Constraint):
    def check(self, value):
        return value == value  # NaN is the only real-typed value outside


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


def _integer(value):
    return value % 1 == 0


class _IntegerInterval(Constraint):
    is_discrete = True
    _bounds = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return _integer(value) & (value >= self.lower_bound) & (value <= self.upper_bound)


class _IntegerLessThan(Constraint):
    is_discrete = True
    _bounds = ("upper_bound",)

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return _integer(value) & (value <= self.upper_bound)


class _IntegerGreaterThan(Constraint):
    is_discrete = True
    _bounds = ("lower_bound",)

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return _integer(value) & (value >= self.lower_bound)


class _GreaterThan(Constraint):
    _bounds = ("lower_bound",)

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return value >= self.lower_bound


class _LessThan(Constraint):
    _bounds = ("upper_bound",)

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound


class _Interval(Constraint):
    _bounds = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


# ------------------------------------------------------------------ vector and matrix sets


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _Multinomial(Constraint):
    """Count vectors of at most ``upper_bound`` draws in total."""

    is_discrete = True
    event_dim = 1
    _bounds = ("upper_bound",)

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)


def _all_matrix(ok: Tensor) -> Tensor:
    return ok.all(-1).all(-1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        batch = tuple(value.shape[:-2])
        return gc.full(
            batch, value.shape[-2] == value.shape[-1], dtype=gc.bool, device=value.device
        )


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not bool(square.all()):
            return square
        return _all_matrix((value - value.mT).abs() <= 1e-6 + 1e-5 * value.mT.abs())


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return gc.linalg.eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return gc.linalg.cholesky_ex(value).info.eq(0)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return _all_matrix(value.tril() == value)


class _LowerCholesky(_LowerTriangular):
    def check(self, value):
        return super().check(value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _CorrCholesky(_LowerCholesky):
    """Cholesky factors of correlation matrices: lower triangular, positive diagonal, rows of
    unit length (to a tolerance growing with the size)."""

    def check(self, value):
        tol = gc.finfo(value.dtype).eps * value.shape[-1] * 10
        rows = gc.linalg.vector_norm(value.detach(), dim=-1)
        return super().check(value) & ((rows - 1).abs() <= tol).all(-1)


class _Cat(Constraint):
    """Constraints applied to consecutive pieces of ``dim`` (of the given lengths)."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError("cat: one length per constraint")
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        parts, start = [], 0
        for c, n in zip(self.cseq, self.lengths):
            parts.append(c.check(value.narrow(self.dim, start, n)))
            start += n
        return gc.cat(parts, self.dim)


class _Stack(Constraint):
    """Constraints applied to the slices of ``dim``, one each."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        d = max(c.event_dim for c in self.cseq)
        return d + 1 if self.dim + d < 0 else d

    def check(self, value):
        n = value.shape[self.dim]
        return gc.stack(
            [c.check(value.select(self.dim, i)) for i, c in zip(range(n), self.cseq)], self.dim
        )


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
