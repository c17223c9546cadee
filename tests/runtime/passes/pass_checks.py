"""What every pass test checks: the graph computes the same before and after the passes."""

import numpy as np
from runtime_models import run_graph

import gpucore
from gpucore.runtime.capture.trace import trace


def traced(fn, *inputs):
    return trace(fn, [gpucore.tensor(x) for x in inputs])


def check_same(fn, inputs, passes, rtol=1e-5, atol=1e-6):
    """Apply ``passes`` in order to the trace of fn; the results (before, after) agree on
    ``inputs`` and on a second random draw of the same shapes. Returns the graph after."""
    before = traced(fn, *inputs)
    after = before.copy()
    changed = [bool(p(after)) for p in passes]
    after.validate()
    rng = np.random.default_rng(7)
    for xs in (inputs, [rng.standard_normal(x.shape).astype(x.dtype) for x in inputs]):
        want = run_graph(before, xs)
        got = run_graph(after, xs)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    after.changed = changed
    return after
