"""Flatten and Unflatten."""

from __future__ import annotations

from ..module import Module


class Flatten(Module):
    """Flattens dims start_dim..end_dim (by default all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expands dim into unflattened_size (the inverse of Flatten)."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        d = self.dim % input.ndim if input.ndim else 0
        shape = tuple(input.shape)
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
