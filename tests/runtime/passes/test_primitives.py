"""gpucore.runtime.passes.primitives: ops whose CPU kernel is a sequence of other kernels are
rewritten into that sequence, with the eager kernel's bits."""

import numpy as np
from pass_checks import check_same, traced
from runtime_models import rand, run_graph

import gpucore
from gpucore.runtime.passes.cleanup import eliminate_dead_code
from gpucore.runtime.passes.primitives import split_clamp

SPECIAL = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -0.5, 0.5, 2.0, -2.0], np.float32)


def test_clamp_becomes_maximum_then_minimum():
    g = check_same(lambda x: x.clamp(-0.5, 0.25), [rand(4, 5)], [split_clamp])
    assert g.op_counts() == {"maximum": 1, "minimum": 1}
    order = [n.op for n in g.order()]
    assert order == ["maximum", "minimum"]
    g = check_same(lambda x: x.clamp(min=0.0) * 2.0, [rand(6)], [split_clamp])
    assert g.op_counts() == {"maximum": 1, "mul": 1}
    g = check_same(lambda x: gpucore.clamp(x, max=1.0), [rand(6)], [split_clamp])
    assert g.op_counts() == {"minimum": 1}


def test_bits_equal_the_clamp_kernel_on_special_values():
    for dt in (np.float32, np.float64):
        x = SPECIAL.astype(dt)
        before = traced(lambda t: t.clamp(-0.0, 1.0), x)
        after = before.copy()
        assert split_clamp(after)
        want, got = run_graph(before, [x])[0], run_graph(after, [x])[0]
        assert want.dtype == got.dtype == dt
        assert want.tobytes() == got.tobytes()


def test_output_keeps_its_name_and_integers_stay():
    g = traced(lambda x: x.clamp(0.0, 1.0), rand(3))
    out = g.outputs[0]
    assert split_clamp(g)
    assert g.outputs == [out] and g.producer[out].op == "minimum"
    g = traced(lambda x: x.clamp(0, 3), np.arange(6, dtype=np.int64))
    assert not split_clamp(g)  # integer clamp: the numpy kernel, no C binary to split into
    assert not eliminate_dead_code(g) and g.op_counts() == {"clamp": 1}
