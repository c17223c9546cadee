"""gpucore.runtime.ir.output_tree: the nesting of a graph's flat outputs, rebuilt; trees that
are not trees (a saved file's field) refused with ValueError."""

import pytest

import gpucore
from gpucore.runtime.capture.trace import CaptureError, flatten_outputs
from gpucore.runtime.ir.output_tree import MAX_DEPTH, leaf_count, max_entries, unflatten


def test_unflatten_rebuilds_each_container_in_order():
    tree = {"dict": [["b", {"tuple": ["tensor", {"list": []}]}], ["a", {"list": ["tensor"] * 2}]]}
    assert leaf_count(tree) == 3
    got = unflatten(tree, [1, 2, 3])
    assert got == {"b": (1, []), "a": [2, 3]} and list(got) == ["b", "a"]
    assert unflatten({"tuple": [{"tuple": ["tensor"]}]}, [7]) == ((7,),)
    assert unflatten("tensor", [7]) == 7


def test_no_tree_is_the_old_rule():
    assert unflatten(None, [7]) == 7
    assert unflatten(None, [7, 8]) == (7, 8)


@pytest.mark.parametrize(
    "tree,match",
    [
        ({"set": ["tensor"]}, "unknown entry"),
        ("Tensor", "unknown entry"),
        ({"tuple": "tensor"}, "unknown entry"),
        ({"tuple": ["tensor"], "list": []}, "unknown entry"),
        ({"dict": [[1, "tensor"]]}, r"\[str key, tree\]"),
        ({"dict": [["k", "tensor"], ["k", "tensor"]]}, "'k' repeats"),
        ({"list": [{"list": [{"list": [None]}]}]}, "unknown entry"),
    ],
)
def test_bad_trees_raise(tree, match):
    with pytest.raises(ValueError, match=match):
        leaf_count(tree)


def test_deep_trees_raise():
    tree = "tensor"
    for _ in range(65):
        tree = {"tuple": [tree]}
    with pytest.raises(ValueError, match="nested too deeply"):
        leaf_count(tree)


def _nest(depth: int, leaf):
    for _ in range(depth):
        leaf = {"tuple": [leaf]}
    return leaf


def _tuples(depth: int, leaf):
    for _ in range(depth):
        leaf = (leaf,)
    return leaf


def test_capture_and_loader_share_the_depth_limit():
    """Containers nest MAX_DEPTH deep (depths 0 .. MAX_DEPTH - 1) in both: a result capture
    accepts is a tree the loader accepts, and one level more is refused by both."""
    t = gpucore.ones(1)
    ok = _tuples(MAX_DEPTH, t)
    assert leaf_count(flatten_outputs(ok)[1]) == 1
    assert leaf_count(_nest(MAX_DEPTH, "tensor")) == 1
    with pytest.raises(CaptureError, match=f"nested more than {MAX_DEPTH} deep"):
        flatten_outputs((ok,))
    # an empty container at depth MAX_DEPTH: capture refuses it, the loader used to accept it
    with pytest.raises(CaptureError, match="nested more than"):
        flatten_outputs((t, _tuples(MAX_DEPTH - 1, ())))
    with pytest.raises(ValueError, match="nested too deeply"):
        leaf_count({"tuple": ["tensor", _nest(MAX_DEPTH - 1, {"tuple": []})]})


def test_entries_are_bounded_by_the_output_count():
    """A tree of a few outputs and millions of empty containers is refused after at most
    ``max_entries(outputs)`` entries are walked, the message short (no str of the tree)."""
    huge = {"tuple": ["tensor"] + [{"list": []}] * 2_000_000}
    assert leaf_count(huge) == 1  # (no bound without the output count)
    with pytest.raises(ValueError, match=r"output_tree: more than 4100 entries") as e:
        leaf_count(huge, 1)
    assert len(str(e.value)) < 120
    fits = {"tuple": ["tensor"] + [{"list": []}] * (max_entries(1) - 2)}
    assert leaf_count(fits, 1) == 1
    with pytest.raises(ValueError, match="more than"):
        leaf_count({"tuple": fits["tuple"] + [{"list": []}]}, 1)


def test_bad_entry_messages_are_short():
    bad = {"tuple": ["tensor", {"set": list(range(1_000_000))}]}
    with pytest.raises(ValueError, match="unknown entry") as e:
        leaf_count(bad)
    assert len(str(e.value)) < 120
    with pytest.raises(ValueError, match="repeats") as e:
        leaf_count({"dict": [["k" * 100_000, "tensor"]] * 2})
    assert len(str(e.value)) < 120
