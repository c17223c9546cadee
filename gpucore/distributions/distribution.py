"""The distribution base classes.

``Distribution`` is torch.distributions' public interface (shapes, sampling, scoring, argument
checks). ``Declared`` builds everything a parametric family shares from one declaration:

    class Normal(Declared):
        fields = (Param("loc", real), Param("scale", positive))
        support = real
        def _rsample(self, shape): ...
        def _log_prob(self, x): ...

From ``fields`` it derives the constructor and its signature (``Normal(loc, scale,
validate_args=None)``), the conversion of numbers to tensors, the broadcasting of the parameters
to one batch shape, ``arg_constraints``, the checks of the parameters' values (naming the
distribution, the parameter and the bad values), alternative parametrisations (``OneOf``:
exactly one given, the others computed on first use), ``expand``, ``repr`` and
``enumerate_support``. A family then writes only its formulas.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

import gpucore as gc

from ..autograd.grad_mode import no_grad
from ..ops.common import broadcast_shapes
from ..tensor import Size, Tensor
from . import constraints as C

__all__ = ["Distribution", "Declared", "Param", "OneOf", "Arg"]

_REQUIRED = inspect.Parameter.empty


class Distribution:
    """A probability distribution over tensors of ``batch_shape + event_shape``
    (torch.distributions.Distribution): ``sample``/``rsample``, ``log_prob``, ``cdf``/``icdf``,
    ``entropy``, ``mean``/``variance``/``mode``/``stddev``, ``expand``, ``enumerate_support``."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument and sample checks on or off for distributions built afterwards."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    # ---------------------------------------------------------------- shapes
    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> Size:
        """``sample_shape + batch_shape + event_shape``."""
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__}.expand is not implemented")

    # ---------------------------------------------------------------- moments
    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Tensor:
        """``exp(entropy())``."""
        return self.entropy().exp()

    # ---------------------------------------------------------------- sampling and scoring
    def sample(self, sample_shape=()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape``, outside autograd."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """A reparameterized sample: gradients flow back to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no rsample")

    def sample_n(self, n: int) -> Tensor:
        warnings.warn(
            "sample_n will be deprecated. Use .sample((n,)) instead", FutureWarning, stacklevel=2
        )
        return self.sample((n,))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    # ---------------------------------------------------------------- checks
    def _check_parameters(self) -> None:
        for name, constraint in self.arg_constraints.items():
            if C.is_dependent(constraint) or name not in self.__dict__:
                continue  # derived on demand from a parameter that was checked
            value = self.__dict__[name]
            if not isinstance(value, Tensor):
                continue
            # a parameter given as a Python number is checked as that number: the same
            # comparisons without a tensor op each (Normal(0.0, 1.0) is built often)
            number = getattr(self, "_numbers", {}).get(name)
            ok = constraint.check(value if number is None else number)
            if not (bool(ok.all()) if isinstance(ok, Tensor) else bool(ok)):
                raise ValueError(
                    f"Expected parameter {name} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                    f"{constraint!r}, but found invalid values:\n{value}"
                )

    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        n_event = len(self._event_shape)
        if Size(value.shape[value.dim() - n_event :]) != self._event_shape:
            raise ValueError(
                f"The right-most size of value must match event_shape: {value.shape} vs "
                f"{self._event_shape}."
            )
        want = self._batch_shape + self._event_shape
        for i, j in zip(reversed(tuple(value.shape)), reversed(tuple(want))):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {value.shape} vs "
                    f"{want}."
                )
        support = self.support
        if support is None or C.is_dependent(support):
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) of the distribution {self!r}, but found "
                f"invalid values:\n{value}"
            )

    def _checked(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return value

    def __repr__(self) -> str:
        shown = [k for k in self.arg_constraints if k in self.__dict__]
        inner = ", ".join(
            f"{k}: {self.__dict__[k] if self.__dict__[k].numel() == 1 else self.__dict__[k].size()}"
            for k in shown
        )
        return f"{type(self).__name__}({inner})"


# ---------------------------------------------------------------------- declarations


class Param:
    """A tensor parameter: its name, the constraint its values satisfy (a Constraint, or a
    function of the distribution for one that depends on other parameters), its event rank
    (1 for a vector per batch element, 2 for a matrix), an optional default, ``prepare``
    (applied to the given value, such as normalising probabilities) and ``derive`` (how to
    compute it from an alternative parametrisation)."""

    def __init__(
        self, name, constraint, event_dim=0, *, default=_REQUIRED, prepare=None, derive=None
    ):
        self.name, self.constraint, self.event_dim = name, constraint, event_dim
        self.default, self.prepare, self.derive = default, prepare, derive

    def __get__(self, obj, owner=None):
        # Reached only for an alternative that was not given: compute it once, keep it.
        if obj is None:
            return self
        value = self.derive(obj)
        obj.__dict__[self.name] = value
        return value


class OneOf:
    """Alternative parametrisations: exactly one of ``params`` is given, each other is derived
    from it on first use."""

    def __init__(self, *params: Param, message: str | None = None):
        self.params = params
        names = [p.name for p in params]
        self.message = message or (
            f"Either `{names[0]}` or `{names[1]}` must be specified, but not both."
            if len(names) == 2
            else f"Exactly one of {' or '.join(names)} may be specified."
        )


class Arg:
    """A plain constructor argument kept as an attribute (not broadcast, not a parameter):
    Multinomial's ``total_count``, LKJCholesky's ``dim``."""

    def __init__(self, name, default=_REQUIRED, prepare=None):
        self.name, self.default, self.prepare = name, default, prepare


def _flat_fields(fields):
    for f in fields:
        yield from (f.params if isinstance(f, OneOf) else (f,))


_WORDS = {1: "one", 2: "two"}
_NP_FLOAT = {gc.float64: np.float64, gc.float32: np.float32}


class Declared(Distribution):
    """A parametric family built from its ``fields`` declaration (see the module docstring).
    Families write ``_rsample(shape)`` or ``_sample(shape)`` (``shape`` is the full sample
    shape), ``_log_prob``/``_cdf``/``_icdf`` (the value already checked), the moments as
    properties, ``entropy``, and ``_event_shape_of`` / ``_setup`` / ``_support_values`` where
    they need them."""

    fields: tuple = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._params = list(_flat_fields(cls.fields))
        params = [p for p in cls._params if not isinstance(p, Arg)]
        for f in cls.fields:
            if isinstance(f, OneOf):
                for p in f.params:
                    setattr(cls, p.name, p)  # the lazy derivation of an absent alternative
        sig = []
        for f in cls.fields:
            for p in f.params if isinstance(f, OneOf) else (f,):
                default = None if isinstance(f, OneOf) else p.default
                sig.append(
                    inspect.Parameter(
                        p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default
                    )
                )
        sig.append(
            inspect.Parameter(
                "validate_args", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None
            )
        )
        if cls.fields:
            cls.__signature__ = inspect.Signature(sig)
        if params and not any(
            callable(p.constraint) and not isinstance(p.constraint, C.Constraint) for p in params
        ):
            cls.arg_constraints = {p.name: p.constraint for p in params}
        if "has_rsample" not in cls.__dict__ and "_rsample" in cls.__dict__:
            cls.has_rsample = True
        if "_support_values" in cls.__dict__:
            cls.has_enumerate_support = True

    @property
    def arg_constraints(self):  # overridden by a class dict where no constraint is dynamic
        return {
            p.name: p.constraint if isinstance(p.constraint, C.Constraint) else p.constraint(self)
            for p in self._params
            if not isinstance(p, Arg)
        }

    def __init__(self, *args, **kwargs):
        try:
            bound = type(self).__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(
                f"{type(self).__name__}(): {e} (signature {type(self).__signature__})"
            ) from None
        bound.apply_defaults()
        given = dict(bound.arguments)
        validate_args = given.pop("validate_args")
        tensors = {}
        for f in self.fields:
            if isinstance(f, Arg):
                v = given[f.name]
                self.__dict__[f.name] = f.prepare(v) if f.prepare else v
                continue
            if isinstance(f, OneOf):
                chosen = [p for p in f.params if given[p.name] is not None]
                if len(chosen) != 1:
                    raise ValueError(f.message)
                p = chosen[0]
            else:
                p = f
            tensors[p] = given[p.name]
        self._start(self._broadcast(tensors), validate_args)

    def _broadcast(self, values: dict) -> Size:
        """Converts numbers to tensors (dtype and device of the tensor parameters), applies each
        parameter's ``prepare``, broadcasts their batch parts together and stores them; returns
        the batch shape."""
        like = next(
            (v for v in values.values() if isinstance(v, Tensor) and v.is_floating_point()), None
        )
        like = (
            like
            if like is not None
            else next((v for v in values.values() if isinstance(v, Tensor)), None)
        )
        dtype = (
            like.dtype if like is not None and like.is_floating_point() else gc.get_default_dtype()
        )
        device = like.device if like is not None else None
        ts, numbers = {}, {}
        for p, v in values.items():
            t = v if isinstance(v, Tensor) else gc.as_tensor(v, dtype=dtype, device=device)
            if t.dim() < p.event_dim:
                raise ValueError(
                    f"`{p.name}` parameter must be at least {_WORDS[p.event_dim]}-dimensional."
                )
            ts[p] = p.prepare(t) if p.prepare else t
            if isinstance(v, (int, float)) and not isinstance(v, bool) and p.prepare is None:
                exact = _NP_FLOAT.get(t.dtype)
                if exact is not None and float(exact(v)) == v:  # the tensor holds v itself
                    numbers[p.name] = float(v)
        self._numbers = numbers
        parts = [tuple(t.shape[: t.dim() - p.event_dim]) for p, t in ts.items()]
        batch = Size(broadcast_shapes(type(self).__name__, *parts) if parts else ())
        for p, t in ts.items():
            event = tuple(t.shape[t.dim() - p.event_dim :])
            self.__dict__[p.name] = (
                t if tuple(t.shape) == batch + event else t.expand(batch + event)
            )
        return batch

    def _start(self, batch_shape, validate_args) -> None:
        # the parameters are checked before ``_setup`` uses them (a Cholesky factorisation of a
        # matrix that is not positive definite would fail with a less helpful error)
        if validate_args is not None:
            self._validate_args = validate_args
        self._batch_shape, self._event_shape = Size(batch_shape), Size(())
        if self._validate_args:
            self._check_parameters()
        self._setup()
        self._event_shape = Size(self._event_shape_of())

    def _setup(self) -> None:
        """Derived state computed once the parameters are stored (after __init__ and expand)."""

    def _event_shape_of(self) -> tuple:
        return ()

    def expand(self, batch_shape, _instance=None):
        """The same family with its parameters expanded to ``batch_shape`` (no copy)."""
        batch = Size(batch_shape)
        new = _instance if _instance is not None else type(self).__new__(type(self))
        for p in self._params:
            if p.name in self.__dict__:
                v = self.__dict__[p.name]
                if isinstance(p, Arg):
                    new.__dict__[p.name] = v
                else:
                    new.__dict__[p.name] = v.expand(batch + tuple(v.shape[v.dim() - p.event_dim :]))
        new._validate_args = self._validate_args
        new._start(batch, False)
        return new

    # ---------------------------------------------------------------- public wrappers
    def _like(self) -> Tensor:
        for p in self._params:
            v = self.__dict__.get(p.name)
            if isinstance(v, Tensor) and not isinstance(p, Arg):
                return v
        raise TypeError(f"{type(self).__name__}: no tensor parameter")

    def _draw(self, kind: str, shape) -> Tensor:
        """Standard noise of ``shape`` in the parameters' dtype and device, from gpucore's
        generator: ``"normal"``, ``"uniform"`` on [0, 1) or ``"open"`` on (0, 1)."""
        like = self._like()
        dtype = like.dtype if like.is_floating_point() else gc.get_default_dtype()
        if kind == "normal":
            return gc.randn(tuple(shape), dtype=dtype, device=like.device)
        u = gc.rand(tuple(shape), dtype=dtype, device=like.device)
        if kind == "open":
            tiny = gc.finfo(dtype).tiny
            u = u.clamp(min=tiny, max=1 - gc.finfo(dtype).eps / 2)
        return u

    def rsample(self, sample_shape=()) -> Tensor:
        if not self.has_rsample:
            raise NotImplementedError(f"{type(self).__name__} has no rsample")
        return self._rsample(self._extended_shape(sample_shape))

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            shape = self._extended_shape(sample_shape)
            return self._rsample(shape) if self.has_rsample else self._sample(shape)

    def log_prob(self, value: Tensor) -> Tensor:
        return self._log_prob(self._checked(value))

    def cdf(self, value: Tensor) -> Tensor:
        if not hasattr(self, "_cdf"):
            return super().cdf(value)
        return self._cdf(self._checked(value))

    def icdf(self, value: Tensor) -> Tensor:
        if not hasattr(self, "_icdf"):
            return super().icdf(value)
        return self._icdf(value)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        if not self.has_enumerate_support:
            return super().enumerate_support(expand)
        values = self._support_values()
        n, event = values.shape[0], tuple(values.shape[1:])
        values = values.reshape((n,) + (1,) * len(self._batch_shape) + event)
        return values.expand((n, *self._batch_shape, *event)) if expand else values
