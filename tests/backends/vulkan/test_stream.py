"""The recorder's hazard tracking (gpucore/backends/vulkan/stream.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import gpucore
from gpucore.backends.vulkan.stream import _RangeSet

ranges = st.lists(st.tuples(st.integers(0, 200), st.integers(1, 40)), max_size=15)


@given(ranges, ranges)
def test_rangeset_overlap_equals_the_union_of_added_ranges(added, queries):
    rs = _RangeSet()
    for s, n in added:
        rs.add(s, s + n)
    for s, n in queries:
        want = any(a < s + n and s < a + m for a, m in added)
        assert rs.overlaps(s, s + n) == want
    assert rs.starts == sorted(rs.starts)
    assert all(e < s2 for e, s2 in zip(rs.ends, rs.starts[1:]))  # disjoint, not touching


def test_independent_ops_need_no_barrier_and_dependent_ones_do(vulkan, monkeypatch):
    stream = vulkan.ctx.stream
    monkeypatch.setattr(stream, "fuse", False)  # one dispatch per op (fusion has its own tests)
    x = gpucore.randn(64, 64).to("vulkan")
    gpucore.vulkan.synchronize()
    before = dict(stream.stats)
    outs = [x.exp() for _ in range(10)]  # each reads x, writes a fresh tensor
    indep = stream.stats["barriers"] - before["barriers"]
    y = outs[-1].tanh()  # reads what the previous dispatch wrote
    dep = stream.stats["barriers"] - before["barriers"] - indep
    assert indep == 0
    assert dep == 1
    gpucore.vulkan.synchronize()
    import numpy as np

    np.testing.assert_allclose(y.numpy(), np.tanh(np.exp(x.numpy())), rtol=1e-5)
