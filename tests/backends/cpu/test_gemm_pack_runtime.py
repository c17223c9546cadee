"""gpucore/runtime/ir/packing.py: the compiled executor lowers GEMMs and convolutions with their
constant operands pre-packed (gemm_pack), cached per constant and shared by every runner; the
results are bitwise the interpreted executor's (unpacked) and those with packing off."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import gpucore
from gpucore import _cpu as C
from gpucore import nn, runtime
from gpucore.runtime.ir import packing


def _ro(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def test_is_constant_needs_read_only_memory_all_the_way_down():
    own = _ro(np.ones((4, 4), np.float32))
    assert packing.is_constant(own)
    assert packing.is_constant(own.reshape(-1))  # a view of a constant
    assert not packing.is_constant(np.ones(4))  # writable
    w = np.ones((4, 4))
    v = w.view()
    v.flags.writeable = False
    assert not packing.is_constant(v)  # read-only view of writable memory
    arena = np.zeros(64, np.uint8)
    s = np.lib.stride_tricks.as_strided(arena, (4,), (1,), writeable=False)
    assert not packing.is_constant(s)  # a planner view into the arena
    assert packing.is_constant(np.frombuffer(b"\0" * 64, np.float32)[2:])  # immutable bytes
    mutable = np.frombuffer(bytearray(64), np.float32)
    mutable.flags.writeable = False
    assert not packing.is_constant(mutable)  # read-only view of a bytearray


def test_a_sealed_array_is_a_constant_and_so_are_its_views():
    block = np.frombuffer(C.host_empty(64), np.float32)  # writable memory no one else holds
    assert not packing.is_constant(block)
    with pytest.raises(ValueError, match="read-only"):
        packing.seal(block)
    block.flags.writeable = False
    assert not packing.is_constant(block)  # read-only, but over a buffer: not known constant
    assert packing.seal(block) is block
    assert packing.is_constant(block) and packing.is_constant(block[2:].reshape(2, 7))
    copy = block.copy()
    assert packing.is_constant(block) and packing.is_constant(np.frombuffer(b"\0" * 8))
    assert not packing.is_constant(np.frombuffer(copy, np.float32))  # writable
    key = id(block)
    del block
    gc.collect()
    assert key not in packing._sealed  # the registry holds no array alive


def test_gemm_operand_packs_constants_that_pay():
    w = _ro(np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32))
    flat = w.reshape(-1)
    pm = packing.gemm_operand(w, flat, "b", 40, 64, 128, 1, 0, 1)
    assert isinstance(pm, C.PackedMatrix) and (pm.rows, pm.cols, pm.trans) == (128, 64, 1)
    assert packing.gemm_operand(w, flat, "b", 40, 64, 128, 1, 0, 1) is pm  # cached
    assert packing.gemm_operand(w, flat, "b", 16, 64, 128, 1, 0, 1) is flat  # small m: gemv
    # few columns of C (C^T through the gemv kernels); a short k packs (the blocked path)
    w10 = _ro(np.random.default_rng(1).standard_normal((10, 512)).astype(np.float32))
    assert packing.gemm_operand(w10, w10.reshape(-1), "b", 64, 10, 512, 1, 0, 1).base is w10
    wk = _ro(np.random.default_rng(2).standard_normal((16, 2048)).astype(np.float32))
    pk = packing.gemm_operand(wk, wk.reshape(-1), "b", 256, 2048, 16, 0, 0, 0)
    assert isinstance(pk, C.PackedMatrix)
    pk = packing.gemm_operand(wk, wk.reshape(-1), "b", 256, 16, 2048, 1, 0, 1)  # op(A) 2 MiB
    assert isinstance(pk, C.PackedMatrix)
    a4 = _ro(np.random.default_rng(3).standard_normal((2000, 96)).astype(np.float32))
    assert packing.gemm_operand(a4, a4.reshape(-1), "a", 2000, 4, 96, 0, 0, 0).base is a4
    pk = packing.gemm_operand(a4, a4.reshape(-1), "a", 2000, 4, 96, 1, 0, 0)  # A transposed
    assert isinstance(pk, C.PackedMatrix)
    assert packing.gemm_operand(w, flat, "b", 40, 64, 128, 1, 8192, 1) is flat  # batch stride
    writable = np.array(w)
    assert packing.gemm_operand(writable, writable.reshape(-1), "b", 40, 64, 128, 1, 0, 1) is not pm
    tiny = _ro(np.ones((8, 8), np.float32))
    assert packing.gemm_operand(tiny, tiny.reshape(-1), "b", 40, 8, 8, 1, 0, 1).base is tiny
    packing.ENABLED = False
    try:
        assert packing.gemm_operand(w, flat, "b", 40, 64, 128, 1, 0, 1) is flat
    finally:
        packing.ENABLED = True


def test_cache_entry_dies_with_its_constant():
    w = _ro(np.ones((64, 128), np.float32))
    key = id(w)
    packing.gemm_operand(w, w.reshape(-1), "b", 40, 64, 128, 1, 0, 1)
    assert key in packing._cache
    del w
    gc.collect()
    assert key not in packing._cache


def test_layout_choice():
    """The transposed layout where the register tile fits the product much better (and K is
    long enough): AVX-512's 14 x 32 float32 tile wastes 24 % of 32 rows, none transposed."""
    assert packing._swap(64, 64, 64, np.float32) == 0  # short K: never
    if packing._tile(np.float32) == (14, 32):
        assert packing._swap(32, 2048, 2048, np.float32) == 1
        assert packing._swap(64, 2048, 2048, np.float32) == 0
        assert packing._swap(512, 49, 4608, np.float32) == 1  # ResNet-18's last convolutions
        assert packing._swap(64, 3136, 576, np.float32) == 0


def _cnn():
    gpucore.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 48, 3, padding=1, bias=False),
        nn.ReLU(),
        nn.Conv2d(48, 40, 3, stride=2, padding=1),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten(),
        nn.Linear(40, 5),
    )


def _mlp(width):
    gpucore.manual_seed(1)
    return nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 7)
    )


CASES = {"mlp": (lambda: _mlp(96), (40, 96)), "mlp_tall": (lambda: _mlp(64), (300, 64)),
         "cnn": (_cnn, (2, 3, 14, 14)), "cnn_7x7": (_cnn, (1, 3, 13, 13))}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_packed_compiled_equals_interpreted_and_unpacked(name):
    build, shape = CASES[name]
    model = build()
    model.eval()
    rng = np.random.default_rng(0)
    x = gpucore.tensor(rng.standard_normal(shape).astype(np.float32))
    before = len(packing._cache)
    compiled = runtime.compile(model, [x], device="cpu")
    assert len(packing._cache) > before  # some constant was packed
    interpreted = runtime.compile(model, [x], device="cpu", executor="interpreted")
    packing.ENABLED = False
    try:
        unpacked = runtime.compile(model, [x], device="cpu")
    finally:
        packing.ENABLED = True
    for _ in range(2):
        xa = rng.standard_normal(shape).astype(np.float32)
        want = interpreted.run_arrays([xa])[0]
        np.testing.assert_array_equal(compiled.run_arrays([xa])[0], want)
        np.testing.assert_array_equal(unpacked.run_arrays([xa])[0], want)


def test_concurrent_runners_share_one_packed_copy():
    build, shape = CASES["mlp"]
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    cm = runtime.compile(build(), [gpucore.tensor(x)], device="cpu")
    want = cm.run_arrays([x])[0]
    sizes = {k: len(v[1]) for k, v in packing._cache.items()}
    outs, errors = [], []

    def worker():
        try:
            for _ in range(5):
                outs.append(cm.run_arrays([x])[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert {k: len(v[1]) for k, v in packing._cache.items() if k in sizes} == sizes  # no repack
    for o in outs:
        np.testing.assert_array_equal(o, want)


def test_a_dropped_model_frees_its_packed_winograd_weights():
    """A Winograd weight packed from a constant holds the constant (the non-finite fallback
    reads it in place): the cache holds the packed copy weakly, so dropping the model frees
    both instead of keeping the pair alive for good."""
    conv = nn.Conv2d(32, 32, 3, padding=1)  # 16 tiles of 4x4: the Winograd rule
    conv.eval()
    x = gpucore.tensor(np.random.default_rng(0).standard_normal((1, 32, 16, 16)).astype(np.float32))
    before = set(packing._cache)
    compiled = runtime.compile(conv, [x], device="cpu")
    new = [k for k in packing._cache if k not in before]
    layouts = [lay for k in new for lay in packing._cache[k][1]]
    assert any(lay[-1] == 2 for lay in layouts)  # a Winograd (swap 2) weight was packed
    held = [packing._cache[k][0] for k in new]
    got = compiled.run_arrays([x.numpy()])[0]
    np.testing.assert_allclose(got, conv(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    del compiled
    gc.collect()
    assert all(ref() is None for ref in held) and not any(k in packing._cache for k in new)


def test_few_input_channel_convs_keep_their_weight_unpacked():
    """A layer that cpu/conv_c1.c takes (at most 4 input channels; a 4 -> 128 3x3 weight is
    18 KiB, past MIN_BYTES) keeps its weight unpacked, so that the compiled model runs that
    kernel and not conv_direct.c on a packed copy: the interpreted executor's bits."""
    geo = (2, 4, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 128)
    w = _ro(np.ones((128, 4, 3, 3), np.float32))
    assert packing.conv_weight(w, 784, geo) is w
    if not C.conv2d_c1(*geo):
        pytest.skip("no few-input-channels kernel on this ISA")
    gpucore.manual_seed(3)
    conv = nn.Conv2d(4, 128, 3, padding=1)
    conv.eval()
    x = np.random.default_rng(4).standard_normal((2, 4, 28, 28)).astype(np.float32)
    before = set(packing._cache)
    compiled = runtime.compile(conv, [gpucore.tensor(x)], device="cpu")
    assert not [k for k in packing._cache if k not in before]  # nothing packed
    interpreted = runtime.compile(conv, [gpucore.tensor(x)], device="cpu", executor="interpreted")
    got = compiled.run_arrays([x])[0]
    assert np.array_equal(got.view(np.uint32), interpreted.run_arrays([x])[0].view(np.uint32))
    eager = conv(gpucore.tensor(x)).detach().numpy()
    assert np.array_equal(got.view(np.uint32), eager.view(np.uint32))
