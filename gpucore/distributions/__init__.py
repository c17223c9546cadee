"""gpucore.distributions: torch.distributions' API (distributions, constraints, transforms,
biject_to / transform_to, kl_divergence / register_kl) written on gpucore ops, so scoring,
sampling and reparameterised gradients run on every backend.

Families are declarations (distribution.py's ``Declared``): parameters, support and formulas;
the shared machinery (constructor, broadcasting, checks, expand, alternative parametrisations)
is derived from the declaration once.
"""

from . import (
    constraints,
    continuous,
    continuous_bernoulli_von_mises,
    derived,
    discrete,
    kl_cross,  # noqa: F401 (registers the pairs of different families)
    multivariate,
    transforms,
    transforms_vector,
    wrappers,
)
from .constraint_registry import biject_to, transform_to
from .continuous import (
    Beta,
    Cauchy,
    Chi2,
    Exponential,
    FisherSnedecor,
    Gamma,
    GeneralizedPareto,
    Laplace,
    Normal,
    StudentT,
    Uniform,
)
from .continuous_bernoulli_von_mises import ContinuousBernoulli, VonMises
from .derived import (
    ExpRelaxedCategorical,
    Gumbel,
    HalfCauchy,
    HalfNormal,
    InverseGamma,
    Kumaraswamy,
    LogisticNormal,
    LogitRelaxedBernoulli,
    LogNormal,
    Pareto,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
    Weibull,
)
from .discrete import (
    Bernoulli,
    Binomial,
    Categorical,
    Geometric,
    Multinomial,
    NegativeBinomial,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
    Poisson,
)
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .kl import kl_divergence, register_kl
from .multivariate import (
    Dirichlet,
    LKJCholesky,
    LowRankMultivariateNormal,
    MultivariateNormal,
    Wishart,
)
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    IndependentTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .transforms_vector import (
    CatTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    SoftmaxTransform,
    StackTransform,
    StickBreakingTransform,
)
from .wrappers import Independent, MixtureSameFamily, TransformedDistribution

# torch.distributions.transforms holds the vector transforms too
for _name in (
    "CatTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "SoftmaxTransform",
    "StackTransform",
    "StickBreakingTransform",
):
    setattr(transforms, _name, globals()[_name])

__all__ = [
    *(
        name
        for module in (continuous, continuous_bernoulli_von_mises, derived, discrete, multivariate)
        for name in module.__all__
    ),
    *(name for module in (transforms, transforms_vector, wrappers) for name in module.__all__),
    *("Distribution", "ExponentialFamily", "biject_to", "transform_to", "kl_divergence"),
    *("register_kl", "constraints", "transforms"),
]
