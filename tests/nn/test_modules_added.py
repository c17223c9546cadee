"""The nn names added for issue 14's scripts: ParameterList / ParameterDict, DataParallel,
Hardshrink / Softshrink / Threshold / RReLU / Softmax2d, Dropout1d / Dropout3d / AlphaDropout /
FeatureAlphaDropout and their functional forms, gumbel_softmax: against PyTorch from the same
weights where the result is deterministic, by their statistics where it is random."""

import numpy as np
import pytest
from helpers import check_grad

import gpucore as gc
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore.errors import ShapeError

torch = pytest.importorskip("torch")


def test_parameter_list_and_dict_register_with_the_parent():
    def net(lib):
        m = lib.nn.Module()
        m.pl = lib.nn.ParameterList(
            [lib.nn.Parameter(lib.ones(2, 3)), lib.nn.Parameter(lib.zeros(4))]
        )
        m.pd = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2)), "b": lib.ones(1)})
        return m

    ours, theirs = net(gc), net(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.pl.append(gc.ones(3))  # a plain tensor becomes a Parameter
    assert isinstance(ours.pl[-1], nn.Parameter) and len(ours.pl) == 3
    assert len(ours.pl[1:]) == 2 and [tuple(p.shape) for p in ours.pl] == [(2, 3), (4,), (3,)]
    ours.pd["c"] = gc.zeros(5)
    assert set(ours.pd) == {"a", "b", "c"} and "c" in ours.pd and len(ours.pd) == 3
    assert ours.pd.pop("b").shape == (1,) and "pd.b" not in ours.state_dict()
    opt = gc.optim.SGD(ours.parameters(), lr=1.0)
    (ours.pl[0].sum() + ours.pd["a"].sum()).backward()
    opt.step()
    assert ours.pl[0].detach().numpy().tolist() == [[0.0] * 3] * 2
    with pytest.raises(TypeError, match="ParameterList"):
        ours.pl.append("x")
    with pytest.raises(IndexError):
        ours.pl[5]


def test_data_parallel_runs_the_module_and_keeps_torch_keys():
    lin = nn.Linear(3, 2)
    dp = nn.DataParallel(lin, device_ids=[0])
    x = gc.randn(4, 3)
    np.testing.assert_array_equal(dp(x).detach().numpy(), lin(x).detach().numpy())
    assert list(dp.state_dict()) == list(torch.nn.DataParallel(torch.nn.Linear(3, 2)).state_dict())
    assert dp.module is lin and gc.nn.parallel.DataParallel is nn.DataParallel


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.Hardshrink(0.3),
        lambda m: m.Softshrink(0.3),
        lambda m: m.Threshold(0.1, -2.0),
        lambda m: m.RReLU().eval(),
        lambda m: m.Softmax2d(),
        lambda m: m.AlphaDropout(0.3).eval(),
    ],
)
def test_deterministic_modules_match_torch(make):
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 4, 5))
    ours = make(nn)(gc.tensor(x)).numpy()
    theirs = make(torch.nn)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert repr(make(nn)).split("(")[0] == repr(make(torch.nn)).split("(")[0]


def test_channel_dropout_drops_whole_channels():
    gc.manual_seed(0)
    x = gc.ones(64, 16, 10)
    y = F.dropout1d(x, 0.25).numpy()
    per_channel = y.reshape(64, 16, 10)
    assert ((per_channel == 0).all(-1) | (per_channel == 1 / 0.75).all(-1)).all()
    assert 0.2 < (per_channel[..., 0] == 0).mean() < 0.3
    assert F.dropout1d(gc.ones(16, 10), 0.5).shape == (16, 10)  # unbatched
    z = nn.Dropout3d(0.5)(gc.ones(2, 8, 3, 4, 5)).numpy()
    assert ((z == 0).all((2, 3, 4)) | (z == 2).all((2, 3, 4))).all()
    with pytest.raises(ShapeError, match="dropout1d"):
        F.dropout1d(gc.ones(2, 3, 4, 5))
    with pytest.warns(UserWarning, match="dropout3d"):
        assert F.dropout3d(gc.ones(2, 3), training=False).shape == (2, 3)
    assert nn.Dropout1d(0.5).eval()(x) is x


def test_alpha_dropout_keeps_selu_statistics():
    gc.manual_seed(1)
    x = F.selu(gc.randn(400000))
    y = F.alpha_dropout(x, 0.2, training=True)
    assert abs(y.mean().item()) < 0.01 and abs(y.std().item() - 1) < 0.01
    alpha, p = 1.7580993408473766, 0.2
    a = 1 / ((alpha**2 * p + 1) * (1 - p)) ** 0.5
    yn, xn = y.numpy().astype(np.float64), x.numpy().astype(np.float64)
    kept = np.isclose(yn, a * xn + alpha * a * p, atol=1e-5)
    dropped = np.isclose(yn, alpha * a * (p - 1), atol=1e-6)
    assert (kept | dropped).all() and 0.18 < dropped.mean() < 0.22
    f = F.feature_alpha_dropout(gc.randn(8, 32, 5), 0.5, training=True).numpy()
    assert (np.ptp(f - f[..., :1], axis=-1)[np.isclose(f[..., 0], f[..., 1])] < 1e-6).all()
    assert F.alpha_dropout(x, 0.5, training=False) is x
    check_grad(lambda t: F.alpha_dropout(t, 0.0, training=True) * 2, np.ones(3))


def test_gumbel_softmax():
    gc.manual_seed(2)
    logits = gc.tensor([[2.0, 0.0, -1.0]]).expand(20000, 3).contiguous()
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-6)
    hard = F.gumbel_softmax(logits, hard=True)
    counts = hard.numpy().sum(0) / 20000
    p = np.exp([2.0, 0.0, -1.0]) / np.exp([2.0, 0.0, -1.0]).sum()  # Gumbel-max: exact softmax
    np.testing.assert_allclose(counts, p, atol=0.015)
    assert set(np.unique(hard.numpy())) <= {0.0, 1.0}
    x = gc.randn(4, 5, requires_grad=True)
    F.gumbel_softmax(x, hard=True).mul(gc.arange(5.0)).sum().backward()
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gumbel_softmax_of_half_logits_is_finite(dtype):
    """Half-precision uniforms round to 0 often enough (about 1 in 1600 for float16) to put a
    log(0) into the noise: the noise is drawn in float32, so no sample is NaN."""
    gc.manual_seed(0)
    logits = gc.randn(2000, 64).to(getattr(gc, dtype))
    y = F.gumbel_softmax(logits)
    assert y.dtype is logits.dtype
    assert np.isfinite(y.float().numpy()).all()
    np.testing.assert_allclose(y.float().numpy().sum(-1), 1.0, atol=0.05)


@pytest.mark.parametrize(
    "cls, shape", [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm3d", (2, 3, 4, 5, 6))]
)
def test_instance_norm_1d_3d_match_torch(cls, shape):
    y = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    for kw in ({}, {"affine": True}, {"track_running_stats": True}):
        ours, theirs = getattr(nn, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw)
        for x in (y, y[0]):  # batched and unbatched
            np.testing.assert_allclose(
                ours(gc.tensor(x)).detach().numpy(),
                theirs(torch.tensor(x)).detach().numpy(),
                rtol=1e-5,
                atol=1e-5,
            )
    with pytest.raises(ShapeError, match=cls):
        getattr(nn, cls)(3)(gc.zeros(2, 3, 4, 5, 6, 7))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_local_response_norm_matches_torch(size):
    x = np.random.default_rng(2).normal(size=(2, 7, 4, 3))
    for xx in (x, x[:, :, 0]):
        ours = F.local_response_norm(gc.tensor(xx), size, 1e-2, 0.7, 2.0).numpy()
        theirs = torch.nn.functional.local_response_norm(torch.tensor(xx), size, 1e-2, 0.7, 2.0)
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12)
    m = nn.LocalResponseNorm(size)
    np.testing.assert_allclose(
        m(gc.tensor(x)).numpy(), torch.nn.LocalResponseNorm(size)(torch.tensor(x)).numpy()
    )
    check_grad(lambda t: F.local_response_norm(t, size, 0.1, 0.75, 1.0), x[:1, :, :2, :2])
    with pytest.raises(ShapeError, match="local_response_norm"):
        F.local_response_norm(gc.zeros(3, 4), 2)


def test_gaussian_nll_loss_matches_torch():
    x = np.random.default_rng(3).normal(size=(4, 5, 3))
    i, t, v = x[..., 0], x[..., 1], np.abs(x[..., 2]) + 1e-8
    v[0, 0] = 0.0  # clamped at eps
    for vv in (v, v[..., 0], v[..., :1], v[:1]):  # v[:1]: one dim of size 1 (torch 2.13)
        for full in (False, True):
            for red in ("mean", "sum", "none"):
                ours = F.gaussian_nll_loss(
                    gc.tensor(i), gc.tensor(t), gc.tensor(vv), full=full, reduction=red
                )
                theirs = torch.nn.functional.gaussian_nll_loss(
                    torch.tensor(i), torch.tensor(t), torch.tensor(vv), full=full, reduction=red
                )
                np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    gi = gc.tensor(i, requires_grad=True)
    gv = gc.tensor(v, requires_grad=True)
    ti = torch.tensor(i, requires_grad=True)
    tv = torch.tensor(v, requires_grad=True)
    nn.GaussianNLLLoss()(gi, gc.tensor(t), gv).backward()
    torch.nn.GaussianNLLLoss()(ti, torch.tensor(t), tv).backward()
    np.testing.assert_allclose(gi.grad.numpy(), ti.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gv.grad.numpy(), tv.grad.numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(gc.tensor(i), gc.tensor(t), gc.tensor(-v))
    for bad in (gc.ones(3), gc.ones(()), gc.ones(1, 1)):  # a 0-d var tensor too, as torch
        with pytest.raises(ValueError, match="var"):
            F.gaussian_nll_loss(gc.tensor(i), gc.tensor(t), bad)


def test_deprecated_upsample_aliases_match_torch():
    x = np.random.default_rng(4).normal(size=(1, 2, 3, 4))
    for name, kw in (("upsample", {"scale_factor": 2, "mode": "bilinear"}),
                     ("upsample_nearest", {"size": (5, 7)}),
                     ("upsample_bilinear", {"scale_factor": 2})):  # fmt: skip
        with pytest.warns(UserWarning, match="deprecated"):
            ours = getattr(F, name)(gc.tensor(x), **kw)
        with pytest.warns(UserWarning, match="deprecated"):
            theirs = getattr(torch.nn.functional, name)(torch.tensor(x), **kw)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_deprecated_container_and_nllloss2d_as_torch():
    with pytest.warns(FutureWarning, match="Container"):
        c = nn.Container(a=nn.Linear(2, 3), b=nn.ReLU())
    assert [n for n, _ in c.named_children()] == ["a", "b"]
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        ours = nn.NLLLoss2d(ignore_index=1, reduction="sum")
    with pytest.warns(FutureWarning):
        theirs = torch.nn.NLLLoss2d(ignore_index=1, reduction="sum")
    rng = np.random.default_rng(50)
    x = rng.standard_normal((2, 3, 4, 4))
    t = rng.integers(0, 3, (2, 4, 4))
    got = ours(gc.tensor(x).log_softmax(1), gc.tensor(t))
    want = theirs(torch.tensor(x).log_softmax(1), torch.tensor(t))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
