"""Parameter: a leaf tensor that a Module registers as trainable."""

from __future__ import annotations

from ..creation import empty, tensor
from ..tensor import Tensor


class Parameter(Tensor):
    """A Tensor that requires grad by default and is picked up by ``Module.parameters()``.

    ``Parameter(t)`` shares ``t``'s storage (no copy), as in PyTorch.
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            data = tensor(data)
        p = Tensor.__new__(cls)
        p._init(data._data, data._dtype, data._vbox)
        p._dev = data._dev
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad: bool = True):
        pass  # everything happens in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self.detach())

    def __deepcopy__(self, memo):
        t = Tensor.__deepcopy__(self.detach(), memo)
        p = Parameter(t, requires_grad=self.requires_grad)
        if self._grad is not None:
            p._grad = self._grad.detach().clone()
        memo[id(self)] = p
        return p
