"""Creation functions: tensor/as_tensor/from_numpy, zeros/ones/full/empty, arange, linspace, eye,
the *_like forms and requires_grad, with values against numpy."""

from fractions import Fraction

import numpy as np
import pytest

import gpucore


def vals(t):
    return t.detach().numpy(force=True)


# ----------------------------------------------------------------------------- tensor()
@pytest.mark.parametrize(
    "data,dtype,ref",
    [
        (1.5, gpucore.float32, np.array(1.5, np.float32)),
        (3, gpucore.int64, np.array(3)),
        (True, gpucore.bool, np.array(True)),
        ([1, 2, 3], gpucore.int64, np.array([1, 2, 3])),
        ([1.0, 2.0], gpucore.float32, np.array([1.0, 2.0], np.float32)),
        ([1, 2.5], gpucore.float32, np.array([1.0, 2.5], np.float32)),
        ([True, False], gpucore.bool, np.array([True, False])),
        ([[1, 2], [3, 4]], gpucore.int64, np.array([[1, 2], [3, 4]])),
        ([[[0.5]], [[1.5]]], gpucore.float32, np.array([[[0.5]], [[1.5]]], np.float32)),
        ([], gpucore.float32, np.zeros(0, np.float32)),
        ([[], []], gpucore.float32, np.zeros((2, 0), np.float32)),
        (np.array([1.0, 2.0]), gpucore.float64, np.array([1.0, 2.0])),
        (np.array([1, 2], np.int32), gpucore.int32, np.array([1, 2], np.int32)),
        (np.array([1, 2], np.uint8), gpucore.uint8, np.array([1, 2], np.uint8)),
        (np.array([1, 2], np.int16), gpucore.int16, np.array([1, 2], np.int16)),
        (np.array([1, 2], np.uint32), gpucore.uint32, np.array([1, 2], np.uint32)),
        (np.array([1.5], np.float16), gpucore.float16, np.array([1.5], np.float16)),
        (np.float64(2.5), gpucore.float64, np.array(2.5)),
        (np.int32(4), gpucore.int32, np.array(4, np.int32)),
        (np.array([1.0, 2.0], ">f4"), gpucore.float32, np.array([1.0, 2.0], np.float32)),
    ],
)
def test_tensor_infers_dtype(data, dtype, ref):
    t = gpucore.tensor(data)
    assert t.dtype is dtype
    assert tuple(t.shape) == ref.shape
    np.testing.assert_array_equal(vals(t), ref)


def test_tensor_explicit_dtype_and_copies():
    t = gpucore.tensor([1.7, -2.2], dtype=gpucore.int32)
    assert t.dtype is gpucore.int32 and t.tolist() == [1, -2]
    assert gpucore.tensor([1, 2], dtype="float64").dtype is gpucore.float64
    a = np.ones(3)
    t = gpucore.tensor(a)
    t[0] = 5.0
    assert a[0] == 1.0  # tensor() copies numpy data
    src = gpucore.ones(2)
    c = gpucore.tensor(src)
    c[0] = 9.0
    assert src.tolist() == [1.0, 1.0]  # and tensors
    b = gpucore.tensor([1.5, 2.5], dtype=gpucore.bfloat16)
    assert gpucore.tensor(b).dtype is gpucore.bfloat16 and gpucore.tensor(b).tolist() == [1.5, 2.5]
    assert gpucore.tensor([gpucore.tensor(1.0), gpucore.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert gpucore.tensor(a).is_contiguous()
    nc = np.arange(12.0).reshape(3, 4)[:, ::2]
    assert gpucore.tensor(nc).tolist() == nc.tolist() and gpucore.tensor(nc).is_contiguous()


def test_tensor_bad_data():
    with pytest.raises(gpucore.ShapeError, match="irregular"):
        gpucore.tensor([[1, 2], [3]])
    with pytest.raises(gpucore.DTypeError):
        gpucore.tensor(["a"])
    with pytest.raises(gpucore.DTypeError):
        gpucore.tensor([1 + 2j])
    with pytest.raises(gpucore.DTypeError):
        gpucore.tensor([1.0], dtype="nope")


def test_as_tensor_shares_when_it_can():
    a = np.ones(3, np.float32)
    t = gpucore.as_tensor(a)
    t[0] = 4.0
    assert a[0] == 4.0
    x = gpucore.ones(2)
    assert gpucore.as_tensor(x) is x
    assert gpucore.as_tensor(x, gpucore.float64).dtype is gpucore.float64
    assert gpucore.as_tensor([1, 2]).tolist() == [1, 2]
    # device= as torch.as_tensor: kept where it already is, else moved / made there
    assert gpucore.as_tensor(x, device="cpu") is x
    assert gpucore.as_tensor(a, device="cpu")[0].item() == 4.0
    y = gpucore.as_tensor(2.5, dtype=gpucore.float64, device="cpu")
    assert y.dtype is gpucore.float64 and y.item() == 2.5 and str(y.device) == "cpu"


def test_device_argument():
    for t in (
        gpucore.zeros(2, device="cpu"),
        gpucore.tensor([1.0], device=gpucore.device("cpu")),
        gpucore.arange(3, device="cpu"),
        gpucore.rand(2, device="cpu"),
    ):
        assert t.device == "cpu"
    for make in (
        lambda: gpucore.ones(2, device="cuda"),
        lambda: gpucore.rand(2, device="cuda"),
        lambda: gpucore.tensor([1.0], device="cuda"),
    ):
        with pytest.raises(gpucore.DeviceError, match="cuda"):
            make()
    # creation on the Vulkan device when there is one (DeviceError naming the op when not)
    on_device = [
        lambda: gpucore.randn(2, device="vulkan:0"),
        lambda: gpucore.zeros(2, device="vulkan"),
        lambda: gpucore.tensor([1.0, 2.0], device="vulkan", requires_grad=True),
        lambda: gpucore.full((2,), 3, device="vulkan"),
        lambda: gpucore.arange(3, device=gpucore.device("vulkan")),
        lambda: gpucore.eye(2, device="vulkan"),
        lambda: gpucore.empty(2, 3, device="vulkan"),
        lambda: gpucore.randint(0, 5, (4,), device="vulkan"),
    ]
    if gpucore.dispatch.vulkan_backend(allow_cpu=True) is None:
        for make in on_device:
            with pytest.raises(gpucore.DeviceError, match="vulkan"):
                make()
        return
    for make in on_device:
        t = make()
        assert t.device == "vulkan"
    t = gpucore.tensor([1.0, 2.0], device="vulkan", requires_grad=True)
    assert t.is_leaf and t.requires_grad and t.tolist() == [1.0, 2.0]
    assert gpucore.full((2,), 3, device="vulkan").tolist() == [3, 3]
    assert gpucore.arange(3, device="vulkan").tolist() == [0, 1, 2]


def test_like_functions_keep_the_device():
    if gpucore.dispatch.vulkan_backend(allow_cpu=True) is None:
        pytest.skip("no Vulkan device")
    x = gpucore.ones(2, 3).to("vulkan")
    for t in (
        gpucore.zeros_like(x),
        gpucore.ones_like(x),
        gpucore.empty_like(x),
        gpucore.full_like(x, 7.0),
        gpucore.rand_like(x),
        gpucore.randn_like(x),
        gpucore.randint_like(x, 5),
    ):
        assert t.device == "vulkan" and t.shape == (2, 3)
    assert gpucore.full_like(x, 7.0).tolist() == [[7.0] * 3] * 2
    assert gpucore.zeros_like(x, device="cpu").device == "cpu"


# ----------------------------------------------------------------------------- constant fills
def test_zeros_ones_full_empty():
    np.testing.assert_array_equal(vals(gpucore.zeros(2, 3)), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(vals(gpucore.ones((4,))), np.ones(4, np.float32))
    assert gpucore.zeros(2, 3).dtype is gpucore.float32
    assert gpucore.ones(2, dtype=gpucore.int64).tolist() == [1, 1]
    assert gpucore.zeros(()).shape == () and gpucore.zeros(()).item() == 0.0
    assert gpucore.zeros(0, 3).shape == (0, 3)
    assert gpucore.empty(2, 5).shape == (2, 5) and gpucore.empty(2, 5).dtype is gpucore.float32
    f = gpucore.full((2, 2), 3.25)
    assert f.dtype is gpucore.float32 and f.tolist() == [[3.25, 3.25], [3.25, 3.25]]
    assert gpucore.full((2,), 3).dtype is gpucore.int64
    assert gpucore.full((2,), True).dtype is gpucore.bool
    assert gpucore.full(3, 2.0).shape == (3,)
    assert gpucore.full([2, 1], 7, dtype=gpucore.float16).tolist() == [[7.0], [7.0]]
    assert gpucore.full((1,), 1.00390625, dtype=gpucore.bfloat16).float().item() == 1.0
    assert gpucore.full((2,), float("nan")).numpy().tolist() != [0.0, 0.0]
    assert np.isnan(gpucore.full((2,), float("nan")).numpy()).all()


def test_shape_argument_errors():
    with pytest.raises(gpucore.ShapeError, match="negative"):
        gpucore.zeros(2, -1)
    with pytest.raises(TypeError):
        gpucore.ones(2.5)
    with pytest.raises(TypeError):
        gpucore.zeros(2, size=(3,))
    with pytest.raises(gpucore.ShapeError):
        gpucore.empty(2**31, 2**31)


def test_like_functions():
    src = gpucore.ones(2, 3, dtype=gpucore.int32)
    z = gpucore.zeros_like(src)
    assert z.dtype is gpucore.int32 and z.shape == (2, 3) and z.tolist() == [[0] * 3] * 2
    o = gpucore.ones_like(src, dtype=gpucore.float64)
    assert o.dtype is gpucore.float64 and o.sum().item() == 6.0
    f = gpucore.full_like(src, 4)
    assert f.dtype is gpucore.int32 and f.tolist() == [[4] * 3] * 2
    e = gpucore.empty_like(src)
    assert e.shape == (2, 3) and e.dtype is gpucore.int32
    # like-functions follow the shape, not the strides, of a view
    t = gpucore.zeros(3, 4).T
    assert gpucore.zeros_like(t).shape == (4, 3) and gpucore.zeros_like(t).is_contiguous()


# ----------------------------------------------------------------------------- arange / linspace
@pytest.mark.parametrize(
    "args,dtype,ref",
    [
        ((5,), gpucore.int64, np.arange(5)),
        ((1, 4), gpucore.int64, np.arange(1, 4)),
        ((0, 10, 3), gpucore.int64, np.arange(0, 10, 3)),
        ((5, 0, -2), gpucore.int64, np.arange(5, 0, -2)),
        ((-3, 3), gpucore.int64, np.arange(-3, 3)),
        ((3, 1), gpucore.int64, np.arange(3, 1)),
        ((0, 1, 0.25), gpucore.float32, np.arange(0, 1, 0.25)),
        ((1.0, 0.0, -0.3), gpucore.float32, np.array([1.0, 0.7, 0.4, 0.1])),
        ((0, 1, 0.1), gpucore.float32, np.arange(10) * 0.1),
        ((2.5,), gpucore.float32, np.array([0.0, 1.0, 2.0])),
        ((-1, 1.5), gpucore.float32, np.array([-1.0, 0.0, 1.0])),
    ],
)
def test_arange(args, dtype, ref):
    t = gpucore.arange(*args)
    assert t.dtype is dtype
    assert tuple(t.shape) == ref.shape
    np.testing.assert_allclose(vals(t), ref.astype(vals(t).dtype), rtol=1e-6, atol=1e-7)


def test_arange_dtypes_and_errors():
    assert gpucore.arange(4, dtype=gpucore.float64).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert gpucore.arange(3, dtype=gpucore.float64).dtype is gpucore.float64
    # float steps with an integer dtype: values computed in float64, then truncated (PyTorch)
    assert gpucore.arange(0, 5, 1.5, dtype=gpucore.int64).tolist() == [0, 1, 3, 4]
    assert gpucore.arange(np.int64(3)).tolist() == [0, 1, 2]
    assert gpucore.arange(0, 3, requires_grad=True, dtype=gpucore.float32).requires_grad
    big = gpucore.arange(2**40, 2**40 + 3)
    assert big.tolist() == [2**40, 2**40 + 1, 2**40 + 2]
    with pytest.raises(ValueError, match="nonzero"):
        gpucore.arange(0, 5, 0)
    with pytest.raises(ValueError, match="finite"):
        gpucore.arange(0, float("inf"))
    with pytest.raises(TypeError):
        gpucore.arange("3")


@pytest.mark.parametrize(
    "start,end,steps",
    [(0, 1, 5), (-1, 1, 1), (0, 1, 0), (2, -3, 11), (0.5, 0.5, 3), (0, 10, 2)],
)
def test_linspace(start, end, steps):
    t = gpucore.linspace(start, end, steps)
    assert t.dtype is gpucore.float32 and t.shape == (steps,)
    np.testing.assert_allclose(vals(t), np.linspace(start, end, steps), rtol=1e-6, atol=1e-7)
    if steps >= 2:
        assert vals(t)[0] == np.float32(start) and vals(t)[-1] == np.float32(end)


def test_linspace_dtype_and_errors():
    assert gpucore.linspace(0, 10, steps=3, dtype=gpucore.int64).tolist() == [0, 5, 10]
    assert gpucore.linspace(0, 1, 3, dtype=gpucore.float64).tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="non-negative"):
        gpucore.linspace(0, 1, -1)


def _round_f32(v: Fraction) -> np.float32:
    """The float32 nearest the rational v (ties to even), with no double rounding."""
    f = np.float32(float(v))
    cands = [f, np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - v), int(c.view(np.int32)) & 1))


@pytest.mark.parametrize("start,end,steps", [(-1, 1, 7), (-1, 1, 8), (0.3, -2.7, 13), (0, 1, 100)])
def test_linspace_values_are_pytorchs(start, end, steps):
    """float32: PyTorch's CPU kernel's values bit for bit (the step rounded to float32, then
    start + step * i for the first half and end - step * (n - 1 - i) for the rest, each rounded
    once), which numpy's float64 linspace rounded to float32 misses by an ulp here and there."""
    step = Fraction(float(np.float32(np.float32(end) - np.float32(start)) / np.float32(steps - 1)))
    lo, hi = Fraction(float(np.float32(start))), Fraction(float(np.float32(end)))
    want = [
        _round_f32(lo + step * i if i < steps // 2 else hi - step * (steps - 1 - i))
        for i in range(steps)
    ]
    np.testing.assert_array_equal(vals(gpucore.linspace(start, end, steps)), want)


@pytest.mark.parametrize(
    "start,end,steps", [(-1.0, 1.0, 100001), (9.488182265684756, 62.8933726582672, 4427)]
)
def test_linspace_float64_rounds_each_value_once(start, end, steps):
    """float64: start + step * i (end - step * (n - 1 - i) past the middle) rounded once, as a
    fused multiply-add, against exact rationals (x87's extended precision, rounded twice, missed
    by an ulp in ~0.1 % of these values)."""
    step = (end - start) / (steps - 1)
    got = gpucore.linspace(start, end, steps, dtype=gpucore.float64).numpy()
    lo, hi, st = Fraction(start), Fraction(end), Fraction(step)
    for i in range(0, steps, max(1, steps // 3000)):  # a sample: Fractions are slow
        exact = lo + st * i if i < steps // 2 else hi - st * (steps - 1 - i)
        f = float(exact)  # Fraction -> float rounds once, to nearest even
        assert got[i] == f, (i, got[i], f)


def test_linspace_matches_torch():
    torch = pytest.importorskip("torch")
    for n in (2, 7, 8, 13, 1000):
        for a, b in ((-1, 1), (0.3, -2.7), (-5, 100)):
            for name in ("float32", "float64"):
                t = torch.linspace(a, b, n, dtype=getattr(torch, name)).numpy()
                g = gpucore.linspace(a, b, n, dtype=getattr(gpucore, name)).numpy()
                np.testing.assert_array_equal(g, t)


def test_logspace_matches_torch():
    torch = pytest.importorskip("torch")
    cases = [((0, 3, 4), {}), ((0.0, 1.0, 5), {"base": 2.0}), ((-2, 2, 9), {"base": 3})]
    cases += [((1, 0, 4), {}), ((0, 3, 1), {}), ((0, 3, 0), {}), ((0, 3, 4), {"dtype": "int64"})]
    cases += [((0.5, 2.5, 7), {"dtype": "float64"}), ((0, 40, 5), {})]
    for args, kw in cases:
        gk = {k: getattr(gpucore, v) if k == "dtype" else v for k, v in kw.items()}
        tk = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
        g, t = gpucore.logspace(*args, **gk), torch.logspace(*args, **tk)
        assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (args, kw)
        np.testing.assert_allclose(vals(g), t.numpy(), rtol=1e-6, err_msg=str((args, kw)))
    t = gpucore.logspace(gpucore.tensor(0.0), 2, 3, requires_grad=True)
    assert t.requires_grad and vals(t).tolist() == [1.0, 10.0, 100.0]
    with pytest.raises(ValueError, match="logspace.*non-negative"):
        gpucore.logspace(0, 1, -1)


def test_eye():
    np.testing.assert_array_equal(vals(gpucore.eye(3)), np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(vals(gpucore.eye(2, 4)), np.eye(2, 4, dtype=np.float32))
    np.testing.assert_array_equal(vals(gpucore.eye(4, 2)), np.eye(4, 2, dtype=np.float32))
    assert gpucore.eye(0).shape == (0, 0)
    assert gpucore.eye(2, dtype=gpucore.int64).tolist() == [[1, 0], [0, 1]]
    assert gpucore.eye(2, dtype=gpucore.bool).tolist() == [[True, False], [False, True]]
    with pytest.raises(gpucore.ShapeError):
        gpucore.eye(-1)


# ----------------------------------------------------------------------------- requires_grad
@pytest.mark.parametrize(
    "make",
    [
        lambda: gpucore.tensor([1.0, 2.0], requires_grad=True),
        lambda: gpucore.zeros(2, requires_grad=True),
        lambda: gpucore.ones(2, requires_grad=True),
        lambda: gpucore.empty(2, requires_grad=True),
        lambda: gpucore.full((2,), 3.0, requires_grad=True),
        lambda: gpucore.arange(0.0, 2.0, requires_grad=True),
        lambda: gpucore.linspace(0, 1, 2, requires_grad=True),
        lambda: gpucore.eye(2, requires_grad=True),
        lambda: gpucore.rand(2, requires_grad=True),
        lambda: gpucore.randn(2, requires_grad=True),
        lambda: gpucore.zeros_like(gpucore.ones(2), requires_grad=True),
        lambda: gpucore.ones_like(gpucore.ones(2), requires_grad=True),
        lambda: gpucore.full_like(gpucore.ones(2), 2.0, requires_grad=True),
        lambda: gpucore.rand_like(gpucore.ones(2), requires_grad=True),
        lambda: gpucore.randn_like(gpucore.ones(2), requires_grad=True),
    ],
)
def test_requires_grad_on_creation(make):
    t = make()
    assert t.requires_grad and t.is_leaf and t.grad_fn is None
    (t * t).sum().backward()
    np.testing.assert_allclose(vals(t.grad), 2 * vals(t), rtol=1e-6)


def test_requires_grad_default_off():
    assert not gpucore.zeros(2).requires_grad
    assert not gpucore.tensor([1.0]).requires_grad
    with pytest.raises(gpucore.DTypeError):
        gpucore.zeros(2, dtype=gpucore.int64, requires_grad=True)


def test_full_value_must_fit_dtype():
    with pytest.raises(gpucore.DTypeError, match="uint8"):
        gpucore.full((2,), 300, dtype=gpucore.uint8)
    with pytest.raises(gpucore.DTypeError, match="int64"):
        gpucore.full((2,), float("nan"), dtype=gpucore.int64)
    assert gpucore.full((2,), 1.5, dtype=gpucore.int64).tolist() == [1, 1]
    assert gpucore.full((1,), 1e40).tolist() == [float("inf")]


def test_python_floats_with_a_dtype_are_not_rounded_through_float32():
    x = 0.027756556490226125
    assert gpucore.tensor([x], dtype=gpucore.float64).tolist() == [x]
    assert gpucore.tensor(0.1, dtype=gpucore.float64).item() == 0.1
    assert gpucore.tensor([x]).dtype is gpucore.float32  # without a dtype: float32, as PyTorch
    assert gpucore.tensor([x], dtype=gpucore.float16).numpy()[0] == np.float16(x)


def test_asarray_as_torch():
    torch = pytest.importorskip("torch")
    a = np.ones(3, np.float32)
    g, t = gpucore.asarray(a), torch.asarray(a)
    a[0] = 5  # shared with the array, as PyTorch's
    assert g.tolist() == t.tolist() == [5.0, 1.0, 1.0]
    g, t = gpucore.asarray(a, copy=True), torch.asarray(a, copy=True)
    a[0] = 7
    assert g.tolist() == t.tolist() == [5.0, 1.0, 1.0]
    x = gpucore.ones(2)
    assert gpucore.asarray(x) is x
    assert gpucore.asarray(x, copy=True) is not x
    assert gpucore.asarray(x, dtype=gpucore.float64).dtype is gpucore.float64
    for data in (3.5, [1, 2], [[1.0, 2.0]], np.float64(2.0), True):
        g, t = gpucore.asarray(data), torch.asarray(data)
        assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert g.tolist() == t.tolist()
    assert gpucore.asarray([1.0], requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="asarray"):
        gpucore.asarray([1.0, 2.0], copy=False)
    with pytest.raises(ValueError, match="asarray"):
        gpucore.asarray(x, dtype=gpucore.float64, copy=False)


def test_asarray_on_vulkan(vulkan):
    x = gpucore.asarray([1.0, 2.0], device="vulkan")
    assert x.device.type == "vulkan" and x.tolist() == [1.0, 2.0]
    assert gpucore.asarray(x, device="vulkan") is x
    assert gpucore.asarray(x, device="cpu").device.type == "cpu"


def test_frombuffer_shares_memory_as_torch():
    torch = pytest.importorskip("torch")
    raw = np.arange(6, dtype=np.float32).tobytes()
    ours_buf, theirs_buf = bytearray(raw), bytearray(raw)
    t = gpucore.frombuffer(ours_buf, dtype=gpucore.float32, count=3, offset=4)
    tt = torch.frombuffer(theirs_buf, dtype=torch.float32, count=3, offset=4)
    np.testing.assert_array_equal(t.numpy(), tt.numpy())
    t[0] = 9.0  # writes land in the buffer
    tt[0] = 9.0
    assert ours_buf == theirs_buf
    whole = gpucore.frombuffer(ours_buf, dtype=gpucore.int16)
    assert tuple(whole.shape) == (12,) and whole.dtype is gpucore.int16
    with pytest.warns(UserWarning, match="not writable"):
        ro = gpucore.frombuffer(b"\x01\x02\x03\x04", dtype=gpucore.uint8)
    np.testing.assert_array_equal(ro.numpy(), [1, 2, 3, 4])
    with pytest.raises(ValueError, match="frombuffer"):
        gpucore.frombuffer(bytearray(5), dtype=gpucore.float32)
    # PyTorch refuses empty results: count 0, an offset at or past the end, an empty buffer
    for lib, buf in ((gpucore, ours_buf), (torch, theirs_buf)):
        for kw in ({"count": 0}, {"offset": len(buf)}, {"offset": len(buf) + 4}):
            with pytest.raises(ValueError, match="must|offset"):
                lib.frombuffer(buf, dtype=lib.float32, **kw)
        with pytest.raises(ValueError, match="must not be 0"):
            lib.frombuffer(bytearray(0), dtype=lib.float32)


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize(
    "args,kw", [((1, 4), {}), ((0, 1, 0.25), {}), ((3, 1, -0.5), {}), ((1, 4), {"dtype": "int64"})]
)
def test_range_as_torch(args, kw):
    torch = pytest.importorskip("torch")
    ours = gpucore.range(*args, **{k: getattr(gpucore, v) for k, v in kw.items()})
    theirs = torch.range(*args, **{k: getattr(torch, v) for k, v in kw.items()})
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]


def test_range_warns_and_checks():
    with pytest.warns(UserWarning, match="deprecated"):
        gpucore.range(0, 2)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="step"):
        gpucore.range(0, 2, 0)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="inconsistent"):
        gpucore.range(2, 0, 1)
