"""gpucore.nn against PyTorch across the topics: the functional forms and the layers on the same
inputs and weights (forward, gradients, running statistics; skipped without torch), PyTorch's
exact module reprs and attribute names (hard-coded), and its warnings."""

import numpy as np
import pytest
from helpers import assert_close, np_softmax, rand, to_np
from nn_refs import INST, np_instance_norm

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def f64(a, grad=False):
    return gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=grad)


# ============================================================================= functional
def _torch_cases(torch):
    tf = torch.nn.functional
    a, b, c = rand((4, 6)), rand((4, 6), seed=1), rand((4, 6), seed=2)
    img = rand((2, 4, 5, 6), seed=3)
    y = np.array([1.0, -1.0, -1.0, 1.0])
    t01 = rand((4, 6), 0.0, 1.0, seed=4)
    prob = np_softmax(rand((4, 6), seed=5), 1)
    return [
        ("silu", F.silu, tf.silu, [a], {}),
        ("mish", F.mish, tf.mish, [a], {}),
        ("softplus", F.softplus, tf.softplus, [a * 10], {"beta": 2.0, "threshold": 5.0}),
        ("elu", F.elu, tf.elu, [a], {"alpha": 0.5}),
        ("selu", F.selu, tf.selu, [a], {}),
        ("celu", F.celu, tf.celu, [a], {"alpha": 2.0}),
        ("hardtanh", F.hardtanh, tf.hardtanh, [a], {"min_val": -0.5, "max_val": 0.7}),
        ("relu6", F.relu6, tf.relu6, [a * 4], {}),
        ("hardsigmoid", F.hardsigmoid, tf.hardsigmoid, [a * 2], {}),
        ("hardswish", F.hardswish, tf.hardswish, [a * 2], {}),
        ("logsigmoid", F.logsigmoid, tf.logsigmoid, [a], {}),
        ("softsign", F.softsign, tf.softsign, [a], {}),
        ("tanhshrink", F.tanhshrink, tf.tanhshrink, [a], {}),
        ("softmin", F.softmin, tf.softmin, [a], {"dim": 1}),
        ("glu", F.glu, tf.glu, [a], {"dim": 1}),
        ("prelu", F.prelu, tf.prelu, [img, rand((4,), seed=9)], {}),
        ("normalize", F.normalize, tf.normalize, [a], {"p": 3.0, "dim": 0}),
        ("cosine_similarity", F.cosine_similarity, tf.cosine_similarity, [a, b], {}),
        ("pairwise_distance", F.pairwise_distance, tf.pairwise_distance, [a, b], {"p": 1.5}),
        ("pad_constant", F.pad, tf.pad, [img], {"pad": (1, -2, 2, 1), "value": 0.5}),
        ("pad_reflect", F.pad, tf.pad, [img], {"pad": (2, 3, -1, 4), "mode": "reflect"}),
        ("pad_replicate", F.pad, tf.pad, [img], {"pad": (3, 0, 1, 2), "mode": "replicate"}),
        ("pad_circular", F.pad, tf.pad, [img], {"pad": (2, 1, 1, 3), "mode": "circular"}),
        ("pad_reflect_1d", F.pad, tf.pad, [a.reshape(2, 2, 6)], {"pad": (2, 3), "mode": "reflect"}),
        (
            "group_norm",
            lambda x, w, b: F.group_norm(x, 2, w, b),
            lambda x, w, b: tf.group_norm(x, 2, w, b),
            [img, rand((4,), seed=6), rand((4,), seed=7)],
            {},
        ),
        ("instance_norm", F.instance_norm, tf.instance_norm, [img], {}),
        ("nearest_up", F.interpolate, tf.interpolate, [img], {"size": (7, 13)}),
        ("nearest_down", F.interpolate, tf.interpolate, [img], {"size": (3, 4)}),
        ("nearest_scale", F.interpolate, tf.interpolate, [img], {"scale_factor": 1.7}),
        (
            "nearest_exact",
            F.interpolate,
            tf.interpolate,
            [img],
            {"size": (7, 4), "mode": "nearest-exact"},
        ),
        ("bilinear", F.interpolate, tf.interpolate, [img], {"size": (9, 4), "mode": "bilinear"}),
        (
            "bilinear_ac",
            F.interpolate,
            tf.interpolate,
            [img],
            {"size": (9, 11), "mode": "bilinear", "align_corners": True},
        ),
        (
            "bilinear_scale",
            F.interpolate,
            tf.interpolate,
            [img],
            {"scale_factor": (1.5, 2.3), "mode": "bilinear"},
        ),
        ("area", F.interpolate, tf.interpolate, [img], {"size": (3, 4), "mode": "area"}),
        ("kl_div", F.kl_div, tf.kl_div, [np.log(prob), t01], {"reduction": "batchmean"}),
        (
            "kl_div_log",
            F.kl_div,
            tf.kl_div,
            [np.log(prob), np.log(t01 + 0.1)],
            {"reduction": "sum", "log_target": True},
        ),
        ("poisson_nll", F.poisson_nll_loss, tf.poisson_nll_loss, [a, t01 * 4], {"full": True}),
        (
            "poisson_nll_lin",
            F.poisson_nll_loss,
            tf.poisson_nll_loss,
            [t01 + 0.1, t01 * 4],
            {"log_input": False},
        ),
        (
            "cosine_embedding",
            F.cosine_embedding_loss,
            tf.cosine_embedding_loss,
            [a, b, y],
            {"margin": 0.1},
        ),
        (
            "margin_ranking",
            F.margin_ranking_loss,
            tf.margin_ranking_loss,
            [a[:, 0], b[:, 0], y],
            {"margin": 0.2},
        ),
        (
            "hinge_embedding",
            F.hinge_embedding_loss,
            tf.hinge_embedding_loss,
            [a, np.where(b > 0, 1.0, -1.0)],
            {"margin": 0.5},
        ),
        (
            "triplet",
            F.triplet_margin_loss,
            tf.triplet_margin_loss,
            [a, b, c],
            {"margin": 1.5, "swap": True},
        ),
        (
            "soft_margin",
            F.soft_margin_loss,
            tf.soft_margin_loss,
            [a, np.where(b > 0, 1.0, -1.0)],
            {},
        ),
        (
            "multilabel_soft_margin",
            F.multilabel_soft_margin_loss,
            tf.multilabel_soft_margin_loss,
            [a, (b > 0).astype(np.float64), c[0]],
            {},
        ),
    ]


# Arguments PyTorch does not differentiate (targets of the margin losses, class weights).
_NO_GRAD = {
    "cosine_embedding": {2},
    "margin_ranking": {2},
    "hinge_embedding": {1},
    "soft_margin": {1},
    "multilabel_soft_margin": {1, 2},
}


def test_functional_match_torch():
    torch = pytest.importorskip("torch")
    for name, gc_fn, t_fn, args, kw in _torch_cases(torch):
        fixed = _NO_GRAD.get(name, set())
        ga = [f64(v, grad=i not in fixed) for i, v in enumerate(args)]
        ta = [torch.tensor(v, requires_grad=i not in fixed) for i, v in enumerate(args)]
        out = gc_fn(*ga, **kw)
        ref = t_fn(*ta, **kw)
        assert_close(out, ref.detach().numpy(), rtol=1e-5, atol=1e-6, what=name)
        w = rand(tuple(ref.shape), seed=11)
        (out * f64(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        for i, (g, t) in enumerate(zip(ga, ta)):
            if i in fixed:
                continue
            assert_close(g.grad, t.grad.numpy(), rtol=1e-5, atol=1e-6, what=f"{name} grad {i}")
        # float32 forward too (PyTorch's float32 kernels within 1e-5)
        out32 = gc_fn(*[gpucore.tensor(v, dtype=gpucore.float32) for v in args], **kw)
        ref32 = t_fn(*[torch.tensor(v, dtype=torch.float32) for v in args], **kw)
        assert_close(
            out32, ref32.numpy().astype(np.float64), rtol=1e-5, atol=1e-5, what=f"{name} float32"
        )


# ============================================================================= layers
def _to_torch(torch, mod, tmod):
    with torch.no_grad():
        for (n, p), (tn, tp) in zip(mod.state_dict().items(), tmod.state_dict().items()):
            assert n == tn
            tp.copy_(torch.tensor(to_np(p)))


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_layers_match_torch():
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    gpucore.manual_seed(0)
    pairs = [
        (
            nn.Conv2d(4, 6, 3, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
            tnn.Conv2d(4, 6, 3, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
            (2, 4, 7, 8),
        ),
        (
            nn.Conv2d(4, 3, (2, 4), padding="same"),
            tnn.Conv2d(4, 3, (2, 4), padding="same"),
            (2, 4, 5, 6),
        ),
        (nn.Linear(8, 3), tnn.Linear(8, 3), (2, 5, 8)),
        (nn.BatchNorm2d(4, momentum=None), tnn.BatchNorm2d(4, momentum=None), (3, 4, 2, 3)),
        (nn.BatchNorm1d(4), tnn.BatchNorm1d(4), (5, 4, 3)),
        (nn.LayerNorm((3, 4)), tnn.LayerNorm((3, 4)), (2, 3, 4)),
        (
            nn.MaxPool2d(3, 2, 1, ceil_mode=True),
            tnn.MaxPool2d(3, 2, 1, ceil_mode=True),
            (2, 3, 8, 7),
        ),
        (
            nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
            tnn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
            (2, 3, 8, 7),
        ),
        (nn.AdaptiveAvgPool2d((3, 5)), tnn.AdaptiveAvgPool2d((3, 5)), (2, 3, 8, 7)),
        (nn.LeakyReLU(0.3), tnn.LeakyReLU(0.3), (4, 5)),
        (nn.GELU(), tnn.GELU(), (4, 5)),
    ]
    for m, tm, shape in pairs:
        m.double()
        tm.double()
        _to_torch(torch, m, tm)
        assert repr(m) == repr(tm)
        for step in range(2):  # two steps: running statistics too
            x = rand(shape, seed=step)
            gx, tx = f64(x, grad=True), torch.tensor(x, requires_grad=True)
            out, tout = m(gx), tm(tx)
            assert_close(out, tout.detach().numpy(), rtol=1e-9, atol=1e-10, what=repr(m))
            w = rand(tuple(tout.shape), seed=7)
            (out * f64(w)).sum().backward()
            (tout * torch.tensor(w)).sum().backward()
            assert_close(gx.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-10, what=repr(m))
            for (n, p), tp in zip(m.named_parameters(), tm.parameters()):
                assert_close(p.grad, tp.grad.numpy(), rtol=1e-8, atol=1e-10, what=n)
                p.grad = None
                tp.grad = None
        tsd = tm.state_dict()
        for k, v in m.state_dict().items():
            assert_close(v, tsd[k].numpy(), rtol=1e-9, atol=1e-12, what=k)
        m.eval()
        tm.eval()
        x = rand(shape, seed=11)
        assert_close(m(f64(x)), tm(torch.tensor(x)).detach().numpy(), rtol=1e-9, atol=1e-10)
    # embedding with padding_idx
    e, te = nn.Embedding(5, 3, padding_idx=1).double(), tnn.Embedding(5, 3, padding_idx=1).double()
    _to_torch(torch, e, te)
    idx = np.array([[1, 2], [4, 1]])
    out, tout = e(gpucore.tensor(idx)), te(torch.tensor(idx))
    assert_close(out, tout.detach().numpy())
    out.sum().backward()
    tout.sum().backward()
    assert_close(e.weight.grad, te.weight.grad.numpy())


# ====================================================================== reprs, attributes, warnings
REPRS = [
    (nn.SiLU(), "SiLU()"),
    (nn.SiLU(inplace=True), "SiLU(inplace=True)"),
    (nn.Mish(inplace=True), "Mish(inplace=True)"),
    (nn.ELU(), "ELU(alpha=1.0)"),
    (nn.ELU(alpha=0.5, inplace=True), "ELU(alpha=0.5, inplace=True)"),
    (nn.SELU(), "SELU()"),
    (nn.SELU(inplace=True), "SELU(inplace=True)"),
    (nn.CELU(alpha=1.5), "CELU(alpha=1.5)"),
    (nn.CELU(1.5, inplace=True), "CELU(alpha=1.5, inplace=True)"),
    (nn.Softplus(), "Softplus(beta=1.0, threshold=20.0)"),
    (nn.Softplus(beta=2, threshold=5), "Softplus(beta=2, threshold=5)"),
    (nn.Hardtanh(), "Hardtanh(min_val=-1.0, max_val=1.0)"),
    (nn.Hardtanh(-2, 3), "Hardtanh(min_val=-2, max_val=3)"),
    (nn.Hardtanh(-2, 3, inplace=True), "Hardtanh(min_val=-2, max_val=3, inplace=True)"),
    (nn.ReLU6(), "ReLU6()"),
    (nn.ReLU6(inplace=True), "ReLU6(inplace=True)"),
    (nn.Hardsigmoid(), "Hardsigmoid()"),
    (nn.Hardsigmoid(inplace=True), "Hardsigmoid()"),  # PyTorch prints no inplace flag here
    (nn.Hardswish(inplace=True), "Hardswish()"),
    (nn.LogSigmoid(), "LogSigmoid()"),
    (nn.Softsign(), "Softsign()"),
    (nn.Tanhshrink(), "Tanhshrink()"),
    (nn.Softmin(), "Softmin(dim=None)"),
    (nn.Softmin(dim=1), "Softmin(dim=1)"),
    (nn.GLU(), "GLU(dim=-1)"),
    (nn.GLU(dim=1), "GLU(dim=1)"),
    (nn.PReLU(), "PReLU(num_parameters=1)"),
    (nn.PReLU(num_parameters=3, init=0.1), "PReLU(num_parameters=3)"),
    (nn.GroupNorm(2, 6), "GroupNorm(2, 6, eps=1e-05, affine=True, bias=True)"),
    (
        nn.GroupNorm(3, 6, eps=1e-3, affine=False),
        "GroupNorm(3, 6, eps=0.001, affine=False, bias=False)",
    ),
    (nn.GroupNorm(2, 6, bias=False), "GroupNorm(2, 6, eps=1e-05, affine=True, bias=False)"),
    (
        nn.InstanceNorm2d(3),
        "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, "
        "bias=False, track_running_stats=False)",
    ),
    (
        nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, "
        "track_running_stats=True)",
    ),
    (nn.Dropout2d(), "Dropout2d(p=0.5, inplace=False)"),
    (nn.Dropout2d(p=0.25, inplace=True), "Dropout2d(p=0.25, inplace=True)"),
    (nn.ConstantPad1d((1, 2), 3.5), "ConstantPad1d(padding=(1, 2), value=3.5)"),
    (nn.ConstantPad1d(2, 1), "ConstantPad1d(padding=(2, 2), value=1)"),
    (nn.ConstantPad2d((1, 0, 2, 3), -1.0), "ConstantPad2d(padding=(1, 0, 2, 3), value=-1.0)"),
    (
        nn.ConstantPad3d((1, 0, 0, 2, 1, 1), 0.5),
        "ConstantPad3d(padding=(1, 0, 0, 2, 1, 1), value=0.5)",
    ),
    (nn.ZeroPad1d((2, 1)), "ZeroPad1d((2, 1))"),
    (nn.ZeroPad2d(1), "ZeroPad2d((1, 1, 1, 1))"),
    (nn.ZeroPad2d((1, 0, 2, 3)), "ZeroPad2d((1, 0, 2, 3))"),
    (nn.ZeroPad3d((1, 0, 0, 2, 1, 1)), "ZeroPad3d((1, 0, 0, 2, 1, 1))"),
    (nn.ReflectionPad1d(1), "ReflectionPad1d((1, 1))"),
    (nn.ReflectionPad2d((1, 0, 2, 1)), "ReflectionPad2d((1, 0, 2, 1))"),
    (nn.ReflectionPad3d((1, 0, 0, 2, 1, 1)), "ReflectionPad3d((1, 0, 0, 2, 1, 1))"),
    (nn.ReplicationPad1d((3, 1)), "ReplicationPad1d((3, 1))"),
    (nn.ReplicationPad2d(2), "ReplicationPad2d((2, 2, 2, 2))"),
    (nn.ReplicationPad3d((1, 0, 0, 2, 1, 1)), "ReplicationPad3d((1, 0, 0, 2, 1, 1))"),
    (nn.Upsample(size=(5, 7)), "Upsample(size=(5, 7), mode='nearest')"),
    (nn.Upsample(size=5), "Upsample(size=5, mode='nearest')"),
    (nn.Upsample(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')"),
    (
        nn.Upsample(scale_factor=(2, 1.5), mode="bilinear"),
        "Upsample(scale_factor=(2.0, 1.5), mode='bilinear')",
    ),
    (
        nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True),
        "Upsample(size=(5, 7), mode='bilinear')",
    ),
    (
        nn.UpsamplingNearest2d(scale_factor=2),
        "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')",
    ),
    (nn.UpsamplingNearest2d(size=(3, 5)), "UpsamplingNearest2d(size=(3, 5), mode='nearest')"),
    (nn.UpsamplingBilinear2d(size=(5, 7)), "UpsamplingBilinear2d(size=(5, 7), mode='bilinear')"),
    (
        nn.UpsamplingBilinear2d(scale_factor=2),
        "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')",
    ),
    # the distances and losses print no arguments in PyTorch
    (nn.CosineSimilarity(dim=0, eps=1e-6), "CosineSimilarity()"),
    (nn.PairwiseDistance(p=1.0, keepdim=True), "PairwiseDistance()"),
    (nn.KLDivLoss(reduction="batchmean", log_target=True), "KLDivLoss()"),
    (nn.PoissonNLLLoss(log_input=False, full=True), "PoissonNLLLoss()"),
    (nn.CosineEmbeddingLoss(margin=0.3, reduction="sum"), "CosineEmbeddingLoss()"),
    (nn.MarginRankingLoss(margin=0.5), "MarginRankingLoss()"),
    (nn.HingeEmbeddingLoss(margin=2.0), "HingeEmbeddingLoss()"),
    (nn.TripletMarginLoss(margin=0.8, p=1.0, swap=True), "TripletMarginLoss()"),
    (nn.SoftMarginLoss(reduction="none"), "SoftMarginLoss()"),
    (nn.MultiLabelSoftMarginLoss(), "MultiLabelSoftMarginLoss()"),
]


def test_repr_matches_pytorch():
    for m, expected in REPRS:
        assert repr(m) == expected


def test_attributes_keep_pytorch_names():
    u = nn.Upsample(scale_factor=2)
    assert (u.size, u.scale_factor, u.mode, u.align_corners) == (None, 2.0, "nearest", None)
    b = nn.UpsamplingBilinear2d(size=(5, 7))
    assert (b.size, b.mode, b.align_corners) == ((5, 7), "bilinear", True)
    d = nn.PairwiseDistance(p=1.0, keepdim=True)
    assert (d.norm, d.eps, d.keepdim) == (1.0, 1e-6, True)
    c = nn.CosineSimilarity(dim=0, eps=1e-6)
    assert (c.dim, c.eps) == (0, 1e-6)
    t = nn.TripletMarginLoss(margin=0.8, p=1.0, swap=True)
    assert (t.margin, t.p, t.eps, t.swap, t.reduction) == (0.8, 1.0, 1e-6, True, "mean")
    assert nn.HingeEmbeddingLoss().margin == 1.0 and nn.MarginRankingLoss().margin == 0.0
    assert nn.ReflectionPad2d(1).padding == (1, 1, 1, 1)
    assert nn.ConstantPad1d(2, 1.5).value == 1.5


def test_warnings():
    with pytest.warns(UserWarning, match="num_features"):  # no per-channel state: goes on
        out = nn.InstanceNorm2d(3)(f64(INST[:, :2]))
    assert_close(out, np_instance_norm(INST[:, :2]), rtol=1e-10, atol=1e-12)
    with pytest.warns(FutureWarning, match="min_val"):
        m = nn.Hardtanh(min_value=-2.0)
    assert (m.min_val, m.max_val) == (-2.0, 1.0)
