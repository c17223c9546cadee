"""gpucore.set_default_dtype / get_default_dtype (gpucore/legacy.py over dtypes.default_float):
what follows the default floating dtype, compared with torch 2.x under the same default where
torch is installed and with the expectations written here otherwise."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn.functional  # noqa: F401 - m.nn.functional in the cases

try:
    import torch
except ImportError:  # the hand-written expectations still run
    torch = None

FLOATS = ("float64", "float16", "bfloat16")


@pytest.fixture(autouse=True)
def _restore_default():
    """Every test leaves both libraries at the default it found, even when it fails."""
    old = gc.get_default_dtype()
    old_torch = torch.get_default_dtype() if torch is not None else None
    yield
    gc.set_default_dtype(old)
    if torch is not None:
        torch.set_default_dtype(old_torch)


def _set(name: str, with_torch: bool = False) -> None:
    gc.set_default_dtype(getattr(gc, name))
    if with_torch:
        torch.set_default_dtype(getattr(torch, name))


def _i(m):
    return m.tensor([1, 2, 3])


def _f32(m):
    return m.tensor([0.5, 1.5], dtype=m.float32)


# (name, expression over the library module m, result dtype: "default" for the default floating
# dtype, else its name, whether the values are deterministic and compared)
CASES = [
    ("tensor(float)", lambda m: m.tensor(1.5), "default", True),
    ("tensor(list of floats)", lambda m: m.tensor([1.0, 2]), "default", True),
    ("tensor(nested)", lambda m: m.tensor([[0.1, 0.2], [1e-3, 3]]), "default", True),
    ("tensor(int)", lambda m: m.tensor(3), "int64", True),
    ("tensor(bool)", lambda m: m.tensor([True]), "bool", True),
    ("as_tensor(floats)", lambda m: m.as_tensor([1.5, 2.5]), "default", True),
    ("zeros", lambda m: m.zeros(2, 3), "default", True),
    ("ones", lambda m: m.ones(2), "default", True),
    ("empty", lambda m: m.empty(2, 2), "default", False),
    ("full(float)", lambda m: m.full((2,), 1.5), "default", True),
    ("full(int)", lambda m: m.full((2,), 7), "int64", True),
    ("full(bool)", lambda m: m.full((2,), True), "bool", True),
    ("arange(float)", lambda m: m.arange(3.0), "default", True),
    ("arange(float step)", lambda m: m.arange(0, 1, 0.25), "default", True),
    ("arange(int)", lambda m: m.arange(3), "int64", True),
    ("linspace", lambda m: m.linspace(0, 1, 5), "default", True),
    ("eye", lambda m: m.eye(2, 3), "default", True),
    ("rand", lambda m: m.rand(3), "default", False),
    ("randn", lambda m: m.randn(3), "default", False),
    ("normal(numbers)", lambda m: m.normal(0.0, 1.0, (3,)), "default", False),
    ("randint", lambda m: m.randint(0, 3, (2,)), "int64", False),
    ("zeros_like(int)", lambda m: m.zeros_like(_i(m)), "int64", True),
    ("ones_like(float32)", lambda m: m.ones_like(_f32(m)), "float32", True),
    ("rand_like(float32)", lambda m: m.rand_like(_f32(m)), "float32", False),
    ("new_zeros(float32)", lambda m: _f32(m).new_zeros(2), "float32", True),
    ("FloatTensor", lambda m: m.FloatTensor([1, 2]), "float32", True),
    ("DoubleTensor", lambda m: m.DoubleTensor([1, 2]), "float64", True),
    ("Tensor(data)", lambda m: m.Tensor([1, 2]), "default", True),
    ("Tensor(sizes)", lambda m: m.Tensor(2, 3), "default", False),
    ("int / int", lambda m: _i(m) / 2, "default", True),
    ("int / int tensor", lambda m: _i(m) / _i(m).flip(0), "default", True),
    ("true_divide", lambda m: m.true_divide(_i(m), 4), "default", True),
    ("int * float", lambda m: _i(m) * 1.5, "default", True),
    ("float * int", lambda m: 0.1 * _i(m), "default", True),
    ("int + float", lambda m: _i(m) + 0.5, "default", True),
    ("int - float", lambda m: _i(m) - 0.1, "default", True),
    ("int ** float", lambda m: _i(m) ** 0.5, "default", True),
    ("float ** int", lambda m: 1.5 ** _i(m), "default", True),
    ("remainder(int, float)", lambda m: m.remainder(_i(m), 1.5), "default", True),
    ("bool + float", lambda m: m.tensor([True, False]) + 1.5, "default", True),
    ("int.exp", lambda m: _i(m).exp(), "default", True),
    ("int.sqrt", lambda m: _i(m).sqrt(), "default", True),
    ("int.sin", lambda m: _i(m).sin(), "default", True),
    ("int.sigmoid", lambda m: _i(m).sigmoid(), "default", True),
    ("int.log", lambda m: _i(m).log(), "default", True),
    ("int.rsqrt", lambda m: _i(m).rsqrt(), "default", True),
    ("logsumexp(int)", lambda m: m.logsumexp(_i(m), 0), "default", True),
    ("deg2rad(int)", lambda m: m.deg2rad(_i(m)), "default", True),
    ("atan2(int, int)", lambda m: m.atan2(_i(m), _i(m).flip(0)), "default", True),
    ("xlogy(int, int)", lambda m: m.xlogy(_i(m), _i(m)), "default", True),
    ("clamp(int, float)", lambda m: _i(m).clamp(1.5), "default", True),
    ("where(int, float)", lambda m: m.where(_i(m) > 1, _i(m), 0.5), "default", True),
    ("erf(int)", lambda m: m.erf(_i(m)), "default", True),
    ("cumsum(int)", lambda m: _i(m).cumsum(0), "int64", True),
    ("int.float()", lambda m: _i(m).float(), "float32", True),
    ("float32 * float", lambda m: _f32(m) * 1.5, "float32", True),
    ("int * 0-d float32", lambda m: _i(m) * m.tensor(1.5, dtype=m.float32), "float32", True),
    ("float16 + bfloat16", lambda m: m.ones(2, dtype=m.float16) + m.ones(2, dtype=m.bfloat16),
     "float32", True),
    ("block_diag()", lambda m: m.block_diag(), "default", True),
    ("Linear.weight", lambda m: m.nn.Linear(2, 3).weight, "default", False),
    ("Linear.bias", lambda m: m.nn.Linear(2, 3).bias, "default", False),
    ("Conv2d.weight", lambda m: m.nn.Conv2d(1, 2, 3).weight, "default", False),
    ("Embedding.weight", lambda m: m.nn.Embedding(4, 2).weight, "default", False),
    ("LayerNorm.weight", lambda m: m.nn.LayerNorm(3).weight, "default", True),
    ("BatchNorm1d.running_var", lambda m: m.nn.BatchNorm1d(3).running_var, "default", True),
    ("LSTM.weight_ih_l0", lambda m: m.nn.LSTM(2, 3).weight_ih_l0, "default", False),
    ("PReLU.weight", lambda m: m.nn.PReLU().weight, "default", True),
    ("causal mask", lambda m: m.nn.Transformer.generate_square_subsequent_mask(3), "default",
     True),
]  # fmt: skip
IDS = [c[0] for c in CASES]


def _expected(kind: str, default: str) -> str:
    return default if kind == "default" else kind


def _values(t) -> list:
    return t.detach().to(t.dtype if t.dtype is gc.float64 else gc.float64).tolist()


@pytest.mark.parametrize("default", FLOATS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dtype_follows_the_default(case, default):
    name, expr, kind, _ = case
    _set(default)
    assert gc.get_default_dtype() is getattr(gc, default)
    assert str(expr(gc).dtype) == f"gpucore.{_expected(kind, default)}", name


@pytest.mark.parametrize("default", FLOATS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_same_as_torch(case, default):
    if torch is None:
        pytest.skip("torch is not installed")
    name, expr, kind, deterministic = case
    _set(default, with_torch=True)
    ours, theirs = expr(gc), expr(torch)
    assert str(theirs.dtype) == f"torch.{_expected(kind, default)}", name  # the table is torch's
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], name
    assert tuple(ours.shape) == tuple(theirs.shape), name
    if deterministic:
        tol = {"float64": 1e-12, "float16": 1e-3, "bfloat16": 8e-3}[default]
        np.testing.assert_allclose(
            np.array(_values(ours)), theirs.detach().double().numpy(), rtol=tol, atol=tol
        )


@pytest.mark.parametrize("bad", [gc.int64, gc.int32, gc.uint8, gc.bool, "int64"])
def test_non_floating_dtypes_are_refused(bad):
    _set("float64")
    with pytest.raises(TypeError, match="only floating-point types are supported as the default"):
        gc.set_default_dtype(bad)
    assert gc.get_default_dtype() is gc.float64  # unchanged by the refused call
    if torch is not None:  # torch's error, in the same words
        with pytest.raises(TypeError, match="only floating-point types are supported as the"):
            torch.set_default_dtype(getattr(torch, str(bad).split(".")[-1]))


def test_restoring_float32():
    _set("float64")
    assert gc.zeros(1).dtype is gc.float64
    gc.set_default_dtype(gc.float32)
    assert gc.get_default_dtype() is gc.float32
    for t in (gc.zeros(1), gc.tensor(0.1), gc.nn.Linear(1, 1).weight, gc.tensor([1]) / 2):
        assert t.dtype is gc.float32
    assert gc.tensor(0.1).item() == float(np.float32(0.1))


def test_python_floats_keep_their_precision():
    _set("float64")
    assert gc.tensor(0.1).item() == 0.1  # straight from the Python float, no float32 rounding
    assert gc.tensor([1 / 3, 2.0]).tolist() == [1 / 3, 2.0]
    assert gc.full((1,), 0.1).item() == 0.1 and gc.arange(0, 0.35, 0.1)[3].item() == 0.1 * 3
    assert gc.linspace(0, 1, 4)[1].item() == 1 / 3
    _set("float16")
    assert gc.tensor(0.1).item() == float(np.float16(0.1))


def test_the_setting_is_process_global():
    seen = []
    _set("float64")
    worker = threading.Thread(target=lambda: seen.append((gc.get_default_dtype(), gc.ones(1))))
    worker.start()
    worker.join()
    assert seen[0][0] is gc.float64 and seen[0][1].dtype is gc.float64
    worker = threading.Thread(target=lambda: gc.set_default_dtype(gc.bfloat16))
    worker.start()
    worker.join()
    assert gc.get_default_dtype() is gc.bfloat16  # as torch: one default for every thread


def test_repr_and_finfo_follow_the_default():
    _set("float64")
    assert repr(gc.ones(2)) == "tensor([1., 1.])"
    assert repr(gc.ones(2, dtype=gc.float32)) == "tensor([1., 1.], dtype=gpucore.float32)"
    assert gc.finfo().eps == np.finfo(np.float64).eps and gc.finfo().dtype == "float64"
    if torch is not None:
        torch.set_default_dtype(torch.float64)
        for dt in ("float32", "float64", "float16"):
            ours = repr(gc.tensor([0.5, 2.0], dtype=getattr(gc, dt)))
            assert ours == repr(torch.tensor([0.5, 2.0], dtype=getattr(torch, dt))).replace(
                "torch.", "gpucore."
            )
        assert gc.finfo().eps == torch.finfo().eps


def test_mean_of_integers_still_refuses():
    _set("float64")  # torch too: the default dtype does not make mean() of ints legal
    with pytest.raises(TypeError, match="could not infer output dtype"):
        gc.tensor([1, 2]).mean()
    assert gc.tensor([1, 2]).mean(dtype=gc.get_default_dtype()).item() == 1.5


def _mlp_step_numpy(x, t, w1, b1, w2, b2, lr):
    """One SGD step of tanh MLP + MSE loss, by hand in float64: (loss, new parameters)."""
    h = np.tanh(x @ w1.T + b1)
    y = h @ w2.T + b2
    loss = ((y - t) ** 2).mean()
    dy = 2 * (y - t) / y.size
    dz = (dy @ w2) * (1 - h**2)
    grads = (dz.T @ x, dz.sum(0), dy.T @ h, dy.sum(0))
    return loss, [p - lr * g for p, g in zip((w1, b1, w2, b2), grads)]


def test_a_model_built_under_float64_trains_in_float64():
    _set("float64")
    gc.manual_seed(3)
    model = gc.nn.Sequential(gc.nn.Linear(3, 4), gc.nn.Tanh(), gc.nn.Linear(4, 2))
    assert all(p.dtype is gc.float64 for p in model.parameters())
    x = gc.tensor([[0.1, -0.7, 1.3], [2.2, 0.4, -0.9]])  # Python floats: float64 now
    t = gc.tensor([[0.3, -0.1], [1.0 / 3, 0.7]])
    before = [p.detach().numpy().copy() for p in model.parameters()]
    opt = gc.optim.SGD(model.parameters(), lr=0.1)
    loss = gc.nn.functional.mse_loss(model(x), t)
    loss.backward()
    opt.step()
    assert loss.dtype is gc.float64
    ref_loss, ref_params = _mlp_step_numpy(x.numpy(), t.numpy(), *before, 0.1)
    assert abs(loss.item() - ref_loss) <= 1e-14 * abs(ref_loss)  # float32 would be ~1e-7 off
    for p, ref in zip(model.parameters(), ref_params):
        assert p.dtype is gc.float64
        np.testing.assert_allclose(p.detach().numpy(), ref, rtol=1e-12, atol=1e-15)
    if torch is not None:  # the same step in torch under its float64 default
        torch.set_default_dtype(torch.float64)
        tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        with torch.no_grad():
            for tp, b in zip(tm.parameters(), before):
                tp.copy_(torch.from_numpy(b))
        tloss = torch.nn.functional.mse_loss(tm(torch.tensor(x.tolist())), torch.tensor(t.tolist()))
        tloss.backward()
        torch.optim.SGD(tm.parameters(), lr=0.1).step()
        assert abs(loss.item() - tloss.item()) <= 1e-14 * abs(tloss.item())
        for p, tp in zip(model.parameters(), tm.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12)


def test_vulkan_tensors_follow_the_default(vulkan):
    _set("float64")
    for t in (
        gc.zeros(2, device="vulkan"),
        gc.rand(2, device="vulkan"),
        gc.eye(2, device="vulkan"),
    ):
        assert t.dtype is gc.float64 and t.device.type == "vulkan"
    i = gc.tensor([1, 2, 3], device="vulkan")
    # float64 results (computed wherever dispatch runs float64) with the host's values
    for ours, host in ((i / 4, gc.tensor([1, 2, 3]) / 4), (i * 0.1, gc.tensor([1, 2, 3]) * 0.1)):
        assert ours.dtype is gc.float64 and ours.cpu().tolist() == host.tolist()


def test_set_default_tensor_type_as_torchs_deprecated_form():
    for t in (gc.DoubleTensor, "torch.HalfTensor", "gpucore.BFloat16Tensor", gc.FloatTensor):
        with pytest.warns(UserWarning, match="deprecated"):
            gc.set_default_tensor_type(t)
        want = t.dtype if not isinstance(t, str) else getattr(gc, t.split(".")[1]).dtype
        assert gc.get_default_dtype() is want and gc.zeros(1).dtype is want
    for bad in (gc.LongTensor, "torch.IntTensor", "torch.cuda.FloatTensor", gc.float64, "x"):
        with pytest.warns(UserWarning), pytest.raises(TypeError, match="floating|invalid type"):
            gc.set_default_tensor_type(bad)
    assert gc.get_default_dtype() is gc.float32
    if torch is not None:
        with pytest.warns(UserWarning):
            torch.set_default_tensor_type("torch.DoubleTensor")
        with pytest.warns(UserWarning):
            gc.set_default_tensor_type("torch.DoubleTensor")
        assert str(torch.tensor(0.5).dtype).split(".")[1] == str(gc.tensor(0.5).dtype).split(".")[1]
        for bad in ("LongTensor", "IntTensor"):  # refused by both, as TypeError
            with pytest.raises(TypeError):
                torch.set_default_tensor_type(getattr(torch, bad))
            with pytest.warns(UserWarning), pytest.raises(TypeError):
                gc.set_default_tensor_type(getattr(gc, bad))
