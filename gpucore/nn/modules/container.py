"""Containers: Sequential, ModuleList, ModuleDict (PyTorch's semantics) and the deprecated
Container."""

from __future__ import annotations

import operator
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ..module import Module
from . import relu_fusion as _relu_fusion


def _wrap_index(container: Module, idx) -> int:
    """idx (an int, negative from the end) as a position in the container, or IndexError."""
    n = len(container)
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(
            f"index {idx} is out of range for a {type(container).__name__} of length {n}"
        )
    return i % n


def _check_module(op: str, module) -> None:
    if not isinstance(module, Module):
        raise TypeError(f"{op}(): {type(module).__name__} is not a Module")


def _renumber(container: Module, modules: list) -> None:
    """Hold ``modules`` under the keys '0'..'n-1' (PyTorch renumbers after a delete/insert)."""
    container._modules.clear()
    for i, m in enumerate(modules):
        container._modules[str(i)] = m


class Sequential(Module):
    """Modules called in order, each on the previous one's output.

    ``Sequential(a, b, c)`` names them '0', '1', '2'; ``Sequential(OrderedDict(...))`` keeps the
    given names. Indexing by int gives a module, by slice a new Sequential sharing the modules.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _index(self, idx) -> int:
        return _wrap_index(self, idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules.keys())[self._index(idx)]
        self.add_module(key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules.keys())
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[self._index(idx)]]
        _renumber(self, list(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise TypeError(f"cannot add a {type(other).__name__} to a Sequential")
        return Sequential(*self, *other)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for a Sequential of length {n}")
        if index < 0:
            index += n
        _check_module("Sequential.insert", module)
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def forward(self, input):
        mods = tuple(self._modules.values())
        # a Linear / Conv and the ReLU (MaxPool2d) after it as one op where nothing could tell
        # the difference (nn/modules/relu_fusion.py: the same bits); ``starts`` is a cached
        # filter on the module classes, empty for most Sequentials
        starts = _relu_fusion.starts(mods)
        if not starts or not _relu_fusion.fusion_open():
            for m in mods:
                input = m(input)
            return input
        fuse_at = _relu_fusion.fuse_at
        i, n = 0, len(mods)
        while i < n:
            fused = fuse_at(mods, i, input) if i in starts else None
            if fused is None:
                input = mods[i](input)
                i += 1
            else:
                input, used = fused
                i += used
        return input


class ModuleList(Module):
    """A list of modules whose parameters the parent sees (names '0', '1', ...)."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx) -> int:
        return _wrap_index(self, idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(self._index(idx))]

    def __setitem__(self, idx, module: Module) -> None:
        self.add_module(str(self._index(idx)), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self))[idx]:
                del self._modules[str(k)]
        else:
            del self._modules[str(self._index(idx))]
        _renumber(self, list(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(
                f"ModuleList.extend() takes an iterable of modules, got {type(modules).__name__}"
            )
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert module before position index (Python list semantics)."""
        _check_module("ModuleList.insert", module)
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)

    def pop(self, index: int = -1) -> Module:
        m = self[index]
        del self[index]
        return m

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            "ModuleList has no forward(); iterate over it and call its modules"
        )


class ModuleDict(Module):
    """An ordered dict of named modules whose parameters the parent sees."""

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self[key]
        return m

    def update(self, modules) -> None:
        if isinstance(modules, (Mapping, ModuleDict)):
            for k, m in modules.items():
                self[k] = m
            return
        for i, pair in enumerate(modules):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(
                    f"ModuleDict.update(): element {i} should be a (key, module) pair, got {pair!r}"
                )
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); call its modules by key")


class Container(Module):
    """PyTorch's deprecated nn.Container: a Module whose keyword arguments become its
    submodules (subclass Module instead); constructing one warns, as in PyTorch."""

    def __init__(self, **kwargs) -> None:
        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in "
            "`nn.Module`. Subclass that instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)
