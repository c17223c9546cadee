"""The distributions the tests build, each as parameters given once as float64 numpy arrays:
``make(lib, case)`` builds it in gpucore or in PyTorch from the same values."""

from __future__ import annotations

import numpy as np

R = np.random.default_rng(1234)


def _pos(*shape, lo=0.5, hi=3.0):
    return R.uniform(lo, hi, shape)


def _real(*shape):
    return R.normal(0, 1, shape)


def _probs(*shape):
    p = R.uniform(0.1, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


def _unit(*shape):
    return R.uniform(0.1, 0.9, shape)


def _spd(n, *batch):
    a = R.normal(0, 1, (*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


_S = _spd(3, 2)

# name -> (class name, {param: array or number}, extra keyword arguments)
CASES = {
    "Normal": ("Normal", {"loc": _real(2, 3), "scale": _pos(2, 3)}, {}),
    "Normal_scalar": ("Normal", {"loc": 0.5, "scale": 2.0}, {}),
    "LogNormal": ("LogNormal", {"loc": _real(4), "scale": _pos(4, hi=1.0)}, {}),
    "Uniform": ("Uniform", {"low": _real(3), "high": _real(3) + 4}, {}),
    "Bernoulli_probs": ("Bernoulli", {"probs": _unit(2, 3)}, {}),
    "Bernoulli_logits": ("Bernoulli", {"logits": _real(5)}, {}),
    "Categorical_probs": ("Categorical", {"probs": _probs(2, 4)}, {}),
    "Categorical_logits": ("Categorical", {"logits": _real(3, 5)}, {}),
    "OneHotCategorical": ("OneHotCategorical", {"probs": _probs(2, 4)}, {}),
    "Multinomial": ("Multinomial", {"probs": _probs(2, 3)}, {"total_count": 7}),
    "Binomial": ("Binomial", {"total_count": np.array([5.0, 20.0, 60.0]), "probs": _unit(3)}, {}),
    "Geometric": ("Geometric", {"probs": _unit(4)}, {}),
    "Poisson": ("Poisson", {"rate": np.array([0.5, 3.0, 12.0, 40.0])}, {}),
    "Exponential": ("Exponential", {"rate": _pos(3)}, {}),
    "Laplace": ("Laplace", {"loc": _real(3), "scale": _pos(3)}, {}),
    "Cauchy": ("Cauchy", {"loc": _real(3), "scale": _pos(3)}, {}),
    "Gamma": ("Gamma", {"concentration": np.array([0.3, 1.0, 2.5, 9.0]), "rate": _pos(4)}, {}),
    "Beta": ("Beta", {"concentration1": _pos(3), "concentration0": _pos(3)}, {}),
    "Dirichlet": ("Dirichlet", {"concentration": _pos(2, 3)}, {}),
    "Chi2": ("Chi2", {"df": _pos(3, lo=1.0, hi=6.0)}, {}),
    "StudentT": (
        "StudentT",
        {"df": _pos(3, lo=2.5, hi=8.0), "loc": _real(3), "scale": _pos(3)},
        {},
    ),
    "MVN_cov": ("MultivariateNormal", {"loc": _real(2, 3), "covariance_matrix": _S}, {}),
    "MVN_prec": ("MultivariateNormal", {"loc": _real(3), "precision_matrix": _spd(3)}, {}),
    "MVN_tril": (
        "MultivariateNormal",
        {"loc": _real(3), "scale_tril": np.linalg.cholesky(_spd(3))},
        {},
    ),
    "LowRankMVN": (
        "LowRankMultivariateNormal",
        {"loc": _real(2, 3), "cov_factor": _real(2, 3, 2), "cov_diag": _pos(2, 3)},
        {},
    ),
    "Gumbel": ("Gumbel", {"loc": _real(3), "scale": _pos(3)}, {}),
    "HalfNormal": ("HalfNormal", {"scale": _pos(3)}, {}),
    "HalfCauchy": ("HalfCauchy", {"scale": _pos(3)}, {}),
    "VonMises": ("VonMises", {"loc": _real(3), "concentration": np.array([0.3, 2.0, 20.0])}, {}),
    "RelaxedBernoulli": (
        "RelaxedBernoulli",
        {"temperature": np.array(0.7), "probs": _unit(3)},
        {},
    ),
    "RelaxedOneHotCategorical": (
        "RelaxedOneHotCategorical",
        {"temperature": np.array(0.7), "probs": _probs(2, 3)},
        {},
    ),
    "Pareto": ("Pareto", {"scale": _pos(3), "alpha": _pos(3, lo=2.5, hi=5.0)}, {}),
    "Weibull": ("Weibull", {"scale": _pos(3), "concentration": _pos(3)}, {}),
    "Kumaraswamy": ("Kumaraswamy", {"concentration1": _pos(3), "concentration0": _pos(3)}, {}),
    "FisherSnedecor": (
        "FisherSnedecor",
        {"df1": _pos(3, lo=3, hi=9), "df2": _pos(3, lo=12, hi=20)},
        {},
    ),
    "InverseGamma": ("InverseGamma", {"concentration": _pos(3, lo=3, hi=6), "rate": _pos(3)}, {}),
    "NegativeBinomial": ("NegativeBinomial", {"total_count": _pos(3), "probs": _unit(3)}, {}),
    "ContinuousBernoulli": ("ContinuousBernoulli", {"probs": np.array([0.2, 0.5, 0.8])}, {}),
    "LogisticNormal": ("LogisticNormal", {"loc": _real(3), "scale": _pos(3, hi=1.0)}, {}),
    # df > 4: a finite fourth moment, so Monte Carlo averages of x^2 have finite variance
    "StudentT_df_above_4": (
        "StudentT",
        {
            "df": np.array([5.5, 7.0, 9.0]),
            "loc": np.array([0.3, -1.0, 2.0]),
            "scale": np.array([0.7, 1.5, 2.0]),
        },
        {},
    ),
}


# PyTorch 2.13's GeneralizedPareto fails on float64 parameters ("Double did not match Float"):
# it is compared in float32
FLOAT32_CASES = {
    "GeneralizedPareto": (
        "GeneralizedPareto",
        {"loc": _real(3), "scale": _pos(3), "concentration": np.array([-0.2, 0.1, 0.3])},
        {},
    ),
}
CASES_ALL = {**CASES, **FLOAT32_CASES}


def make(lib, name: str, dtype: str = "float64", requires_grad: bool = False):
    """The distribution ``name`` of CASES in ``lib`` (the gpucore or torch module); returns it
    and its tensor parameters (leaf tensors, requiring grad when asked)."""
    cls_name, params, extra = CASES_ALL[name]
    tensors = {}
    for k, v in params.items():
        if isinstance(v, np.ndarray):
            t = lib.tensor(v, dtype=getattr(lib, dtype))
            if requires_grad and k not in ("total_count",):
                t.requires_grad_(True)
            tensors[k] = t
        else:
            tensors[k] = v
    return getattr(lib.distributions, cls_name)(**tensors, **extra), tensors
