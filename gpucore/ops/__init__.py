"""All ops: importing this package fills the registry and attaches Tensor methods."""

from . import (  # noqa: F401
    elementwise,
    indexing,
    inplace,
    linalg,
    nnops,
    optim_ops,
    pool,
    reduce,
    shape,
)
from .registry import REGISTRY, apply, defop  # noqa: F401
