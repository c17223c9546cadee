"""All ops: importing this package fills the registry and declares the public API (``api``)."""

from . import (  # noqa: F401
    attention,
    bessel,
    bitwise,
    comparison,
    covariance,
    ctc,
    decompositions,
    distances,
    einsum,
    elementwise,
    factories,
    grid_sample,
    indexing,
    joining,
    linalg,
    matrix,
    membership,
    nn,
    norm,
    norm_batch,
    optim,
    optim_capturable,
    pointwise,
    polynomials,
    pool,
    products,
    random,
    rearrange,
    recurrent,
    reduce,
    scan,
    scatter,
    selection,
    shape,
    shorthands,
    shorthands_more,
    sorting,
    special,
    stacking,
    statistics,
    transcendental,
    trig,
    unary,
)

# inplace attaches the in-place forms every family above declared: it comes last.
from . import inplace  # noqa: F401, E402  isort: skip
from . import attributes, sampling  # noqa: F401, E402  isort: skip  (they use inplace)
from .api import FUNCTIONS, METHODS  # noqa: F401
from .registry import REGISTRY, apply, defop  # noqa: F401
