"""Reading an ONNX file into checked plain data: nodes in a topological order, attributes as Python
values, initializers as numpy arrays.

Everything here treats the file as hostile: a truncated or malformed protobuf, a node reading a
name nothing defines, a cycle, a tensor whose dims claim more elements than ``MAX_ELEMENTS`` or
more bytes than it carries, raise SerializationError naming the file before anything is
allocated from the claim. ``onnx`` (an optional dependency) is imported by ``require_onnx`` only.
"""

from __future__ import annotations

import heapq
import mmap
import os
from dataclasses import dataclass, field

import numpy as np

from .. import _cpu
from .. import dtypes as D
from ..errors import SerializationError
from ..runtime.ir.packing import seal
from .errors import UnsupportedOperator
from .wire import split_raw_data

# The most elements one tensor may have at load time (an initializer, an example input, a value
# the importer computes): 2**28 (1 GiB of float32). Larger claims are refused as hostile.
MAX_ELEMENTS = 1 << 28
MIN_OPSET = 7  # older opsets changed too many attribute meanings to map here
DEFAULT_DOMAINS = ("", "ai.onnx")

# ONNX TensorProto.DataType -> numpy dtype, for the types a static (load-time) value may have
NUMPY_TYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}
# ... and -> gpucore dtype, for the types a traced tensor may have
GPUCORE_TYPES = {
    1: D.float32,
    2: D.uint8,
    3: D.int8,
    4: D.uint16,
    5: D.int16,
    6: D.int32,
    7: D.int64,
    9: D.bool_,
    10: D.float16,
    11: D.float64,
    12: D.uint32,
    13: D.uint64,
}
TYPE_NAMES = {
    0: "undefined",
    1: "float",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "double",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    16: "bfloat16",
}


def require_onnx():
    """The ``onnx`` module, or ImportError saying how to install it."""
    try:
        import onnx  # noqa: PLC0415 - optional dependency, imported on first use
    except ImportError as e:
        raise ImportError(
            "gpucore.onnx needs the 'onnx' package: pip install 'gpucore[onnx]' (or onnx>=1.14)"
        ) from e
    return onnx


@dataclass
class NodeInfo:
    """One ONNX node as plain data (``inputs`` / ``outputs``: names, '' for an omitted one)."""

    op_type: str
    name: str
    inputs: list
    outputs: list
    attrs: dict
    domain: str = ""

    def label(self) -> str:
        """How messages name the node: its name, else its first output."""
        if self.name:
            return self.name
        first = next((o for o in self.outputs if o), "?")
        return f"<{self.op_type} -> {first}>"


@dataclass
class ValueInfo:
    """A graph input or output: name, ONNX element type, dims (int, str symbol or None)."""

    name: str
    elem_type: int
    dims: list | None


@dataclass
class ModelInfo:
    """The checked content of a model file."""

    source: str
    opset: int
    nodes: list  # NodeInfo, topologically sorted
    inputs: list  # ValueInfo of the real inputs (those without an initializer)
    outputs: list  # ValueInfo
    initializers: dict = field(default_factory=dict)  # name -> np.ndarray


def bad(source: str, message: str) -> SerializationError:
    """A SerializationError naming the file."""
    return SerializationError(f"{source}: {message}")


# ------------------------------------------------------------------------------------ reading
@dataclass
class RawData:
    """The initializers' ``raw_data`` left in the file's bytes (wire.py): initializer i's bytes
    are ``data[offset:offset + size]`` for ``spans[i] = (offset, size)`` (None: it has none).
    ``data``: the bytes given (read in place), or the file mapped read-only, whose weights are
    copied out once into one read-only array (the mapping goes with this object)."""

    data: object
    spans: list
    _arena: tuple | None = None

    def of(self, i: int):
        """(bytes or array, offset, size) of initializer i's raw data, or None."""
        span = self.spans[i] if i < len(self.spans) else None
        if span is None:
            return None
        if type(self.data) is bytes:
            return (self.data, *span)
        if self._arena is None:
            self._arena = self._copy_out()
        arena, offsets = self._arena
        return (arena, offsets[i], span[1])

    def _copy_out(self) -> tuple:
        """(one read-only array holding every weight at a 64-byte-aligned offset, offsets): one
        block of the caching host allocator (24 ms of CPU against 32 for a copy per weight of
        ResNet-18's 45 MiB, 2026-11-28; a block a dropped model left in the cache is reused
        warm: 17 against 24 ms for numpy's fresh pages), sealed as a constant (only this array
        references the block)."""
        offsets, end = [], 0
        for span in self.spans:
            offsets.append(end)
            end += -(-span[1] // 64) * 64 if span is not None else 0
        block = _cpu.host_empty(end)
        dst, src = np.frombuffer(block, np.uint8), np.frombuffer(self.data, np.uint8)
        for span, at in zip(self.spans, offsets):
            if span is not None:
                dst[at : at + span[1]] = src[span[0] : span[0] + span[1]]
        del src, dst  # (the mapping can close once this object goes)
        # over a read-only export of the block, which only it holds: no view of it can be made
        # writable again (numpy refuses: the buffer is read-only)
        arena = np.frombuffer(memoryview(block).toreadonly(), np.uint8)
        return seal(arena), offsets  # constants, down to the owner


def read(model, source: str | None = None, *, split: bool = False):
    """(ModelProto, source name) from a path, bytes or a ModelProto; external data files are
    read relative to the model's folder. split=True: (ModelProto, source, RawData or None), the
    ModelProto without its initializers' raw_data when the file's bytes hold them (``check``
    reads them from the RawData without a copy)."""
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        src = source or "<ModelProto>"
        return (model, src, None) if split else (model, src)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        with open(path, "rb") as f:  # a missing file is the caller's OSError
            # mapped: copying the weights out of the page cache costs half of reading them
            # through read() (measured: 20 vs 47 ms of CPU for a 45 MiB file)
            big = split and os.fstat(f.fileno()).st_size > 0
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if big else f.read()
    elif isinstance(model, (bytes, bytearray, memoryview)):
        path = None
        data = bytes(model)
    else:
        raise TypeError(
            f"gpucore.onnx.load: expected a path, bytes or an onnx.ModelProto, got "
            f"{type(model).__name__}"
        )
    src = path if path is not None else source or "<bytes>"
    raw = None
    cut = split_raw_data(data) if split and data else None
    if cut is not None:
        raw = RawData(data, cut[1])
        data = cut[0]
    proto = _parse(onnx, data if isinstance(data, bytes) else bytes(data), src)
    if path is not None:
        try:
            from onnx.external_data_helper import load_external_data_for_model  # noqa: PLC0415

            load_external_data_for_model(proto, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001 - any failure to read the data files: a bad model
            raise bad(path, f"cannot read its external data: {type(e).__name__}: {e}") from None
    return (proto, src, raw) if split else (proto, src)


def _parse(onnx, data: bytes, source: str):
    if not data:
        raise bad(source, "the file is empty")
    try:
        return onnx.load_model_from_string(data)
    except Exception as e:  # noqa: BLE001 - protobuf raises DecodeError and others
        raise bad(source, f"not a valid ONNX protobuf ({type(e).__name__}: {e})") from None


# ------------------------------------------------------------------------------------ tensors
def elements(dims, source: str, what: str) -> int:
    """The element count of ``dims``, checked against MAX_ELEMENTS."""
    n = 1
    for d in dims:
        d = int(d)
        if d < 0:
            raise bad(source, f"{what} has a negative dim in {list(dims)}")
        n *= d
    if n > MAX_ELEMENTS:
        raise bad(
            source,
            f"{what} claims {n:.3g} elements (shape {list(dims)}); the limit is "
            f"gpucore.onnx.proto.MAX_ELEMENTS = {MAX_ELEMENTS}",
        )
    return n


def to_numpy(t, source: str, what: str, raw: tuple | None = None) -> np.ndarray:
    """The array a TensorProto holds, after checking its claims against its data. Raw bytes
    (``t.raw_data``, else ``raw`` = (bytes, offset, size) from ``RawData.of``) are read in
    place: a read-only array over them, copied only when misaligned for its dtype."""
    onnx = require_onnx()
    what = f"{what} {t.name!r}" if t.name else what
    if t.data_type not in NUMPY_TYPES:
        name = TYPE_NAMES.get(t.data_type, f"type {t.data_type}")
        raise UnsupportedOperator(f"{source}: {what} has element type {name}, not supported")
    n = elements(t.dims, source, what)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise bad(source, f"{what} is stored in an external file that was not loaded")
    if t.HasField("raw_data"):  # (external data is loaded into raw_data)
        data = t.raw_data  # (protobuf copies it out on every read: read once)
        raw = (data, 0, len(data))
    if raw is not None:
        return _from_raw(t, raw, n, source, what)
    try:
        arr = onnx.numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - inconsistent fields
        raise bad(source, f"{what} cannot be read: {type(e).__name__}: {e}") from None
    if arr.shape != tuple(t.dims) or arr.dtype != NUMPY_TYPES[t.data_type]:
        raise bad(source, f"{what}: data of shape {arr.shape} for dims {list(t.dims)}")
    arr = np.array(arr, order="C")  # (typed fields: small; an array of its own, read-only as
    arr.flags.writeable = False  # _from_raw's)
    return arr


def _from_raw(t, raw: tuple, n: int, source: str, what: str) -> np.ndarray:
    dtype = np.dtype(NUMPY_TYPES[t.data_type]).newbyteorder("<")  # ONNX stores little-endian
    data, offset, held = raw
    want = n * dtype.itemsize
    if held != want:
        raise bad(source, f"{what}: shape {list(t.dims)} needs {want} bytes, holds {held}")
    arr = np.frombuffer(data, dtype, n, offset).reshape(tuple(t.dims))
    if not dtype.isnative:
        arr = arr.astype(dtype.newbyteorder("="))
    elif not isinstance(data, (bytes, np.ndarray)) or not arr.flags.aligned:  # a mapped
        arr = arr.copy()  # file (RawData copies it out first); the C kernels read aligned items
    arr.flags.writeable = False  # weights are constants: no copy when they become ones
    return arr


def attribute(a, source: str, what: str):
    """An AttributeProto as a Python value (a graph or sparse tensor stays a proto: no handler
    reads those, so they end as UnsupportedOperator when the node runs)."""
    onnx = require_onnx()
    A = onnx.AttributeProto
    kind = a.type
    if kind == A.FLOAT:
        return float(a.f)
    if kind == A.INT:
        return int(a.i)
    if kind == A.STRING:
        return a.s.decode("utf-8", "replace")
    if kind == A.TENSOR:
        return to_numpy(a.t, source, f"{what} attribute {a.name!r}")
    if kind == A.FLOATS:
        return [float(x) for x in a.floats]
    if kind == A.INTS:
        return [int(x) for x in a.ints]
    if kind == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in a.strings]
    return a  # GRAPH, SPARSE_TENSOR, TYPE_PROTO and their lists


def _value_info(v, source: str) -> ValueInfo:
    tt = v.type.tensor_type if v.type.HasField("tensor_type") else None
    if tt is None:
        raise UnsupportedOperator(f"{source}: graph input/output {v.name!r} is not a tensor")
    dims = None
    if tt.HasField("shape"):
        dims = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                if d.dim_value < 0:
                    raise bad(source, f"input/output {v.name!r} has a negative dim")
                dims.append(int(d.dim_value))
            else:
                dims.append(d.dim_param or None)
    return ValueInfo(v.name, int(tt.elem_type), dims)


# ------------------------------------------------------------------------------------ the graph
def opset_of(proto, source: str) -> int:
    """The default domain's opset version (checked against what this onnx knows)."""
    onnx = require_onnx()
    versions = [int(o.version) for o in proto.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise bad(source, "the model imports no opset of the default ONNX domain")
    opset = max(versions)
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= newest:
        raise UnsupportedOperator(
            f"{source}: opset {opset} is not supported (gpucore.onnx reads opsets {MIN_OPSET} "
            f"to {newest}, the newest the installed onnx knows)",
            opset=opset,
        )
    return opset


def check(proto, source: str, raw: RawData | None = None) -> ModelInfo:
    """The model's graph as a ModelInfo, checked (see the module docstring); ``raw``: the
    initializers' raw_data that ``read(..., split=True)`` left in the file's bytes."""
    if not proto.HasField("graph"):
        raise bad(source, "the model has no graph")
    opset = opset_of(proto, source)
    g = proto.graph
    if len(g.sparse_initializer):
        raise UnsupportedOperator(f"{source}: sparse initializers are not supported")
    inits = {}
    if raw is not None and len(raw.spans) != len(g.initializer):
        raise bad(source, "the initializers are not where the graph lists them")
    for i, t in enumerate(g.initializer):
        if t.name in inits:
            raise bad(source, f"initializer {t.name!r} is defined twice")
        inits[t.name] = to_numpy(t, source, "initializer", raw.of(i) if raw else None)
    inputs = [_value_info(v, source) for v in g.input if v.name not in inits]
    names = [v.name for v in inputs]
    if len(set(names)) != len(names) or any(not n for n in names):
        raise bad(source, f"graph inputs {names} are empty or repeated")
    nodes = []
    for n in g.node:
        node = NodeInfo(n.op_type, n.name, list(n.input), list(n.output), {}, n.domain)
        for a in n.attribute:
            node.attrs[a.name] = attribute(a, source, f"node {node.label()}")
        nodes.append(node)
    outputs = [_value_info(v, source) for v in g.output]
    if not outputs:
        raise bad(source, "the graph has no outputs")
    ordered = sort_nodes(nodes, set(names) | set(inits), [o.name for o in outputs], source)
    return ModelInfo(source, opset, ordered, inputs, outputs, inits)


def sort_nodes(nodes: list, defined: set, outputs: list, source: str) -> list:
    """``nodes`` in a topological order (ONNX requires one, some exporters do not keep it);
    SerializationError for a name defined twice or by nothing, or a cycle."""
    producer = {}
    for i, node in enumerate(nodes):
        for o in node.outputs:
            if not o:
                continue
            if o in defined or o in producer:
                raise bad(source, f"node {node.label()} defines {o!r}, which is defined before")
            producer[o] = i
    waiting = [0] * len(nodes)
    readers: dict = {}
    for i, node in enumerate(nodes):
        for name in set(node.inputs):
            if not name or name in defined:
                continue
            if name not in producer:
                what = f"node {node.label()} ({node.op_type})"
                raise bad(
                    source,
                    f"{what} reads {name!r}, which nothing in the graph defines (no initializer, "
                    "graph input or node output has that name: the file may lack a weight; "
                    "re-export it, or add the initializer)",
                )
            waiting[i] += 1
            readers.setdefault(producer[name], []).append(i)
    # Kahn's algorithm, taking the ready node that comes first in the file: the file's order is
    # kept wherever it is valid
    ready = [i for i in range(len(nodes)) if waiting[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(nodes[i])
        for j in readers.get(i, ()):
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(nodes):
        stuck = [nodes[i].label() for i in range(len(nodes)) if waiting[i]][:4]
        raise bad(source, f"the graph has a cycle (through nodes {', '.join(stuck)})")
    for o in outputs:
        if o not in defined and o not in producer:
            raise bad(source, f"graph output {o!r} is defined by nothing")
    return order
