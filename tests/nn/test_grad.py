"""gpucore.nn.grad (nn.functional.grad): the convolution gradients as functions against
torch.nn.grad (1-D, 2-D and 3-D, stride / padding / dilation / groups, an input size that a
stride leaves ambiguous), against autograd's own gradient, double backward, and errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore.autograd import gradcheck

CASES = [
    (1, (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, dilation=1, groups=2)),
    (2, (2, 4, 7, 6), (6, 2, 3, 2), dict(stride=2, padding=1, dilation=1, groups=2)),
    (2, (2, 4, 8, 6), (6, 2, 3, 2), dict(stride=2, padding=1, dilation=1, groups=2)),
    (2, (1, 3, 6, 6), (2, 3, 2, 2), dict(stride=1, padding=0, dilation=2, groups=1)),
    (3, (1, 2, 5, 4, 4), (3, 2, 2, 2, 2), dict(stride=(2, 1, 1), padding=1)),
]


@pytest.mark.parametrize("dims,xs,ws,kw", CASES)
def test_conv_grads_as_torch_and_autograd(dims, xs, ws, kw):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(sum(xs))
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    gx, gw = gpucore.tensor(x, requires_grad=True), gpucore.tensor(w, requires_grad=True)
    y = conv(gx, gw, None, **kw)
    go = rng.standard_normal(tuple(y.shape))
    y.backward(gpucore.tensor(go))
    name = f"conv{dims}d"
    ours_in = getattr(gpucore.nn.grad, name + "_input")(
        xs, gpucore.tensor(w), gpucore.tensor(go), **kw
    )
    ours_w = getattr(F.grad, name + "_weight")(gpucore.tensor(x), ws, gpucore.tensor(go), **kw)
    tg = torch.nn.grad
    theirs_in = getattr(tg, name + "_input")(xs, torch.tensor(w), torch.tensor(go), **kw)
    theirs_w = getattr(tg, name + "_weight")(torch.tensor(x), ws, torch.tensor(go), **kw)
    np.testing.assert_allclose(ours_in.numpy(), theirs_in.numpy(), atol=1e-12)
    np.testing.assert_allclose(ours_w.numpy(), theirs_w.numpy(), atol=1e-12)
    np.testing.assert_allclose(ours_in.numpy(), gx.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(ours_w.numpy(), gw.grad.numpy(), atol=1e-12)


def test_conv_grads_are_differentiable_and_check_shapes():
    rng = np.random.default_rng(3)
    w = gpucore.tensor(rng.standard_normal((2, 3, 2, 2)), requires_grad=True)
    go = gpucore.tensor(rng.standard_normal((1, 2, 4, 4)), requires_grad=True)
    assert gradcheck(lambda w, g: F.grad.conv2d_input((1, 3, 5, 5), w, g), (w, go))
    x = gpucore.tensor(rng.standard_normal((1, 3, 5, 5)), requires_grad=True)
    assert gradcheck(lambda x, g: F.grad.conv2d_weight(x, (2, 3, 2, 2), g), (x, go))
    with pytest.raises(gpucore.ShapeError, match="grad_output"):
        F.grad.conv2d_input((1, 3, 6, 6), w.detach(), go.detach())
