"""gcd, lcm, frexp, ldexp and nextafter (gpucore/ops/numeric.py) against PyTorch and numpy:
dtypes, broadcasting, edges (0, inf, NaN, subnormals, negative integers), gradients, in-place
forms, device tensors and errors."""

import numpy as np
import pytest
from torch_compare import same_as_torch

import gpucore as gc


def _ints(*shape, seed, low=-50, high=50):
    return np.random.default_rng(seed).integers(low, high, shape)


@pytest.mark.parametrize("name", ["gcd", "lcm"])
@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64"])
def test_gcd_lcm_as_torch(name, dt):
    torch = pytest.importorskip("torch")
    lo = 0 if dt == "uint8" else -11
    a = _ints(4, 5, seed=1, low=lo, high=12).astype(dt)
    b = _ints(5, seed=2, low=lo, high=12).astype(dt)
    a[0, :2] = 0
    b[1] = 0
    got = getattr(gc, name)(gc.tensor(a), gc.tensor(b))
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(got.numpy(), getattr(np, name)(a, b).astype(dt))


def test_gcd_promotes_and_works_in_place():
    a = gc.tensor([12, -18, 0], dtype=gc.int32)
    r = gc.gcd(a, gc.tensor([8, 12, 5]))
    assert r.dtype is gc.int64 and r.tolist() == [4, 6, 5]
    a.gcd_(gc.tensor([8, 12, 5], dtype=gc.int32))
    assert a.tolist() == [4, 6, 5]
    b = gc.tensor([4, 6])
    b.lcm_(gc.tensor([6, 4]))
    assert b.tolist() == [12, 12]


@pytest.mark.parametrize("name", ["gcd", "lcm", "nextafter"])
def test_refuses_wrong_dtypes(name):
    ints, floats = gc.tensor([4, 6]), gc.tensor([1.0, 2.0])
    bad = (floats, floats) if name != "nextafter" else (ints, ints)
    with pytest.raises(gc.DTypeError, match=name):
        getattr(gc, name)(*bad)
    if name != "nextafter":
        with pytest.raises(gc.DTypeError, match=name):
            getattr(gc, name)(gc.tensor([True]), gc.tensor([True]))


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
def test_frexp_as_torch(dt):
    torch = pytest.importorskip("torch")
    x = np.array([8.0, -3.0, 0.0, -0.0, np.inf, -np.inf, 0.375, 1e-40, 6e-8, 1000.0, np.nan])
    if dt in ("float16", "bfloat16"):
        x = x[[0, 1, 2, 3, 4, 5, 6, 9, 10]]
    g = gc.frexp(gc.tensor(x, dtype=getattr(gc, dt)))
    t = torch.frexp(torch.tensor(x, dtype=getattr(torch, dt)))
    assert g.mantissa.dtype is getattr(gc, dt) and g.exponent.dtype is gc.int32
    np.testing.assert_array_equal(g.mantissa.float().numpy(), t.mantissa.float().numpy())
    np.testing.assert_array_equal(g.exponent.numpy(), t.exponent.numpy())


def test_frexp_gradient_as_torch():
    x = np.random.default_rng(3).uniform(-40, 40, (3, 4))
    same_as_torch(lambda m, x: m.frexp(x)[0], x)


def test_frexp_refuses_integers():
    with pytest.raises(gc.DTypeError, match="frexp"):
        gc.frexp(gc.tensor([3]))


def test_ldexp_as_torch():
    x = np.random.default_rng(4).uniform(-3, 3, (3, 4))
    e = np.random.default_rng(5).uniform(-3, 3, (4,))
    same_as_torch(lambda m, x, e: m.ldexp(x, e), x, e)
    torch = pytest.importorskip("torch")
    got = gc.ldexp(gc.tensor([3, 5]), gc.tensor([2, -1]))
    want = torch.ldexp(torch.tensor([3, 5]), torch.tensor([2, -1]))
    assert got.dtype is gc.float32 and got.tolist() == want.tolist()


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
def test_nextafter_as_torch(dt):
    torch = pytest.importorskip("torch")
    a = np.array([3.0, -1.0, 0.0, -0.0, 1.0, np.inf, np.nan, 2.0, -5.0, 65504.0])
    b = np.array([4.0, 0.0, -1.0, 1.0, 1.0, 0.0, 1.0, np.nan, -np.inf, np.inf])
    got = gc.nextafter(gc.tensor(a, dtype=getattr(gc, dt)), gc.tensor(b, dtype=getattr(gc, dt)))
    want = torch.nextafter(torch.tensor(a, dtype=getattr(torch, dt)),
                           torch.tensor(b, dtype=getattr(torch, dt)))  # fmt: skip
    assert got.dtype is getattr(gc, dt)
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())


def test_nextafter_promotes_and_broadcasts():
    r = gc.nextafter(gc.tensor([[1.0], [2.0]]), gc.tensor([0.0, 3.0], dtype=gc.float64))
    assert r.dtype is gc.float64 and r.shape == (2, 2)
    np.testing.assert_array_equal(r.numpy(), np.nextafter([[1.0], [2.0]], [0.0, 3.0]))


def test_on_vulkan_the_cpu_answers(vulkan):
    a, b = _ints(6, seed=6), _ints(6, seed=7)
    with gc.device_policy("cpu"):
        want = gc.gcd(gc.tensor(a), gc.tensor(b)).numpy()
        x = np.random.default_rng(8).uniform(-9, 9, (5,)).astype(np.float32)
        m_want = gc.frexp(gc.tensor(x)).mantissa.numpy()
    got = gc.gcd(gc.tensor(a, device="vulkan"), gc.tensor(b, device="vulkan"))
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(gc.frexp(gc.tensor(x, device="vulkan")).mantissa.numpy(), m_want)
