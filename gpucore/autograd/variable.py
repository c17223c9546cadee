"""``Variable``: PyTorch's legacy alias of Tensor, kept so old scripts run.

``Variable(t)`` returns a tensor sharing ``t``'s storage, cut from the graph, with
``requires_grad`` as given (as PyTorch, it is not ``t`` itself); ``Variable(data)`` with a list or
array makes a new tensor. ``isinstance(x, Variable)`` is True for every Tensor.
"""

from __future__ import annotations

from ..creation import tensor as _tensor
from ..tensor import Tensor, leaf_requires_grad


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False, volatile=False)``: a Tensor (see the module)."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if data is None:
            data = _tensor([])
        t = data.detach() if isinstance(data, Tensor) else _tensor(data)
        return leaf_requires_grad(t, requires_grad, "Variable()")
