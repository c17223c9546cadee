"""default_collate and default_convert: the structure and dtypes of PyTorch's, compared with
torch.utils.data when installed and with hand-written expectations otherwise."""

import collections

import numpy as np
import pytest

import gpucore
from gpucore.utils.data import default_collate, default_convert
from gpucore.utils.data.collate import collate, collate_str_fn, default_collate_fn_map

Point = collections.namedtuple("Point", "x y")


def _plain(obj):
    """A comparable skeleton of a batch: tensors become (dtype name, shape, values)."""
    if hasattr(obj, "shape") and hasattr(obj, "tolist") and not isinstance(obj, np.ndarray):
        return ("T", str(obj.dtype).split(".")[-1], tuple(obj.shape), obj.tolist())
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return (type(obj).__name__,) + tuple(_plain(v) for v in obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def test_numbers_and_strings():
    assert _plain(default_collate([1, 2, 3])) == ("T", "int64", (3,), [1, 2, 3])
    assert _plain(default_collate([0.5, 1.5])) == ("T", "float64", (2,), [0.5, 1.5])
    assert default_collate([0.1, 1 / 3]).tolist() == [0.1, 1 / 3]  # float64 all the way
    assert _plain(default_collate([True, False])) == ("T", "bool", (2,), [True, False])
    assert default_collate(["a", "b"]) == ["a", "b"]
    assert default_collate([b"a", b"b"]) == [b"a", b"b"]


def test_tensors_stack_along_a_new_dim():
    batch = default_collate([gpucore.ones(2, 3), gpucore.zeros(2, 3)])
    assert batch.shape == (2, 2, 3) and batch[0].sum().item() == 6
    with pytest.raises(ValueError):
        default_collate([gpucore.ones(2), gpucore.ones(3)])


def test_numpy_arrays_and_scalars():
    b = default_collate([np.ones((2,), np.float32), np.zeros((2,), np.float32)])
    assert _plain(b) == ("T", "float32", (2, 2), [[1.0, 1.0], [0.0, 0.0]])
    assert default_collate([np.arange(3), np.arange(3)]).dtype == gpucore.int64
    assert _plain(default_collate([np.float64(1.5), np.float64(2)])) == (
        "T",
        "float64",
        (2,),
        [1.5, 2.0],
    )
    assert default_collate([np.int32(1), np.int32(2)]).dtype == gpucore.int32
    mixed = default_collate([np.zeros(2, np.float32), np.ones(2, np.float64)])
    assert mixed.shape == (2, 2)
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_containers_keep_their_structure():
    samples = [
        {"img": np.ones(2, np.float32), "label": 1, "meta": ("a", 0.5), "p": Point(1, 2.0)},
        {"img": np.zeros(2, np.float32), "label": 0, "meta": ("b", 1.5), "p": Point(3, 4.0)},
    ]
    out = default_collate(samples)
    assert set(out) == {"img", "label", "meta", "p"}
    assert out["img"].shape == (2, 2) and out["label"].tolist() == [1, 0]
    assert isinstance(out["meta"], list) and out["meta"][0] == ("a", "b")  # tuples -> lists
    assert out["meta"][1].dtype == gpucore.float64
    assert isinstance(out["p"], Point) and out["p"].x.tolist() == [1, 3]
    pairs = default_collate([(gpucore.ones(3), 0), (gpucore.zeros(3), 1)])
    assert isinstance(pairs, list) and pairs[0].shape == (2, 3) and pairs[1].tolist() == [0, 1]
    assert default_collate([[1, 2], [3, 4]])[0].tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([[1, 2], [3]])


def test_mapping_and_sequence_types_are_kept():
    od = default_collate([collections.OrderedDict(a=1), collections.OrderedDict(a=2)])
    assert type(od) is collections.OrderedDict and od["a"].tolist() == [1, 2]

    class Row(list):
        pass

    out = default_collate([Row([1, 2.0]), Row([3, 4.0])])
    assert type(out) is Row and out[0].tolist() == [1, 3]


def test_unsupported_elements():
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        default_collate([None, None])


def test_default_convert():
    assert default_convert(3) == 3 and default_convert("s") == "s"
    t = default_convert(np.arange(3))
    assert isinstance(t, gpucore.Tensor) and t.tolist() == [0, 1, 2]
    out = default_convert({"a": (np.float32(2), [np.ones(1)]), "b": Point(np.int64(1), "y")})
    assert isinstance(out["a"], list) and out["a"][0].dtype == gpucore.float32
    assert isinstance(out["a"][1][0], gpucore.Tensor)
    assert isinstance(out["b"], Point) and out["b"].x.item() == 1 and out["b"].y == "y"
    strings = np.array(["a"])
    assert default_convert(strings) is strings


def test_custom_collate_fn_map():
    class Box:
        def __init__(self, v):
            self.v = v

    fn_map = dict(default_collate_fn_map)
    fn_map[Box] = lambda batch, *, collate_fn_map: sum(b.v for b in batch)
    assert collate([(Box(1), "a"), (Box(2), "b")], collate_fn_map=fn_map) == [3, ("a", "b")]
    assert collate_str_fn(["x"]) == ["x"]


CASES = [
    [1, 2, 3],
    [0.5, 1.5],
    [True, False],
    ["a", "b"],
    [(1, 2.5, "x"), (3, 4.5, "y")],
    [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    [Point(1, 2.0), Point(3, 4.0)],
    [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)],
    [np.float32(1), np.float32(2)],
    [np.int64(5), np.int64(7)],
    [{"x": np.arange(4), "y": (np.float64(1.0), 2)}] * 3,
]


@pytest.mark.parametrize("batch", CASES, ids=range(len(CASES)))
def test_default_collate_matches_torch(batch):
    torch = pytest.importorskip("torch")
    ref = torch.utils.data.default_collate(batch)
    assert _plain(default_collate(batch)) == _plain(ref)
    assert _plain(default_convert(batch[0])) == _plain(torch.utils.data.default_convert(batch[0]))


def test_tensor_samples_match_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours = default_collate([(gpucore.tensor(a), 1), (gpucore.tensor(a + 1), 2)])
    ref = torch.utils.data.default_collate([(torch.tensor(a), 1), (torch.tensor(a + 1), 2)])
    assert _plain(ours) == _plain(ref)
