"""cross_entropy in depth: reductions, ignore_index, class weights, label smoothing, probability
targets, extra dims, a 1-D input, first and second derivatives, stability, bad input, and
PyTorch where installed."""

import numpy as np
import pytest
from helpers import assert_close, check_op, np_log_softmax, rand, to_np

import gpucore
import gpucore.nn.functional as F


def np_cross_entropy(x, t, reduction="mean", ignore_index=-100, weight=None, smoothing=0.0):
    """numpy reference (PyTorch's definition): x [N, C, ...], t [N, ...] class indices."""
    c = x.shape[1]
    ls = np.moveaxis(np_log_softmax(x, 1), 1, -1).reshape(-1, c)
    w = np.ones(c) if weight is None else weight
    tf = t.reshape(-1)
    valid = tf != ignore_index
    safe = np.where(valid, tf, 0)
    wt = np.where(valid, w[safe], 0.0)
    nll = -ls[np.arange(len(tf)), safe] * wt
    smooth = np.where(valid, -(ls * w).sum(1), 0.0)
    rows = (1 - smoothing) * nll + smoothing / c * smooth
    if reduction == "none":
        return rows.reshape(t.shape)
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / wt.sum()


def np_cross_entropy_probs(x, p, reduction="mean", weight=None, smoothing=0.0):
    """numpy reference for class-probability targets shaped like x."""
    c = x.shape[1]
    p = p * (1 - smoothing) + smoothing / c
    w = np.ones(c) if weight is None else weight
    wshape = (1, c) + (1,) * (x.ndim - 2)
    rows = -(np_log_softmax(x, 1) * p * w.reshape(wshape)).sum(1)
    if reduction == "none":
        return rows
    return rows.sum() if reduction == "sum" else rows.mean()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction):
    t = np.array([0, 3, 3, 1, 2])

    def fn(x):
        return F.cross_entropy(x, gpucore.tensor(t), reduction=reduction)

    def np_fn(x):
        return np_cross_entropy(x, t, reduction)

    check_op(fn, np_fn, [(5, 4)], gradgrad=True, low=-3, high=3)
    tb = np.random.default_rng(0).integers(0, 10, 64)
    check_op(
        lambda x: F.cross_entropy(x, gpucore.tensor(tb), reduction=reduction),
        lambda x: np_cross_entropy(x, tb, reduction),
        [(64, 10)],
        grad=False,
        rtol=1e-4,
    )


@pytest.mark.parametrize("dtype", [gpucore.float32, gpucore.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_common_case_equals_the_general_path(reduction, dtype):
    """Host logits [N, C] with int64 targets take a shortcut past the general checks (the
    training step's case); a Parameter as the input takes the general path: the same bits,
    values and gradients."""
    x0 = rand((64, 10), seed=3)
    t = gpucore.tensor(np.random.default_rng(4).integers(0, 10, 64))
    t[5] = -100
    fast_in = gpucore.tensor(x0, dtype=dtype, requires_grad=True)
    slow_in = gpucore.nn.Parameter(gpucore.tensor(x0, dtype=dtype))
    got = F.cross_entropy(fast_in, t, reduction=reduction)
    want = F.cross_entropy(slow_in, t, reduction=reduction)
    np.testing.assert_array_equal(to_np(got), to_np(want))
    g = gpucore.tensor(rand(tuple(got.shape), seed=5), dtype=dtype)
    got.backward(g)
    want.backward(g)
    np.testing.assert_array_equal(to_np(fast_in.grad), to_np(slow_in.grad))
    assert_close(to_np(got), np_cross_entropy(x0, to_np(t), reduction), rtol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index(reduction):
    t = np.array([0, -100, 2, -100, 1])
    check_op(
        lambda x: F.cross_entropy(x, gpucore.tensor(t), reduction=reduction),
        lambda x: np_cross_entropy(x, t, reduction),
        [(5, 3)],
        gradgrad=True,
    )
    t2 = np.array([1, 4, 0])
    check_op(
        lambda x: F.cross_entropy(x, gpucore.tensor(t2), reduction=reduction, ignore_index=4),
        lambda x: np_cross_entropy(x, t2, reduction, 4),
        [(3, 4)],
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_weight_and_label_smoothing(reduction, smoothing):
    t = np.array([2, -100, 0, 3, 3])
    w = rand((4,), 0.5, 2, seed=4)
    wt = gpucore.tensor(w, dtype=gpucore.float64)

    def fn(x):
        return F.cross_entropy(
            x, gpucore.tensor(t), weight=wt, reduction=reduction, label_smoothing=smoothing
        )

    check_op(fn, lambda x: np_cross_entropy(x, t, reduction, -100, w, smoothing), [(5, 4)])
    check_op(
        lambda x: F.cross_entropy(
            x, gpucore.tensor(t), reduction=reduction, label_smoothing=smoothing
        ),
        lambda x: np_cross_entropy(x, t, reduction, smoothing=smoothing),
        [(5, 4)],
        gradgrad=smoothing > 0,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets(reduction):
    p = rand((3, 4, 2), 0, 1, seed=3)
    p /= p.sum(1, keepdims=True)
    w = rand((4,), 0.5, 2, seed=4)
    check_op(
        lambda x, q: F.cross_entropy(x, q, reduction=reduction),
        lambda x, q: np_cross_entropy_probs(x, q, reduction),
        [(3, 4, 2)],
        vals=[rand((3, 4, 2)), p],
    )
    check_op(
        lambda x: F.cross_entropy(
            x,
            gpucore.tensor(p[:, :, 0], dtype=x.dtype),
            reduction=reduction,
            weight=gpucore.tensor(w),
            label_smoothing=0.1,
        ),
        lambda x: np_cross_entropy_probs(x, p[:, :, 0], reduction, w, 0.1),
        [(3, 4)],
    )


def test_cross_entropy_all_ignored_mean_is_nan():
    x = gpucore.zeros(2, 3, requires_grad=True)
    loss = F.cross_entropy(x, gpucore.tensor([-100, -100]))
    assert np.isnan(loss.item())


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_extra_dims(reduction):
    t = np.array([[[0, 2], [1, 1], [2, 0]], [[1, 0], [-100, 2], [0, 0]]])  # [N=2, d1=3, d2=2]
    check_op(
        lambda x: F.cross_entropy(x, gpucore.tensor(t), reduction=reduction),
        lambda x: np_cross_entropy(x, t, reduction),
        [(2, 3, 3, 2)],
    )


def test_cross_entropy_1d_input():
    check_op(
        lambda x: F.cross_entropy(x, gpucore.tensor(2)),
        lambda x: np_cross_entropy(x[None], np.array([2])),
        [(4,)],
    )
    out = F.cross_entropy(gpucore.zeros(4), gpucore.tensor(1), reduction="none")
    assert out.shape == ()


def test_cross_entropy_stability():
    x = gpucore.tensor([[1000.0, 1000.0, 1000.0], [1000.0, -1000.0, 0.0]], requires_grad=True)
    loss = F.cross_entropy(x, gpucore.tensor([1, 1]), reduction="none")
    assert_close(loss, [np.log(3.0), 2000.0], rtol=1e-5)
    loss.sum().backward()
    assert np.isfinite(to_np(x.grad)).all()
    for dt in (gpucore.float16, gpucore.bfloat16):
        out = F.cross_entropy(gpucore.tensor([[10.0, 10.0, -10.0]], dtype=dt), gpucore.tensor([0]))
        assert out.dtype is dt
        assert_close(out.float(), np.log(2.0), rtol=1e-2)


def test_cross_entropy_errors():
    x = gpucore.zeros(2, 3)
    with pytest.raises(IndexError, match="3") as e:
        F.cross_entropy(x, gpucore.tensor([0, 3]))
    assert isinstance(e.value, gpucore.GpucoreIndexError)
    with pytest.raises(IndexError, match="-5"):
        F.cross_entropy(x, gpucore.tensor([-5, 0]))
    with pytest.raises(gpucore.DTypeError, match="int64"):
        F.cross_entropy(x, gpucore.tensor([0, 1]).int())
    with pytest.raises(TypeError, match="'target' .*must be Tensor, not list"):  # PyTorch's
        F.cross_entropy(x, [0, 1])
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\)"):  # probabilities: input's shape
        F.cross_entropy(x, gpucore.tensor([0.0, 1.0]))
    with pytest.raises(gpucore.ShapeError, match="weight"):
        F.cross_entropy(x, gpucore.tensor([0, 1]), weight=gpucore.ones(2))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, gpucore.tensor([0, 1]), label_smoothing=1.5)
    with pytest.raises(TypeError, match="deprecated"):
        F.cross_entropy(x, gpucore.tensor([0, 1]), size_average=True)
    with pytest.raises(gpucore.ShapeError, match=r"\(2, 3\).*\(3,\)"):
        F.cross_entropy(x, gpucore.tensor([0, 1, 2]))
    with pytest.raises(gpucore.ShapeError):
        F.cross_entropy(gpucore.zeros(2, 3, 4), gpucore.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, gpucore.tensor([0, 1]), reduction="avg")
    with pytest.raises(gpucore.DTypeError, match="floating"):
        F.cross_entropy(gpucore.zeros(2, 3, dtype=gpucore.int64), gpucore.tensor([0, 1]))


def test_cross_entropy_matches_torch():
    torch = pytest.importorskip("torch")
    x = rand((6, 5, 2), -3, 3)
    t = np.array([[0, 4], [-100, 1], [2, 2], [3, -100], [4, 0], [1, 1]])
    w = rand((5,), 0.5, 2, seed=2)
    cases = [
        (r, i, wt, ls)
        for r in ("mean", "sum", "none")
        for i in (-100, 1)
        for wt in (None, w)
        for ls in (0.0, 0.25)
    ]
    for reduction, ignore, weight, smoothing in cases:
        ti = np.where(t == -100, ignore, t)
        kw = dict(reduction=reduction, ignore_index=ignore, label_smoothing=smoothing)
        tx = torch.tensor(x, requires_grad=True)
        tw = None if weight is None else torch.tensor(weight)
        ref = torch.nn.functional.cross_entropy(tx, torch.tensor(ti), weight=tw, **kw)
        gx = gpucore.tensor(x, dtype=gpucore.float64, requires_grad=True)
        gw = None if weight is None else gpucore.tensor(weight, dtype=gpucore.float64)
        out = F.cross_entropy(gx, gpucore.tensor(ti), weight=gw, **kw)
        assert_close(out, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
        ref.sum().backward()
        out.sum().backward()
        assert_close(gx.grad, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    # probability targets
    p = rand((6, 5, 2), 0, 1, seed=5)
    for reduction in ("mean", "sum", "none"):
        ref = torch.nn.functional.cross_entropy(
            torch.tensor(x), torch.tensor(p), reduction=reduction, label_smoothing=0.1
        )
        out = F.cross_entropy(
            gpucore.tensor(x, dtype=gpucore.float64),
            gpucore.tensor(p, dtype=gpucore.float64),
            reduction=reduction,
            label_smoothing=0.1,
        )
        assert_close(out, ref.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("loss", [F.cross_entropy, lambda x, t: F.nll_loss(x.log_softmax(1), t)])
def test_compiled_mean_counts_the_targets_of_each_call(loss):
    """A compiled mean with ignored targets divides by the count of each call's targets, not by
    the count the example targets had at capture."""
    x = gpucore.tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32))
    example = gpucore.tensor(np.array([1, -100, 2, -100]))
    other = gpucore.tensor(np.array([1, 0, 2, 3]))
    compiled = gpucore.compile(loss, (x, example), device="cpu")
    assert_close(compiled(x, other), loss(x, other), rtol=1e-5, atol=1e-6)
    assert_close(compiled(x, example), loss(x, example), rtol=1e-5, atol=1e-6)
