"""Elementwise fusion (gpucore/backends/vulkan/fusion.py, shaders/fused.comp).

The program's rules, without a device: which operands join, which force a new program. Then on
the device: a chain of same-size elementwise ops is one dispatch, every intermediate tensor holds
its value (numpy float64 reference), and whatever is not fusable flushes the program first.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore.backends.vulkan import fusion
from gpucore.backends.vulkan.fusion import BINARY, MAX_OPS, MAX_SLOTS, SRC_ACC, SRC_NONE, Program

RNG = np.random.default_rng(11)
ADD = BINARY + fusion.BINARY_CODES["add"]
RELU = 5


class Op:
    """The fields of a backend Operand that a program reads."""

    def __init__(self, block, offset, bind_off=0, bind_size=1 << 20):
        self.block, self.offset, self.bind_off, self.bind_size = block, offset, bind_off, bind_size


def fields(word):
    return word & 127, word >> 7 & 15, word >> 11 & 15, word >> 15 & 7


# ----------------------------------------------------------------------------- program rules
def test_a_chain_reads_the_previous_result_from_a_register():
    blk = object()
    x, y, z = Op(blk, 0), Op(blk, 100), Op(blk, 200)
    p = Program()
    assert p.add(RELU, "relu", 100, y, [(x, False)])
    assert p.add(ADD, "add", 100, z, [(y, False), (x, False)])
    assert fields(p.codes[0]) == (RELU, 0, SRC_NONE, 1)
    assert fields(p.codes[1]) == (ADD, SRC_ACC, 0, 2)
    assert [b[3] for b in p.bindings()] == [False, True, True] + [False] * (MAX_SLOTS - 3)
    push = p.push()
    assert push.dtype == np.uint32 and push.nbytes == 128
    assert list(push[:4]) == [100, 0, 100, 200] and push[1 + MAX_SLOTS] == 2 << 8


def test_in_place_ops_reuse_the_slot():
    x = Op(object(), 0)
    p = Program()
    for _ in range(3):
        assert p.add(RELU, "relu", 64, x, [(x, False)])
    assert len(p.slots) == 1 and [fields(c)[3] for c in p.codes] == [0, 0, 0]


def test_partial_overlap_is_refused_and_leaves_the_program_unchanged():
    blk = object()
    x, y = Op(blk, 0), Op(blk, 1000)
    p = Program()
    assert p.add(RELU, "relu", 100, y, [(x, False)])
    before = (list(p.codes), len(p.slots), p.written)
    shifted = Op(blk, 1050)  # reads y[50:] and beyond: another invocation's element
    assert not p.add(RELU, "relu", 100, Op(blk, 5000), [(shifted, False)])
    assert not p.add(RELU, "relu", 100, Op(blk, 60), [(x, False)])  # out overlaps x at +60
    assert (list(p.codes), len(p.slots), p.written) == before


def test_a_broadcast_operand_is_one_float_and_never_overlaps_a_written_slot():
    blk = object()
    x, y, s = Op(blk, 0), Op(blk, 100), Op(blk, 500)
    p = Program()
    assert p.add(ADD, "add", 100, y, [(x, False), (s, True)])
    assert p.push()[1 + MAX_SLOTS] & 0xFF == 0b10  # inputs take slots first: s is slot 1
    inside_y = Op(blk, 150)
    assert not p.add(ADD, "add", 100, Op(blk, 1000), [(y, False), (inside_y, True)])


def test_size_count_and_slot_limits():
    p = Program()
    blk = object()
    assert p.add(RELU, "relu", 10, Op(blk, 0), [(Op(blk, 10), False)])
    assert not p.add(RELU, "relu", 11, Op(blk, 100), [(Op(blk, 0), False)])  # another size
    p.clear()
    ops = [Op(blk, 16 * i) for i in range(MAX_SLOTS + 1)]
    for i in range(MAX_SLOTS - 1):  # slots 0..MAX_SLOTS-1 filled
        assert p.add(RELU, "relu", 16, ops[i + 1], [(ops[i], False)])
    assert not p.add(RELU, "relu", 16, ops[MAX_SLOTS], [(ops[0], False)])
    p.clear()
    x = Op(blk, 0)
    for _ in range(MAX_OPS):
        assert p.add(RELU, "relu", 8, x, [(x, False)])
    assert not p.add(RELU, "relu", 8, x, [(x, False)])


# ----------------------------------------------------------------------------- on the device
@pytest.fixture
def fused(vulkan, monkeypatch):
    """The vulkan fixture with fusion on (CPU-type devices leave it off by default)."""
    vulkan.ctx.stream.flush_program()
    monkeypatch.setattr(vulkan.ctx.stream, "fuse", True)
    yield vulkan
    vulkan.ctx.stream.flush_program()


def stats():
    return gpucore.vulkan.stats()


def dev(a):
    return gpucore.tensor(np.ascontiguousarray(a, np.float32)).to("vulkan")


def test_a_chain_is_one_dispatch_and_every_intermediate_holds_its_value(fused):
    a, b = RNG.standard_normal((2, 3000)).astype(np.float32)
    x, y = dev(a), dev(b)
    gpucore.vulkan.synchronize()
    s0 = stats()
    t1 = x * y
    t2 = t1.relu()
    t3 = t2 + x
    t4 = t3.tanh()
    t5 = t4 - y.sigmoid()
    assert stats()["dispatches"] == s0["dispatches"]  # still pending
    got = [t.numpy() for t in (t1, t2, t3, t4, t5)]
    assert stats()["dispatches"] - s0["dispatches"] == 1
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    r1 = a64 * b64
    r2 = np.maximum(r1, 0)
    r3 = r2 + a64
    r4 = np.tanh(r3)
    r5 = r4 - 1 / (1 + np.exp(-b64))
    for g, r in zip(got, (r1, r2, r3, r4, r5)):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def chain_on_device(vulkan, fuse: bool, fn, *arrays):
    """(numpy results, dispatches) of fn on device copies of arrays, fused or not."""
    stream = vulkan.ctx.stream
    stream.flush_program()
    old, stream.fuse = stream.fuse, fuse
    try:
        xs = [dev(a) for a in arrays]
        gpucore.vulkan.synchronize()
        d0 = stats()["dispatches"]
        out = fn(*xs)
        got = out.numpy()
        return got, stats()["dispatches"] - d0
    finally:
        stream.fuse = old


def test_a_long_chain_splits_into_full_programs(vulkan):
    def chain(z, w):
        for _ in range(100):
            z = (z * w).tanh()
        return z

    x, w = RNG.uniform(-1, 1, 5000), RNG.uniform(1.0, 1.2, 5000)
    fused, n_fused = chain_on_device(vulkan, True, chain, x, w)
    plain, n_plain = chain_on_device(vulkan, False, chain, x, w)
    np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-7)
    assert n_plain == 200
    # each op writes a fresh tensor: a program holds its input, w and MAX_SLOTS - 2 results
    assert n_fused == -(-200 // (MAX_SLOTS - 2))


def test_a_python_scalar_is_a_broadcast_slot(fused):
    a = RNG.standard_normal(5000).astype(np.float32)
    x = dev(a)
    gpucore.vulkan.synchronize()
    s0 = stats()
    y = (x * 0.5 + 2.0).exp()
    np.testing.assert_allclose(y.numpy(), np.exp(a.astype(np.float64) * 0.5 + 2), rtol=1e-5)
    assert stats()["dispatches"] - s0["dispatches"] == 1


def test_in_place_ops_and_their_copies_fuse(vulkan):
    def chain(x):
        with gpucore.no_grad():
            for _ in range(10):
                x.mul_(1.5).tanh_()  # each: the out-of-place op, then a copy into x
        return x

    a = RNG.standard_normal(4096)
    fused, n_fused = chain_on_device(vulkan, True, chain, a)
    plain, n_plain = chain_on_device(vulkan, False, chain, a)
    ref = a.astype(np.float32).astype(np.float64)
    for _ in range(10):
        ref = np.tanh(ref * 1.5)
    # ten rounds compound the float32 rounding of tanh: absolute 2e-5 near 0
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-7)
    assert n_plain == 40
    # per round a scalar, the product and the tanh take 3 new slots beside x
    assert n_fused == -(-10 // ((MAX_SLOTS - 1) // 3))


def test_other_ops_and_host_reads_see_the_pending_results(fused):
    a = RNG.standard_normal((64, 50)).astype(np.float32)
    x = dev(a)
    y = x.exp()
    s = y.sum()  # a reduction reads y: the program is recorded before it
    z = y.t().contiguous() * 2.0  # a strided copy, then a new program
    np.testing.assert_allclose(s.item(), np.exp(a.astype(np.float64)).sum(), rtol=1e-5)
    np.testing.assert_allclose(z.numpy(), 2 * np.exp(a.astype(np.float64)).T, rtol=1e-5)


def test_gradients_through_fused_ops_match_the_cpu(fused):
    a, b = RNG.standard_normal((2, 4096)).astype(np.float32)

    def f(x, y):
        return ((x * y).sigmoid() + x.tanh() * y.relu()).sum()

    def grads(device):
        x = gpucore.tensor(a, requires_grad=True)
        y = gpucore.tensor(b, requires_grad=True)
        if device == "vulkan":
            out = f(x.to("vulkan"), y.to("vulkan"))
        else:
            with gpucore.device_policy("cpu"):
                out = f(x, y)
        out.backward()
        return x.grad.numpy(), y.grad.numpy()

    got = grads("vulkan")
    with gpucore.device_policy("cpu"):
        ref = grads("cpu")
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_the_profiler_times_ops_one_by_one(fused):
    x = dev(RNG.standard_normal(4096))
    gpucore.vulkan.synchronize()
    with gpucore.profiler() as p:
        (x.exp() + x).relu()
    assert [op for op, _ in p.gpu_events] == ["exp", "add", "relu"]
    assert "fused(" not in p.table()


class FakeCtx:
    def __init__(self, is_cpu, bindings=64):
        self.is_cpu = is_cpu
        self.limits = {"maxPerStageDescriptorStorageBuffers": bindings}


@pytest.mark.parametrize("value", ["", "auto", "0", "1"])
def test_gpus_fuse_by_default_and_the_environment_decides_otherwise(value, monkeypatch):
    monkeypatch.setenv("GPUCORE_VULKAN_FUSION", value)
    want = {"0": False, "1": True}.get(value)
    assert fusion.enabled_for(FakeCtx(is_cpu=False)) is (True if want is None else want)
    assert fusion.enabled_for(FakeCtx(is_cpu=True)) is (False if want is None else want)
    assert fusion.enabled_for(FakeCtx(is_cpu=False, bindings=4)) is False


def test_a_bad_environment_value_is_named(monkeypatch):
    monkeypatch.setenv("GPUCORE_VULKAN_FUSION", "yes")
    with pytest.raises(ValueError, match="GPUCORE_VULKAN_FUSION"):
        fusion.enabled_by_env()
