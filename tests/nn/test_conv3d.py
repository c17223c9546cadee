"""conv3d (functional, torch.conv3d, nn.Conv3d): values and gradients against PyTorch across
strides, paddings ('same', 'valid', triples), dilations, groups, bias, unbatched inputs;
gradcheck in float64; the module on Vulkan against the CPU; bad arguments."""

import numpy as np
import pytest
from helpers import rand, to_np
from nn_checks import check_function_vs_torch, check_module_vs_torch

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck

# (input shape, weight shape, kwargs)
CASES = [
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), {}),
    ((1, 4, 6, 7, 5), (6, 2, 3, 2, 3), dict(stride=(2, 1, 2), padding=(1, 0, 2), groups=2)),
    ((2, 2, 7, 6, 6), (3, 2, 2, 3, 2), dict(dilation=(2, 1, 2), padding=1, stride=2)),
    ((1, 3, 5, 5, 5), (2, 3, 3, 2, 3), dict(padding="same", dilation=(2, 1, 1))),
    ((1, 2, 4, 5, 6), (2, 2, 2, 2, 2), dict(padding="same")),  # even kernels: one more after
    ((1, 2, 4, 5, 6), (3, 2, 1, 3, 3), dict(padding="valid")),
    ((2, 6, 4, 4, 4), (6, 1, 3, 1, 2), dict(groups=6, padding=(1, 0, 1))),  # depthwise
    ((3, 4, 5, 6), (5, 3, 2, 3, 1), dict(padding=1)),  # unbatched
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape,wshape,kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_conv3d_matches_torch(shape, wshape, kw, bias):
    torch = pytest.importorskip("torch")
    inputs = [rand(shape, seed=1), rand(wshape, seed=2)]
    if bias:
        inputs.append(rand((wshape[0],), seed=3))
    check_function_vs_torch(
        lambda *a: F.conv3d(*a, **kw), lambda *a: torch.nn.functional.conv3d(*a, **kw), inputs
    )


def test_toplevel_conv3d_matches_torch():
    torch = pytest.importorskip("torch")
    inputs = [rand((1, 2, 4, 5, 4), seed=1), rand((3, 2, 2, 2, 2), seed=2)]
    check_function_vs_torch(
        lambda x, w: gpucore.conv3d(x, w, None, 2, 1), lambda x, w: torch.conv3d(x, w, None, 2, 1),
        inputs,
    )  # fmt: skip


def test_conv3d_gradcheck():
    x = gpucore.tensor(rand((1, 2, 4, 4, 3), seed=4), requires_grad=True)
    w = gpucore.tensor(rand((2, 1, 2, 3, 2), seed=5), requires_grad=True)
    b = gpucore.tensor(rand((2,), seed=6), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv3d(x, w, b, (2, 1, 1), 1, (1, 1, 2), 2), (x, w, b))


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3),
        dict(kernel_size=(2, 3, 1), stride=(2, 1, 1), padding=(1, 1, 0), groups=2, bias=False),
        dict(kernel_size=2, padding="same", dilation=(1, 2, 1)),
    ],
)
def test_conv3d_module_matches_torch(kw):
    torch = pytest.importorskip("torch")
    m = nn.Conv3d(4, 6, **kw)
    tm = torch.nn.Conv3d(4, 6, **kw)
    check_module_vs_torch(m, tm, [rand((2, 4, 5, 5, 4), seed=7)])
    assert m(gpucore.tensor(rand((4, 5, 5, 4), seed=8))).ndim == 4  # unbatched


def test_conv3d_module_init_bounds():
    """PyTorch's init: kaiming_uniform_(a=sqrt(5)) and a bias within 1/sqrt(fan_in)."""
    gpucore.manual_seed(0)
    m = nn.Conv3d(4, 8, (2, 3, 3), groups=2)
    fan_in = 2 * 2 * 3 * 3
    bound = 1 / np.sqrt(fan_in)
    assert tuple(m.weight.shape) == (8, 2, 2, 3, 3)
    assert np.abs(to_np(m.weight)).max() <= bound + 1e-7
    assert np.abs(to_np(m.bias)).max() <= bound + 1e-7
    assert np.abs(to_np(m.weight)).max() > 0.5 * bound


def test_conv3d_module_on_vulkan_matches_cpu(vulkan):
    gpucore.manual_seed(1)
    m = nn.Conv3d(3, 4, (2, 3, 3), stride=(1, 2, 1), padding=1)
    x = rand((2, 3, 4, 6, 5), seed=9).astype(np.float32)
    xc = gpucore.tensor(x, requires_grad=True)
    with gpucore.device_policy("cpu"):  # the reference: every op on the host
        out = m(xc)
        out.sum().backward()
    assert out.device.type == "cpu"
    want = [to_np(out), to_np(xc.grad), to_np(m.weight.grad)]
    m.zero_grad()
    m.to("vulkan")
    xv = gpucore.tensor(x, device="vulkan", requires_grad=True)
    outv = m(xv)
    assert outv.device.type == "vulkan"
    outv.sum().backward()
    got = [to_np(outv), to_np(xv.grad), to_np(m.weight.grad)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "args,kw,exc,match",
    [
        (((1, 2, 4, 4), (3, 2, 2, 2)), {}, gpucore.ShapeError, r"conv3d\(\): weight must be 5-D"),
        (((2, 4, 4), (3, 2, 2, 2, 2)), {}, gpucore.ShapeError, r"conv3d\(\): expected a 4-D"),
        (((1, 3, 4, 4, 4), (2, 2, 2, 2, 2)), {}, gpucore.ShapeError, r"has 3 channels"),
        (((1, 2, 4, 4, 4), (3, 2, 2, 2, 2)), dict(groups=2), ValueError, r"groups must be"),
        (((1, 2, 2, 4, 4), (3, 2, 3, 2, 2)), {}, gpucore.ShapeError, r"smaller than the dilated"),
        (((1, 2, 4, 4, 4), (3, 2, 2, 2, 2)), dict(stride=(1, 2)), ValueError, r"a triple"),
        (((1, 2, 4, 4, 4), (3, 2, 2, 2, 2)), dict(padding="full"), ValueError, r"'same'"),
        (((1, 2, 4, 4, 4), (3, 2, 2, 2, 2)), dict(padding="same", stride=2), ValueError, "strided"),
    ],
)
def test_conv3d_bad_arguments(args, kw, exc, match):
    x, w = (gpucore.tensor(rand(s, seed=i)) for i, s in enumerate(args))
    with pytest.raises(exc, match=match):
        F.conv3d(x, w, **kw)


def test_conv3d_bad_bias_and_dtype():
    x, w = gpucore.tensor(rand((1, 2, 3, 3, 3))), gpucore.tensor(rand((3, 2, 2, 2, 2)))
    with pytest.raises(gpucore.ShapeError, match=r"conv3d\(\): bias must have shape \(3,\)"):
        F.conv3d(x, w, gpucore.zeros(2, dtype=gpucore.float64))
    with pytest.raises(gpucore.DTypeError, match=r"conv3d\(\): input .* and weight"):
        F.conv3d(x, w.to(gpucore.float32))
    with pytest.raises(ValueError, match=r"Conv3d: kernel_size must be an int or a triple"):
        nn.Conv3d(2, 3, (2, 2))


# (input shape, weight shape [C, O/groups, kd, kh, kw], kwargs)
TRANSPOSED = [
    ((2, 4, 3, 4, 5), (4, 3, 2, 3, 2), dict(stride=(2, 1, 2), padding=(1, 0, 1))),
    ((1, 4, 4, 3, 3), (4, 2, 3, 2, 2), dict(groups=2, dilation=(2, 1, 2), stride=(1, 2, 1))),
    ((1, 2, 3, 3, 4), (2, 3, 3, 3, 2), dict(stride=2, padding=1, output_padding=(1, 0, 1))),
    ((4, 3, 3, 3), (4, 5, 2, 2, 2), {}),  # unbatched
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "shape,wshape,kw", TRANSPOSED, ids=[str(i) for i in range(len(TRANSPOSED))]
)
def test_conv_transpose3d_matches_torch(shape, wshape, kw, bias):
    torch = pytest.importorskip("torch")
    inputs = [rand(shape, seed=1), rand(wshape, seed=2)]
    if bias:
        inputs.append(rand((wshape[1] * kw.get("groups", 1),), seed=3))
    check_function_vs_torch(
        lambda *a: F.conv_transpose3d(*a, **kw),
        lambda *a: torch.nn.functional.conv_transpose3d(*a, **kw),
        inputs,
    )
    if not bias:
        check_function_vs_torch(
            lambda *a: gpucore.conv_transpose3d(*a, None, **kw),
            lambda *a: torch.conv_transpose3d(*a, None, **kw),
            inputs,
        )


def test_conv_transpose3d_gradcheck():
    x = gpucore.tensor(rand((1, 2, 2, 3, 2), seed=4), requires_grad=True)
    w = gpucore.tensor(rand((2, 2, 2, 2, 3), seed=5), requires_grad=True)
    b = gpucore.tensor(rand((4,), seed=6), requires_grad=True)
    assert gradcheck(
        lambda x, w, b: F.conv_transpose3d(x, w, b, (2, 1, 2), (1, 0, 1), (1, 0, 0), 2), (x, w, b)
    )


def test_conv_transpose3d_module_matches_torch():
    torch = pytest.importorskip("torch")
    kw = dict(kernel_size=(3, 2, 3), stride=2, padding=(1, 0, 1), groups=2)
    m, tm = nn.ConvTranspose3d(4, 6, **kw), torch.nn.ConvTranspose3d(4, 6, **kw)
    x = rand((2, 4, 3, 3, 4), seed=7)
    check_module_vs_torch(m, tm, [x])
    size = (6, 7, 8)  # output_size picks output_padding (1, 1, 1)
    check_module_vs_torch(m, tm, [x], output_size=size)


def test_conv_transpose3d_module_on_vulkan_matches_cpu(vulkan):
    gpucore.manual_seed(2)
    m = nn.ConvTranspose3d(3, 4, (2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 1))
    x = rand((2, 3, 3, 4, 3), seed=9).astype(np.float32)
    results = []
    for device in ("cpu", "vulkan"):
        m.zero_grad()
        m.to(device)
        with gpucore.device_policy(device):
            t = gpucore.tensor(x, device=device, requires_grad=True)
            out = m(t)
            assert out.device.type == device
            (out * out).sum().backward()
        results.append([to_np(out), to_np(t.grad), to_np(m.weight.grad)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "xs,ws,kw,exc,match",
    [
        ((1, 2, 3, 3, 3), (2, 3, 2, 2), {}, gpucore.ShapeError, r"weight must be 5-D"),
        ((1, 3, 3, 3, 3), (2, 3, 2, 2, 2), {}, gpucore.ShapeError, r"does not fit weight"),
        ((1, 2, 3, 3, 3), (2, 3, 2, 2, 2), dict(output_padding=1), ValueError, "output_padding"),
        ((1, 2, 1, 3, 3), (2, 3, 1, 2, 2), dict(padding=1), gpucore.ShapeError, "not positive"),
    ],
)
def test_conv_transpose3d_bad_arguments(xs, ws, kw, exc, match):
    x, w = gpucore.tensor(rand(xs, seed=1)), gpucore.tensor(rand(ws, seed=2))
    with pytest.raises(exc, match=r"conv_transpose3d\(\): .*" + match):
        F.conv_transpose3d(x, w, **kw)


def test_compiled_3d_network_matches_eager():
    """The compositions trace into the inference runtime (every choice in max_pool3d is computed
    in the graph, not taken for a constant): the compiled model equals eager on other inputs."""
    gpucore.manual_seed(0)
    m = nn.Sequential(
        nn.Conv3d(2, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool3d(2),
        nn.ConvTranspose3d(4, 3, 2, stride=2),
        nn.AvgPool3d(3, 2, 1, count_include_pad=False),
        nn.AdaptiveAvgPool3d((1, 2, 2)),
    )
    example = gpucore.tensor(rand((2, 2, 6, 8, 8), seed=1).astype(np.float32))
    compiled = gpucore.runtime.compile(m, (example,))
    x = gpucore.tensor(rand((2, 2, 6, 8, 8), seed=2).astype(np.float32))
    with gpucore.no_grad():
        want = to_np(m(x))
    np.testing.assert_allclose(to_np(compiled(x)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "n,kw",
    [
        (1, dict(kernel_size=3, padding=2, stride=2)),
        (2, dict(kernel_size=(3, 2), padding=(1, 2), dilation=(1, 2))),
        (2, dict(kernel_size=(2, 3), padding="same", groups=2)),
        (3, dict(kernel_size=3, padding=(1, 2, 1), stride=(1, 2, 1))),
        (3, dict(kernel_size=(2, 2, 3), padding="same")),
    ],
)
def test_conv_padding_modes_match_torch(n, kw, mode):
    """Conv1d/2d/3d with padding_mode reflect / replicate / circular: F.pad in that mode, then
    an unpadded convolution, as PyTorch."""
    torch = pytest.importorskip("torch")
    name = f"Conv{n}d"
    m = getattr(nn, name)(4, 6, padding_mode=mode, **kw)
    tm = getattr(torch.nn, name)(4, 6, padding_mode=mode, **kw)
    shape = (2, 4) + (6, 7, 5)[:n]
    check_module_vs_torch(m, tm, [rand(shape, seed=3)])
    check_module_vs_torch(m, tm, [rand(shape[1:], seed=4)])  # unbatched
