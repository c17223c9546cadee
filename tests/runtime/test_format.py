"""gpucore.runtime.format: a saved model round-trips, and hostile files raise
SerializationError (never a crash)."""

import json

import numpy as np
import pytest
from runtime_models import block, cnn, eager, rand

import gpucore
from gpucore import SerializationError, runtime


@pytest.fixture
def saved(tmp_path):
    model = block(16, causal=True)
    cm = gpucore.compile(model, (rand(2, 5, 16),), device="cpu", dynamic_axes={"x": {0: "b"}})
    path = tmp_path / "block.gcm"
    cm.save(path)
    return model, cm, path


def test_round_trip(saved):
    model, cm, path = saved
    loaded = runtime.load(path, device="cpu")
    assert loaded.symbols == ["b"] and loaded.input_names == ["x"]
    for batch in (1, 4):
        x = rand(batch, 5, 16, seed=batch)
        np.testing.assert_array_equal(loaded.run_arrays([x])[0], cm.run_arrays([x])[0])
    sess = runtime.InferenceSession(str(path), providers=["cpu"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], eager(model, x), rtol=1e-5, atol=1e-5)


def test_cnn_round_trip(tmp_path):
    cm = gpucore.compile(cnn(), (rand(1, 3, 8, 8),), device="cpu")
    cm.save(tmp_path / "cnn.gcm")
    x = rand(1, 3, 8, 8, seed=3)
    loaded = runtime.load(tmp_path / "cnn.gcm", device="cpu")
    np.testing.assert_array_equal(loaded.run_arrays([x])[0], cm.run_arrays([x])[0])


def test_truncated_and_flipped_files(saved):
    _, _, path = saved
    data = path.read_bytes()
    rng = np.random.default_rng(0)
    bad = path.with_name("bad.gcm")
    for cut in (0, 7, 100, len(data) // 2, len(data) - 1):
        bad.write_bytes(data[:cut])
        with pytest.raises(SerializationError):
            runtime.load(bad)
    for _ in range(40):
        mutated = bytearray(data)
        i = int(rng.integers(0, len(data)))
        mutated[i] ^= 1 << int(rng.integers(0, 8))
        bad.write_bytes(bytes(mutated))
        with pytest.raises(SerializationError):
            runtime.load(bad)


def _rewrite(path, out, edit):
    """A well-formed gpucore file whose graph JSON was edited (the checksums recomputed, as an
    attacker would): only the graph validation stands between it and the runtime."""
    obj = gpucore.load(path)
    doc = json.loads(obj["graph"])
    edit(doc)
    obj["graph"] = json.dumps(doc)
    gpucore.save(obj, out)


NESTED: list = [1]
for _ in range(20):
    NESTED = [NESTED]

HOSTILE = {
    "unknown op": lambda d: d["nodes"][0].update(op="os.system"),
    "dangling input": lambda d: d["nodes"][1]["inputs"].__setitem__(0, "nowhere"),
    "negative size": lambda d: d["tensors"]["x"].update(shape={"$tuple": [-1, 5, 16]}),
    "too many dims": lambda d: d["tensors"]["x"].update(shape={"$tuple": [1] * 9}),
    "bad tag": lambda d: d["nodes"][0].update(attrs={"$pickle": "x"}),
    "deep nesting": lambda d: d["nodes"][0].update(attrs={"$dict": [["k", NESTED]]}),
    "output not produced": lambda d: d.update(outputs=["x"]),
    "missing weight": lambda d: d["tensors"].update(
        ghost={"shape": {"$tuple": []}, "dtype": "float32", "const": True}
    ),
    "bad dtype": lambda d: d["tensors"]["x"].update(dtype="complex128"),
    "cycle": lambda d: d["nodes"][0]["inputs"].__setitem__(0, d["nodes"][-1]["output"]),
    "not a dict": lambda d: d.update(nodes={"a": 1}),
    "huge claimed output": lambda d: d["tensors"][d["nodes"][0]["output"]].update(
        shape={"$tuple": [1 << 20, 1 << 20, 1 << 10]}
    ),
    "wrong claimed dtype": lambda d: d["tensors"][d["nodes"][0]["output"]].update(dtype="int8"),
    "output tree of two": lambda d: d.update(output_tree={"tuple": ["tensor", "tensor"]}),
    "output tree of a set": lambda d: d.update(output_tree={"set": ["tensor"]}),
    "output tree dict key": lambda d: d.update(output_tree={"dict": [[1, "tensor"]]}),
    "deep output tree": lambda d: d.update(output_tree=_deep_tree(100)),
    "wide output tree": lambda d: d.update(
        output_tree={"tuple": ["tensor"] + [{"list": []}] * 10**5}
    ),
    # an empty container at depth 64, which capture refuses
    "output tree one too deep": lambda d: d.update(
        output_tree={"tuple": ["tensor", _deep_tree(63, {"tuple": []})]}
    ),
}


def _deep_tree(depth: int, tree="tensor"):
    for _ in range(depth):
        tree = {"tuple": [tree]}
    return tree


def test_nested_outputs_round_trip(tmp_path):
    """The output tree is saved with the graph: a loaded model returns the nesting the model
    did. A file without one (saved before trees were kept; written here from a graph without
    one) loads and runs as before: one output as a Tensor, several as a flat tuple."""
    cm = gpucore.compile(lambda a: (a + 1, {"h": (a * 2,)}), (rand(3),), device="cpu")
    cm.save(tmp_path / "nested.gcm")
    x = rand(3, seed=4)
    out, d = runtime.load(tmp_path / "nested.gcm", device="cpu")(x)
    np.testing.assert_array_equal(out.numpy(), x + 1)
    np.testing.assert_array_equal(d["h"][0].numpy(), x * 2)
    cm.symbolic.output_tree = None
    cm.save(tmp_path / "old.gcm")
    assert "output_tree" not in gpucore.load(tmp_path / "old.gcm")["graph"]
    old = runtime.load(tmp_path / "old.gcm", device="cpu")
    got = old(x)
    assert isinstance(got, tuple) and len(got) == 2
    np.testing.assert_array_equal(got[1].numpy(), x * 2)
    single = gpucore.compile(lambda a: (a + 1,), (rand(3),), device="cpu")
    single.symbolic.output_tree = None
    single.save(tmp_path / "single.gcm")
    assert isinstance(runtime.load(tmp_path / "single.gcm", device="cpu")(x), gpucore.Tensor)


def _strided_out_of_bounds(d):
    node = next(n for n in d["nodes"] if n["op"] == "view")
    node["op"] = "strided"
    node["attrs"] = {
        "$dict": [
            ["shape", {"$tuple": [4, 4]}],
            ["strides", {"$tuple": [1 << 40, 1]}],
            ["offset", 0],
        ]
    }


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_graphs(saved, tmp_path, name):
    _, _, path = saved
    out = tmp_path / "hostile.gcm"
    _rewrite(path, out, HOSTILE[name])
    with pytest.raises(SerializationError, match="hostile.gcm") as e:
        runtime.load(out)
    if "output tree" in name:  # the field named, the message short
        assert "output" in str(e.value) and len(str(e.value)) < 300


def test_views_reaching_outside_their_source_are_refused(saved, tmp_path):
    _, _, path = saved
    out = tmp_path / "strided.gcm"
    _rewrite(path, out, _strided_out_of_bounds)
    with pytest.raises(SerializationError, match="reaches outside its source"):
        runtime.load(out)


def test_other_files_are_refused(tmp_path):
    gpucore.save({"w": gpucore.ones(2)}, tmp_path / "weights.pt")
    with pytest.raises(SerializationError, match="not a gpucore.runtime model"):
        runtime.load(tmp_path / "weights.pt")


def test_loaded_weights_are_read_only_constants(saved):
    _, _, path = saved
    loaded = runtime.load(path, device="cpu")
    weights = [t.data for t in loaded.symbolic.tensors.values() if t.data is not None]
    assert weights and not any(w.flags.writeable for w in weights)
