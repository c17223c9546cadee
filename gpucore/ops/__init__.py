"""All ops: importing this package fills the registry and attaches Tensor methods."""

from . import elementwise, indexing, inplace, linalg, nnops, optim_ops, reduce, shape  # noqa: F401
from .registry import REGISTRY, apply, defop  # noqa: F401
