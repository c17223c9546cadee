"""Hostile headers cost bounded time and memory (gpucore/io/header.py): the header size, the
tensor count, the metadata keys and the nesting depth are capped with SerializationErrors that
name the limit, the file and how to raise it; the member-by-member parser reads every valid header
as json.loads does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpucore
from gpucore.errors import SerializationError
from gpucore.io import from_bytes, header, to_bytes
from gpucore.io import safetensors_format as fmt

ZERO = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}


def raw_file(hdr, data: bytes = b"") -> bytes:
    hb = hdr if isinstance(hdr, bytes) else json.dumps(hdr).encode()
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + data


def many(n: int) -> bytes:
    """A header of ``n`` zero-size tensors, built as text (fast)."""
    body = ",".join(
        f'"t{i:07d}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(n)
    )
    return raw_file(("{" + body + "}").encode())


def test_header_size_limit(tmp_path, monkeypatch):
    data = to_bytes({"w": gpucore.ones(3)})
    n = int.from_bytes(data[:8], "little")
    with pytest.raises(
        SerializationError, match=f"exceeds the {n - 1}-byte limit.*max_header_bytes"
    ):
        from_bytes(data, max_header_bytes=n - 1)
    assert from_bytes(data, max_header_bytes=n)["w"].tolist() == [1, 1, 1]
    monkeypatch.setattr(header, "MAX_HEADER_BYTES", 16)  # the module default, read per call
    p = tmp_path / "small_limit.safetensors"
    p.write_bytes(data)
    with pytest.raises(SerializationError, match="MAX_HEADER_BYTES") as ei:
        gpucore.load(p)
    assert str(p) in str(ei.value)
    assert gpucore.load(p, max_header_bytes=n)["w"].tolist() == [1, 1, 1]


def test_tensor_count_limit_at_and_past_the_limit():
    assert len(from_bytes(many(50), max_tensors=50)) == 50
    with pytest.raises(SerializationError, match="more than 49 tensors.*max_tensors="):
        from_bytes(many(50), max_tensors=49)
    meta = raw_file({"__metadata__": {"a": "b"}, "t": ZERO})  # __metadata__ is not a tensor
    assert list(from_bytes(meta, max_tensors=1)) == ["t"]


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _refused(data: bytes, limit: int):
    def run():
        with pytest.raises(SerializationError, match=f"more than {limit} tensors"):
            from_bytes(data, max_tensors=limit)

    return run


def test_a_huge_entry_count_is_refused_in_bounded_memory(monkeypatch):
    """The issue's hostile file, scaled: a count of the raw bytes refuses it before parsing;
    where that count cannot tell (entries written with escapes, say), the parser stops at the
    limit. Memory: the header's bytes (and text), plus the entries up to the limit."""
    data = many(300_000)  # 17 MB of header
    assert _peak(_refused(data, 1000)) < 1.1 * len(data) + (1 << 20)
    _refused(data, header.MAX_TENSORS)()
    monkeypatch.setattr(header, "precheck", lambda *a: None)
    assert _peak(_refused(data, 1000)) < 2.2 * len(data) + (4 << 20)
    evasive = data.replace(b'"data_offsets"', b'"data_offset\\u0073"')
    assert _peak(_refused(evasive, 1000)) < 2.2 * len(evasive) + (4 << 20)


def test_metadata_key_limit(monkeypatch):
    monkeypatch.setattr(header, "MAX_METADATA_KEYS", 3)
    assert from_bytes(raw_file({"__metadata__": {"a": "1", "b": "2", "c": "3"}})) == {}
    with pytest.raises(SerializationError, match="more than 3 __metadata__ keys.*MAX_METADATA"):
        from_bytes(raw_file({"__metadata__": {k: "v" for k in "abcd"}}))


@pytest.mark.parametrize(
    "hdr, match",
    [
        (b'{"t": {"dtype": ' + b"[" * 40 + b"]" * 40 + b"}}", "levels deep"),
        (b'{"t": ' + b"[" * 5000 + b"]" * 5000 + b"}", "levels deep"),
        (b'{"t": {"dtype": "F32", "shape": [' + b"0," * 3000 + b'0], "x": 1}}', "longer than"),
        (b'{"__metadata__": {"k": ["v"]}}', "strings to strings"),
        (b'{"__metadata__": {"k": "v",}}', "not valid JSON"),
        (b'{"t": {"dtype": "F32", "dtype": "F32"}}', "more than once"),
        (b'{"__metadata__": {}, "__metadata__": {}}', "more than once"),
        (b'{"__metadata__": {"k": "a", "k": "b"}}', "more than once"),
        (b'{"t": {}, }', "not valid JSON"),
        (b'{"t": {}} {', "not valid JSON"),
        (b'{"t\x01": {}}', "not valid JSON"),
    ],
)
def test_malformed_headers(hdr, match):
    with pytest.raises(SerializationError, match=match):
        from_bytes(raw_file(hdr))


def test_limit_arguments_are_checked():
    data = to_bytes({})
    for bad, exc in [(-1, ValueError), ("10", TypeError), (True, TypeError), (1.0, TypeError)]:
        with pytest.raises(exc, match="max_tensors"):
            from_bytes(data, max_tensors=bad)
        with pytest.raises(exc, match="max_header_bytes"):
            gpucore.load("/nonexistent/never/read", max_header_bytes=bad)


def test_deep_nesting_is_refused_even_with_a_huge_recursion_limit(tmp_path):
    """The depth is counted before json.loads recurses: a raised recursion limit cannot turn a
    hostile file into a C stack overflow."""
    deep_structure = tmp_path / "structure.safetensors"
    structure = "[" * 200_000 + "]" * 200_000
    meta = {"gpucore.version": "1", "gpucore.structure": structure}
    meta[fmt.DIGEST_KEY] = fmt.digest(meta, [])
    hdr = {"__metadata__": meta}
    deep_structure.write_bytes(raw_file(hdr))
    deep_entry = tmp_path / "entry.safetensors"
    deep_entry.write_bytes(raw_file(b'{"t": ' + b"[" * 4000 + b"]" * 4000 + b"}"))
    script = textwrap.dedent(
        f"""
        import sys
        sys.setrecursionlimit(10**8)
        import gpucore
        for p in ({str(deep_structure)!r}, {str(deep_entry)!r}):
            try:
                gpucore.load(p)
            except gpucore.SerializationError as e:
                print("refused:", e)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("refused:") == 2 and "levels deep" in r.stdout, r.stdout


_name = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=6).filter(
    lambda s: s != "__metadata__"
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(_name, min_size=0, max_size=5, unique=True),
    meta=st.one_of(st.none(), st.dictionaries(_name, st.text(max_size=5), max_size=3)),
    meta_at=st.integers(0, 5),
    indent=st.sampled_from([None, 0, 1, "\t"]),
    ascii_only=st.booleans(),
)
def test_the_parser_reads_valid_headers_as_json_does(names, meta, meta_at, indent, ascii_only):
    """Any formatting of a valid header (whitespace, escapes, braces in names, metadata
    anywhere or null) loads the tensors json.loads finds, in header order."""
    items = [
        (n, {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]}) for i, n in enumerate(names)
    ]
    items.insert(min(meta_at, len(items)), ("__metadata__", meta))
    text = json.dumps(dict(items), indent=indent, ensure_ascii=ascii_only)
    out = from_bytes(raw_file(text.encode("utf-8")) + bytes(range(len(names))))
    assert list(out) == names
    assert [t.tolist() for t in out.values()] == [[i] for i in range(len(names))]
