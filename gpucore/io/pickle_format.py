"""gpucore's pickle format: what ``gpucore.save`` writes for objects the safe format cannot hold
(a whole ``nn.Module``, an optimizer, numpy arrays, sets), and what only
``gpucore.load(..., weights_only=False)`` reads.

Unpickling runs whatever code the file names, so a pickle file is only as safe as its source.
The format is kept apart from the safe one: it starts with MAGIC, which no safetensors file can
start with (its first 8 bytes, read as a header length, would be far beyond any limit), and
``load`` refuses it unless called with ``weights_only=False`` (``WeightsOnlyError``, naming why
the file was saved as a pickle).

    [16 bytes]  MAGIC
    [8 bytes]   L, little-endian; [L bytes] UTF-8 JSON: {"version": 1, "reason": str}
    [8 bytes]   P, little-endian; [P bytes] the pickle, tensors replaced by references
    [rest]      a safetensors file (the safe format) holding those tensors, as a list

Tensors (Parameters and other subclasses too) are pickled as references (``persistent_id``)
to the tensor section, so their bytes are checksummed and read by the safe reader, and
``map_location`` applies to them. Each comes back as a fresh leaf of its class with its
``requires_grad``, on the CPU unless ``map_location`` says otherwise (as the safe format:
tensors are saved from host memory). ``.grad`` and the autograd graph are not saved.
"""

from __future__ import annotations

import io as _stdio
import json
import pickle

from ..errors import SerializationError
from ..tensor import Tensor, as_leaf
from .header import short

MAGIC = b"\x93GPUCORE-PICKLE\n"
VERSION = 1
_MAX_INFO = 1 << 16


class WeightsOnlyError(SerializationError, pickle.UnpicklingError):
    """``load(weights_only=True)`` met a file that needs unpickling: a SerializationError, and
    the ``pickle.UnpicklingError`` PyTorch raises there."""


def is_pickle_file(head: bytes) -> bool:
    """Whether the first bytes of a file are those of the pickle format."""
    return head.startswith(MAGIC)


def write(f, obj, reason: str, write_tensors, pickle_module=pickle, protocol: int = 4) -> None:
    """Write ``obj`` to the binary file ``f``; ``write_tensors(f, tensors)`` writes the tensor
    section (the safe format, from the caller)."""
    tensors: list = []
    index: dict[int, int] = {}
    base = getattr(pickle_module, "Pickler", pickle.Pickler)

    class _Pickler(base):
        def persistent_id(self, o):
            if not isinstance(o, Tensor):
                return None
            i = index.get(id(o))
            if i is None:
                i = index[id(o)] = len(tensors)
                tensors.append(o)
            state = getattr(o, "__dict__", None) or None
            return ("tensor", i, type(o), bool(o._requires_grad), state)

    buf = _stdio.BytesIO()
    try:
        _Pickler(buf, protocol=protocol).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
        raise SerializationError(f"cannot save the object: {type(e).__name__}: {e}") from None
    info = json.dumps({"version": VERSION, "reason": reason[:2000]}).encode("utf-8")
    f.write(MAGIC)
    f.write(len(info).to_bytes(8, "little"))
    f.write(info)
    f.write(buf.getbuffer().nbytes.to_bytes(8, "little"))
    f.write(buf.getbuffer())
    write_tensors(f, [t.detach() for t in tensors])


def _read_exact(f, n: int, source: str, what: str) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise SerializationError(f"{source}: file ended while reading {what} (truncated)")
    return b


def read_info(f, size: int, source: str) -> tuple[dict, int]:
    """The info of a pickle file positioned at its start: (info dict, bytes read so far)."""
    _read_exact(f, len(MAGIC), source, "the magic number")
    n = int.from_bytes(_read_exact(f, 8, source, "the info length"), "little")
    if n > _MAX_INFO:
        raise SerializationError(f"{source}: gpucore pickle file with a corrupt info length {n}")
    if n > size - len(MAGIC) - 8:
        raise SerializationError(f"{source}: gpucore pickle file truncated (in its info block)")
    try:
        info = json.loads(_read_exact(f, n, source, "the info").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("reason", ""), str):
        raise SerializationError(f"{source}: gpucore pickle file with a corrupt info block")
    return info, len(MAGIC) + 8 + n


def refusal(source: str, info: dict) -> WeightsOnlyError:
    why = "".join(c if c.isprintable() else "?" for c in (info.get("reason") or "unknown")[:300])
    return WeightsOnlyError(
        f"{source}: this file holds pickled Python objects (gpucore's pickle format; it was saved "
        f"as one: {why}). Unpickling can run arbitrary code, so gpucore.load "
        "refuses it with weights_only=True, the default. If, and only if, you trust where the "
        "file comes from, load it with gpucore.load(..., weights_only=False). Otherwise ask for "
        "a state_dict checkpoint, which loads safely (gpucore.serialization.add_safe_globals "
        "lets objects of listed classes into the safe format)."
    )


def read(f, size: int, source: str, read_tensors, pickle_module=pickle, **pickle_load_args):
    """Unpickle a pickle file (trusted: ``weights_only=False``); ``read_tensors(f, size)``
    reads the tensor section at the file's position (the safe reader, with map_location)."""
    info, pos = read_info(f, size, source)
    if info.get("version") != VERSION:
        raise SerializationError(
            f"{source}: gpucore pickle format version {short(info.get('version'))}; this gpucore "
            f"reads version {VERSION} (saved by a newer gpucore?)"
        )
    p = int.from_bytes(_read_exact(f, 8, source, "the pickle length"), "little")
    if p > size - pos - 8:
        raise SerializationError(f"{source}: gpucore pickle file truncated (pickle of {p} bytes)")
    data = _read_exact(f, p, source, "the pickle")
    tensors = read_tensors(f, size - pos - 8 - p)
    if not isinstance(tensors, list):
        raise SerializationError(f"{source}: the tensor section of a pickle file is not a list")
    made: dict = {}
    base = getattr(pickle_module, "Unpickler", pickle.Unpickler)

    class _Unpickler(base):
        def persistent_load(self, pid):
            if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "tensor"):
                raise pickle.UnpicklingError(f"unknown persistent id {short(pid)}")
            _, i, cls, requires_grad, state = pid
            if i not in made:
                if not (isinstance(i, int) and 0 <= i < len(tensors)):
                    raise pickle.UnpicklingError(f"tensor reference {short(i)} out of range")
                if not (isinstance(cls, type) and issubclass(cls, Tensor)):
                    raise pickle.UnpicklingError(f"{short(cls)} is not a tensor class")
                t = as_leaf(cls, tensors[i], requires_grad and tensors[i].is_floating_point())
                if state:
                    t.__dict__.update(state)
                made[i] = t
            return made[i]

    return _Unpickler(_stdio.BytesIO(data), **pickle_load_args).load()
