"""Vector and matrix families: Dirichlet, MultivariateNormal (covariance, precision or Cholesky
factor), LowRankMultivariateNormal, Wishart (Bartlett sampling) and LKJCholesky (onion
sampling)."""

from __future__ import annotations

import math

import gpucore as gc
from gpucore.ops.common import broadcast_shapes

from . import constraints as C
from .distribution import Arg, Declared, OneOf, Param
from .exp_family import ExponentialFamily
from .gamma import sample_dirichlet, standard_gamma

__all__ = ["Dirichlet", "MultivariateNormal", "LowRankMultivariateNormal", "Wishart", "LKJCholesky"]

_LOG_2PI = math.log(2 * math.pi)


def _batched(mat, batch):
    """``mat`` (..., n, m) broadcast to the batch ``batch``."""
    return mat.expand(tuple(batch) + tuple(mat.shape[-2:]))


def _tril_solve_norm2(L, v):
    """|L^-1 v|^2 over the last dimension, L lower triangular, broadcasting their batches."""
    batch = broadcast_shapes("mahalanobis", tuple(L.shape[:-2]), tuple(v.shape[:-1]))
    y = gc.linalg.solve_triangular(
        _batched(L, batch), v.expand(tuple(batch) + (v.shape[-1],)).unsqueeze(-1), upper=False
    )
    return y.squeeze(-1).pow(2).sum(-1)


def _half_log_det(L):
    return L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _matrices():
    """covariance_matrix, precision_matrix or scale_tril: one given, the others derived from the
    Cholesky factor ``d._L`` (computed by ``_setup`` from the given one)."""
    return OneOf(
        Param(
            "covariance_matrix",
            C.positive_definite,
            2,
            derive=lambda d: d.scale_tril @ d.scale_tril.mT,
        ),
        Param(
            "precision_matrix",
            C.positive_definite,
            2,
            derive=lambda d: gc.cholesky_inverse(d.scale_tril),
        ),
        Param("scale_tril", C.lower_cholesky, 2, derive=lambda d: d._L),
    )


def _given_matrix(d):
    return next(
        d.__dict__[k]
        for k in ("covariance_matrix", "precision_matrix", "scale_tril")
        if k in d.__dict__
    )


def _cholesky_of_given(d):
    if "scale_tril" in d.__dict__:
        return d.scale_tril
    if "covariance_matrix" in d.__dict__:
        return gc.linalg.cholesky(d.covariance_matrix)
    return gc.linalg.cholesky(gc.linalg.inv(d.precision_matrix))


class Dirichlet(ExponentialFamily):
    """Dirichlet(concentration): probability vectors on the simplex of the last dimension."""

    fields = (Param("concentration", C.independent(C.positive, 1), 1),)
    support = C.simplex
    has_rsample = True

    def _event_shape_of(self):
        return tuple(self.concentration.shape[-1:])

    mean = property(lambda self: self.concentration / self.concentration.sum(-1, keepdim=True))

    @property
    def mode(self):
        c = self.concentration
        above = (c - 1).clamp(min=0)
        mode = above / above.sum(-1, keepdim=True)
        # every concentration below 1: the mass piles on the corner of the largest
        corner = gc.nn.functional.one_hot(c.argmax(-1), c.shape[-1]).to(c.dtype)
        return gc.where((c < 1).all(-1, keepdim=True), corner, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def _rsample(self, shape):
        return sample_dirichlet(self.concentration.expand(tuple(shape)))

    def _log_prob(self, x):
        c = self.concentration
        return gc.xlogy(c - 1, x).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    def entropy(self):
        c = self.concentration
        k, a0 = c.shape[-1], c.sum(-1)
        return (
            c.lgamma().sum(-1)
            - a0.lgamma()
            - (k - a0) * a0.digamma()
            - ((c - 1) * c.digamma()).sum(-1)
        )

    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()


class MultivariateNormal(Declared):
    """MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)."""

    fields = (Param("loc", C.real_vector, 1), _matrices())
    support = C.real_vector
    has_rsample = True

    def _setup(self):
        self._L = _cholesky_of_given(self)

    def _event_shape_of(self):
        return tuple(self.loc.shape[-1:])

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: self._L.pow(2).sum(-1))

    def _rsample(self, shape):
        eps = self._draw("normal", shape)
        return self.loc + (self._L @ eps.unsqueeze(-1)).squeeze(-1)

    def _log_prob(self, x):
        n = self._event_shape[0]
        m = _tril_solve_norm2(self._L, x - self.loc)
        return -0.5 * (n * _LOG_2PI + m) - _half_log_det(self._L)

    def entropy(self):
        n = self._event_shape[0]
        return 0.5 * n * (1.0 + _LOG_2PI) + _half_log_det(self._L)


class LowRankMultivariateNormal(Declared):
    """LowRankMultivariateNormal(loc, cov_factor, cov_diag): covariance W W^T + diag(D) with
    W = ``cov_factor`` (n x rank); scored through the rank x rank capacitance matrix
    I + W^T D^-1 W (Woodbury), never an n x n inverse."""

    fields = (
        Param("loc", C.real_vector, 1),
        Param("cov_factor", C.independent(C.real, 2), 2),
        Param("cov_diag", C.independent(C.positive, 1), 1),
    )
    support = C.real_vector
    has_rsample = True

    def _event_shape_of(self):
        return tuple(self.loc.shape[-1:])

    def _setup(self):
        W, D = self.cov_factor, self.cov_diag
        n = self.loc.shape[-1]
        if W.shape[-2] != n or D.shape[-1] != n:
            raise ValueError(
                f"LowRankMultivariateNormal(): loc {tuple(self.loc.shape)} has event size {n}, "
                f"so cov_factor must be a batch of {n} x rank matrices and cov_diag a batch of "
                f"vectors of size {n}; got cov_factor {tuple(W.shape)}, cov_diag {tuple(D.shape)}"
            )
        cap = W.mT @ (W / D.unsqueeze(-1))
        cap = cap + gc.eye(W.shape[-1], dtype=W.dtype, device=W.device)
        self._cap_L = gc.linalg.cholesky(cap)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: self.cov_factor.pow(2).sum(-1) + self.cov_diag)

    @property
    def covariance_matrix(self):
        return self.cov_factor @ self.cov_factor.mT + gc.diag_embed(self.cov_diag)

    @property
    def scale_tril(self):
        return gc.linalg.cholesky(self.covariance_matrix)

    @property
    def precision_matrix(self):
        return gc.linalg.inv(self.covariance_matrix)

    def _log_det(self):
        return 2 * _half_log_det(self._cap_L) + self.cov_diag.log().sum(-1)

    def _rsample(self, shape):
        rank = self.cov_factor.shape[-1]
        eps_w = self._draw("normal", tuple(shape[:-1]) + (rank,))
        eps_d = self._draw("normal", shape)
        return (
            self.loc
            + (self.cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1)
            + self.cov_diag.sqrt() * eps_d
        )

    def _log_prob(self, x):
        diff = x - self.loc
        n = self._event_shape[0]
        scaled = diff / self.cov_diag
        wt = (self.cov_factor.mT @ scaled.unsqueeze(-1)).squeeze(-1)
        m = (diff * scaled).sum(-1) - _tril_solve_norm2(self._cap_L, wt)
        return -0.5 * (n * _LOG_2PI + m + self._log_det())

    def entropy(self):
        n = self._event_shape[0]
        return 0.5 * (n * (1.0 + _LOG_2PI) + self._log_det())


def _mv_digamma(a, p: int):
    return sum((a - 0.5 * i).digamma() for i in range(p))


class Wishart(Declared):
    """Wishart(df, covariance_matrix=None, precision_matrix=None, scale_tril=None): positive
    definite p x p matrices, sums of ``df`` outer products of N(0, V) vectors."""

    fields = (
        Param("df", lambda d: C.greater_than(d._p - 1)),
        _matrices(),
    )
    support = C.positive_definite
    has_rsample = True

    def _setup(self):
        self._L = _cholesky_of_given(self)

    _p = property(lambda self: _given_matrix(self).shape[-1])

    def _event_shape_of(self):
        return (self._p, self._p)

    def _V(self):
        return self._L @ self._L.mT

    mean = property(lambda self: self.df[..., None, None] * self._V())

    @property
    def mode(self):
        factor = self.df - self._p - 1
        m = factor[..., None, None] * self._V()
        return gc.where((factor > 0)[..., None, None], m, gc.full_like(m, math.nan))

    @property
    def variance(self):
        V = self._V()
        diag = V.diagonal(dim1=-2, dim2=-1)
        return self.df[..., None, None] * (V.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _rsample(self, shape):
        # Bartlett: X = L A A^T L^T, A lower triangular with A_ii^2 ~ chi2(df - i), A_ij ~ N(0, 1)
        p = self._p
        batch = tuple(shape[:-2])
        df = self.df.expand(batch).unsqueeze(-1) - gc.arange(
            p, dtype=self.df.dtype, device=self.df.device
        )
        diag = (2 * standard_gamma(0.5 * df)).sqrt()
        noise = self._draw("normal", batch + (p, p)).tril(-1)
        A = noise + gc.diag_embed(diag)
        LA = _batched(self._L, batch) @ A
        return LA @ LA.mT

    def _log_prob(self, X):
        p, nu = self._p, self.df
        log_det_x = 2 * _half_log_det(gc.linalg.cholesky(X))
        batch = broadcast_shapes("Wishart", tuple(self._L.shape[:-2]), tuple(X.shape[:-2]))
        trace = (
            gc.cholesky_solve(X.expand(tuple(batch) + (p, p)), _batched(self._L, batch))
            .diagonal(dim1=-2, dim2=-1)
            .sum(-1)
        )
        return (
            0.5 * (nu - p - 1) * log_det_x
            - 0.5 * trace
            - 0.5 * nu * p * math.log(2)
            - nu * _half_log_det(self._L)
            - gc.mvlgamma(0.5 * nu, p)
        )

    def entropy(self):
        p, nu = self._p, self.df
        return (
            (p + 1) * _half_log_det(self._L)
            + 0.5 * p * (p + 1) * math.log(2)
            + gc.mvlgamma(0.5 * nu, p)
            - 0.5 * (nu - p - 1) * _mv_digamma(0.5 * nu, p)
            + 0.5 * nu * p
        )


class LKJCholesky(Declared):
    """LKJCholesky(dim, concentration=1.0): Cholesky factors of dim x dim correlation matrices
    with density proportional to det(corr)^(concentration - 1). Sampled by the onion method:
    row i (i >= 1) is sqrt(y) u and sqrt(1 - y) on the diagonal, u uniform on the unit sphere
    of R^i and y ~ Beta(i/2, concentration + (dim - 1 - i)/2)."""

    fields = (Arg("dim"), Param("concentration", C.positive, default=1.0))
    support = C.corr_cholesky

    def _setup(self):
        if not isinstance(self.dim, int) or self.dim < 2:
            raise ValueError(f"LKJCholesky: dim must be an integer >= 2, got {self.dim!r}")

    def _event_shape_of(self):
        return (self.dim, self.dim)

    def _row_shapes(self):
        c = self.concentration
        i = gc.arange(self.dim, dtype=c.dtype, device=c.device)
        return 0.5 * i, c.unsqueeze(-1) + 0.5 * (self.dim - 1 - i)

    def _sample(self, shape):
        d = self.dim
        batch = tuple(shape[:-2])
        a, b = self._row_shapes()
        a = gc.where(a == 0, gc.full_like(a, 0.5), a)  # row 0 is fixed; any valid shape
        ga, gb = standard_gamma(a.expand(batch + (d,))), standard_gamma(b.expand(batch + (d,)))
        y = ga / (ga + gb)
        y = gc.where(gc.arange(d, device=y.device) == 0, gc.zeros_like(y), y)
        z = self._draw("normal", batch + (d, d)).tril(-1)
        norm = z.pow(2).sum(-1, keepdim=True).sqrt()
        u = z / gc.where(norm == 0, gc.ones_like(norm), norm)
        return u * y.sqrt().unsqueeze(-1) + gc.diag_embed((1 - y).sqrt())

    def _log_prob(self, L):
        d = self.dim
        a, b = self._row_shapes()
        diag = L.diagonal(dim1=-2, dim2=-1)[..., 1:]
        coef = 2 * (b[..., 1:] - 1)
        unnorm = (coef * diag.log()).sum(-1)
        # each row's density over its free entries: Gamma(i/2 + b_i) / (Gamma(b_i) pi^(i/2))
        alpha = self.concentration + 0.5 * (d - 1)
        lnorm = (
            (d - 1) * alpha.lgamma()
            - b[..., 1:].lgamma().sum(-1)
            - 0.25 * d * (d - 1) * math.log(math.pi)
        )
        return unnorm + lnorm
