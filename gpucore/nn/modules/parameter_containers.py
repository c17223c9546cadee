"""ParameterList and ParameterDict: parameters held in a list or dict whose parent module sees
them (``parameters()``, ``state_dict()`` under the index or key), as PyTorch's. Plain tensors
given to them become Parameters, as there."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...tensor import Tensor
from ..module import Module
from ..parameter import Parameter


def _as_parameter(owner: str, value):
    if isinstance(value, Parameter) or value is None:
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"{owner}: expected a Parameter or Tensor, got {type(value).__name__}")


class ParameterList(Module):
    """A list of parameters, registered under "0", "1", ... in the parent module."""

    def __init__(self, values: Iterable | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, idx: int) -> int:
        if not -self._size <= idx < self._size:
            raise IndexError(f"ParameterList: index {idx} is out of range (length {self._size})")
        return idx % self._size

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        return self._parameters[str(self._index(idx))]

    def __setitem__(self, idx: int, value) -> None:
        self.register_parameter(str(self._index(idx)), _as_parameter("ParameterList", value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (self._parameters[str(i)] for i in range(self._size))

    def __iadd__(self, values: Iterable) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        """Add one parameter (a Tensor is made a Parameter) at the end."""
        self.register_parameter(str(self._size), _as_parameter("ParameterList", value))
        self._size += 1
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Append each of ``values``."""
        if isinstance(values, Tensor) or not isinstance(values, Iterable):
            raise TypeError(
                f"ParameterList.extend() expects an iterable of parameters, got "
                f"{type(values).__name__}"
            )
        for v in values:
            self.append(v)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward(); use its parameters")

    def extra_repr(self) -> str:
        return "\n".join(
            f"({i}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
            for i, p in enumerate(self)
        )


class ParameterDict(Module):
    """An ordered dict of named parameters whose parent module sees them under their keys."""

    def __init__(self, parameters: Mapping | Iterable | None = None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be str, got {type(key).__name__}")
        self.register_parameter(key, _as_parameter("ParameterDict", value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def get(self, key: str, default=None):
        return self._parameters.get(key, default)

    def pop(self, key: str):
        value = self._parameters[key]
        del self._parameters[key]
        return value

    def clear(self) -> None:
        self._parameters.clear()

    def update(self, parameters) -> None:
        """Add (key, parameter) pairs from a mapping or an iterable of pairs."""
        pairs = (
            parameters.items() if isinstance(parameters, (Mapping, ParameterDict)) else parameters
        )
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(
                    f"ParameterDict.update(): element {i} should be a (key, parameter) pair, "
                    f"got {pair!r}"
                )
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward(); use its parameters by key")

    def extra_repr(self) -> str:
        return "\n".join(
            f"({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
            for k, p in self.items()
        )
