"""max_pool3d, avg_pool3d, adaptive_avg_pool3d and adaptive_max_pool3d (functional,
torch.max_pool3d, the modules): values, PyTorch's flat D*H*W indices and gradients against
PyTorch across kernels, strides, paddings, dilations, ceil_mode, count_include_pad,
divisor_override, ties, NaN and -inf windows, unbatched inputs; gradcheck in float64; Vulkan
against the CPU; bad arguments."""

import numpy as np
import pytest
from helpers import rand, to_np
from nn_checks import check_function_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck

MAX_CASES = [
    ((2, 3, 6, 5, 7), dict(kernel_size=2)),
    ((1, 2, 7, 6, 5), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 8, 5, 6), dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0))),
    ((2, 1, 9, 6, 7), dict(kernel_size=(3, 2, 2), stride=(2, 2, 1), dilation=(2, 1, 2))),
    ((1, 2, 7, 7, 6), dict(kernel_size=3, stride=2, padding=1, dilation=(2, 1, 1))),
    ((1, 2, 6, 6, 5), dict(kernel_size=(2, 2, 3), stride=(2, 2, 2), ceil_mode=True)),
    ((1, 1, 7, 5, 8), dict(kernel_size=3, stride=(3, 2, 2), padding=1, ceil_mode=True)),
    ((2, 5, 5, 6), dict(kernel_size=2, stride=1)),  # unbatched
    ((1, 2, 4, 5, 6), dict(kernel_size=(1, 3, 2), stride=(2, 1, 2))),  # one depth tap
]


def _ties_and_nans(shape, seed, nan: bool):
    x = np.round(rand(shape, seed=seed) * 2)  # many ties: the first maximum must win
    if nan:
        x.reshape(-1)[::11] = np.nan
    return x


@pytest.mark.parametrize("nan", [False, True], ids=["ties", "nan"])
@pytest.mark.parametrize("shape,kw", MAX_CASES, ids=[str(i) for i in range(len(MAX_CASES))])
def test_max_pool3d_matches_torch(shape, kw, nan):
    torch = pytest.importorskip("torch")
    x = _ties_and_nans(shape, 1, nan)
    ours = F.max_pool3d(gpucore.tensor(x), return_indices=True, **kw)
    theirs = torch.nn.functional.max_pool3d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(to_np(ours[0]), theirs[0].numpy())  # NaN where torch has
    np.testing.assert_array_equal(to_np(ours[1]), theirs[1].numpy())
    if not nan:  # gradients: one input element per window, summed where windows overlap
        check_function_vs_torch(
            lambda a: F.max_pool3d(a, return_indices=True, **kw),
            lambda a: torch.nn.functional.max_pool3d(a, return_indices=True, **kw),
            [x],
        )


def test_max_pool3d_nan_gradient_goes_to_the_last_nan():
    torch = pytest.importorskip("torch")
    x = _ties_and_nans((1, 1, 4, 4, 4), 2, nan=True)
    gx, tx = gpucore.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.max_pool3d(gx, 2, 1).sum().backward()
    torch.nn.functional.max_pool3d(tx, 2, 1).sum().backward()
    np.testing.assert_array_equal(to_np(gx.grad), tx.grad.numpy())


def test_max_pool3d_all_minus_inf_windows_index_the_first_inside():
    torch = pytest.importorskip("torch")
    x = np.full((1, 1, 5, 4, 4), -np.inf)
    x[0, 0, 4, 3, 3] = 1.0
    kw = dict(kernel_size=3, stride=2, padding=1, dilation=(2, 1, 1), return_indices=True)
    ours = F.max_pool3d(gpucore.tensor(x), **kw)
    theirs = torch.nn.functional.max_pool3d(torch.tensor(x), **kw)
    np.testing.assert_array_equal(to_np(ours[0]), theirs[0].numpy())
    np.testing.assert_array_equal(to_np(ours[1]), theirs[1].numpy())


AVG_CASES = [
    ((2, 3, 6, 5, 7), dict(kernel_size=2)),
    ((1, 2, 7, 6, 5), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 6, 5), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((1, 2, 8, 5, 6), dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0))),
    ((1, 2, 6, 6, 5), dict(kernel_size=(2, 2, 3), stride=2, ceil_mode=True)),
    ((1, 2, 8, 5, 6), dict(kernel_size=(3, 3, 2), stride=(2, 2, 3), padding=1, ceil_mode=True)),
    (
        (1, 2, 8, 5, 6),
        dict(
            kernel_size=(3, 3, 2),
            stride=(2, 2, 3),
            padding=1,
            ceil_mode=True,
            count_include_pad=False,
        ),
    ),  # fmt: skip
    ((2, 2, 5, 5, 5), dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
    ((2, 5, 5, 5), dict(kernel_size=2, ceil_mode=True, divisor_override=3)),  # unbatched
]


@pytest.mark.parametrize("shape,kw", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
def test_avg_pool3d_matches_torch(shape, kw):
    torch = pytest.importorskip("torch")
    check_function_vs_torch(
        lambda a: F.avg_pool3d(a, **kw),
        lambda a: torch.nn.functional.avg_pool3d(a, **kw),
        [rand(shape, seed=3)],
    )


@pytest.mark.parametrize("size", [(3, 2, 4), 2, (None, 4, None), 1, (5, 6, 7)])
def test_adaptive_avg_pool3d_matches_torch(size):
    torch = pytest.importorskip("torch")
    check_function_vs_torch(
        lambda a: F.adaptive_avg_pool3d(a, size),
        lambda a: torch.nn.functional.adaptive_avg_pool3d(a, size),
        [rand((2, 3, 7, 6, 5), seed=4)],
    )


def test_pools3d_gradcheck():
    x = gpucore.tensor(rand((1, 2, 5, 4, 5), seed=5), requires_grad=True)
    assert gradcheck(lambda a: F.max_pool3d(a, (2, 3, 2), (2, 1, 2), 1, ceil_mode=True), (x,))
    assert gradcheck(
        lambda a: F.avg_pool3d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False), (x,)
    )
    assert gradcheck(lambda a: F.adaptive_avg_pool3d(a, (3, 2, 4)), (x,))


@pytest.mark.parametrize(
    "name,args",
    [
        ("MaxPool3d", dict(kernel_size=(2, 3, 2), stride=2, padding=1, return_indices=True)),
        ("MaxPool3d", dict(kernel_size=3, stride=(1, 2, 2), dilation=2, ceil_mode=True)),
        ("AvgPool3d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
        ("AvgPool3d", dict(kernel_size=2, ceil_mode=True, divisor_override=7)),
        ("AdaptiveAvgPool3d", dict(output_size=(2, None, 3))),
    ],
)
def test_pool3d_modules_match_torch(name, args):
    torch = pytest.importorskip("torch")
    m, tm = getattr(nn, name)(**args), getattr(torch.nn, name)(**args)
    assert repr(m) == repr(tm)
    x = rand((2, 3, 7, 6, 7), seed=6)
    check_function_vs_torch(m, tm, [x])
    check_function_vs_torch(m, tm, [x[0]])  # unbatched


def test_toplevel_max_pool3d_matches_torch():
    torch = pytest.importorskip("torch")
    check_function_vs_torch(
        lambda a: gpucore.max_pool3d(a, 2, (), 1), lambda a: torch.max_pool3d(a, 2, (), 1),
        [rand((1, 2, 5, 4, 4), seed=7)],
    )  # fmt: skip


def test_pool3d_modules_on_vulkan_match_cpu(vulkan):
    x = rand((2, 3, 6, 5, 6), seed=8).astype(np.float32)
    for m in (
        nn.MaxPool3d(3, 2, 1, return_indices=True),
        nn.AvgPool3d((2, 3, 2), 2, 1, ceil_mode=True, count_include_pad=False),
        nn.AdaptiveAvgPool3d((2, 3, 4)),
        nn.AdaptiveMaxPool3d((4, 3, 4), return_indices=True),
    ):
        got, want = [], []
        for device, into in (("vulkan", got), ("cpu", want)):
            with gpucore.device_policy(device):
                t = gpucore.tensor(x, device=device, requires_grad=True)
                out = m(t)
                vals = out[0] if isinstance(out, tuple) else out
                assert vals.device.type == device
                (vals * vals).sum().backward()
            into += [to_np(o) for o in (out if isinstance(out, tuple) else (out,))]
            into.append(to_np(t.grad))
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "fn,kw,exc,match",
    [
        (F.max_pool3d, dict(kernel_size=2, padding=2), ValueError, r"max_pool3d\(\): padding"),
        (F.max_pool3d, dict(kernel_size=(2, 2)), ValueError, r"kernel_size .* triple"),
        (F.max_pool3d, dict(kernel_size=9), gpucore.ShapeError, r"max_pool3d\(\): input of"),
        (F.avg_pool3d, dict(kernel_size=2, padding=(0, 2, 0)), ValueError, r"pool3d\(\): padding"),
        (F.avg_pool3d, dict(kernel_size=2, divisor_override=0), ValueError, r"divisor_override"),
        (F.adaptive_avg_pool3d, dict(output_size=(2, 2)), ValueError, r"a triple"),
        (F.adaptive_avg_pool3d, dict(output_size=0), ValueError, r"must be positive"),
    ],
)
def test_pool3d_bad_arguments(fn, kw, exc, match):
    with pytest.raises(exc, match=match):
        fn(gpucore.tensor(rand((1, 2, 4, 4, 4), seed=9)), **kw)


def test_pool3d_bad_rank():
    for fn in (F.max_pool3d, F.avg_pool3d):
        with pytest.raises(gpucore.ShapeError, match=r"pool3d\(\): expected a 4-D"):
            fn(gpucore.tensor(rand((2, 4, 4), seed=9)), 2)


@pytest.mark.parametrize("size", [(3, 2, 4), 2, (None, 4, None), 1, (4, 5, 3)])
def test_adaptive_max_pool3d_matches_torch(size):
    torch = pytest.importorskip("torch")
    x = _ties_and_nans((2, 3, 7, 6, 5), 5, nan=False)
    check_function_vs_torch(
        lambda a: F.adaptive_max_pool3d(a, size, return_indices=True),
        lambda a: torch.nn.functional.adaptive_max_pool3d(a, size, return_indices=True),
        [x],
    )
    m, tm = nn.AdaptiveMaxPool3d(size), torch.nn.AdaptiveMaxPool3d(size)
    assert repr(m) == repr(tm)
    check_function_vs_torch(m, tm, [x[0]])  # unbatched


def test_adaptive_max_pool3d_gradcheck():
    x = gpucore.tensor(rand((1, 2, 5, 4, 5), seed=5), requires_grad=True)
    assert gradcheck(lambda a: F.adaptive_max_pool3d(a, (3, 2, 4)), (x,))
