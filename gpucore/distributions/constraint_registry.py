"""``biject_to(constraint)`` and ``transform_to(constraint)``: a transform from unconstrained
reals onto the constraint's set (bijective for ``biject_to``; possibly many-to-one for
``transform_to``, which is then cheaper or better conditioned). Both are registries keyed by
the constraint's class; ``register`` adds to them."""

from __future__ import annotations

import numbers

from . import constraints as C
from . import transforms as T
from . import transforms_vector as V

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Constraint class -> factory(constraint) -> Transform."""

    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        """Register ``factory`` for ``constraint`` (a Constraint class, or an instance standing
        for its class); usable as a decorator."""
        if factory is None:
            return lambda f: self.register(constraint, f)
        if isinstance(constraint, C.Constraint):
            constraint = type(constraint)
        if not (isinstance(constraint, type) and issubclass(constraint, C.Constraint)):
            raise TypeError(
                "Expected constraint to be either a Constraint subclass or instance, "
                f"but got {constraint}"
            )
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        for cls in type(constraint).__mro__:
            if cls in self._registry:
                return self._registry[cls](constraint)
        raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints")


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _is(value, number) -> bool:
    return isinstance(value, numbers.Number) and value == number


def _above(c):
    if _is(c.lower_bound, 0):
        return T.ExpTransform()
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(c.lower_bound, 1)])


def _below(c):
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(c.upper_bound, -1)])


def _between(c):
    if _is(c.lower_bound, 0) and _is(c.upper_bound, 1):
        return T.SigmoidTransform()
    return T.ComposeTransform(
        [T.SigmoidTransform(), T.AffineTransform(c.lower_bound, c.upper_bound - c.lower_bound)]
    )


def _independent(registry):
    def make(c):
        return T.IndependentTransform(registry(c.base_constraint), c.reinterpreted_batch_ndims)

    return make


for _reg in (biject_to, transform_to):
    _reg.register(C._Real, lambda c: T.identity_transform)
    _reg.register(C._GreaterThan, _above)
    _reg.register(C._LessThan, _below)
    _reg.register(C._Interval, _between)
    _reg.register(C._IndependentConstraint, _independent(_reg))
    _reg.register(C._CorrCholesky, lambda c: V.CorrCholeskyTransform())
    _reg.register(
        C._Cat, lambda c, r=_reg: V.CatTransform([r(x) for x in c.cseq], c.dim, c.lengths)
    )
    _reg.register(C._Stack, lambda c, r=_reg: V.StackTransform([r(x) for x in c.cseq], c.dim))

biject_to.register(C._Simplex, lambda c: V.StickBreakingTransform())
transform_to.register(C._Simplex, lambda c: V.SoftmaxTransform())
transform_to.register(C._LowerCholesky, lambda c: V.LowerCholeskyTransform())
transform_to.register(C._PositiveDefinite, lambda c: V.PositiveDefiniteTransform())
transform_to.register(C._PositiveSemidefinite, lambda c: V.PositiveDefiniteTransform())
