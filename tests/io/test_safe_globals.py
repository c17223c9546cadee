"""gpucore.serialization's allow-list (gpucore/io/safe_globals.py and the structure's "object"
nodes): add_safe_globals / safe_globals / get_safe_globals / clear_safe_globals as PyTorch's,
objects of listed classes in the safe format, refused unless listed at load time, hostile or
malformed object nodes refused without importing or calling anything."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import io
import json

import pytest
from serialization_helpers import read_header

import gpucore
from gpucore.errors import SerializationError
from gpucore.io import from_bytes, to_bytes
from gpucore.io import safetensors_format as fmt
from gpucore.serialization import (
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass
class Config:
    lr: float
    layers: list
    name: str = "net"


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


class Custom:
    """A reduction calling another function: never in the safe format."""

    def __reduce__(self):
        return (dict, ())


@pytest.fixture(autouse=True)
def _empty_list():
    clear_safe_globals()
    yield
    clear_safe_globals()


def _checkpoint():
    return {
        "args": argparse.Namespace(lr=0.1, layers=[2, 3], device="cpu"),
        "color": Color.BLUE,
        "cfg": Config(0.5, [1, 2]),
        "slots": Slotted(1, gpucore.ones(2)),
        "w": gpucore.arange(3.0),
    }


def test_the_list_functions():
    assert get_safe_globals() == []
    add_safe_globals([Config, (Color, "my.Color")])
    add_safe_globals([Config])  # once only
    assert get_safe_globals() == [Config, (Color, "my.Color")]
    with safe_globals([argparse.Namespace]):
        assert get_safe_globals() == [Config, (Color, "my.Color"), argparse.Namespace]
    assert get_safe_globals() == [Config, (Color, "my.Color")]
    clear_safe_globals()
    assert get_safe_globals() == []
    with pytest.raises(TypeError):
        add_safe_globals(Config)  # a list is needed
    with pytest.raises(TypeError):
        add_safe_globals([(Config, 3)])
    add_safe_globals([print])  # not a class: kept, without effect (as a numpy reconstructor)
    assert get_safe_globals() == [print]


def test_listed_objects_round_trip_in_the_safe_format():
    obj = _checkpoint()
    classes = [argparse.Namespace, Color, Config, Slotted]
    with safe_globals(classes):
        data = to_bytes(obj)  # the safe format: to_bytes refuses anything else
        back = from_bytes(data)
    assert back["args"] == obj["args"] and back["color"] is Color.BLUE
    assert back["cfg"] == obj["cfg"] and back["w"].tolist() == [0.0, 1.0, 2.0]
    assert back["slots"].a == 1 and back["slots"].b.tolist() == [1.0, 1.0]
    structure = read_header(data)["__metadata__"]["gpucore.structure"]
    assert '"class":"argparse.Namespace"' in structure


def test_unlisted_at_load_time_is_refused_naming_the_class(tmp_path):
    with safe_globals([argparse.Namespace]):
        gpucore.save({"args": argparse.Namespace(lr=1)}, tmp_path / "c.pt")
    with pytest.raises(SerializationError, match=r"argparse\.Namespace.*add_safe_globals"):
        gpucore.load(tmp_path / "c.pt")
    add_safe_globals([argparse.Namespace])
    assert gpucore.load(tmp_path / "c.pt")["args"].lr == 1
    clear_safe_globals()
    # a trusted file: weights_only=False imports the named class
    assert gpucore.load(tmp_path / "c.pt", weights_only=False)["args"].lr == 1


def test_unlisted_objects_make_save_pickle(tmp_path):
    p = tmp_path / "c.pt"
    gpucore.save({"args": argparse.Namespace(lr=1)}, p)
    with pytest.raises(gpucore.serialization.WeightsOnlyError, match="Namespace"):
        gpucore.load(p)
    assert gpucore.load(p, weights_only=False)["args"].lr == 1


def test_listed_class_with_a_custom_reduction_is_not_in_the_safe_format():
    with safe_globals([Custom]), pytest.raises(SerializationError, match="not plain data"):
        to_bytes({"c": Custom()})


def test_renamed_entries():
    with safe_globals([(Config, "settings.Config")]):
        data = to_bytes(Config(1.0, []))
        assert from_bytes(data) == Config(1.0, [])
    assert "settings.Config" in read_header(data)["__metadata__"]["gpucore.structure"]


# ------------------------------------------------------------------------------ hostile nodes
def _with_structure(node) -> bytes:
    """A file of one tensor whose structure is ``node`` (checksums recomputed: a crafted file)."""
    meta = {"format": "pt", "gpucore.version": "1", "gpucore.structure": json.dumps(node)}
    buf = io.BytesIO()
    fmt.write(buf, fmt.prepare({"t": gpucore.ones(1)}, meta))
    return buf.getvalue()


@pytest.mark.parametrize(
    "obj, match",
    [
        ({"class": "os.system", "call": ["echo pwned"]}, "os.system"),
        ({"class": "builtins.eval", "call": ["1"]}, "builtins.eval"),
        ({"class": "argparse.Namespace", "new": [], "state": 3}, "argparse.Namespace"),
    ],
)
def test_unlisted_classes_are_never_imported_or_called(obj, match):
    data = _with_structure([{"tensor": "t"}, {"object": obj}])
    with pytest.raises(SerializationError, match=match):
        from_bytes(data)


@pytest.mark.parametrize(
    "obj, match",
    [
        ({"class": "argparse.Namespace"}, "malformed"),
        ({"class": 3, "new": []}, "malformed"),
        ({"class": "argparse.Namespace", "new": [], "call": []}, "malformed"),
        ({"class": "argparse.Namespace", "new": [], "extra": 1}, "malformed"),
        ({"class": "argparse.Namespace", "new": {"dict": []}}, "must be a list"),
        ({"class": "argparse.Namespace", "new": [], "state": 3}, "cannot rebuild"),
        ({"class": "argparse.Namespace", "new": [], "state": {"dict": [[1, 2]]}}, "str keys"),
        ({"class": "argparse.Namespace", "new": [{"tensor": "nope"}]}, "lacks"),
    ],
)
def test_malformed_object_nodes(obj, match):
    data = _with_structure([{"tensor": "t"}, {"object": obj}])
    with safe_globals([argparse.Namespace]), pytest.raises(SerializationError, match=match):
        from_bytes(data)


def test_same_calls_as_torch(tmp_path):
    torch = pytest.importorskip("torch")
    for lib in (torch, gpucore):
        lib.serialization.clear_safe_globals()
        with lib.serialization.safe_globals([argparse.Namespace]):
            lib.save({"args": argparse.Namespace(lr=2)}, tmp_path / "a.pt")
            assert lib.load(tmp_path / "a.pt")["args"].lr == 2
        lib.serialization.add_safe_globals([argparse.Namespace])
        assert lib.serialization.get_safe_globals() == [argparse.Namespace]
        assert lib.load(tmp_path / "a.pt", weights_only=True)["args"].lr == 2
        lib.serialization.clear_safe_globals()
        with pytest.raises(Exception, match="Namespace"):
            lib.load(tmp_path / "a.pt")
