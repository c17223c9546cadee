"""Per-tensor checksums (gpucore/io/checksum.py): gpucore.save writes each tensor's SHA-256 into
the metadata (``gpucore.tensor_sha256``), guarded by the header digest; gpucore.load checks them
and names the corrupt tensor and the file; files without them (other writers, older gpucore)
still load; other safetensors readers ignore them."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from serialization_helpers import assert_same, read_header, sample_object

import gpucore
from gpucore.errors import SerializationError
from gpucore.io import checksum, from_bytes, to_bytes
from gpucore.io import safetensors_format as fmt

KEY = fmt.CHECKSUM_KEY


def _split(data: bytes):
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _join(header: dict, body: bytes, fix_digest: bool = True) -> bytes:
    """A file from a header and a body, with the header digest recomputed (as a file whose
    header was written that way, not corrupted)."""
    meta = header["__metadata__"]
    if fix_digest:
        entries = [
            fmt.Entry(k, fmt.FROM_ST[v["dtype"]], tuple(v["shape"]), *v["data_offsets"])
            for k, v in header.items()
            if k != "__metadata__"
        ]
        meta[fmt.DIGEST_KEY] = fmt.digest(meta, entries)
    hb = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + body


def test_each_tensor_carries_the_sha256_of_its_bytes():
    data = to_bytes(sample_object())
    header, body = _split(data)
    sums = json.loads(header["__metadata__"][KEY])
    names = [k for k in header if k != "__metadata__"]
    assert sorted(sums) == sorted(names)
    for name in names:  # verifiable with hashlib alone
        b, e = header[name]["data_offsets"]
        assert sums[name] == hashlib.sha256(body[b:e]).hexdigest(), name


def test_a_flipped_bit_in_any_tensor_names_the_tensor_and_the_file(tmp_path):
    data = to_bytes(sample_object())
    header, body = _split(data)
    start = len(data) - len(body)
    rng = np.random.default_rng(0)
    p = tmp_path / "ckpt.safetensors"
    checked = 0
    for name, v in header.items():
        if name == "__metadata__" or v["data_offsets"][0] == v["data_offsets"][1]:
            continue
        b = bytearray(data)
        b[start + int(rng.integers(*v["data_offsets"]))] ^= 1 << int(rng.integers(8))
        p.write_bytes(bytes(b))
        with pytest.raises(SerializationError, match="checksum") as ei:
            gpucore.load(p)
        assert repr(name) in str(ei.value) and str(p) in str(ei.value)
        checked += 1
    assert checked >= 10


def test_large_tensors_are_hashed_in_parallel_and_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(checksum, "MAX_QUEUED", 3 << 20)  # the producer also waits for workers
    n = checksum.PARALLEL_MIN // 4 + 1000
    obj = {f"w{i}": gpucore.from_numpy(np.full(n, float(i), np.float32)) for i in range(6)}
    obj["small"] = gpucore.ones(3)
    p = tmp_path / "big.safetensors"
    gpucore.save(obj, p)
    assert p.read_bytes() == to_bytes(obj)
    assert_same(gpucore.load(p), obj)
    b = bytearray(p.read_bytes())
    b[-100] ^= 4  # the last large tensor in the file
    p.write_bytes(bytes(b))
    with pytest.raises(SerializationError, match="'w[0-5]'.*checksum"):
        gpucore.load(p)


def test_saving_reads_each_tensor_once(monkeypatch):
    calls = []
    real = fmt._payload
    monkeypatch.setattr(fmt, "_payload", lambda t: calls.append(t) or real(t))
    obj = {"a": gpucore.ones(5), "b": gpucore.zeros(2, 2).t(), "c": gpucore.tensor(1)}
    data = to_bytes(obj)
    assert len(calls) == 3
    assert_same(from_bytes(data), obj)


def test_files_without_checksums_still_load():
    obj = sample_object()
    header, body = _split(to_bytes(obj))
    del header["__metadata__"][KEY]  # as gpucore wrote files before the checksums
    assert_same(from_bytes(_join(header, body)), obj)
    foreign = {k: v for k, v in header.items() if k != "__metadata__"}
    foreign["__metadata__"] = {"format": "pt"}
    out = from_bytes(_join(foreign, body, fix_digest=False))  # another writer's file
    assert sorted(out) == sorted(k for k in header if k != "__metadata__")


@pytest.mark.parametrize(
    "table, match",
    [
        ("not json", "not valid JSON"),
        ("[]", "hex digests"),
        ('{"a": "00"}', "hex digests"),
        ('{"a": ' + '"' + "G" * 64 + '"}', "hex digests"),
        ("{}", "disagree"),
        ('{"a": "' + "0" * 64 + '", "zz": "' + "0" * 64 + '"}', "disagree"),
        ('{"a": {"b": 1}}', "levels deep"),
    ],
)
def test_a_malformed_checksum_table_is_refused(table, match):
    header, body = _split(to_bytes({"a": gpucore.ones(2)}))
    header["__metadata__"][KEY] = table
    with pytest.raises(SerializationError, match=match):
        from_bytes(_join(header, body))


def test_the_header_digest_guards_the_checksums():
    data = to_bytes({"a": gpucore.ones(2)})
    header, body = _split(data)
    sums = json.loads(header["__metadata__"][KEY])
    sums["a"] = hashlib.sha256(b"other").hexdigest()
    header["__metadata__"][KEY] = json.dumps(sums, separators=(",", ":"))
    with pytest.raises(SerializationError, match="header checksum mismatch"):
        from_bytes(_join(header, body, fix_digest=False))


def test_other_readers_see_the_checksums_as_plain_metadata(tmp_path):
    st = pytest.importorskip("safetensors")
    p = tmp_path / "m.safetensors"
    gpucore.save({"w": gpucore.arange(4).float()}, p)
    with st.safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
        w = f.get_tensor("w")
    assert json.loads(meta[KEY])["w"] == hashlib.sha256(w.tobytes()).hexdigest()
    assert read_header(p.read_bytes())["__metadata__"] == meta
