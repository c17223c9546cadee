"""gpucore.runtime.ir.output_tree: the nesting of a graph's flat outputs, rebuilt; trees that
are not trees (a saved file's field) refused with ValueError."""

import pytest

from gpucore.runtime.ir.output_tree import leaf_count, unflatten


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
