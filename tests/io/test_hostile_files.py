"""Hostile and corrupted files: whatever the bytes, gpucore.load and from_bytes raise
SerializationError (naming the file) and allocate nothing up front, or load a valid file. Covers a
table of hand-made malformed headers and structure nodes, the header digest, non-regular paths,
truncation at every byte, every byte flipped, and hypothesis fuzzing of headers, structures and
raw bytes."""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serialization_helpers import read_header, sample_object

import gpucore
from gpucore.errors import GpucoreError, SerializationError
from gpucore.io import from_bytes, to_bytes
from gpucore.io import safetensors_format as fmt
from gpucore.tensor import Tensor

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------ hostile files
def raw_file(header, data: bytes = b"", length=None) -> bytes:
    hb = header if isinstance(header, bytes) else json.dumps(header).encode()
    return (len(hb) if length is None else length).to_bytes(8, "little") + hb + data


def gc_file(structure, tensors: dict | None = None, data: bytes = b"", **meta) -> bytes:
    """A gpucore file with a hand-written structure node and a valid digest."""
    tensors = tensors or {}
    metadata = {
        "gpucore.version": "1",
        "gpucore.structure": structure if isinstance(structure, str) else json.dumps(structure),
    }
    metadata.update(meta)
    entries = [
        fmt.Entry(k, fmt.FROM_ST[v["dtype"]], tuple(v["shape"]), *v["data_offsets"])
        for k, v in tensors.items()
    ]
    metadata[fmt.DIGEST_KEY] = fmt.digest(metadata, entries)
    return raw_file({"__metadata__": metadata, **tensors}, data)


T4 = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}


def _t(dtype="F32", shape=(1,), offs=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


HOSTILE = [
    (b"", "truncated"),
    (b"\x01\x00\x00", "truncated"),
    ((2**64 - 1).to_bytes(8, "little") + b"{}", "exceeds"),
    ((100_000_001).to_bytes(8, "little") + b"{}", "exceeds"),
    ((50).to_bytes(8, "little") + b"{}", "runs past the end of the file"),
    (raw_file(b""), "does not start with"),
    (raw_file(b"[]"), "does not start with"),
    (raw_file(b"{\xff}"), "UTF-8"),
    (raw_file(b"{"), "not valid JSON"),
    (raw_file(b'{"a": NaN}'), "not valid JSON"),
    (raw_file(b'{"a": 1} trailing'), "not valid JSON"),
    (raw_file(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), "not valid JSON"),
    (raw_file(b'{"a": ' + b"9" * 5000 + b"}"), "not valid JSON"),
    (raw_file(b'{"t": {}, "t": {}}'), "more than once"),
    (raw_file({"t": 5}), "not an object"),
    (raw_file({"t": {"dtype": "F32", "shape": [1]}}), "missing"),
    (raw_file({"t": dict(T4, extra=1)}, b"\0" * 4), "unexpected"),
    (raw_file({"t": _t("F128")}, b"\0" * 4), "unknown dtype"),
    (raw_file({"t": _t(7)}, b"\0" * 4), "dtype must be a string"),
    (raw_file({"t": _t("C64", (2,))}, b"\0" * 16), "no gpucore equivalent"),
    (raw_file({"t": _t(shape=(-1,))}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": _t(shape=(1.0,))}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": _t(shape=(True,))}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": dict(T4, shape="1")}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": _t(shape=(1,) * 9)}, b"\0" * 4), "at most 8"),
    (raw_file({"t": _t(shape=(0, 2**62, 2**62), offs=(0, 0))}), "too large"),
    (raw_file({"t": _t(shape=(2**70,), offs=(0, 2**72))}), "too large"),
    (raw_file({"t": dict(T4, data_offsets=[0])}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": dict(T4, data_offsets=[0, 4, 8])}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": dict(T4, data_offsets=[0.0, 4])}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": dict(T4, data_offsets={"0": 4})}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": _t(offs=(-4, 0))}, b"\0" * 4), "0 <= begin <= end"),
    (raw_file({"t": _t(shape=(0,), offs=(4, 0))}, b"\0" * 4), "0 <= begin <= end"),
    (raw_file({"t": _t(shape=(3,), offs=(0, 4))}, b"\0" * 4), "needs 12"),
    (raw_file({"t": T4}, b"\0" * 3), "run past the end of the data"),
    (raw_file({"t": _t(offs=(2**63, 2**63 + 4))}, b"\0" * 4), "run past the end of the data"),
    (raw_file({"t": T4, "u": _t(offs=(2, 6))}, b"\0" * 6), "overlaps"),
    (raw_file({"t": T4, "u": T4}, b"\0" * 4), "overlaps"),
    (raw_file({"t": _t(offs=(4, 8))}, b"\0" * 8), "unused bytes before"),
    (raw_file({"t": T4}, b"\0" * 5), "unused bytes after"),
    (raw_file({}, b"\0"), "unused bytes after"),
    (raw_file({"__metadata__": []}), "__metadata__"),
    (raw_file({"__metadata__": {"k": 1}}), "__metadata__"),
    (raw_file({"__metadata__": {"gpucore.version": "1"}}), "lacks"),
    (gc_file({"tensor": "nope"}), "which the file lacks"),
    (gc_file(None, {"t": T4}, b"\0" * 4), "not referenced"),
    (gc_file({"what": 1}), "unknown node"),
    (gc_file({"tuple": 1}), "tuple node"),
    (gc_file({"dict": [[1, 2, 3]]}), "pair"),
    (gc_file({"dict": [[[1], 2]]}), "not a plain value"),
    (gc_file({"dict": [[1, 2], [1, 3]]}), "appears twice"),
    (gc_file({"float": "0x3ff0000000000000"}), "non-finite float"),
    (gc_file({"float": "0x7ff8000000000zzz"}), "non-finite float"),
    (gc_file({"a": 1, "b": 2}), "unexpected node"),
    (gc_file("[1e999]"), "out of range"),
    (gc_file("[" * 150 + "]" * 150), "deeper"),
    (gc_file("[" * 100_000 + "]" * 100_000), "not valid JSON"),
    (gc_file("{"), "not valid JSON"),
    (gc_file(1, **{"gpucore.version": "2"}), "format version"),
]


@pytest.mark.parametrize("data, match", HOSTILE, ids=[m for _, m in HOSTILE])
def test_hostile_files_raise_serialization_error(data, match, tmp_path):
    with pytest.raises(SerializationError, match=match):
        from_bytes(data)
    p = tmp_path / "hostile.safetensors"
    p.write_bytes(data)
    with pytest.raises(SerializationError, match=match) as ei:
        gpucore.load(p)
    assert str(p) in str(ei.value)  # names the file
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, GpucoreError)


def test_bool_bytes_normalised_and_null_metadata_accepted():
    data = raw_file({"__metadata__": None, "m": _t("BOOL", (3,), (0, 3))}, b"\x00\x02\xff")
    out = from_bytes(data)["m"]
    assert out.tolist() == [False, True, True]
    assert out._host().view(np.uint8).tolist() == [0, 1, 1]


def test_load_from_a_deep_stack_never_leaks_recursion_error():
    data = to_bytes(functools.reduce(lambda acc, _: [acc], range(95), [gpucore.ones(1)]))

    def deep(n):
        if n:
            return deep(n - 1)
        try:
            from_bytes(data)
        except SerializationError:
            pass

    for n in (0, 300, 600, 800, 900):
        deep(n)


def test_digest_detects_header_edits():
    data = to_bytes({"t": gpucore.ones(2)})
    hb = data[8 : 8 + int.from_bytes(data[:8], "little")]
    edited = hb.replace(b'"F32"', b'"I32"')
    assert edited != hb
    with pytest.raises(SerializationError, match="checksum"):
        from_bytes(data[:8] + edited + data[8 + len(hb) :])


def test_huge_claims_allocate_nothing():
    import tracemalloc

    tracemalloc.start()
    for data in [
        (2**63).to_bytes(8, "little"),
        (99_999_999).to_bytes(8, "little") + b"{}",
        raw_file({"t": _t(shape=(2**20, 2**20), offs=(0, 2**42))}),
    ]:
        with pytest.raises(SerializationError):
            from_bytes(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 << 20


def test_non_regular_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        gpucore.load(tmp_path / "missing")
    with pytest.raises(SerializationError, match="not a regular file"):
        gpucore.load(tmp_path)
    if hasattr(os, "mkfifo"):  # opening a FIFO for reading would block forever
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(SerializationError, match="not a regular file"):
            gpucore.load(fifo)
    if os.path.exists("/dev/zero"):
        with pytest.raises(SerializationError, match="not a regular file"):
            gpucore.load("/dev/zero")


# ------------------------------------------------------------------------------ corruption
SAMPLE = to_bytes(sample_object())
SAMPLE_HEADER_END = 8 + int.from_bytes(SAMPLE[:8], "little")


def check_corrupted(data: bytes):
    """Loading corrupted bytes: SerializationError, or (a change in tensor data only, or one the
    header's meaning ignores, like padding whitespace) a load whose header matches the original."""
    diff = [i for i, (x, y) in enumerate(zip(data, SAMPLE)) if x != y]
    first_changed = diff[0] if diff else len(SAMPLE)
    try:
        out = from_bytes(data)
    except SerializationError:
        return
    again = to_bytes(out)
    if first_changed < SAMPLE_HEADER_END:
        assert again == SAMPLE, "a header change loaded as something else"
    else:
        assert again[:SAMPLE_HEADER_END] == SAMPLE[:SAMPLE_HEADER_END]


def test_truncation_at_every_byte(tmp_path):
    for cut in range(len(SAMPLE)):
        with pytest.raises(SerializationError):
            from_bytes(SAMPLE[:cut])
    hdr = read_header(SAMPLE)
    bounds = {0, 4, 7, 8, 9, SAMPLE_HEADER_END - 1, SAMPLE_HEADER_END}
    for v in hdr.values():
        if "data_offsets" in v:
            bounds.update(SAMPLE_HEADER_END + o for o in v["data_offsets"])
    bounds.discard(len(SAMPLE))
    p = tmp_path / "cut.safetensors"
    for cut in sorted(bounds):
        p.write_bytes(SAMPLE[:cut])
        with pytest.raises(SerializationError, match="cut.safetensors"):
            gpucore.load(p)
    with pytest.raises(SerializationError, match="unused bytes after"):
        from_bytes(SAMPLE + b"\0")


def test_every_byte_flipped_once():
    rng = np.random.default_rng(0)
    masks = rng.integers(1, 256, len(SAMPLE))
    for pos, m in enumerate(masks):
        b = bytearray(SAMPLE)
        b[pos] ^= int(m)
        check_corrupted(bytes(b))


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(1, 255)), min_size=1, max_size=8
    )
)
def test_random_byte_flips(flips):
    b = bytearray(SAMPLE)
    for pos, m in flips:
        b[pos] ^= m
    check_corrupted(bytes(b))


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["F32", "BF16", "BOOL", "U16", "t", "inf", "nan"]),
)
_json = st.recursive(
    _json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(
            st.sampled_from(
                ["tensor", "tuple", "dict", "odict", "float", "dtype", "shape", "data_offsets", "x"]
            ),
            kids,
            max_size=3,
        ),
    ),
    max_leaves=20,
)
_int = st.one_of(st.integers(-3, 40), st.integers(-(2**64), 2**66), st.sampled_from([2**63 - 1]))
_entry = st.fixed_dictionaries(
    {
        "dtype": st.one_of(
            st.sampled_from(
                ["F32", "F64", "F16", "BF16", "I8", "U8", "I32", "I64", "BOOL", "U16", "XX", ""]
            ),
            _json_leaf,
        ),
        "shape": st.one_of(st.lists(_int, max_size=9), _json),
        "data_offsets": st.one_of(st.lists(_int, min_size=2, max_size=2), _json),
    }
)


@FUZZ
@given(
    entries=st.dictionaries(st.text(max_size=4), st.one_of(_entry, _json), max_size=4),
    meta=st.one_of(st.none(), _json, st.dictionaries(st.text(max_size=4), st.text(max_size=4))),
    data_len=st.integers(0, 80),
    length=st.one_of(st.none(), st.integers(0, 2**64 - 1)),
)
def test_hostile_headers_fuzz(entries, meta, data_len, length):
    header = dict(entries)
    if meta is not None:
        header["__metadata__"] = meta
    data = raw_file(header, bytes(range(data_len)), length)
    try:
        out = from_bytes(data)
    except SerializationError:
        return
    assert isinstance(out, dict)  # a valid foreign safetensors file: a flat dict of tensors
    assert all(isinstance(t, Tensor) for t in out.values())


@FUZZ
@given(structure=_json, with_tensor=st.booleans())
def test_hostile_structure_fuzz(structure, with_tensor):
    tensors = {"t": T4} if with_tensor else {}
    data = gc_file(structure, tensors, b"\0\0\x80\x3f" if with_tensor else b"")
    try:
        from_bytes(data)
    except SerializationError:
        pass


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes(blob):
    for data in (blob, len(blob[8:]).to_bytes(8, "little") + blob[8:]):
        try:
            from_bytes(data)
        except SerializationError:
            pass
