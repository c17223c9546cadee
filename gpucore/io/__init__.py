"""Saving and loading: ``gpucore.save(obj, path)`` and ``gpucore.load(path, map_location=None)``.

What can be saved: tensors, and dicts (str, int, float, bool or None keys; insertion order kept),
OrderedDicts, lists and tuples nested up to 100 levels deep, holding tensors and the
plain values int, float (inf and NaN included), str, bool and None. Model and optimizer state
dicts (optimizer state is keyed by int parameter ids) and epoch counters load back as the same
structure: tuples stay tuples, int keys stay ints. numpy scalars are saved as the Python value
(np.float32(0.5) loads as the float 0.5); other dict, list and tuple subclasses as the base type.
A tensor object that appears twice is stored once and loads as one object referenced twice;
distinct tensors viewing one storage are stored (and load) separately.

Like PyTorch state dicts, only a tensor's values are saved: ``requires_grad``, ``.grad`` and the
autograd history are not. Loaded tensors are fresh leaves with ``requires_grad=False``; optimizers
and ``load_state_dict`` copy values into existing parameters, which keep their own flags.

The file is a safetensors file (see ``safetensors_format``): PyTorch users can open it with
``safetensors.torch.load_file`` and get the tensors under names that follow the nesting
(``'fc.weight'``, ``'state.0.exp_avg'``). The nesting and the plain values are JSON in the
``__metadata__`` entry ``gpucore.structure`` (see ``structure``); ``gpucore.version`` is the
format version, ``gpucore.tensor_sha256`` holds each tensor's SHA-256 (``checksum``) and
``gpucore.header_sha256`` guards the header. ``load`` also reads safetensors files from other
writers and returns their tensors as a flat dict, in header order. No pickle: nothing in a file is
ever executed.

The checksums guard against corruption, not tampering: whoever recomputes them can change a
file unnoticed, and a file stripped of every ``gpucore.*`` metadata entry is indistinguishable
from another writer's (it loads as a flat dict of its tensors).

Device independence: tensors are saved from host memory (Vulkan tensors are read back first) and
load on the CPU; ``map_location='vulkan'`` moves them to the Vulkan device.

Saving is atomic (``atomic.atomic_write``). Loading validates the whole header before reading any
tensor data, within limits on the header's size, its tensor count and its nesting (``header``:
``max_header_bytes`` and ``max_tensors`` raise them), checks every tensor's checksum, and raises
SerializationError (a ValueError) naming the file and the problem for any corrupt, truncated or
hostile file; a missing or unreadable path raises the usual OSError.
"""

from __future__ import annotations

import io as _stdio
import json
import os

from ..errors import SerializationError
from ..tensor import device as _device
from . import safetensors_format as fmt
from .atomic import atomic_write
from .header import check_limit
from .structure import MAX_DEPTH, Decoder, Encoder

FORMAT_VERSION = "1"
VERSION_KEY = "gpucore.version"
STRUCTURE_KEY = "gpucore.structure"
_OUR_KEYS = (VERSION_KEY, STRUCTURE_KEY, fmt.DIGEST_KEY)  # fmt.CHECKSUM_KEY: since 2026-11
# JSON levels of a structure: a dict node is three ({"dict": [[key, node]]}), a key one more
STRUCTURE_JSON_DEPTH = 3 * MAX_DEPTH + 2

__all__ = ["save", "load", "to_bytes", "from_bytes"]


def _plan(obj):
    """Encode ``obj`` and lay out the file; raises before any file is touched."""
    enc = Encoder()
    try:
        node = enc(obj)
        structure = json.dumps(node, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, RecursionError) as e:  # e.g. an int too long for str()
        raise SerializationError(f"cannot save the object: {e}") from None
    metadata = {"format": "pt", VERSION_KEY: FORMAT_VERSION, STRUCTURE_KEY: structure}
    return fmt.prepare(enc.tensors, metadata)


def _path(path, fn: str):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(
            f"{fn}() needs a file path (str or os.PathLike), got {type(path).__name__}; for "
            "in-memory data use gpucore.io.to_bytes / gpucore.io.from_bytes"
        )
    return os.fsdecode(os.fspath(path))


def save(obj, path) -> None:
    """Save ``obj`` (tensors in nested dicts/lists/tuples with plain values) to ``path``.

    The file is replaced atomically: the data goes to a temporary file next to ``path``
    (``.<name>.<pid>.<random>.tmp``, the name shortened and hashed where a long one would pass the
    file system's name limit) that is renamed over ``path`` once complete. After an exception or
    a crash mid-save, ``path`` still holds its previous content. A crash (kill -9, power loss) can
    leave the temporary file behind: each save first deletes the stale temporaries of the same
    ``path``, never those of other files. A writer keeps its temporary locked (flock); one that
    nobody holds is stale once its pid, on this machine, has exited, or once it has not been
    modified for 15 minutes (``gpucore.io.atomic.STALE_SECONDS``).

    Each tensor's SHA-256 goes into the file (``load`` checks it). Tensors are saved from host
    memory, without requires_grad or grad.
    """
    path = _path(path, "save")
    plan = _plan(obj)
    atomic_write(path, lambda f: fmt.write(f, plan))


def to_bytes(obj) -> bytes:
    """The file ``save`` would write, as bytes."""
    buf = _stdio.BytesIO()
    fmt.write(buf, _plan(obj))
    return buf.getvalue()


def _target(map_location):
    if map_location is None:
        return "cpu"
    if not isinstance(map_location, (str, _device)):
        raise TypeError(
            "map_location must be None, 'cpu', 'vulkan' or a gpucore.device, got "
            f"{type(map_location).__name__}"
        )
    return _device(map_location).type  # DeviceError for unknown names


def _load(f, size: int, source: str, map_location, limits: dict):
    target = _target(map_location)
    metadata, entries, data_start = fmt.read_header(f, size, source, **limits)
    names = {e.name for e in entries}
    present = [k for k in _OUR_KEYS if k in metadata]
    foreign = not present and fmt.CHECKSUM_KEY not in metadata  # another writer's file
    if foreign:
        structure = None
    elif len(present) != len(_OUR_KEYS):
        missing = [k for k in _OUR_KEYS if k not in metadata]
        raise fmt.error(source, f"metadata lacks {', '.join(missing)}: corrupt gpucore file")
    else:
        if metadata[VERSION_KEY] != FORMAT_VERSION:
            raise fmt.error(
                source,
                f"format version {metadata[VERSION_KEY][:20]!r}; this gpucore reads version "
                f"{FORMAT_VERSION} (saved by a newer gpucore?)",
            )
        structure = fmt.parse_json(
            metadata[STRUCTURE_KEY],
            source,
            "metadata structure",
            STRUCTURE_JSON_DEPTH,
            f"gpucore structure ({MAX_DEPTH} containers deep at most)",
        )
        check = Decoder(source, names)
        _guard(check, structure, source)  # validate everything before reading tensor data
        unused = names - check.used
        if unused:
            raise fmt.error(
                source,
                f"{len(unused)} tensor(s) not referenced by the metadata structure, e.g. "
                f"{fmt.short(sorted(unused)[0])}",
            )
    sums = fmt.tensor_checksums(metadata, entries, source)
    tensors = fmt.read_tensors(f, entries, data_start, source, sums)
    if target != "cpu":
        tensors = {k: t.to(target) for k, t in tensors.items()}
    if foreign:
        return tensors
    return _guard(Decoder(source, names, tensors.__getitem__), structure, source)


def _guard(decoder, structure, source: str):
    """Decode; a load called from an already deep stack could still exhaust the recursion limit
    within MAX_DEPTH levels: report that as a SerializationError too."""
    try:
        return decoder(structure)
    except RecursionError:
        raise fmt.error(source, "metadata structure nested too deeply to decode here") from None


def _limits(max_header_bytes, max_tensors) -> dict:
    """The header limits, checked before any I/O; None: the defaults (``header``)."""
    if max_header_bytes is not None:
        check_limit(max_header_bytes, "max_header_bytes")
    if max_tensors is not None:
        check_limit(max_tensors, "max_tensors")
    return {"max_header_bytes": max_header_bytes, "max_tensors": max_tensors}


def load(path, map_location=None, *, max_header_bytes=None, max_tensors=None):
    """Load what ``save`` wrote (or any safetensors file) from ``path``.

    ``map_location``: None or 'cpu' (the default) gives CPU tensors, 'vulkan' Vulkan tensors.
    Raises SerializationError naming the file for any corrupt, truncated or hostile content,
    including a tensor whose bytes do not match the checksum ``save`` stored.

    ``max_header_bytes`` (default ``gpucore.io.header.MAX_HEADER_BYTES``, 100 MB) and
    ``max_tensors`` (default ``gpucore.io.header.MAX_TENSORS``, 100,000) bound the header, so a
    hostile file costs no more time and memory than a legitimate one at the limits; raise them
    for a legitimate file beyond them.
    """
    source = path = _path(path, "load")
    _target(map_location)  # argument errors before any I/O
    limits = _limits(max_header_bytes, max_tensors)
    with fmt.open_regular(path, source) as f:
        return _load(f, os.fstat(f.fileno()).st_size, source, map_location, limits)


def from_bytes(data, map_location=None, *, max_header_bytes=None, max_tensors=None):
    """Load from the bytes of a file (``to_bytes``, or a safetensors file read into memory);
    the arguments are ``load``'s."""
    limits = _limits(max_header_bytes, max_tensors)
    mv = memoryview(data)
    buf = _stdio.BytesIO(data if type(data) is bytes else mv)  # bytes are shared, not copied
    return _load(buf, mv.nbytes, "<bytes>", map_location, limits)
