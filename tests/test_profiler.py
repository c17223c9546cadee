"""gpucore.profiler: per-op CPU time and per-dispatch GPU time."""

from __future__ import annotations

import gpucore


def test_profiler_counts_every_op_on_the_cpu():
    x = gpucore.randn(64, 64)
    with gpucore.device_policy("cpu"), gpucore.profiler() as p:
        y = (x @ x).relu().sum()
        y.item()
    calls = {(op, be): n for op, be, n, *_ in p.summary()}
    assert calls == {("matmul", "cpu"): 1, ("relu", "cpu"): 1, ("sum", "cpu"): 1}
    assert all(cpu > 0 for *_, cpu, _gpu, _nd in [r[:6] for r in p.summary()])
    table = p.table()
    assert table.splitlines()[0].startswith("| op | backend | calls")
    assert "| matmul | cpu | 1 |" in table
    # outside the block nothing is recorded
    (x + 1).sum()
    assert len(p.events) == 3


def test_profiler_times_dispatches_on_the_device(vulkan):
    x = gpucore.randn(128, 128)
    with gpucore.profiler() as p:
        x.tanh().exp()
    rows = {r[0]: r for r in p.summary()}
    for op in ("tanh", "exp"):
        _, backend, calls, cpu_ms, gpu_ms, dispatches = rows[op]
        assert backend == "vulkan" and calls == 1 and dispatches >= 1
        assert gpu_ms > 0 and cpu_ms > 0


def test_nested_profilers_both_see_the_inner_dispatches(vulkan):
    x = gpucore.randn(128, 128)
    with gpucore.profiler() as outer:
        x.tanh()
        with gpucore.profiler() as inner:
            x.exp()
        x.relu()
    inner_ops = {r[0] for r in inner.summary() if r[5]}
    outer_ops = {r[0] for r in outer.summary() if r[5]}  # ops with timed dispatches
    assert inner_ops == {"exp"}
    assert {"tanh", "exp", "relu"} <= outer_ops, outer.summary()
