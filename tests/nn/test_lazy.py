"""nn.Buffer, UninitializedParameter / UninitializedBuffer and the Lazy modules: sizes inferred
from the first input, the same parameter objects materialised (an optimizer made before the
first call trains them), the module turned into its ordinary class, results equal to that class
with the same weights, and PyTorch's shapes."""

import copy

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn


def _t(a, dtype=gpucore.float32, grad=False):
    return gpucore.tensor(np.asarray(a), dtype=dtype, requires_grad=grad)


def test_buffer_registers_on_assignment():
    m = nn.Module()
    m.stats = nn.Buffer(gpucore.ones(3))
    m.scratch = nn.Buffer(gpucore.zeros(2), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["stats", "scratch"]
    assert list(m.state_dict()) == ["stats"]
    assert isinstance(m.stats, gpucore.Tensor) and m.stats.persistent
    assert not list(m.parameters())


def test_uninitialized_parameter():
    p = nn.UninitializedParameter()
    assert isinstance(p, nn.Parameter) and p.requires_grad
    with pytest.raises(ValueError, match="uninitialized parameter"):
        p.numel()
    p.materialize((2, 3), dtype=gpucore.float64)
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.dtype is gpucore.float64
    b = nn.UninitializedBuffer()
    b.materialize((4,))
    assert type(b) is gpucore.Tensor and b.shape == (4,)


CASES = [
    (lambda: nn.LazyLinear(5), nn.Linear, (3, 7)),
    (lambda: nn.LazyLinear(5, bias=False), nn.Linear, (2, 3, 4)),
    (lambda: nn.LazyConv1d(4, 3, padding=1), nn.Conv1d, (2, 3, 8)),
    (lambda: nn.LazyConv2d(4, 3, stride=2), nn.Conv2d, (2, 3, 7, 7)),
    (lambda: nn.LazyConv2d(4, 3), nn.Conv2d, (3, 6, 6)),  # unbatched
    (lambda: nn.LazyConv3d(2, 2), nn.Conv3d, (1, 3, 4, 4, 4)),
    (lambda: nn.LazyConvTranspose1d(4, 3), nn.ConvTranspose1d, (2, 3, 5)),
    (lambda: nn.LazyConvTranspose2d(4, 3, stride=2), nn.ConvTranspose2d, (2, 3, 4, 4)),
    (lambda: nn.LazyConvTranspose3d(2, 2), nn.ConvTranspose3d, (1, 3, 3, 3, 3)),
    (lambda: nn.LazyBatchNorm1d(), nn.BatchNorm1d, (4, 3)),
    (lambda: nn.LazyBatchNorm2d(momentum=0.2), nn.BatchNorm2d, (4, 3, 2, 2)),
    (lambda: nn.LazyBatchNorm3d(affine=False), nn.BatchNorm3d, (2, 3, 2, 2, 2)),
    (lambda: nn.LazyInstanceNorm1d(), nn.InstanceNorm1d, (2, 3, 5)),
    (lambda: nn.LazyInstanceNorm2d(affine=True), nn.InstanceNorm2d, (2, 3, 4, 4)),
    (lambda: nn.LazyInstanceNorm3d(track_running_stats=True), nn.InstanceNorm3d, (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("make,cls,shape", CASES)
def test_lazy_module_becomes_its_class(make, cls, shape):
    m = make()
    assert isinstance(m, nn.modules.lazy.LazyModuleMixin)
    before = dict(m.named_parameters())
    opt = gpucore.optim.SGD(m.parameters(), lr=0.1) if before else None
    x = _t(np.random.default_rng(0).standard_normal(shape))
    out = m(x)
    assert type(m) is cls
    assert not any(
        isinstance(v, (nn.UninitializedParameter, nn.UninitializedBuffer))
        for v in (*m.parameters(), *m.buffers())
    )
    after = dict(m.named_parameters())
    assert all(after[k] is before[k] for k in before)  # the same objects, materialised
    twin = copy.deepcopy(m)
    np.testing.assert_allclose(out.detach().numpy(), twin(x).detach().numpy(), rtol=1e-6)
    if opt is not None:
        w = next(iter(before.values()))
        old = w.detach().numpy().copy()
        m(x).square().sum().backward()
        opt.step()
        assert not np.allclose(w.detach().numpy(), old)


@pytest.mark.parametrize("make,cls,shape", CASES)
def test_lazy_shapes_match_torch(make, cls, shape):
    torch = pytest.importorskip("torch")
    m = make()
    m(_t(np.zeros(shape)))
    tm = {
        nn.Linear: lambda: torch.nn.LazyLinear(m.out_features, bias=m.bias is not None),
    }.get(cls)
    name = "Lazy" + cls.__name__
    if tm is None:
        kw = {}
        if "Conv" in name:
            kw = dict(out_channels=m.out_channels, kernel_size=m.kernel_size, stride=m.stride)
        else:
            kw = dict(affine=m.affine, track_running_stats=m.track_running_stats)
        tm = lambda: getattr(torch.nn, name)(**kw)  # noqa: E731
    t = tm()
    t(torch.zeros(shape))
    ours = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in t.state_dict().items()}
    assert ours == theirs


def test_lazy_errors():
    with pytest.raises(ValueError, match="in_channels"):
        nn.LazyConv2d(4, 3)(_t(np.zeros((2, 3))))


def test_load_state_dict_materialises_a_lazy_module():
    src = nn.Linear(4, 3)
    m = nn.LazyLinear(3)
    m.load_state_dict(src.state_dict())
    assert type(m.weight) is nn.Parameter and m.weight.shape == (3, 4)
    x = _t(np.random.default_rng(1).standard_normal((2, 4)))
    np.testing.assert_allclose(m(x).detach().numpy(), src(x).detach().numpy(), rtol=1e-6)
    assert type(m) is nn.Linear and m.in_features == 4
