"""Saving and loading: ``gpucore.save(obj, f)`` and ``gpucore.load(f, map_location=None,
weights_only=True)``, as PyTorch's; ``f`` is a path or an open binary file object (``files``).

Two formats. The safe format (below) holds data only and is what ``load`` reads by default
(``weights_only=True``). Objects it cannot hold (a whole ``nn.Module``, an optimizer object, numpy
arrays, sets) are saved in gpucore's pickle format instead (``pickle_format``), which ``load``
reads only with an explicit ``weights_only=False``, for trusted files: unpickling can run
arbitrary code. ``save(..., weights_only=True)`` refuses such objects instead of pickling them.
``gpucore.serialization.add_safe_globals`` lists classes whose objects the safe format may hold
(``safe_globals``).

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
load on the CPU: every tensor's saved location is ``'cpu'``. ``map_location`` as PyTorch's: a
device (``'vulkan'`` moves them to the Vulkan device), a dict of locations (``{'cpu':
'vulkan'}``; other keys, such as ``'cuda:0'``, never match), or a callable ``fn(tensor, 'cpu')``
returning the tensor to use (None: keep it).

Saving is atomic (``atomic.atomic_write``). Loading validates the whole header before reading any
tensor data, within limits on the header's size, its tensor count and its nesting (``header``:
``max_header_bytes`` and ``max_tensors`` raise them), checks every tensor's checksum, and raises
SerializationError (a ValueError) naming the file and the problem for any corrupt, truncated or
hostile file (in the pickle format, the tensor section is checked the same way; the pickle itself
is trusted); a missing or unreadable path raises the usual OSError.
"""

from __future__ import annotations

import io as _stdio
import json
import pickle

from ..errors import SerializationError
from ..tensor import Tensor
from ..tensor import device as _device
from . import pickle_format
from . import safe_globals as sg
from . import safetensors_format as fmt
from .files import Window, open_source, write_to
from .header import check_limit
from .structure import MAX_DEPTH, Decoder, Encoder

FORMAT_VERSION = "1"
VERSION_KEY = "gpucore.version"
STRUCTURE_KEY = "gpucore.structure"
_OUR_KEYS = (VERSION_KEY, STRUCTURE_KEY, fmt.DIGEST_KEY)  # fmt.CHECKSUM_KEY: since 2026-11
# JSON levels of a structure: a dict node is three ({"dict": [[key, node]]}), a key one more
STRUCTURE_JSON_DEPTH = 3 * MAX_DEPTH + 2
DEFAULT_PROTOCOL = 4  # of the pickle format

__all__ = ["save", "load", "to_bytes", "from_bytes"]


def _plan(obj):
    """Encode ``obj`` and lay out the file; raises before any file is touched."""
    enc = Encoder(sg.allowed())
    try:
        node = enc(obj)
        structure = json.dumps(node, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, RecursionError) as e:  # e.g. an int too long for str()
        if isinstance(e, SerializationError):
            raise
        raise SerializationError(f"cannot save the object: {e}") from None
    metadata = {"format": "pt", VERSION_KEY: FORMAT_VERSION, STRUCTURE_KEY: structure}
    return fmt.prepare(enc.tensors, metadata)


def _writer(obj, weights_only, pickle_module, pickle_protocol):
    """The function that writes ``obj`` to a binary file, in the safe format when it can hold
    ``obj`` (and ``weights_only`` is not False), else in the pickle format."""
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"weights_only must be None, True or False, got {weights_only!r}")
    if weights_only is not False:
        try:
            plan = _plan(obj)
            return lambda f: fmt.write(f, plan)
        except SerializationError as e:
            if weights_only:
                raise
            reason = str(e).removeprefix("cannot save ")
    else:
        reason = "save() was called with weights_only=False"
    pm = pickle if pickle_module is None else pickle_module

    def write(f):
        pickle_format.write(
            f, obj, reason, lambda g, ts: fmt.write(g, _plan(ts)), pm, pickle_protocol
        )

    return write


def save(
    obj,
    f,
    pickle_module=None,
    pickle_protocol: int = DEFAULT_PROTOCOL,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
    *,
    weights_only: bool | None = None,
) -> None:
    """Save ``obj`` to ``f``: a path, or a binary file object open for writing (written from
    its position on), as ``torch.save``.

    Tensors in nested dicts/lists/tuples with plain values (state dicts, checkpoints) go in the
    safe format. Anything else (a whole model, an optimizer object) goes in the pickle format,
    which ``load`` reads only with ``weights_only=False``; ``weights_only=True`` here raises
    SerializationError for such objects instead, ``weights_only=False`` always pickles.
    ``pickle_module`` and ``pickle_protocol`` apply to the pickle format; PyTorch's
    ``_use_new_zipfile_serialization`` and ``_disable_byteorder_record`` are accepted and
    ignored.

    A path is replaced atomically: the data goes to a temporary file next to it
    (``.<name>.<pid>.<random>.tmp``, the name shortened and hashed where a long one would pass the
    file system's name limit) that is renamed over ``path`` once complete. After an exception or
    a crash mid-save, ``path`` still holds its previous content. A crash (kill -9, power loss) can
    leave the temporary file behind: each save first deletes the stale temporaries of the same
    ``path``, never those of other files. A writer keeps its temporary locked (flock); one that
    nobody holds is stale once its pid, on this machine, has exited, or once it has not been
    modified for 15 minutes (``gpucore.io.atomic.STALE_SECONDS``).

    Each tensor's SHA-256 goes into the file (``load`` checks it). Tensors are saved from host
    memory, without ``.grad`` (the pickle format keeps ``requires_grad``).
    """
    write_to(f, _writer(obj, weights_only, pickle_module, pickle_protocol), "save")


def to_bytes(obj, *, weights_only: bool | None = True) -> bytes:
    """The file ``save`` would write, as bytes; by default the safe format only (an object it
    cannot hold raises SerializationError; ``weights_only=None`` pickles it as ``save`` does)."""
    buf = _stdio.BytesIO()
    _writer(obj, weights_only, None, DEFAULT_PROTOCOL)(buf)
    return buf.getvalue()


# ------------------------------------------------------------------------------ map_location
def _to_device(target: str):
    return None if target == "cpu" else (lambda t: t.to(target))


def _mapper(map_location):
    """map_location as a function tensor -> tensor (None: keep them on the CPU); argument errors
    are raised here, before any I/O."""
    if map_location is None:
        return None
    if isinstance(map_location, (str, _device)):
        return _to_device(_device(map_location).type)  # DeviceError for 'cuda' and unknowns
    if isinstance(map_location, dict):
        for k in map_location:
            if not isinstance(k, (str, _device)):
                raise TypeError(f"map_location keys must be device names, got {k!r}")
        hits = [v for k, v in map_location.items() if str(k) == "cpu"]
        if not hits:  # every tensor's location is 'cpu'
            return None
        if not isinstance(hits[0], (str, _device)):
            raise TypeError(f"map_location values must be device names, got {hits[0]!r}")
        return _to_device(_device(hits[0]).type)
    if callable(map_location):

        def call(t):
            out = map_location(t, "cpu")
            if out is None:
                return t
            if not isinstance(out, Tensor):
                raise TypeError(
                    f"map_location(tensor, location) must return a Tensor or None, got "
                    f"{type(out).__name__}"
                )
            return out

        return call
    raise TypeError(
        "map_location must be None, a device ('cpu', 'vulkan', a gpucore.device), a dict of "
        f"locations or a callable, got {type(map_location).__name__}"
    )


# ------------------------------------------------------------------------------ reading
def _find_class(weights_only: bool):
    allowed = sg.allowed()
    if weights_only:
        return allowed.get
    return lambda name: allowed.get(name) or sg.import_class(name)  # a trusted file


def _load(f, size: int, source: str, mapper, limits: dict, find_class=None):
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
        check = Decoder(source, names, find_class=find_class)
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
    if mapper is not None:
        tensors = {k: mapper(t) for k, t in tensors.items()}
    if foreign:
        return tensors
    return _guard(Decoder(source, names, tensors.__getitem__, find_class), structure, source)


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


def _not_ours(source: str, head: bytes) -> SerializationError | None:
    """A clear error for PyTorch's own formats, which gpucore does not read (a safetensors
    header, whose length's first byte may be 0x80 too, starts with '{' at byte 8)."""
    if head[8:9] in (b"{", b" ", b"\t", b"\n", b"\r"):
        return None
    if head.startswith(b"PK\x03\x04"):
        what = "a PyTorch checkpoint (torch.save's zip format)"
    elif head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        what = "a raw pickle (PyTorch's legacy torch.save format, or pickle.dump)"
    else:
        return None
    return SerializationError(
        f"{source}: {what}, which gpucore does not read; in PyTorch, convert it with "
        "safetensors.torch.save_file(torch.load(path), 'model.safetensors') (a state dict) and "
        "load that"
    )


def _read(
    f, size: int, source: str, mapper, limits: dict, weights_only: bool, pickle_module, load_args
):
    """Load from ``f`` (at the data's start, ``size`` bytes on): the pickle format (refused with
    ``weights_only``), a clear error for PyTorch's formats, else the safe format."""
    start = f.tell()
    head = f.read(len(pickle_format.MAGIC))
    f.seek(start)
    if pickle_format.is_pickle_file(head):
        if weights_only:
            info, _ = pickle_format.read_info(f, size, source)
            raise pickle_format.refusal(source, info)

        def tensors(g, n):  # the tensor section: a safe-format file of its own from here
            return _load(Window(g, g.tell()), n, source, mapper, limits)

        pm = pickle if pickle_module is None else pickle_module
        return pickle_format.read(f, size, source, tensors, pm, **load_args)
    err = _not_ours(source, head)
    if err is not None:
        raise err
    return _load(f, size, source, mapper, limits, _find_class(weights_only))


def load(
    f,
    map_location=None,
    pickle_module=None,
    *,
    weights_only: bool | None = True,
    mmap: bool | None = None,
    max_header_bytes=None,
    max_tensors=None,
    **pickle_load_args,
):
    """Load what ``save`` wrote (or any safetensors file) from ``f``: a path, or a binary file
    object open for reading (read from its position to its end), as ``torch.load``.

    ``weights_only=True`` (the default; None means the same) reads only the safe format: a
    pickle-format file raises ``WeightsOnlyError`` (a SerializationError and a
    ``pickle.UnpicklingError``) saying why it was pickled. ``weights_only=False`` also unpickles
    it, running whatever code the file names: only for files you trust. ``pickle_module`` and
    ``pickle_load_args`` (``encoding=...``) apply to that unpickling. ``mmap`` is accepted; the
    data is read into memory either way.

    ``map_location``: None or 'cpu' (the default) gives CPU tensors; 'vulkan', a
    ``gpucore.device``, a dict of locations or a callable as described in the module docstring.
    Raises SerializationError naming the file for any corrupt, truncated or hostile content,
    including a tensor whose bytes do not match the checksum ``save`` stored.

    ``max_header_bytes`` (default ``gpucore.io.header.MAX_HEADER_BYTES``, 100 MB) and
    ``max_tensors`` (default ``gpucore.io.header.MAX_TENSORS``, 100,000) bound the header, so a
    hostile file costs no more time and memory than a legitimate one at the limits; raise them
    for a legitimate file beyond them.
    """
    if weights_only is None:
        weights_only = True
    if not isinstance(weights_only, bool):
        raise TypeError(f"weights_only must be True or False, got {weights_only!r}")
    if weights_only and pickle_module is not None:
        raise TypeError(
            "load(): cannot load weights safely with an explicit pickle_module; pass "
            "weights_only=False with it (for trusted files only)"
        )
    mapper = _mapper(map_location)  # argument errors before any I/O
    limits = _limits(max_header_bytes, max_tensors)
    with open_source(f, "load") as (fh, size, source):
        return _read(
            fh, size, source, mapper, limits, weights_only, pickle_module, pickle_load_args
        )


def from_bytes(
    data, map_location=None, *, weights_only: bool = True, max_header_bytes=None, max_tensors=None
):
    """Load from the bytes of a file (``to_bytes``, or a safetensors file read into memory);
    the arguments are ``load``'s."""
    if not isinstance(weights_only, bool):
        raise TypeError(f"weights_only must be True or False, got {weights_only!r}")
    mapper = _mapper(map_location)
    limits = _limits(max_header_bytes, max_tensors)
    mv = memoryview(data)
    buf = _stdio.BytesIO(data if type(data) is bytes else mv)  # bytes are shared, not copied
    return _read(buf, mv.nbytes, "<bytes>", mapper, limits, weights_only, None, {})
