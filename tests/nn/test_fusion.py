"""gpucore.nn.utils.fusion: a convolution, transposed convolution or linear layer with an eval-mode
BatchNorm folded in computes what the two did (float64), with and without a bias or affine
parameters; the weights against PyTorch's fusion where installed; errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
from gpucore.nn.utils import fusion


def _randomise(*modules, seed=0):
    rng = np.random.default_rng(seed)
    with gpucore.no_grad():
        for m in modules:
            for t in [*m.parameters(), *m.buffers()]:
                if t.dtype.is_floating_point:
                    t.copy_(gpucore.tensor(rng.uniform(0.5, 1.5, tuple(t.shape))))


@pytest.mark.parametrize(
    "make,shape",
    [
        (lambda: nn.Conv2d(3, 4, 3, padding=1), (2, 3, 5, 5)),
        (lambda: nn.Conv2d(3, 4, 3, bias=False), (2, 3, 5, 5)),
        (lambda: nn.Conv1d(2, 3, 2), (2, 2, 6)),
        (lambda: nn.ConvTranspose2d(3, 4, 2, stride=2), (1, 3, 3, 3)),
    ],
)
@pytest.mark.parametrize("affine", [True, False])
def test_fuse_conv_bn_eval(make, shape, affine):
    conv = make().double()
    bn = getattr(nn, f"BatchNorm{len(shape) - 2}d")(conv.out_channels, affine=affine).double()
    _randomise(conv, bn)
    conv.eval()
    bn.eval()
    x = gpucore.tensor(np.random.default_rng(1).standard_normal(shape))
    fused = fusion.fuse_conv_bn_eval(conv, bn, transpose=isinstance(conv, nn.ConvTranspose2d))
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-12)
    assert isinstance(fused.weight, nn.Parameter) and fused.bias is not None
    assert fused is not conv and conv.weight is not fused.weight


def test_fuse_linear_bn_eval_and_errors():
    lin, bn = nn.Linear(3, 4).double(), nn.BatchNorm1d(4).double()
    _randomise(lin, bn)
    x = gpucore.tensor(np.random.default_rng(2).standard_normal((5, 3)))
    with pytest.raises(RuntimeError, match="fusion only for eval"):
        fusion.fuse_linear_bn_eval(lin, bn)
    lin.eval()
    bn.eval()
    fused = fusion.fuse_linear_bn_eval(lin, bn)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(lin(x)).detach().numpy(), rtol=1e-12)
    with pytest.raises(gpucore.ShapeError, match="must match"):
        fusion.fuse_linear_bn_eval(lin, nn.BatchNorm1d(3).eval())
    assert nn.utils.fusion is fusion


def test_fused_weights_match_torch():
    torch = pytest.importorskip("torch")
    conv, bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
    _randomise(conv, bn)
    args = [conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias]
    targs = [torch.tensor(a.detach().numpy()) if hasattr(a, "numpy") else a for a in args]
    got = fusion.fuse_conv_bn_weights(*args)
    want = torch.nn.utils.fusion.fuse_conv_bn_weights(*targs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6)
