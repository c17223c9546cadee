"""The nesting of a saved object, as JSON that references tensors by name.

A node is one of:

    null, true, false, a JSON int, a finite JSON float, a JSON string   the plain value itself
    [node, ...]                                                          a list
    {"tuple": [node, ...]}                                               a tuple
    {"dict": [[key, node], ...]}   {"odict": [[key, node], ...]}         a dict / OrderedDict; keys
                                                                         are plain-value nodes, in
                                                                         insertion order
    {"tensor": "<name>"}                                                 a tensor of the file
    {"qtensor": {"dtype": "qint8", "qscheme": "per_tensor_affine",        a quantized tensor
                 "scale": x, "zero_point": n, "int_repr": {"tensor":..}}} (per channel: "axis",
                                                                         and "scales" and
                                                                         "zero_points" tensors)
    {"float": "inf" | "-inf" | "nan" | "0x<16 hex digits>"}             a non-finite float (the
                                                                         hex form: a NaN's bits)
    {"object": {"class": "module.Name", "new" | "call": [node, ...],     an object of a class in
                "state": node}}                                          the safe globals
                                                                         (``safe_globals``)

Decoding builds only dicts, OrderedDicts, lists, tuples, plain values and quantized tensors
(``gpucore.quantization.QuantizedTensor``, from checked integers and parameters), and objects of
the classes the caller allows (``gpucore.serialization.add_safe_globals``, looked up by name):
nothing else a file names is constructed or run.
"""

from __future__ import annotations

import math
import reprlib
import struct
from collections import OrderedDict

import numpy as np

from ..errors import SerializationError
from ..tensor import Tensor
from . import safe_globals as sg

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

    def __init__(self, classes: dict | None = None):
        self.tensors: dict[str, Tensor] = {}
        self._names: dict[int, str] = {}
        self._active: set[int] = set()
        # class -> name: objects of these classes are stored as {"object": ...} nodes
        self._classes = {c: n for n, c in (classes or {}).items()}

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
        parts = getattr(obj, "_checkpoint_parts", None)
        if parts is not None:  # a gpucore.quantization.QuantizedTensor
            meta, tensors = parts()
            node = dict(meta)
            for role, t in tensors.items():
                where = path if role == "int_repr" else (*path, role)
                node[role] = {"tensor": self._tensor_name(t, where)}
            return {"qtensor": node}
        parts = None
        if type(obj) in self._classes:
            parts = sg.reduce_parts(obj)
        if parts is None and not isinstance(obj, (dict, list, tuple)):
            hint = " (convert it with gpucore.from_numpy)" if isinstance(obj, np.ndarray) else ""
            if type(obj) in self._classes:
                hint = " (its reduction is not plain data)"
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
            if parts is not None:
                kind, args, state = parts
                node = {"class": self._classes[type(obj)], kind: self._node(args, (*path, kind))}
                if state is not None:
                    node["state"] = self._node(state, (*path, "state"))
                return {"object": node}
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
    ``find_class(name)`` gives the class of an object node, or None when it is not allowed.
    """

    def __init__(self, source: str, names, tensor=None, find_class=None):
        self.source = source
        self.names = names
        self.tensor = tensor
        self.find_class = find_class or (lambda name: None)
        self.used: set[str] = set()
        self._quantized: dict = {}  # node text -> QuantizedTensor: one object per saved one

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
        if tag == "qtensor":
            return self._qtensor(v, path)
        if tag == "object":
            return self._object(v, path)
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

    def _qtensor(self, v, path: tuple):
        """A quantized tensor: its fields are checked before any data is read, the parts'
        agreement (dtypes, shapes, ranges) once the tensors are loaded."""
        # local: gpucore imports io at start-up, gpucore.quantization only on first use (here:
        # a file holding quantized tensors)
        from ..quantization.checkpoint import CHECKPOINT_FIELDS, from_checkpoint

        scheme = v.get("qscheme") if isinstance(v, dict) else None
        if not isinstance(scheme, str) or scheme not in CHECKPOINT_FIELDS:
            raise self._bad(path, f"quantized tensor node {_short(v)} has no known qscheme")
        fields, roles = CHECKPOINT_FIELDS[scheme]
        if set(v) != fields | roles:
            raise self._bad(path, f"quantized tensor node has fields {_short(sorted(v))}")
        meta = {k: v[k] for k in fields}
        for k in ("scale", "zero_point", "axis"):
            if k in meta and (isinstance(meta[k], bool) or not isinstance(meta[k], (int, float))):
                raise self._bad(path, f"quantized tensor {k} {_short(meta[k])} is not a number")
        tensors = {}
        for role in roles:
            node = v[role]
            if not (isinstance(node, dict) and set(node) == {"tensor"}):
                raise self._bad(path, f"quantized tensor {role} must reference a tensor")
            tensors[role] = self._node(node, (*path, role))
        if self.tensor is None:
            return None
        key = repr(sorted((k, repr(x)) for k, x in v.items()))
        if key not in self._quantized:
            try:
                self._quantized[key] = from_checkpoint(meta, tensors)
            except (ValueError, TypeError, IndexError) as e:
                raise self._bad(path, f"inconsistent quantized tensor: {e}") from None
        return self._quantized[key]

    def _object(self, v, path: tuple):
        """An object of an allowed class (``safe_globals``): checked, then rebuilt."""
        name = v.get("class") if isinstance(v, dict) else None
        kinds = [k for k in ("new", "call") if isinstance(v, dict) and k in v]
        if not isinstance(name, str) or len(kinds) != 1 or not set(v) <= {"class", "state", *kinds}:
            raise self._bad(path, f"malformed object node {_short(v)}")
        cls = self.find_class(name)
        if cls is None:
            raise SerializationError(
                f"{self.source}: metadata structure at {_path_str(path)}: an object of class "
                f"{_short(name)}, which is not allowed: weights_only=True rebuilds only classes "
                "listed with gpucore.serialization.add_safe_globals([cls]) (or inside "
                "gpucore.serialization.safe_globals([cls])), weights_only=False only classes it "
                "can import"
            )
        (kind,) = kinds
        args = self._node(v[kind], (*path, kind))
        if not isinstance(args, list):
            raise self._bad(path, "object arguments must be a list")
        state = self._node(v["state"], (*path, "state")) if "state" in v else None
        if self.tensor is None:
            return None
        try:
            return sg.rebuild(cls, kind, args, state)
        except Exception as e:  # whatever the class raises for bad arguments
            raise self._bad(
                path, f"cannot rebuild {_short(name)}: {type(e).__name__}: {e}"
            ) from None


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


def _short(x) -> str:
    """A bounded repr (depth, length) of a value from a file."""
    return _REPR.repr(x)
