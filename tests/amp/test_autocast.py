"""gpucore.autocast: PyTorch's CPU autocast op lists (result dtypes equal torch.autocast's op by
op), values within bfloat16 rounding of float32, float32 gradients for float32 parameters, and
the region rules (nesting, threads, decorator, cuda regions disabled, bad arguments)."""

import threading
import warnings

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn.functional as G

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
A = RNG.standard_normal((4, 5)).astype(np.float32)
B = RNG.standard_normal((5, 6)).astype(np.float32)
Q = RNG.standard_normal((2, 2, 4, 8)).astype(np.float32)
T = np.array([1, 0, 2, 1])


def lin(L, F):
    return F.linear(L.tensor(A), L.tensor(B.T))


# (name, f(library, its functional module)) with float32 inputs inside an autocast region
CASES = {
    "linear": lin,
    "matmul": lambda L, F: L.tensor(A) @ L.tensor(B),
    "mm": lambda L, F: L.mm(L.tensor(A), L.tensor(B)),
    "bmm": lambda L, F: L.bmm(L.tensor(Q[0]), L.tensor(Q[1]).transpose(1, 2)),
    "conv1d": lambda L, F: F.conv1d(L.tensor(X[:, :, 0]), L.tensor(W[:, :, 0])),
    "conv2d": lambda L, F: F.conv2d(L.tensor(X), L.tensor(W)),
    "conv_transpose2d": lambda L, F: F.conv_transpose2d(L.tensor(X), L.tensor(W.swapaxes(0, 1))),
    "sdpa": lambda L, F: F.scaled_dot_product_attention(L.tensor(Q), L.tensor(Q), L.tensor(Q)),
    "prelu": lambda L, F: F.prelu(L.tensor(A), L.tensor(np.array([0.1], np.float32))),
    "relu of low": lambda L, F: F.relu(lin(L, F)),
    "gelu of low": lambda L, F: F.gelu(lin(L, F)),
    "softmax of low": lambda L, F: F.softmax(lin(L, F), -1),
    "layer_norm of low": lambda L, F: F.layer_norm(lin(L, F), (6,)),
    "sum of low": lambda L, F: lin(L, F).sum(),
    "max_pool2d of low": lambda L, F: F.max_pool2d(F.conv2d(L.tensor(X), L.tensor(W)), 2),
    "low + float32": lambda L, F: lin(L, F) + L.tensor(A[:, :1]),
    "float64 linear": lambda L, F: F.linear(L.tensor(A.astype(float)), L.tensor(B.T.astype(float))),
    "bilinear": lambda L, F: F.bilinear(
        L.tensor(A), L.tensor(A), L.tensor(np.ones((2, 5, 5), np.float32))
    ),
    "cross_entropy": lambda L, F: F.cross_entropy(lin(L, F), L.tensor(T)),
    "nll_loss": lambda L, F: F.nll_loss(lin(L, F), L.tensor(T)),
    "mse_loss": lambda L, F: F.mse_loss(lin(L, F), L.zeros(4, 6)),
    "l1_loss": lambda L, F: F.l1_loss(lin(L, F), L.zeros(4, 6)),
    "bce_with_logits": lambda L, F: F.binary_cross_entropy_with_logits(lin(L, F), L.zeros(4, 6)),
    "kl_div": lambda L, F: F.kl_div(lin(L, F), L.zeros(4, 6), reduction="sum"),
}


@pytest.mark.parametrize("case", CASES)
def test_result_dtypes_and_values_equal_torch_autocast(case):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = CASES[case](torch, F)
    with gc.autocast("cpu", dtype=gc.bfloat16):
        out = CASES[case](gc, G)
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    r = ref.detach().float().numpy().astype(np.float64)
    o = out.detach().float().numpy().astype(np.float64)
    # bfloat16 keeps 8 bits: results may differ by a few units of its rounding
    np.testing.assert_allclose(o, r, rtol=3e-2, atol=3e-2 * max(1.0, np.abs(r).max()))


def test_losses_of_low_precision_inputs_run_in_float32_inside_a_region_only():
    """The float32 list (PyTorch's): losses of two bfloat16 inputs give float32 inside a region
    (the public forms switch to autocast's casting form there) and bfloat16 outside one."""
    lo = gc.tensor(A).to(gc.bfloat16)
    fns = [G.mse_loss, G.l1_loss, G.binary_cross_entropy_with_logits, G.smooth_l1_loss]
    with gc.autocast("cpu", dtype=gc.bfloat16):
        assert [f(lo, lo).dtype for f in fns] == [gc.float32] * len(fns)
    assert [f(lo, lo).dtype for f in fns] == [gc.bfloat16] * len(fns)


def test_listed_ops_use_the_region_dtype_and_nothing_else_changes():
    a, b = gc.tensor(A), gc.tensor(B)
    with gc.autocast("cpu"):
        assert gc.get_autocast_dtype("cpu") is gc.bfloat16 and gc.is_autocast_enabled("cpu")
        assert (a @ b).dtype is gc.bfloat16
        assert (a + 1).dtype is gc.float32  # not on a list: runs as it is
    with gc.autocast("cpu", dtype=gc.float16):
        assert (a @ b).dtype is gc.float16
    assert (a @ b).dtype is gc.float32 and not gc.is_autocast_enabled("cpu")


def test_gradients_of_float32_parameters_stay_float32():
    torch = pytest.importorskip("torch")
    grads = []
    for L, F in ((torch, torch.nn.functional), (gc, G)):
        w = L.tensor(B.T.copy(), requires_grad=True)
        x = L.tensor(A)
        with L.autocast("cpu", dtype=L.bfloat16):
            loss = F.cross_entropy(F.linear(x, w), L.tensor(T))
        loss.backward()
        assert str(w.grad.dtype).endswith("float32")
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=2e-2, atol=2e-2)


def test_a_weight_used_twice_is_cast_once_per_region():
    w = gc.tensor(B, requires_grad=True)
    x = gc.tensor(A)

    def casts(fn):
        with gc.profiler() as p:
            fn()
        return sum(row[2] for row in p.summary() if row[0] == "to_dtype")

    with gc.autocast("cpu"):
        assert casts(lambda: (x @ w, x @ w)) == 3  # x twice (not a weight), w once
        y1 = x @ w
        with gc.no_grad():
            w.add_(1.0)  # a new version: cast again
        assert casts(lambda: x @ w) == 2
        y3 = x @ w
    assert not np.array_equal(y3.detach().float().numpy(), y1.detach().float().numpy())
    with gc.autocast("cpu"):  # a new region: cast again
        assert casts(lambda: x @ w) == 2


def test_nesting_threads_and_decorator():
    a, b = gc.tensor(A), gc.tensor(B)
    seen = {}

    def other():
        seen["thread"] = (a @ b).dtype

    with gc.autocast("cpu"):
        with gc.autocast("cpu", enabled=False):
            assert (a @ b).dtype is gc.float32
        assert (a @ b).dtype is gc.bfloat16
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen["thread"] is gc.float32  # regions belong to the thread that entered them

    @gc.autocast("cpu")
    def f(u, v):
        return u @ v

    assert f(a, b).dtype is gc.bfloat16 and (a @ b).dtype is gc.float32


def test_cuda_regions_are_disabled_and_bad_arguments_raise():
    a, b = gc.tensor(A), gc.tensor(B)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = gc.autocast("cuda")
    with region:
        assert (a @ b).dtype is gc.float32
    with pytest.warns(UserWarning, match="CUDA"):
        with gc.cuda.amp.autocast():
            assert (a @ b).dtype is gc.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with gc.autocast("cuda", enabled=False):
            pass
    assert not gc.is_autocast_enabled()
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        gc.autocast("tpu")
    with pytest.raises(RuntimeError, match="bfloat16 or"):
        gc.autocast("cpu", dtype=gc.float64)
    with pytest.raises(ValueError, match="device_type"):
        gc.autocast(0)


def test_backward_inside_the_region_runs_in_the_forward_dtypes():
    grads = []
    for inside in (False, True):
        w = gc.tensor(B.T.copy(), requires_grad=True)
        with gc.autocast("cpu"):
            loss = G.cross_entropy(G.linear(gc.tensor(A), w), gc.tensor(T))
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        grads.append(w.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
