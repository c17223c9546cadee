"""GEMM shaders (shaders/gemm.comp, kernels/gemm.py) against numpy float64.

Both variants are forced in every case (``variant=`` on ``gemm()``; GPUCORE_VULKAN_GEMM for the
registry's ``matmul``). The error measure is the norm of the difference relative to the norm of
the float64 reference (float32 accumulation over K terms drifts elementwise, not in norm).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from device_helpers import on_cpu

import gpucore
from gpucore.backends.vulkan.kernels import gemm as G

RNG = np.random.default_rng(20261122)
VARIANTS = ["regblock", "tiled"]
SHAPES = [(1, 1, 1), (7, 13, 5), (129, 257, 65), (33, 17, 1), (5, 130, 40), (70, 36, 96)]


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def dev(be, a: np.ndarray) -> np.ndarray:
    """A device array holding ``a`` (contiguous)."""
    return be.upload(np.ascontiguousarray(a, np.float32), None)


def dev_t(be, a: np.ndarray) -> np.ndarray:
    """A device view equal to ``a`` whose last two dims are transposed in memory."""
    return np.swapaxes(dev(be, np.swapaxes(a, -1, -2)), -1, -2)


def host(be, arr: np.ndarray) -> np.ndarray:
    return np.array(be.host_view(arr), dtype=np.float64)


def assert_norm_close(got, ref, rtol=1e-4):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    err = np.linalg.norm(got - ref)
    scale = max(np.linalg.norm(ref), 1e-30)
    assert err <= rtol * scale, f"relative error {err / scale:.3g} > {rtol}"


def act_ref(name, v):
    if name is None:
        return v
    if name == "relu":
        return np.maximum(v, 0.0)
    if name == "gelu":
        erf = np.vectorize(math.erf)
        return 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-v))
    if name == "tanh":
        return np.tanh(v)
    raise AssertionError(name)


# ----------------------------------------------------------------------------- gemm()
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=["NN", "NT", "TN", "TT"])
def test_gemm_shapes_and_transposes(vulkan, variant, shape, ta, tb):
    m, n, k = shape
    A, B = rand(m, k), rand(k, n)
    a = dev_t(vulkan, A) if ta else dev(vulkan, A)
    b = dev_t(vulkan, B) if tb else dev(vulkan, B)
    out = vulkan.empty_array((m, n), np.float32)
    G.gemm(vulkan, out, a, b, variant=variant)
    assert_norm_close(host(vulkan, out), A.astype(np.float64) @ B)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gemm_broadcast_batch(vulkan, variant):
    # a: (3, 1, m, k) broadcast over dim 1; b: (4, k, n) broadcast over dim 0 (0 batch strides)
    m, n, k = 9, 14, 11
    A, B = rand(3, 1, m, k), rand(4, k, n)
    a = np.broadcast_to(dev(vulkan, A), (3, 4, m, k))
    b = np.broadcast_to(dev_t(vulkan, B), (3, 4, k, n))
    out = vulkan.empty_array((3, 4, m, n), np.float32)
    G.gemm(vulkan, out, a, b, variant=variant)
    assert_norm_close(host(vulkan, out), A.astype(np.float64) @ B)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gemm_alpha_beta(vulkan, variant):
    m, n, k = 19, 24, 10
    A, B, C0 = rand(m, k), rand(k, n), rand(m, n)
    out = dev(vulkan, C0)
    G.gemm(vulkan, out, dev(vulkan, A), dev(vulkan, B), alpha=0.5, beta=-2.0, variant=variant)
    assert_norm_close(host(vulkan, out), 0.5 * (A.astype(np.float64) @ B) - 2.0 * C0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"])
def test_gemm_bias_activation_epilogue(vulkan, variant, activation):
    m, n, k = 37, 21, 16
    A, B, bias = rand(m, k), rand(k, n), rand(n)
    out = vulkan.empty_array((m, n), np.float32)
    G.gemm(
        vulkan,
        out,
        dev(vulkan, A),
        dev_t(vulkan, B),
        bias=dev(vulkan, bias),
        activation=activation,
        variant=variant,
    )
    ref = act_ref(activation, A.astype(np.float64) @ B + bias)
    assert_norm_close(host(vulkan, out), ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gemm_full_epilogue_batched(vulkan, variant):
    # everything at once: batch, beta, a (M, N)-shaped bias broadcast over the batch, activation
    m, n, k = 6, 20, 9
    A, B, C0, bias = rand(2, m, k), rand(2, k, n), rand(2, m, n), rand(m, n)
    out = dev(vulkan, C0)
    G.gemm(
        vulkan,
        out,
        dev(vulkan, A),
        dev(vulkan, B),
        alpha=1.5,
        beta=0.25,
        bias=dev(vulkan, bias),
        activation="tanh",
        variant=variant,
    )
    ref = np.tanh(1.5 * (A.astype(np.float64) @ B) + 0.25 * C0 + bias)
    assert_norm_close(host(vulkan, out), ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gemm_strided_out_and_k0(vulkan, variant):
    m, n, k = 12, 7, 5
    A, B = rand(m, k), rand(k, n)
    out_t = vulkan.empty_array((n, m), np.float32)
    G.gemm(vulkan, out_t.T, dev(vulkan, A), dev(vulkan, B), variant=variant)  # column-major out
    assert_norm_close(host(vulkan, out_t).T, A.astype(np.float64) @ B)
    # K = 0: the product is zeros; bias and activation still apply
    out = vulkan.empty_array((m, n), np.float32)
    bias = rand(n)
    G.gemm(
        vulkan,
        out,
        vulkan.empty_array((m, 0), np.float32),
        vulkan.empty_array((0, n), np.float32),
        bias=dev(vulkan, bias),
        activation="relu",
        variant=variant,
    )
    np.testing.assert_array_equal(host(vulkan, out), np.broadcast_to(np.maximum(bias, 0), (m, n)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_gemm_grid_splits(vulkan, variant, monkeypatch):
    # A tiny maxComputeWorkGroupCount makes gemm() split rows, columns and batches in launches.
    monkeypatch.setitem(vulkan.ctx.limits, "maxComputeWorkGroupCount", [1, 1, 2])
    m, n, k = 70, 140, 8
    A, B = rand(5, m, k), rand(5, k, n)
    out = vulkan.empty_array((5, m, n), np.float32)
    G.gemm(vulkan, out, dev(vulkan, A), dev(vulkan, B), variant=variant)
    assert_norm_close(host(vulkan, out), A.astype(np.float64) @ B)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    "case",
    [
        "b_transposed",  # a Linear's weight (N, K) used as B: halved along N
        "b_rows",  # a (K, N) B: halved along K, accumulating
        "a_rows",  # a large A: halved along M
        "a_transposed",  # a large column-major A: halved along K
        "out_columns",  # a large column-major out: halved along N
    ],
)
def test_gemm_operands_larger_than_one_binding_run_in_bands(vulkan, variant, case, monkeypatch):
    # A 16 KiB maxStorageBufferRange stands for lavapipe's 128 MiB (AlexNet's 144 MiB weight):
    # gemm() cuts the product into pieces that each fit one binding; with beta, bias and an
    # activation, which must apply once.
    monkeypatch.setattr(vulkan, "max_range", 16 << 10)
    m, k, n = {"a": (70, 96, 5), "b": (3, 96, 70), "o": (64, 2, 80)}[case[0]]
    A, B = rand(m, k), rand(k, n)
    C0, bias = rand(m, n), rand(n)
    a = dev_t(vulkan, A) if case == "a_transposed" else dev(vulkan, A)
    b = dev_t(vulkan, B) if case == "b_transposed" else dev(vulkan, B)
    out = dev_t(vulkan, C0) if case == "out_columns" else dev(vulkan, C0)
    assert max(G._span(a), G._span(b), G._span(out)) > vulkan.max_range
    G.gemm(vulkan, out, a, b, alpha=0.5, beta=-1.5, bias=dev(vulkan, bias), activation="relu",
           variant=variant)  # fmt: skip
    want = np.maximum(0.5 * (A.astype(np.float64) @ B) - 1.5 * C0 + bias, 0.0)
    assert_norm_close(host(vulkan, out), want)


def test_a_batch_larger_than_one_binding_is_refused_clearly(vulkan, monkeypatch):
    monkeypatch.setattr(vulkan, "max_range", 16 << 10)
    a = dev(vulkan, rand(64, 1, 80))  # 20 KiB through its batch dimension alone
    out = vulkan.empty_array((64, 1, 1), np.float32)
    with pytest.raises(gpucore.errors.DeviceError, match="largest storage binding"):
        G.gemm(vulkan, out, a, dev(vulkan, rand(64, 80, 1)))


def test_gemm_errors(vulkan):
    a = vulkan.empty_array((3, 4), np.float32)
    b = vulkan.empty_array((5, 6), np.float32)
    out = vulkan.empty_array((3, 6), np.float32)
    with pytest.raises(gpucore.errors.ShapeError, match="do not form"):
        G.gemm(vulkan, out, a, b)
    with pytest.raises(ValueError, match="activation"):
        G.gemm(vulkan, out, a, vulkan.empty_array((4, 6), np.float32), activation="swish")
    with pytest.raises(ValueError, match="variant"):
        G.gemm(vulkan, out, a, vulkan.empty_array((4, 6), np.float32), variant="fast")


# ----------------------------------------------------------------------------- variant choice
def test_variant_choice(vulkan, monkeypatch):
    ctx = vulkan.ctx
    monkeypatch.delenv("GPUCORE_VULKAN_GEMM", raising=False)
    expected = "regblock" if ctx.is_cpu and G.subgroup_shuffle_size(ctx) else "tiled"
    assert G.choose_variant(ctx) == expected
    monkeypatch.setenv("GPUCORE_VULKAN_GEMM", "tiled")
    assert G.choose_variant(ctx) == "tiled"
    assert G.choose_variant(ctx, "regblock") == "regblock"  # the argument wins
    monkeypatch.setenv("GPUCORE_VULKAN_GEMM", "bogus")
    with pytest.raises(ValueError, match="GPUCORE_VULKAN_GEMM"):
        G.choose_variant(ctx)


class _FakeCtx:
    def __init__(self, shared, invocations):
        self.limits = {
            "maxComputeSharedMemorySize": shared,
            "maxComputeWorkGroupInvocations": invocations,
        }


def test_tiled_config_respects_device_limits():
    big = _FakeCtx(32768, 1024)
    assert G.tiled_config(big, 1024, 1024) == G.TILED_CONFIGS[0]
    assert G.tiled_config(big, 64, 1024)[:2] == (64, 64)
    assert G.tiled_config(big, 3, 5) == G.TILED_CONFIGS[-1]
    # 4 KiB of shared memory rules out the 8 KiB tiles; 64 invocations rules out 256
    assert (G.tiled_config(_FakeCtx(4096, 1024), 1024, 1024)[0]) == 32
    assert (G.tiled_config(_FakeCtx(32768, 64), 1024, 1024)[0]) == 32
    with pytest.raises(gpucore.errors.DeviceError, match="shared memory"):
        G.tiled_config(_FakeCtx(256, 1024), 64, 64)


def test_regblock_config():
    assert G.regblock_config(1, 1, 8) == (4, 1, 1)
    assert G.regblock_config(255, 1024, 8) == (32, 2, 4)
    assert G.regblock_config(64, 512, 8) == (32, 2, 2)
    tall = G.REGBLOCK_TALL_TM
    assert G.regblock_config(1024, 1024, 8) == (tall, 2, 1)
    assert G.regblock_config(2 * tall, 7, 8) == (tall, 1, 1)


# Tall REGBLOCK blocks (M >= 2 * REGBLOCK_TALL_TM): M, N, K off every tile multiple, N narrower
# and wider than one lane group, every B load mode (NN: vec4 along n, NT: vec4 along k, N odd:
# scalar), with and without the epilogue.
@pytest.mark.parametrize(
    "shape", [(257, 37, 70), (300, 7, 13), (257, 65, 1)], ids=lambda s: "x".join(map(str, s))
)
@pytest.mark.parametrize("tb", [0, 1], ids=["NN", "NT"])
def test_gemm_regblock_tall_blocks(vulkan, shape, tb):
    m, n, k = shape
    assert G.regblock_config(m, n, 8)[0] == G.REGBLOCK_TALL_TM
    A, B, bias = rand(m, k), rand(k, n), rand(n)
    b = dev_t(vulkan, B) if tb else dev(vulkan, B)
    out = vulkan.empty_array((m, n), np.float32)
    G.gemm(vulkan, out, dev(vulkan, A), b, variant="regblock")
    assert_norm_close(host(vulkan, out), A.astype(np.float64) @ B)
    out2 = vulkan.empty_array((2, m, n), np.float32)
    a2 = np.broadcast_to(dev(vulkan, A), (2, m, k))
    G.gemm(
        vulkan,
        out2,
        a2,
        np.broadcast_to(b, (2, k, n)),
        alpha=0.5,
        bias=dev(vulkan, bias),
        activation="relu",
        variant="regblock",
    )
    ref = np.maximum(0.5 * (A.astype(np.float64) @ B) + bias, 0)
    assert_norm_close(host(vulkan, out2), np.broadcast_to(ref, (2, m, n)))


# ----------------------------------------------------------------------------- registry matmul
@pytest.mark.parametrize("variant", VARIANTS)
def test_matmul_op_broadcast_and_views(vulkan, variant, monkeypatch):
    monkeypatch.setenv("GPUCORE_VULKAN_GEMM", variant)
    A, B = rand(2, 1, 9, 6), rand(3, 13, 6)
    a, b = gpucore.tensor(A), gpucore.tensor(B)
    with gpucore.dispatch.trace_ops() as ops:
        out = a @ b.mT  # (2, 3, 9, 13), b transposed, a broadcast
        vec = a[0, 0] @ gpucore.tensor(B[0, 0])  # matrix @ vector
    assert ("matmul", "vulkan", (2, 3, 9, 13)) in ops
    assert_norm_close(out.numpy(), A.astype(np.float64) @ np.swapaxes(B, -1, -2))
    assert_norm_close(vec.numpy(), A[0, 0].astype(np.float64) @ B[0, 0])


@pytest.mark.parametrize("variant", VARIANTS)
def test_mlp_training_gradients_match_cpu(vulkan, variant, monkeypatch):
    monkeypatch.setenv("GPUCORE_VULKAN_GEMM", variant)
    F = gpucore.nn.functional
    X, T = rand(48, 20), RNG.integers(0, 10, 48)
    W1, b1, W2, b2 = rand(32, 20) * 0.3, rand(32) * 0.1, rand(10, 32) * 0.3, rand(10) * 0.1

    def step():
        params = [gpucore.tensor(p, requires_grad=True) for p in (W1, b1, W2, b2)]
        w1, c1, w2, c2 = params
        h = F.relu(F.linear(gpucore.tensor(X), w1, c1))
        loss = F.cross_entropy(F.linear(h, w2, c2), gpucore.tensor(T))
        loss.backward()
        return [float(loss.item())] + [p.grad.numpy().astype(np.float64) for p in params]

    with gpucore.dispatch.trace_ops() as ops:
        dev_res = step()
    assert any(name == "matmul" and be == "vulkan" for name, be, _ in ops)
    cpu_res = on_cpu(step)
    assert dev_res[0] == pytest.approx(cpu_res[0], rel=1e-4)
    for g_dev, g_cpu in zip(dev_res[1:], cpu_res[1:]):
        assert_norm_close(g_dev, g_cpu)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("m,k,n", [(1, 3, 1), (65, 70, 33), (64, 784, 10)])
def test_linear_op_fuses_the_bias(vulkan, variant, monkeypatch, m, k, n):
    monkeypatch.setenv("GPUCORE_VULKAN_GEMM", variant)
    F = gpucore.nn.functional
    X, W, B = rand(m, k), rand(n, k), rand(n)
    with gpucore.dispatch.trace_ops() as ops:
        out = F.linear(gpucore.tensor(X), gpucore.tensor(W), gpucore.tensor(B))
        no_bias = F.linear(gpucore.tensor(X), gpucore.tensor(W))
    assert [(name, be) for name, be, _ in ops] == [("linear", "vulkan")] * 2
    ref = X.astype(np.float64) @ W.T.astype(np.float64)
    assert_norm_close(out.numpy(), ref + B)
    assert_norm_close(no_bias.numpy(), ref)
