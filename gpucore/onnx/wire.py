"""The initializers' bytes of a serialized model without a copy through protobuf.

``onnx.load_model_from_string`` copies every byte of the file into protobuf's memory, and each
read of ``TensorProto.raw_data`` copies the weights out again: for a 45 MiB ResNet-18 that is
most of what loading costs. ``split_raw_data`` walks the wire format of the model's bytes just
deep enough (ModelProto.graph -> GraphProto.initializer -> TensorProto.raw_data) to cut the
initializers' ``raw_data`` out: protobuf then parses only the small rest, and the weights are
read where they lie in the file's bytes (proto.py: ``np.frombuffer``, no copy when aligned).

Anything this walk does not expect (a graph field twice, a raw_data field twice, a group, a
length past the end) returns None and the caller parses the whole file as before, so protobuf
stays the judge of malformed files.
"""

from __future__ import annotations

MODEL_GRAPH = 7  # ModelProto.graph
GRAPH_INITIALIZER = 5  # GraphProto.initializer (repeated TensorProto)
TENSOR_RAW_DATA = 9  # TensorProto.raw_data


class _Odd(Exception):  # noqa: N818 - internal: the bytes are not in the layout expected
    pass


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Odd
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(buf, pos: int, end: int):
    """(field number, wire type, start of the field's key, start of its payload, end) of each
    field in ``buf[pos:end]``; for length-delimited fields the payload is the bytes."""
    while pos < end:
        key_at = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Odd
        if wire == 0:
            _, nxt = _varint(buf, pos, end)
        elif wire == 1:
            nxt = pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos, end)
            nxt = pos + size
        elif wire == 5:
            nxt = pos + 4
        else:  # groups (3, 4) and invalid types
            raise _Odd
        if nxt > end:
            raise _Odd
        yield number, wire, key_at, pos, nxt
        pos = nxt


def _delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _tensor(buf, start: int, end: int) -> tuple[bytes, tuple | None]:
    """(the TensorProto without raw_data, (offset, size) of its raw_data or None)."""
    out = bytearray()
    raw = None
    for number, wire, key_at, pos, nxt in _fields(buf, start, end):
        if number == TENSOR_RAW_DATA:
            if wire != 2 or raw is not None:
                raise _Odd
            raw = (pos, nxt - pos)
        else:
            out += buf[key_at:nxt]
    return bytes(out), raw


def _graph(buf, start: int, end: int, raws: list) -> bytes:
    out = bytearray()
    for number, wire, key_at, pos, nxt in _fields(buf, start, end):
        if number == GRAPH_INITIALIZER and wire == 2:
            stripped, raw = _tensor(buf, pos, nxt)
            raws.append(raw)
            out += _delimited(GRAPH_INITIALIZER, stripped)
        else:
            out += buf[key_at:nxt]
    return bytes(out)


def split_raw_data(data: bytes) -> tuple[bytes, list] | None:
    """(the model's bytes with the initializers' raw_data cut out, [(offset, size) in ``data``
    of initializer i's raw_data, or None where it has none]), or None when the bytes are not
    laid out as expected (see the module docstring)."""
    buf = memoryview(data)
    out = bytearray()
    raws: list = []
    seen = False
    try:
        for number, wire, key_at, pos, nxt in _fields(buf, 0, len(buf)):
            if number == MODEL_GRAPH and wire == 2:
                if seen:  # protobuf would merge two graph fields
                    return None
                seen = True
                out += _delimited(MODEL_GRAPH, _graph(buf, pos, nxt, raws))
            else:
                out += buf[key_at:nxt]
    except _Odd:
        return None
    return bytes(out), raws
