"""F.grid_sample and F.affine_grid: values and gradients against PyTorch (every mode, padding
mode and align_corners, 4-D and 5-D), against numpy float64 (gpucore/ops/grid_sample.py's
reference) and finite differences, the C kernel against the composition device tensors run,
Vulkan against the CPU, and errors."""

import warnings
from fractions import Fraction

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck
from gpucore.nn.functional.grid import grid_sample_composed
from gpucore.ops.grid_sample import np_grid_sample

CASES = [
    (mode, pad, align, nd)
    for mode in ("bilinear", "nearest", "bicubic")
    for pad in ("zeros", "border", "reflection")
    for align in (False, True)
    for nd in (2, 3)
    if not (mode == "bicubic" and nd == 3)
]


def _inputs(nd, seed=0, n=2, c=3, lo=-1.4, hi=1.4):
    rng = np.random.default_rng(seed)
    sp = (5, 6) if nd == 2 else (3, 4, 5)
    osp = (4, 3) if nd == 2 else (2, 3, 2)
    x = rng.standard_normal((n, c) + sp)
    grid = rng.uniform(lo, hi, (n,) + osp + (nd,))
    return x, grid


def _t(a, dtype=gpucore.float64, grad=False, device="cpu"):
    return gpucore.tensor(np.asarray(a), dtype=dtype, device=device, requires_grad=grad)


@pytest.mark.parametrize("mode,pad,align,nd", CASES)
def test_grid_sample_matches_torch(mode, pad, align, nd):
    torch = pytest.importorskip("torch")
    x, grid = _inputs(nd, seed=len(mode) + nd)
    for dtype, tdtype, tol in ((gpucore.float64, torch.float64, 1e-10),
                               (gpucore.float32, torch.float32, 1e-4)):  # fmt: skip
        gx, gg = _t(x, dtype, True), _t(grid, dtype, True)
        out = F.grid_sample(gx, gg, mode, pad, align)
        w = np.random.default_rng(3).standard_normal(out.shape)
        (out * _t(w, dtype)).sum().backward()
        tx = torch.tensor(x, dtype=tdtype, requires_grad=True)
        tg = torch.tensor(grid, dtype=tdtype, requires_grad=True)
        tout = torch.nn.functional.grid_sample(tx, tg, mode, pad, align)
        (tout * torch.tensor(w, dtype=tdtype)).sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(
            gx.grad.detach().numpy(), tx.grad.detach().numpy(), rtol=tol, atol=tol
        )
        np.testing.assert_allclose(
            gg.grad.detach().numpy(), tg.grad.detach().numpy(), rtol=tol, atol=tol * 10
        )


@pytest.mark.parametrize("mode,pad,align,nd", CASES)
def test_grid_sample_matches_numpy_and_composition(mode, pad, align, nd):
    x, grid = _inputs(nd, seed=7)
    want = np_grid_sample(x, grid, mode, pad, align)
    out = F.grid_sample(_t(x), _t(grid), mode, pad, align)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    # the composition (device tensors' path) on the host: same values and gradients
    a, b = _t(x, grad=True), _t(grid, grad=True)
    c, d = _t(x, grad=True), _t(grid, grad=True)
    w = _t(np.random.default_rng(1).standard_normal(want.shape))
    (F.grid_sample(a, b, mode, pad, align) * w).sum().backward()
    (grid_sample_composed(c, d, mode, pad, align) * w).sum().backward()
    np.testing.assert_allclose(
        c.grad.detach().numpy(), a.grad.detach().numpy(), rtol=1e-10, atol=1e-12
    )
    if mode != "nearest":
        np.testing.assert_allclose(
            d.grad.detach().numpy(), b.grad.detach().numpy(), rtol=1e-9, atol=1e-10
        )
    else:
        assert not b.grad.detach().numpy().any()


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample_gradcheck(mode, pad):
    x, grid = _inputs(2, seed=11, n=1, c=2, lo=-0.9, hi=0.9)
    gradcheck(
        lambda a, b: F.grid_sample(a, b, mode, pad, align_corners=False),
        (_t(x, grad=True), _t(grid, grad=True)),
    )


def test_grid_sample_trilinear_gradcheck():
    x, grid = _inputs(3, seed=12, n=1, c=2, lo=-0.9, hi=0.9)
    gradcheck(
        lambda a, b: F.grid_sample(a, b, "bilinear", "zeros", align_corners=True),
        (_t(x, grad=True), _t(grid, grad=True)),
    )


def test_grid_sample_identity_and_edges():
    x, _ = _inputs(2, seed=2)
    theta = _t(np.tile(np.array([[1.0, 0, 0], [0, 1, 0]]), (2, 1, 1)))
    for align in (False, True):
        grid = F.affine_grid(theta, (2, 3, 5, 6), align_corners=align)
        out = F.grid_sample(_t(x), grid, align_corners=align)
        np.testing.assert_allclose(out.detach().numpy(), x, atol=1e-12)
    # NaN and huge coordinates sample nothing (zeros padding)
    g = np.zeros((2, 1, 3, 2))
    g[:, 0, 0] = np.nan
    g[:, 0, 1] = 1e30
    out = F.grid_sample(_t(x), _t(g), align_corners=False).detach().numpy()
    assert (out[:, :, 0, :2] == 0).all()
    # float16 runs in float32 and comes back float16
    h = F.grid_sample(_t(x, gpucore.float16), _t(g * 0, gpucore.float16), align_corners=False)
    assert h.dtype is gpucore.float16


def test_grid_sample_align_corners_none_warns():
    x, grid = _inputs(2)
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.grid_sample(_t(x), _t(grid))
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.affine_grid(_t(np.zeros((1, 2, 3))), (1, 1, 2, 2))


def test_grid_sample_double_backward_raises():
    x, grid = _inputs(2)
    a, b = _t(x, grad=True), _t(grid, grad=True)
    (ga,) = gpucore.autograd.grad(
        F.grid_sample(a, b, align_corners=False).sum(), [a], create_graph=True
    )
    with pytest.raises(NotImplementedError, match="double backward"):
        ga.sum().backward()


@pytest.mark.parametrize("nd,align", [(2, False), (2, True), (3, False), (3, True)])
def test_affine_grid_matches_torch(nd, align):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(nd)
    theta = rng.standard_normal((2, nd, nd + 1))
    size = (2, 3, 4, 5) if nd == 2 else (2, 3, 2, 4, 3)
    t = _t(theta, grad=True)
    g = F.affine_grid(t, size, align_corners=align)
    w = rng.standard_normal(g.shape)
    (g * _t(w)).sum().backward()
    tt = torch.tensor(theta, requires_grad=True)
    tg = torch.nn.functional.affine_grid(tt, size, align_corners=align)
    (tg * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(t.grad.detach().numpy(), tt.grad.detach().numpy(), atol=1e-10)


def _fused_linspace(n, dtype):
    """PyTorch's CPU linspace(-1, 1, n): the step rounded to dtype, then start + step * i (first
    half) or end - step * (n - 1 - i), each exact (rational) and rounded once."""
    step = Fraction(float(dtype(2) / dtype(n - 1)))
    exact = [-1 + step * i if i < n // 2 else 1 - step * (n - 1 - i) for i in range(n)]
    if dtype is np.float64:
        return np.array([float(v) for v in exact])
    # float32: round the rational to the nearest float32 directly (no double rounding)
    out = []
    for v in exact:
        f = np.float32(float(v))
        cands = [f, np.nextafter(f, np.float32(-2)), np.nextafter(f, np.float32(2))]
        out.append(
            min(cands, key=lambda c: (abs(Fraction(float(c)) - v), int(c.view(np.int32)) & 1))
        )
    return np.array(out, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("align", [True, False])
def test_affine_grid_base_coordinates_are_pytorchs(dtype, align):
    """The identity map's grid is the base grid itself: PyTorch's linspace values bit for bit
    (one ulp off, mode='nearest' picks the other pixel at a pixel-centre tie)."""
    for h, w in [(7, 8), (13, 5), (16, 9)]:
        theta = gpucore.tensor(np.eye(2, 3)[None].astype(dtype))
        g = F.affine_grid(theta, (1, 1, h, w), align_corners=align).numpy()
        for n, got in ((w, g[0, 0, :, 0]), (h, g[0, :, 0, 1])):
            want = _fused_linspace(n, dtype)
            if not align:
                want = want * dtype(n - 1) / dtype(n)
            np.testing.assert_array_equal(got, want)


def test_affine_grid_unit_size_warns_with_align_corners():
    theta = _t(np.eye(2, 3)[None])
    with pytest.warns(UserWarning, match="unit-size"):
        g = F.affine_grid(theta, (1, 1, 1, 3), align_corners=True)
    assert g.shape == (1, 1, 3, 2)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda x, g: F.grid_sample(x, g, "area"), ValueError, "expected mode"),
        (lambda x, g: F.grid_sample(x, g, padding_mode="wrap"), ValueError, "padding_mode"),
        (lambda x, g: F.grid_sample(x[0], g), gpucore.ShapeError, "4D or 5D"),
        (lambda x, g: F.grid_sample(x, g[:1]), gpucore.ShapeError, "same batch size"),
        (lambda x, g: F.grid_sample(x, g[..., :1]), gpucore.ShapeError, "size 2 in last"),
        (lambda x, g: F.grid_sample(x, g.float()), gpucore.DTypeError, "same dtype"),
        (lambda x, g: F.grid_sample(x.to(gpucore.int64), g), gpucore.DTypeError, "floating"),
        (lambda x, g: F.grid_sample(x[:, :, :0], g), gpucore.ShapeError, "non-empty spatial"),
        (
            lambda x, g: F.grid_sample(x.unsqueeze(2), _t(np.zeros((2, 1, 4, 3, 3))), "bicubic"),
            gpucore.ShapeError,
            "bicubic",
        ),  # fmt: skip
        (lambda x, g: F.affine_grid(x, (2, 3, 4, 4)), ValueError, "Nx2x3"),
        (lambda x, g: F.affine_grid(x[:, 0, :2, :3], (2, 3, 4)), NotImplementedError, "4D and 5D"),
        (lambda x, g: F.affine_grid(x[:, 0, :2, :3], (2, 3, 0, 4)), ValueError, "positive"),
        (
            lambda x, g: F.affine_grid(x[:, 0, :2, :3].to(gpucore.int64), (2, 3, 4, 4)),
            ValueError,
            "floating point",
        ),  # fmt: skip
    ],
)
def test_errors(call, exc, match):
    x, grid = _inputs(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            call(_t(x), _t(grid))


def test_grid_sample_on_vulkan_matches_cpu(vulkan):
    for mode, pad, align, nd in CASES[::3] + [("bicubic", "reflection", True, 2)]:
        x, grid = _inputs(nd, seed=5)
        got, want = [], []
        for device, into in (("vulkan", got), ("cpu", want)):
            with gpucore.device_policy(device):
                a = _t(x, gpucore.float32, True, device)
                b = _t(grid, gpucore.float32, True, device)
                out = F.grid_sample(a, b, mode, pad, align)
                assert out.device.type == device
                (out * out).sum().backward()
            into += [out.detach().numpy(), a.grad.detach().numpy(), b.grad.detach().numpy()]
        for u, v in zip(got, want):
            np.testing.assert_allclose(u, v, rtol=2e-4, atol=2e-4)
    theta = np.random.default_rng(0).standard_normal((2, 2, 3))
    g_dev = F.affine_grid(_t(theta, gpucore.float32, device="vulkan"), (2, 1, 3, 4), False)
    g_cpu = F.affine_grid(_t(theta, gpucore.float32), (2, 1, 3, 4), False)
    assert g_dev.device.type == "vulkan"
    np.testing.assert_allclose(g_dev.detach().numpy(), g_cpu.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_huge_coordinates_sample_zeros_as_torch(mode):
    # Points far outside (up to the 1e15 limit and beyond) sample zero padding; their taps'
    # offsets (coordinate times a plane's stride) must never be formed, they would overflow.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 2, 100, 100))
    big = np.array([1e12, -1e12, 9.9e14, -9.9e14, 1e15, 3e15, -3e15, 1e20, 0.5, -0.25])
    g = np.stack(np.meshgrid(big, big, big, indexing="ij"), -1).reshape(1, 1, 1, -1, 3)
    for d in ((1, 0, 2), (2, 1, 0), (0, 1, 2)):
        gg = np.ascontiguousarray(g[..., list(d)])
        want = torch.nn.functional.grid_sample(
            torch.tensor(x), torch.tensor(gg), mode=mode, padding_mode="zeros",
            align_corners=False,
        ).numpy()  # fmt: skip
        got = F.grid_sample(
            gpucore.tensor(x), gpucore.tensor(gg), mode=mode, padding_mode="zeros",
            align_corners=False,
        ).numpy()  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert np.count_nonzero(want) > 0  # the in-range points still sample the input


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_reflection_far_outside_matches_torch(mode, align):
    # points many reflections away on both sides (odd and even fold counts: the gradient's sign
    # flips with each fold), at float64 precision
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 5, 7))
    k = np.arange(-9, 10)
    coords = np.concatenate([k + rng.uniform(0.05, 0.95, k.size), k * 0.8 + 0.123])
    grid = np.stack([coords, coords[::-1] * 1.3], -1).reshape(1, 1, -1, 2)
    gx, gg = _t(x, grad=True), _t(grid, grad=True)
    tx = torch.tensor(x, requires_grad=True)
    tg = torch.tensor(grid, requires_grad=True)
    out = F.grid_sample(gx, gg, mode, "reflection", align)
    tout = torch.nn.functional.grid_sample(tx, tg, mode, "reflection", align)
    w = rng.standard_normal(tuple(tout.shape))
    (out * _t(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gg.grad.numpy(), tg.grad.numpy(), rtol=1e-9, atol=1e-10)
