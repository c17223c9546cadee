"""Transforms acting on whole vectors and matrices (softmax, stick-breaking, Cholesky factors,
correlation Cholesky factors), joining transforms (cat, stack) and the CDF of a distribution."""

from __future__ import annotations

import math

import gpucore as gc
import gpucore.nn.functional as F

from . import constraints as C
from .transforms import Transform, _sum_rightmost
from .utils import tril_matrix_to_vec, vec_to_tril_matrix

__all__ = [
    "SoftmaxTransform",
    "StickBreakingTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "CorrCholeskyTransform",
    "CatTransform",
    "StackTransform",
    "CumulativeDistributionTransform",
]


class _Parameterless(Transform):
    def __eq__(self, other):
        return type(self) is type(other)

    __hash__ = object.__hash__


class SoftmaxTransform(_Parameterless):
    """Real vectors to the simplex by a softmax (not bijective: the inverse is the log)."""

    domain = C.real_vector
    codomain = C.simplex

    def _call(self, x):
        return x.softmax(-1)

    def _inverse(self, y):
        return y.log()


def _stick_offsets(n: int, like):
    """log K, log(K - 1), ..., log 2 for K = n + 1 sticks: the shift that maps x = 0 to the
    uniform point."""
    return (n + 1 - gc.arange(1, n + 1, dtype=like.dtype, device=like.device)).log()


class StickBreakingTransform(_Parameterless):
    """R^(K-1) to the K-simplex: each coordinate's sigmoid breaks off that fraction of what
    remains of a unit stick."""

    domain = C.real_vector
    codomain = C.simplex
    bijective = True

    def _call(self, x):
        z = (x - _stick_offsets(x.shape[-1], x)).sigmoid()
        remaining = (1 - z).cumprod(-1)
        return F.pad(z, (0, 1), value=1.0) * F.pad(remaining, (1, 0), value=1.0)

    def _inverse(self, y):
        head = y[..., :-1]
        rest = (1 - head.cumsum(-1)).clamp(min=gc.finfo(y.dtype).tiny)
        return head.log() - rest.log() + _stick_offsets(head.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        shifted = x - _stick_offsets(x.shape[-1], x)
        return (-shifted + F.logsigmoid(shifted) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return gc.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        return gc.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(_Parameterless):
    """Square matrices to lower triangular ones with a positive diagonal: the strict lower
    triangle kept, the diagonal exponentiated."""

    domain = C.independent(C.real, 2)
    codomain = C.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + gc.diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y):
        return y.tril(-1) + gc.diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class PositiveDefiniteTransform(_Parameterless):
    """Square matrices to positive definite ones: L L^T of the LowerCholeskyTransform's L."""

    domain = C.independent(C.real, 2)
    codomain = C.positive_definite

    def _call(self, x):
        L = LowerCholeskyTransform()(x)
        return L @ L.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(gc.linalg.cholesky(y))


class CorrCholeskyTransform(_Parameterless):
    """R^(D(D-1)/2) to Cholesky factors of D x D correlation matrices: tanh maps each value to
    (-1, 1), filling the strict lower triangle row by row; each row is then scaled so that its
    entries break a unit stick of squared length (the diagonal takes what remains)."""

    domain = C.real_vector
    codomain = C.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = gc.finfo(x.dtype).eps
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        left = (1 - r.pow(2)).sqrt().cumprod(-1)
        eye = gc.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return (r + eye) * F.pad(left[..., :-1], (1, 0), value=1.0)

    def _inverse(self, y):
        left = F.pad((1 - y.pow(2).cumsum(-1))[..., :-1], (1, 0), value=1.0)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(left, diag=-1).sqrt()
        return t.atanh()

    def log_abs_det_jacobian(self, x, y):
        # entry (i, j), j < i, is y_ij = z_ij sqrt(s_ij) with z = tanh(x) and s_ij = 1 - the
        # squares of row i left of j: the Jacobian is triangular, its log-determinant the sum of
        # 1/2 log s_ij and of log(1 - z^2) = log sech^2 x = 2 log 2 - 2|x| - 2 log1p(e^-2|x|)
        squares = y.pow(2)
        stick_before = 1 - (squares.cumsum(-1) - squares)
        stick = 0.5 * tril_matrix_to_vec(stick_before, diag=-1).log().sum(-1)
        a = x.abs()
        sech2 = 2 * math.log(2.0) - 2 * a - 2 * (-2 * a).exp().log1p()
        return stick + sech2.sum(-1)

    def forward_shape(self, shape):
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("CorrCholeskyTransform: the input length is not D (D - 1) / 2")
        return gc.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        d = shape[-1]
        if shape[-2] != d:
            raise ValueError("CorrCholeskyTransform: the input is not square")
        return gc.Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))


class CatTransform(Transform):
    """Transforms applied to consecutive pieces of ``dim`` (of lengths ``lengths``)."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(
                f"CatTransform: {len(self.transforms)} transforms but {len(self.lengths)} lengths"
            )
        self.dim = dim
        self._recache(cache_size)

    def _recache(self, cache_size):
        if cache_size:
            self.transforms = [t.with_cache(cache_size) for t in self.transforms]

    event_dim = property(lambda self: max(t.event_dim for t in self.transforms))
    bijective = property(lambda self: all(t.bijective for t in self.transforms))

    def _joined(self, which):
        return C.cat([getattr(t, which) for t in self.transforms], self.dim, self.lengths)

    domain = property(lambda self: self._joined("domain"))
    codomain = property(lambda self: self._joined("codomain"))

    def _split(self, v):
        """v cut along dim into the transforms' pieces."""
        bounds = [0]
        for n in self.lengths:
            bounds.append(bounds[-1] + n)
        return [v.narrow(self.dim, a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]

    def _call(self, x):
        return gc.cat([t(v) for t, v in zip(self.transforms, self._split(x))], self.dim)

    def _inverse(self, y):
        return gc.cat([t.inv(v) for t, v in zip(self.transforms, self._split(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        rank = self.event_dim
        # each piece's log-determinant reduced to the common event rank
        terms = [
            _sum_rightmost(t.log_abs_det_jacobian(a, b), rank - t.event_dim)
            for t, a, b in zip(self.transforms, self._split(x), self._split(y))
        ]
        # dim counted from the right: outside the event it survives in the log-determinant
        # (the pieces sit side by side there); inside it the pieces' terms add
        from_right = self.dim - x.dim() if self.dim >= 0 else self.dim
        if -from_right > rank:
            return gc.cat(terms, from_right + rank)
        return sum(terms)


class StackTransform(Transform):
    """Transforms applied to the slices of ``dim``, one each."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim
        self._recache(cache_size)

    def _recache(self, cache_size):
        if cache_size:
            self.transforms = [t.with_cache(cache_size) for t in self.transforms]

    bijective = property(lambda self: all(t.bijective for t in self.transforms))
    domain = property(lambda self: C.stack([t.domain for t in self.transforms], self.dim))
    codomain = property(lambda self: C.stack([t.codomain for t in self.transforms], self.dim))

    def _map(self, v, fn):
        return gc.stack(
            [fn(t, v.select(self.dim, i)) for i, t in enumerate(self.transforms)], self.dim
        )

    def _call(self, x):
        return self._map(x, lambda t, v: t(v))

    def _inverse(self, y):
        return self._map(y, lambda t, v: t.inv(v))

    def log_abs_det_jacobian(self, x, y):
        terms = [
            t.log_abs_det_jacobian(x.select(self.dim, i), y.select(self.dim, i))
            for i, t in enumerate(self.transforms)
        ]
        return gc.stack(terms, self.dim)


class CumulativeDistributionTransform(Transform):
    """x to the CDF of ``distribution`` at x (its inverse is the icdf)."""

    bijective = True
    codomain = C.unit_interval
    sign = 1

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    domain = property(lambda self: self.distribution.support)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)
