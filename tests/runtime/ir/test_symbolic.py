"""gpucore.runtime.ir.symbolic: linear sizes over named symbols."""

from gpucore.runtime.ir.symbolic import SymInt, evaluate, symbols_in


def test_symint_evaluates_linear_forms():
    s = SymInt(-1, {"batch": 16, "seq": 0})
    assert s.eval({"batch": 3}) == 47
    assert s.symbols() == {"batch"} and repr(s) == "16*batch + -1"
    assert SymInt(0, {"batch": 1}) == SymInt(0, {"batch": 1, "seq": 0})
    assert len({SymInt(2, {"a": 1}), SymInt(2, {"a": 1})}) == 1
    bt = SymInt(1, {("t", "b"): 2, "b": 1})
    assert bt.eval({"b": 3, "t": 5}) == 34 and bt.symbols() == {"b", "t"}
    assert bt.single() is None and SymInt(-2, {"b": 1}).single() == "b"


def test_evaluate_walks_nested_attributes():
    b = SymInt(0, {"b": 1})
    attrs = {"shape": (b, 4), "key": (slice(None, b, None), Ellipsis), "n": [b, 2], "f": 0.5}
    out = evaluate(attrs, {"b": 5})
    assert out == {"shape": (5, 4), "key": (slice(None, 5, None), Ellipsis), "n": [5, 2], "f": 0.5}
    assert symbols_in(attrs) == {"b"} and symbols_in((1, 2)) == set()
