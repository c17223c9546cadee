"""The safetensors file layout, written and read with numpy alone (no ``safetensors`` package).

    [8 bytes]  N, the header length, unsigned little-endian
    [N bytes]  UTF-8 JSON object, padded with spaces so the data starts on an 8-byte boundary:
               {"__metadata__": {str: str, ...},
                "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
    [rest]     the tensors' bytes, little-endian, C order; offsets are relative to the data start

The reader follows the safetensors rules and checks every number against the file size before it
allocates anything: the tensors must tile the data section exactly (sorted by offset, each starting
where the previous one ended, the last ending at the end of the file), and each tensor's byte count
must equal prod(shape) * itemsize. Any violation raises SerializationError naming the source.

Files written here also carry two checksums in the metadata. ``gpucore.tensor_sha256`` maps each
tensor's name to the SHA-256 of its bytes (see ``checksum``): any change to tensor data is an
error naming the tensor. ``gpucore.header_sha256`` is a SHA-256 over the other metadata entries
(the tensor checksums included) and the tensor table: any change to the header's meaning (a
flipped digit in a shape, a dtype or a value in the metadata) is an error instead of a silent
misread. They are integrity checks, not signatures. Files from other writers (and gpucore files
older than the tensor checksums) lack them and are checked for what they carry.

The header is parsed within limits on its size, its tensor count and its nesting (see ``header``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import sys
from dataclasses import dataclass

import numpy as np

from .. import dtypes as D
from ..backends.cpu import empty_array
from ..errors import SerializationError
from ..tensor import MAX_DIMS, Tensor
from . import checksum, header
from .header import (
    METADATA_KEY,
    check_limit,
    error,
    header_too_large,
    parse_header,
    parse_json,
    short,
)

MAX_ELEMENTS = 1 << 40  # per tensor, counting zero-sized dims as 1 (numpy's own limit is 2**63)
DIGEST_KEY = "gpucore.header_sha256"
CHECKSUM_KEY = "gpucore.tensor_sha256"
_PLACEHOLDER = "0" * checksum.HEX_DIGITS

TO_ST = {
    D.float64: "F64",
    D.float32: "F32",
    D.float16: "F16",
    D.bfloat16: "BF16",
    D.int64: "I64",
    D.int32: "I32",
    D.int16: "I16",
    D.int8: "I8",
    D.uint8: "U8",
    D.uint16: "U16",
    D.uint32: "U32",
    D.uint64: "U64",
    D.bool_: "BOOL",
}
FROM_ST = {v: k for k, v in TO_ST.items()}
# Valid safetensors dtypes that gpucore has no tensor type for (a clearer error than "unknown").
OTHER_ST = frozenset(
    {
        "C64",
        "F8_E4M3",
        "F8_E5M2",
        "F8_E8M0",
        "F6_E2M3",
        "F6_E3M2",
        "F4",
        "E8M0",
    }
)
_ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})


@dataclass(frozen=True)
class Entry:
    """One tensor of the header, already validated."""

    name: str
    dtype: D.dtype
    shape: tuple
    begin: int
    end: int


def digest(metadata: dict, entries) -> str:
    """SHA-256 (hex) of the metadata without the digest itself, and of the tensor table."""
    meta = sorted((k, v) for k, v in metadata.items() if k != DIGEST_KEY)
    table = sorted([e.name, TO_ST[e.dtype], list(e.shape), [e.begin, e.end]] for e in entries)
    blob = json.dumps([meta, table], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------------------- writing
def _payload(t: Tensor) -> np.ndarray:
    """The tensor's bytes as a flat little-endian uint8 array (host copy for Vulkan and views)."""
    a = np.ascontiguousarray(t._host())
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big"):
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.reshape(-1).view(np.uint8)


@dataclass
class Plan:
    """What ``write`` puts in a file: the metadata, the tensor table, the tensors in data order,
    and the header's length (the same with placeholder and with real checksums)."""

    metadata: dict
    entries: list
    tensors: list
    header_len: int


def _header(metadata: dict, entries, sums: dict) -> bytes:
    """The padded header bytes for ``metadata`` plus the tensor checksums and the digest."""
    metadata = dict(metadata)
    metadata[CHECKSUM_KEY] = json.dumps(sums, ensure_ascii=False, separators=(",", ":"))
    metadata[DIGEST_KEY] = digest(metadata, entries)
    table = {METADATA_KEY: metadata}
    for e in entries:
        table[e.name] = {
            "dtype": TO_ST[e.dtype],
            "shape": list(e.shape),
            "data_offsets": [e.begin, e.end],
        }
    hb = json.dumps(table, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        hb = hb.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SerializationError(
            f"a tensor name or metadata string is not valid UTF-8 ({err})"
        ) from None
    return hb + b" " * (-len(hb) % 8)


def prepare(tensors: dict, metadata: dict) -> Plan:
    """Lay out ``tensors`` (name -> Tensor) and ``metadata`` (str -> str): returns the plan that
    ``write`` puts in a file. Nothing is written yet, so any error here leaves no file behind.

    Tensors are laid out by decreasing itemsize (stable), so with the 8-byte aligned data start
    each one is aligned to its element size, as the safetensors package does.
    """
    order = sorted(tensors.items(), key=lambda kv: -kv[1].dtype.itemsize)
    entries, off = [], 0
    for name, t in order:
        n = t.numel() * t.dtype.itemsize
        entries.append(Entry(name, t.dtype, tuple(t.shape), off, off + n))
        off += n
    hb = _header(metadata, entries, dict.fromkeys((e.name for e in entries), _PLACEHOLDER))
    return Plan(dict(metadata), entries, [t for _, t in order], len(hb))


def write(f, plan: Plan) -> None:
    """Write a plan from ``prepare`` to the binary file ``f``, which must be seekable.

    One pass over the tensors: the header goes first with placeholder checksums (hex digits of
    the same length), the tensors follow while they are hashed, and the header is rewritten in
    place with the real checksums and digest.
    """
    sums = dict.fromkeys((e.name for e in plan.entries), _PLACEHOLDER)
    start = f.tell()
    f.write(plan.header_len.to_bytes(8, "little"))
    f.write(_header(plan.metadata, plan.entries, sums))
    with checksum.Hasher() as hasher:
        for e, t in zip(plan.entries, plan.tensors):
            data = _payload(t)
            if data.nbytes != e.end - e.begin:  # a tensor resized behind our back
                raise SerializationError(f"tensor {short(e.name)} changed size while being saved")
            hasher.add(e.name, data)
            f.write(memoryview(data))
        sums.update(hasher.finish())
    hb = _header(plan.metadata, plan.entries, sums)
    assert len(hb) == plan.header_len, "checksums changed the header length"
    end = f.tell()
    f.seek(start + 8)
    f.write(hb)
    f.seek(end)


# --------------------------------------------------------------------------------------- reading
def open_regular(path, source: str):
    """Open ``path`` for reading; refuse anything but a regular file (a FIFO or a device would
    block or never end). Missing or unreadable paths raise the usual OSError."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise error(source, "not a regular file")
    f = open(path, "rb")  # closed by the caller
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced between stat and open
        f.close()
        raise error(source, "not a regular file")
    return f


def _read_exact(f, n: int, source: str, what: str) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise error(source, f"file ended while reading {what} (truncated or changed on disk)")
    return b


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


_ST_SIZES = {st: dt.itemsize for st, dt in FROM_ST.items()}


def _entry(name: str, info, source: str) -> Entry:
    """Validate one header entry. The usual well-formed entry passes a few cheap checks; any
    doubt goes to ``_bad_entry``, which finds and reports the problem."""
    if type(info) is dict and len(info) == 3:
        st, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if (
            type(st) is str
            and st in _ST_SIZES
            and type(shape) is list
            and len(shape) <= MAX_DIMS
            and all(type(s) is int and s >= 0 for s in shape)
            and type(offs) is list
            and len(offs) == 2
            and type(offs[0]) is int
            and type(offs[1]) is int
            and 0 <= offs[0]
            and math.prod(max(s, 1) for s in shape) <= MAX_ELEMENTS
            and offs[1] - offs[0] == math.prod(shape) * _ST_SIZES[st]
        ):
            return Entry(name, FROM_ST[st], tuple(shape), offs[0], offs[1])
    raise _bad_entry(name, info, source)


def _bad_entry(name: str, info, source: str) -> SerializationError:
    where = f"tensor {short(name)}"
    if not isinstance(info, dict):
        return error(source, f"{where}: header entry is {type(info).__name__}, not an object")
    if set(info) != _ENTRY_KEYS:
        missing = sorted(_ENTRY_KEYS - set(info))
        extra = sorted(set(info) - _ENTRY_KEYS)
        return error(
            source,
            f"{where}: header entry must have exactly dtype, shape and data_offsets"
            + (f"; missing {missing}" if missing else "")
            + (f"; unexpected {extra}" if extra else ""),
        )
    st = info["dtype"]
    if not isinstance(st, str):
        return error(source, f"{where}: dtype must be a string, got {short(st)}")
    if st not in FROM_ST:
        if st in OTHER_ST:
            return error(source, f"{where}: safetensors dtype {st} has no gpucore equivalent")
        return error(
            source, f"{where}: unknown dtype {st[:40]!r}; expected one of {sorted(FROM_ST)}"
        )
    shape = info["shape"]
    if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
        return error(
            source, f"{where}: shape must be a list of non-negative ints, got {short(shape)}"
        )
    if len(shape) > MAX_DIMS:
        return error(source, f"{where}: {len(shape)} dims; gpucore tensors have at most {MAX_DIMS}")
    if math.prod(max(s, 1) for s in shape) > MAX_ELEMENTS:
        return error(source, f"{where}: shape {short(shape)} is too large")
    offs = info["data_offsets"]
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_int(o) for o in offs)):
        return error(source, f"{where}: data_offsets must be a pair of ints, got {short(offs)}")
    begin, end = offs
    if not 0 <= begin <= end:
        return error(source, f"{where}: data_offsets [{begin}, {end}] are not 0 <= begin <= end")
    nbytes = math.prod(shape) * FROM_ST[st].itemsize
    return error(
        source,
        f"{where}: data_offsets [{begin}, {end}] span {end - begin} bytes but shape "
        f"{tuple(shape)} of {st} needs {nbytes}",
    )


def read_header(f, size: int, source: str, max_header_bytes=None, max_tensors=None):
    """Read and validate the header of a file of ``size`` bytes positioned at its start, within
    ``max_header_bytes`` and ``max_tensors`` (None: the defaults of ``header``).

    Returns (metadata dict, entries in header order, data start offset). Allocates nothing larger
    than the file, and for the header no more than its text and the entries kept.
    """
    if max_header_bytes is None:  # the module defaults, read now: they may have been raised
        max_header_bytes = header.MAX_HEADER_BYTES
    if max_tensors is None:
        max_tensors = header.MAX_TENSORS
    check_limit(max_header_bytes, "max_header_bytes")
    check_limit(max_tensors, "max_tensors")
    if size < 8:
        raise error(source, f"truncated: {size} bytes, less than the 8-byte header length")
    n = int.from_bytes(_read_exact(f, 8, source, "the header length"), "little")
    if n > max_header_bytes:
        raise header_too_large(source, n, max_header_bytes)
    if 8 + n > size:
        raise error(
            source,
            f"header length {n} runs past the end of the file ({size} bytes): truncated or corrupt",
        )
    raw = _read_exact(f, n, source, "the header")
    if not raw.startswith(b"{"):
        raise error(source, "header does not start with '{' (not a safetensors file?)")
    header.precheck(raw, source, max_tensors)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(source, f"header is not valid UTF-8 ({e})") from None
    del raw
    metadata, items = parse_header(text, source, max_tensors)
    del text
    if metadata is None:  # absent, or null (which the safetensors package accepts too)
        metadata = {}
    entries = [_entry(name, info, source) for name, info in items]
    del items

    data_len = size - 8 - n
    for e in entries:
        if e.end > data_len:
            raise error(
                source,
                f"tensor {short(e.name)}: data_offsets [{e.begin}, {e.end}] run past the end of "
                f"the data section ({data_len} bytes): truncated or corrupt",
            )
    pos, prev = 0, None
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin < pos:
            raise error(
                source,
                f"tensor {short(e.name)} overlaps tensor {short(prev)} "
                f"(begins at {e.begin}, before {pos})",
            )
        if e.begin > pos:
            raise error(
                source,
                f"{e.begin - pos} unused bytes before tensor {short(e.name)} "
                f"(offset {pos}); safetensors data must be contiguous",
            )
        pos, prev = e.end, e.name
    if pos != data_len:
        raise error(
            source,
            f"{data_len - pos} unused bytes after the last tensor "
            "(trailing garbage, or a corrupt header)",
        )
    if DIGEST_KEY in metadata and metadata[DIGEST_KEY] != digest(metadata, entries):
        raise error(source, f"header checksum mismatch ({DIGEST_KEY}): the header is corrupt")
    return metadata, entries, 8 + n


_HEX = frozenset("0123456789abcdef")


def tensor_checksums(metadata: dict, entries, source: str):
    """The tensor checksums of the metadata (name -> hex), validated against the tensor table;
    None when the file has none (another writer's, or an older gpucore's)."""
    text = metadata.get(CHECKSUM_KEY)
    if text is None:
        return None
    sums = parse_json(text, source, f"metadata {CHECKSUM_KEY}", 1, "checksum table")
    if not isinstance(sums, dict) or not all(
        isinstance(v, str) and len(v) == checksum.HEX_DIGITS and _HEX.issuperset(v)
        for v in sums.values()
    ):
        raise error(source, f"metadata {CHECKSUM_KEY} is not an object of SHA-256 hex digests")
    names = {e.name for e in entries}
    if sums.keys() != names:
        odd = sorted(names.symmetric_difference(sums))[0]
        raise error(
            source, f"metadata {CHECKSUM_KEY} and the tensor table disagree about {short(odd)}"
        )
    return sums


def read_tensors(f, entries, data_start: int, source: str, sums=None) -> dict:
    """Read the (validated) tensors into fresh aligned CPU storage: name -> Tensor. With
    ``sums`` (from ``tensor_checksums``), each tensor's bytes must have its checksum."""
    arrays = {}
    f.seek(data_start)
    with checksum.Hasher() as hasher:
        for e in sorted(entries, key=lambda e: (e.begin, e.end)):
            arr = empty_array(e.shape, e.dtype.np)
            raw = memoryview(arr.reshape(-1).view(np.uint8))
            got, nbytes = 0, e.end - e.begin
            while got < nbytes:
                k = f.readinto(raw[got:])
                if not k:
                    raise error(
                        source,
                        f"file ended while reading tensor {short(e.name)} "
                        "(changed on disk while loading?)",
                    )
                got += k
            if sums is not None:
                hasher.add(e.name, raw)
            arrays[e.name] = arr
        found = hasher.finish()
    if sums is not None:
        for e in sorted(entries, key=lambda e: (e.begin, e.end)):
            if found[e.name] != sums[e.name]:
                raise error(
                    source,
                    f"tensor {short(e.name)}: its bytes do not match their checksum "
                    f"({CHECKSUM_KEY}): the tensor data is corrupt",
                )
    out = {}
    for e in entries:
        arr = arrays[e.name]
        if sys.byteorder == "big" and e.dtype.itemsize > 1:
            arr.byteswap(inplace=True)
        if e.dtype is D.bool_:  # any nonzero byte is True; kernels may assume 0/1
            np.not_equal(arr.view(np.uint8), 0, out=arr)
        out[e.name] = Tensor._wrap(arr, e.dtype)
    return out
