"""Parsing a safetensors header in bounded time and memory, whatever the bytes.

The header is one JSON object: ``{"__metadata__": {str: str}, "<name>": {"dtype": ...,
"shape": [...], "data_offsets": [b, e]}, ...}``. A hostile file can declare a header of any size,
pack it with a million entries, or nest values thousands of levels deep. Three limits keep a load
cheap; each raises SerializationError naming the file, the limit and how to raise it:

- header bytes: ``max_header_bytes`` of ``gpucore.load`` (default MAX_HEADER_BYTES, 100 MB, the
  safetensors package's own cap), checked before the header is read;
- tensors: ``max_tensors`` (default MAX_TENSORS), checked while the entries are parsed, so a header
  of a million entries is refused after MAX_TENSORS of them, in the time and memory a legitimate
  file at the limit takes (far more entries than that are refused by a count of the raw bytes,
  before any parsing); ``__metadata__`` keys: MAX_METADATA_KEYS;
- nesting: a header entry is at most MAX_ENTRY_CHARS characters and ENTRY_DEPTH levels (a valid
  one is an object of int lists: 2); any JSON text handed to ``json.loads`` (an entry, the
  gpucore structure) has its depth counted first, without recursion, so neither a deep file nor
  a raised recursion limit can exhaust the C stack.

The top-level object is walked member by member (json's C string scanner for the keys and the
metadata strings, ``json.loads`` on each entry's few characters), so memory is the header text
plus what the kept entries take: a hostile header never turns into more Python objects than the
limits allow.
"""

from __future__ import annotations

import json
import re
import reprlib
from json.decoder import scanstring

import numpy as np

from ..errors import SerializationError

MAX_HEADER_BYTES = 100_000_000  # the safetensors package's own cap
MAX_TENSORS = 100_000  # per file; sharded checkpoints of the largest models stay far below
MAX_METADATA_KEYS = 10_000  # ``__metadata__`` entries (gpucore writes 5)
MAX_ENTRY_CHARS = 4096  # one tensor's header entry (gpucore writes about 60 characters)
ENTRY_DEPTH = 32  # JSON levels parsed in an entry (a valid one has 2: an object of int lists)
METADATA_KEY = "__metadata__"

_WS = re.compile(r"[ \t\n\r]*")
# The usual member: a key without escapes and a flat object (no braces inside), then ',' or '}'
_MEMBER = re.compile(
    r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*(\{[^{}]*\})[ \t\n\r]*([,}])[ \t\n\r]*'
)
# JSON strings, and runs of anything but brackets and quotes: what remains are the brackets
_NOT_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^"\[\]{}]+', re.S)

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40


def short(x) -> str:
    """A bounded repr (depth, length) of a value from a file."""
    return _REPR.repr(x)


def error(source: str, msg: str) -> SerializationError:
    return SerializationError(f"{source}: {msg}")


def check_limit(value, name: str) -> int:
    """A limit argument (max_header_bytes, max_tensors): a non-negative int."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _raise_hint(name: str) -> str:
    return (
        f"if the file is legitimate, pass {name}=... to gpucore.load / gpucore.io.from_bytes "
        f"(default gpucore.io.header.{name.upper()})"
    )


def header_too_large(source: str, n: int, limit: int) -> SerializationError:
    return error(
        source,
        f"header length {n} exceeds the {limit}-byte limit (corrupt, or not a safetensors "
        f"file; {_raise_hint('max_header_bytes')})",
    )


# ----------------------------------------------------------------------------------- depth
def json_depth(text: str) -> int:
    """The nesting depth of JSON text (brackets outside strings), counted without recursion in
    two C-speed passes; memory is one byte and one int32 per bracket."""
    brackets = _NOT_BRACKETS.sub("", text).encode("ascii", "replace")
    if not brackets:
        return 0
    a = np.frombuffer(brackets, np.uint8)
    step = (a == ord("[")).astype(np.int32)
    step += a == ord("{")
    step -= a == ord("]")
    step -= a == ord("}")
    return int(np.cumsum(step, dtype=np.int64).max())


def check_depth(text: str, limit: int, source: str, what: str, kind: str) -> None:
    """Refuse JSON text nested more than ``limit`` levels deep, before json.loads recurses."""
    if text.count("[") + text.count("{") <= limit:  # cannot be deeper: the common case
        return
    depth = json_depth(text)
    if depth > limit:
        raise error(
            source,
            f"{what} nests {depth} levels deep, more than the {limit} allowed in a {kind} "
            "(not valid JSON for one: corrupt or hostile)",
        )


# ----------------------------------------------------------------------------------- json
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


def _decoder(source: str) -> json.JSONDecoder:
    return json.JSONDecoder(
        object_pairs_hook=_no_duplicates(source), parse_constant=_reject_constant
    )


def parse_json(text: str, source: str, what: str, max_depth: int, kind: str):
    """json.loads that refuses duplicate keys, NaN/Infinity and nesting deeper than
    ``max_depth``, and never raises anything but SerializationError (over-long integers too)."""
    check_depth(text, max_depth, source, what, kind)
    try:
        return _decoder(source).decode(text)
    except SerializationError:
        raise
    except (ValueError, RecursionError) as e:
        raise error(source, f"{what} is not valid JSON ({type(e).__name__}: {e})") from None


# ----------------------------------------------------------------------------------- header
class _Walk:
    """The top-level header object, member by member (see the module docstring)."""

    def __init__(self, text: str, source: str, max_tensors: int):
        self.text, self.source, self.max_tensors = text, source, max_tensors
        self.decoder = _decoder(source)
        self.scan = self.decoder.scan_once  # json's C scanner: (value, end) of the value at i

    def bad(self, pos: int, msg: str) -> SerializationError:
        return error(self.source, f"header is not valid JSON ({msg} at char {pos})")

    def duplicate(self, key) -> SerializationError:
        return error(self.source, f"header JSON has the key {short(key)} more than once")

    def ws(self, pos: int) -> int:
        return _WS.match(self.text, pos).end()

    def colon(self, pos: int) -> int:
        pos = self.ws(pos)
        if not self.text.startswith(":", pos):
            raise self.bad(pos, "expected ':'")
        return self.ws(pos + 1)

    def separator(self, pos: int) -> tuple[int, str]:
        """Past the ',' or '}' after a member (and whitespace), and which it was."""
        pos = self.ws(pos)
        sep = self.text[pos : pos + 1]
        if sep not in (",", "}") or not sep:
            raise self.bad(pos, "expected ',' or '}'")
        return self.ws(pos + 1), sep

    def string(self, pos: int) -> tuple[str, int]:
        if not self.text.startswith('"', pos):
            raise self.bad(pos, "expected a string")
        try:
            return scanstring(self.text, pos + 1, True)
        except ValueError as e:
            raise self.bad(pos, str(e)) from None

    def too_many(self, what: str, limit: int) -> SerializationError:
        if what == "tensors":
            hint = _raise_hint("max_tensors")
        else:
            hint = "if the file is legitimate, raise gpucore.io.header.MAX_METADATA_KEYS"
        return error(self.source, f"header has more than {limit} {what}, the limit ({hint})")

    def flat(self, piece: str, key: str):
        """A member's value without braces inside (at most MAX_ENTRY_CHARS characters), or
        NotImplemented when it does not parse as one JSON value on its own."""
        if piece.count("[") >= ENTRY_DEPTH:
            check_depth(piece, ENTRY_DEPTH, self.source, f"tensor {short(key)}", "header entry")
        try:
            value, end = self.scan(piece, 0)
        except SerializationError:
            raise
        except (StopIteration, ValueError, RecursionError):
            return NotImplemented  # e.g. a '}' inside a string: the general case reports it
        return value if end == len(piece) else NotImplemented

    def entry(self, pos: int, key: str):
        """One tensor's entry at ``pos``: (value, end), parsed from at most MAX_ENTRY_CHARS."""
        text = self.text
        if text.startswith("{", pos):
            end = text.find("}", pos, pos + MAX_ENTRY_CHARS)
            if end > 0 and "{" not in text[pos + 1 : end]:
                value = self.flat(text[pos : end + 1], key)
                if value is not NotImplemented:
                    return value, end + 1
        window = text[pos : pos + MAX_ENTRY_CHARS]
        check_depth(window, ENTRY_DEPTH, self.source, f"tensor {short(key)}", "header entry")
        try:
            value, n = self.decoder.raw_decode(window)
        except SerializationError:
            raise
        except (ValueError, RecursionError) as e:
            if len(window) == MAX_ENTRY_CHARS and getattr(e, "pos", 0) >= MAX_ENTRY_CHARS - 64:
                raise error(
                    self.source,
                    f"tensor {short(key)}: header entry longer than {MAX_ENTRY_CHARS} "
                    "characters (corrupt or hostile)",
                ) from None
            raise self.bad(pos, f"{type(e).__name__}: {e}") from None
        return value, pos + n

    def metadata(self, pos: int):
        """``__metadata__`` at ``pos``: (None for null, or a dict of strings; end)."""
        text = self.text
        if text.startswith("null", pos):
            return None, pos + 4
        if not text.startswith("{", pos):
            raise error(self.source, "__metadata__ must be an object mapping strings to strings")
        out: dict[str, str] = {}
        pos = self.ws(pos + 1)
        sep = "}" if text.startswith("}", pos) else ","
        pos += sep == "}"
        while sep == ",":
            key, pos = self.string(pos)
            pos = self.colon(pos)
            if not text.startswith('"', pos):
                raise error(
                    self.source,
                    f"__metadata__ must be an object mapping strings to strings (key {short(key)})",
                )
            value, pos = self.string(pos)
            if key in out:
                raise self.duplicate(key)
            out[key] = value
            if len(out) > MAX_METADATA_KEYS:
                raise self.too_many("__metadata__ keys", MAX_METADATA_KEYS)
            pos, sep = self.separator(pos)
        return out, pos

    def header(self):
        text, max_tensors = self.text, self.max_tensors
        pos = self.ws(0)
        if not text.startswith("{", pos):
            raise self.bad(pos, "expected '{'")
        pos = self.ws(pos + 1)
        metadata, items, names = None, [], set()
        sep = "}" if text.startswith("}", pos) else ","
        pos += sep == "}"
        while sep == ",":
            m = _MEMBER.match(text, pos)
            value = NotImplemented
            if (
                m is not None
                and m.end(2) - m.start(2) <= MAX_ENTRY_CHARS
                and m.group(1) != METADATA_KEY
            ):  # the usual entry: one regex match and one json call
                key = m.group(1)
                value = self.flat(m.group(2), key)
                if value is not NotImplemented:
                    pos, sep = m.end(), m.group(3)
            if value is NotImplemented:  # anything else
                key, pos = self.string(pos)
                pos = self.colon(pos)
                if key == METADATA_KEY:
                    value, pos = self.metadata(pos)
                else:
                    value, pos = self.entry(pos, key)
                pos, sep = self.separator(pos)
            if key in names:
                raise self.duplicate(key)
            names.add(key)
            if key == METADATA_KEY:
                metadata = value
                continue
            items.append((key, value))
            if len(items) > max_tensors:
                raise self.too_many("tensors", max_tensors)
        end = self.ws(pos)
        if end != len(text):
            raise self.bad(end, "extra data after the header object")
        return metadata, items


def precheck(raw: bytes, source: str, max_tensors: int) -> None:
    """Refuse, before decoding, a header that holds far more than ``max_tensors`` entries.

    ``"data_offsets"`` (quotes included) can only occur at the end of a JSON string: once per
    entry (its key), and at most once per tensor name and metadata string. So a valid header
    with T tensors and M metadata entries holds it at most 2T + 2M times.
    """
    if raw.count(b'"data_offsets"') > 2 * (max_tensors + MAX_METADATA_KEYS):
        raise _Walk("", source, max_tensors).too_many("tensors", max_tensors)


def parse_header(text: str, source: str, max_tensors: int):
    """The header text as (metadata: dict or None, [(tensor name, entry value), ...]) in file
    order, within the limits of the module docstring; entries are not validated here."""
    return _Walk(text, source, max_tensors).header()
