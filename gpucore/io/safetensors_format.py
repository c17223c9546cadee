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

Files written here also carry ``gpucore.header_sha256`` in the metadata: a SHA-256 over the other
metadata entries and the tensor table. It makes any change to the header's meaning (a flipped
digit in a shape, a dtype or a value in the metadata) an error instead of a silent misread. It is
an integrity check, not a signature. Files from other writers have no digest and are not checked.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import reprlib
import stat
import sys
from dataclasses import dataclass

import numpy as np

from .. import dtypes as D
from ..backends.cpu import empty_array
from ..errors import SerializationError
from ..tensor import MAX_DIMS, Tensor

MAX_HEADER_BYTES = 100_000_000  # the safetensors package's own cap
MAX_ELEMENTS = 1 << 40  # per tensor, counting zero-sized dims as 1 (numpy's own limit is 2**63)
DIGEST_KEY = "gpucore.header_sha256"
METADATA_KEY = "__metadata__"

TO_ST = {
    D.float64: "F64",
    D.float32: "F32",
    D.float16: "F16",
    D.bfloat16: "BF16",
    D.int64: "I64",
    D.int32: "I32",
    D.int8: "I8",
    D.uint8: "U8",
    D.bool_: "BOOL",
}
FROM_ST = {v: k for k, v in TO_ST.items()}
# Valid safetensors dtypes that gpucore has no tensor type for (a clearer error than "unknown").
OTHER_ST = frozenset(
    {
        "I16",
        "U16",
        "U32",
        "U64",
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


def error(source: str, msg: str) -> SerializationError:
    return SerializationError(f"{source}: {msg}")


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


def prepare(tensors: dict, metadata: dict):
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
    metadata = dict(metadata)
    metadata[DIGEST_KEY] = digest(metadata, entries)
    header = {METADATA_KEY: metadata}
    for e in entries:
        header[e.name] = {
            "dtype": TO_ST[e.dtype],
            "shape": list(e.shape),
            "data_offsets": [e.begin, e.end],
        }
    hb = json.dumps(header, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        hb = hb.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SerializationError(
            f"a tensor name or metadata string is not valid UTF-8 ({err})"
        ) from None
    hb += b" " * (-len(hb) % 8)
    return hb, [(e, t) for e, (_, t) in zip(entries, order)]


def write(f, plan) -> None:
    """Write a plan from ``prepare`` to the binary file ``f``."""
    hb, items = plan
    f.write(len(hb).to_bytes(8, "little"))
    f.write(hb)
    for e, t in items:
        data = _payload(t)
        if data.nbytes != e.end - e.begin:  # a tensor resized behind our back
            raise SerializationError(f"tensor {short(e.name)} changed size while being saved")
        f.write(memoryview(data))


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


def _no_duplicates(source: str):
    def hook(pairs):
        d = dict(pairs)
        if len(d) != len(pairs):
            seen = set()
            dup = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise error(source, f"header JSON has the key {short(dup)} more than once")
        return d

    return hook


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str, source: str, what: str):
    """json.loads that refuses duplicate keys and NaN/Infinity, and never raises anything but
    SerializationError (deep nesting, over-long integers included)."""
    try:
        return json.loads(
            text, object_pairs_hook=_no_duplicates(source), parse_constant=_reject_constant
        )
    except SerializationError:
        raise
    except (ValueError, RecursionError) as e:
        raise error(source, f"{what} is not valid JSON ({type(e).__name__}: {e})") from None


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _entry(name: str, info, source: str) -> Entry:
    where = f"tensor {short(name)}"
    if not isinstance(info, dict):
        raise error(source, f"{where}: header entry is {type(info).__name__}, not an object")
    if set(info) != _ENTRY_KEYS:
        missing = sorted(_ENTRY_KEYS - set(info))
        extra = sorted(set(info) - _ENTRY_KEYS)
        raise error(
            source,
            f"{where}: header entry must have exactly dtype, shape and data_offsets"
            + (f"; missing {missing}" if missing else "")
            + (f"; unexpected {extra}" if extra else ""),
        )
    st = info["dtype"]
    if not isinstance(st, str):
        raise error(source, f"{where}: dtype must be a string, got {st!r}")
    if st not in FROM_ST:
        if st in OTHER_ST:
            raise error(source, f"{where}: safetensors dtype {st} has no gpucore equivalent")
        raise error(
            source, f"{where}: unknown dtype {st[:40]!r}; expected one of {sorted(FROM_ST)}"
        )
    dt = FROM_ST[st]
    shape = info["shape"]
    if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
        raise error(
            source, f"{where}: shape must be a list of non-negative ints, got {short(shape)}"
        )
    if len(shape) > MAX_DIMS:
        raise error(source, f"{where}: {len(shape)} dims; gpucore tensors have at most {MAX_DIMS}")
    if math.prod(max(s, 1) for s in shape) > MAX_ELEMENTS:
        raise error(source, f"{where}: shape {short(shape)} is too large")
    offs = info["data_offsets"]
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_int(o) for o in offs)):
        raise error(source, f"{where}: data_offsets must be a pair of ints, got {short(offs)}")
    begin, end = offs
    if not 0 <= begin <= end:
        raise error(source, f"{where}: data_offsets [{begin}, {end}] are not 0 <= begin <= end")
    nbytes = math.prod(shape) * dt.itemsize
    if end - begin != nbytes:
        raise error(
            source,
            f"{where}: data_offsets [{begin}, {end}] span {end - begin} bytes but shape "
            f"{tuple(shape)} of {st} needs {nbytes}",
        )
    return Entry(name, dt, tuple(shape), begin, end)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


def short(x) -> str:
    """A bounded repr (depth, length) of a value from a file."""
    return _REPR.repr(x)


def read_header(f, size: int, source: str):
    """Read and validate the header of a file of ``size`` bytes positioned at its start.

    Returns (metadata dict, entries in header order, data start offset). Allocates nothing larger
    than the file.
    """
    if size < 8:
        raise error(source, f"truncated: {size} bytes, less than the 8-byte header length")
    n = int.from_bytes(_read_exact(f, 8, source, "the header length"), "little")
    if n > MAX_HEADER_BYTES:
        raise error(
            source,
            f"header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit "
            "(corrupt, or not a safetensors file)",
        )
    if 8 + n > size:
        raise error(
            source,
            f"header length {n} runs past the end of the file ({size} bytes): truncated or corrupt",
        )
    raw = _read_exact(f, n, source, "the header")
    if not raw.startswith(b"{"):
        raise error(source, "header does not start with '{' (not a safetensors file?)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(source, f"header is not valid UTF-8 ({e})") from None
    header = parse_json(text, source, "header")
    if not isinstance(header, dict):
        raise error(source, f"header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop(METADATA_KEY, None)
    if metadata is None:  # absent, or null (which the safetensors package accepts too)
        metadata = {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise error(source, "__metadata__ must be an object mapping strings to strings")
    entries = [_entry(name, info, source) for name, info in header.items()]

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


def read_tensors(f, entries, data_start: int, source: str) -> dict:
    """Read the (validated) tensors into fresh aligned CPU storage: name -> Tensor."""
    out = {}
    f.seek(data_start)
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        arr = empty_array(e.shape, e.dtype.np)
        nbytes = e.end - e.begin
        if nbytes:
            view = memoryview(arr.reshape(-1).view(np.uint8))
            got = 0
            while got < nbytes:
                k = f.readinto(view[got:])
                if not k:
                    raise error(
                        source,
                        f"file ended while reading tensor {short(e.name)} "
                        "(changed on disk while loading?)",
                    )
                got += k
            if sys.byteorder == "big" and e.dtype.itemsize > 1:
                arr.byteswap(inplace=True)
            if e.dtype is D.bool_:  # any nonzero byte is True; kernels may assume 0/1
                np.not_equal(arr.view(np.uint8), 0, out=arr)
        out[e.name] = Tensor._wrap(arr, e.dtype)
    return {e.name: out[e.name] for e in entries}
