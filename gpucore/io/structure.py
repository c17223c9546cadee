"""The nesting of a saved object, as JSON that references tensors by name.

A node is one of:

    null, true, false, a JSON int, a finite JSON float, a JSON string   the plain value itself
    [node, ...]                                                          a list
    {"tuple": [node, ...]}                                               a tuple
    {"dict": [[key, node], ...]}   {"odict": [[key, node], ...]}         a dict / OrderedDict; keys
                                                                         are plain-value nodes, in
                                                                         insertion order
    {"tensor": "<name>"}                                                 a tensor of the file
    {"float": "inf" | "-inf" | "nan" | "0x<16 hex digits>"}             a non-finite float (the
                                                                         hex form: a NaN's bits)

Decoding builds only dicts, OrderedDicts, lists, tuples and plain values: nothing in a file names
a type to construct or code to run.
"""

from __future__ import annotations

import math
import reprlib
import struct
from collections import OrderedDict

import numpy as np

from ..errors import SerializationError
from ..tensor import Tensor

MAX_DEPTH = 100  # nesting levels; far deeper than any state dict, well below the recursion limit
_NAN_BITS = struct.unpack("<Q", struct.pack("<d", float("nan")))[0]
_SCALARS = (type(None), bool, int, float, str)


def _float_node(x: float):
    if math.isfinite(x):
        return x
    if x == math.inf:
        return {"float": "inf"}
    if x == -math.inf:
        return {"float": "-inf"}
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    return {"float": "nan" if bits == _NAN_BITS else f"0x{bits:016x}"}


def _path_str(path: tuple) -> str:
    return "obj" + "".join(f"[{_short(k)}]" for k in path)


class Encoder:
    """Turns an object into a structure node plus a name -> Tensor table.

    Tensor names follow the nesting ('fc.weight', 'state.0.exp_avg'), so a state dict reads as
    the usual flat dict in the safetensors package. A tensor object met twice is stored once and
    loads as one object referenced twice.
    """

    def __init__(self):
        self.tensors: dict[str, Tensor] = {}
        self._names: dict[int, str] = {}
        self._active: set[int] = set()

    def __call__(self, obj):
        return self._node(obj, ())

    def _scalar(self, obj, path):
        """The node of a plain value, or NotImplemented when obj is not one."""
        if obj is None or isinstance(obj, (bool, np.bool_)):
            return None if obj is None else bool(obj)
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            return _float_node(float(obj))
        if isinstance(obj, str):
            return str(obj)
        return NotImplemented

    def _node(self, obj, path: tuple):
        node = self._scalar(obj, path)
        if node is not NotImplemented:
            return node
        if isinstance(obj, Tensor):
            return {"tensor": self._tensor_name(obj, path)}
        if not isinstance(obj, (dict, list, tuple)):
            hint = " (convert it with gpucore.from_numpy)" if isinstance(obj, np.ndarray) else ""
            raise SerializationError(
                f"cannot save {_path_str(path)} of type {type(obj).__name__}{hint}: only tensors, "
                "dicts, lists, tuples, int, float, str, bool and None can be saved"
            )
        if len(path) >= MAX_DEPTH:
            raise SerializationError(
                f"cannot save {_path_str(path[:3])}...: nested deeper than {MAX_DEPTH} levels"
            )
        if id(obj) in self._active:
            raise SerializationError(f"cannot save {_path_str(path)}: it contains itself")
        self._active.add(id(obj))
        try:
            if isinstance(obj, dict):
                items = []
                for k, v in obj.items():
                    key = self._scalar(k, path)
                    if key is NotImplemented:
                        raise SerializationError(
                            f"cannot save {_path_str(path)}: dict key {k!r} of type "
                            f"{type(k).__name__}; keys must be str, int, float, bool or None"
                        )
                    items.append([key, self._node(v, (*path, k))])
                return {"odict" if isinstance(obj, OrderedDict) else "dict": items}
            nodes = [self._node(v, (*path, i)) for i, v in enumerate(obj)]
            return {"tuple": nodes} if isinstance(obj, tuple) else nodes
        finally:
            self._active.discard(id(obj))

    def _tensor_name(self, t: Tensor, path: tuple) -> str:
        name = self._names.get(id(t))
        if name is not None:
            return name
        name = ".".join(str(k) for k in path) or "tensor"
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: safetensors names must be UTF-8
            name = f"tensor{len(self.tensors)}"
        base, i = name, 1
        while name in self.tensors or name == "__metadata__":
            name = f"{base}#{i}"
            i += 1
        self.tensors[name] = t
        self._names[id(t)] = name
        return name


class Decoder:
    """Rebuilds the object from a node; every malformed node raises SerializationError.

    ``tensor(name)`` supplies the tensor for a reference; ``used`` collects the names referenced,
    so the caller can refuse a file whose tensors the structure does not account for.
    """

    def __init__(self, source: str, names, tensor=None):
        self.source = source
        self.names = names
        self.tensor = tensor
        self.used: set[str] = set()

    def _bad(self, path: tuple, msg: str) -> SerializationError:
        return SerializationError(f"{self.source}: metadata structure at {_path_str(path)}: {msg}")

    def __call__(self, node):
        return self._node(node, ())

    def _scalar(self, n, path):
        if n is None or isinstance(n, (bool, int, str)):
            return n
        if isinstance(n, float):
            if not math.isfinite(n):
                raise self._bad(path, "float literal out of range")
            return n
        if isinstance(n, dict) and len(n) == 1 and "float" in n:
            return self._float(n["float"], path)
        return NotImplemented

    def _float(self, s, path) -> float:
        if s == "inf":
            return math.inf
        if s == "-inf":
            return -math.inf
        if s == "nan":
            return float("nan")  # a fresh object: distinct NaN dict keys stay distinct
        if isinstance(s, str) and len(s) == 18 and s.startswith("0x"):
            digits = s[2:]
            if all(c in "0123456789abcdef" for c in digits):
                x = struct.unpack("<d", struct.pack("<Q", int(digits, 16)))[0]
                if math.isnan(x):
                    return x
        raise self._bad(path, f"bad non-finite float {s!r}")

    def _node(self, n, path: tuple):
        v = self._scalar(n, path)
        if v is not NotImplemented:
            return v
        if len(path) >= MAX_DEPTH:
            raise self._bad(path[:3], f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(n, list):
            return [self._node(x, (*path, i)) for i, x in enumerate(n)]
        if not isinstance(n, dict) or len(n) != 1:
            raise self._bad(path, f"unexpected node {_short(n)}")
        ((tag, v),) = n.items()
        if tag == "tensor":
            if not isinstance(v, str) or v not in self.names:
                raise self._bad(path, f"references tensor {_short(v)}, which the file lacks")
            self.used.add(v)
            return self.tensor(v) if self.tensor is not None else None
        if tag == "tuple":
            if not isinstance(v, list):
                raise self._bad(path, "tuple node must hold a list")
            return tuple(self._node(x, (*path, i)) for i, x in enumerate(v))
        if tag in ("dict", "odict"):
            if not isinstance(v, list):
                raise self._bad(path, f"{tag} node must hold a list of [key, value] pairs")
            out = OrderedDict() if tag == "odict" else {}
            for item in v:
                if not (isinstance(item, list) and len(item) == 2):
                    raise self._bad(path, f"dict item {_short(item)} is not a [key, value] pair")
                key = self._scalar(item[0], path)
                if key is NotImplemented:
                    raise self._bad(path, f"dict key {_short(item[0])} is not a plain value")
                if key in out:
                    raise self._bad(path, f"dict key {_short(key)} appears twice")
                out[key] = self._node(item[1], (*path, key))
            return out
        raise self._bad(path, f"unknown node type {_short(tag)}")


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


def _short(x) -> str:
    """A bounded repr (depth, length) of a value from a file."""
    return _REPR.repr(x)
