"""Observers (gpucore/quantization/observer.py): calculate_qparams against PyTorch's formulas
written out in numpy, against torch.ao.quantization's observers on the same data (bit for bit),
running/moving-average statistics, per-channel axes, state and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore.quantization import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
)

pytestmark = [  # torch's deprecation notices for its quantized tensors and torch.ao
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

RNG = np.random.default_rng(0)
BATCHES = [RNG.standard_normal((16, 8)).astype(np.float32) * s + o for s, o in [(1, 0), (3, 2)]]


def _feed(obs, batches=BATCHES):
    for b in batches:
        out = obs(gc.from_numpy(b))
        assert np.array_equal(out.numpy(), b)  # forward returns its input
    return obs


def test_min_max_affine_quint8_follows_the_formula():
    obs = _feed(MinMaxObserver())
    lo = min(b.min() for b in BATCHES)
    hi = max(b.max() for b in BATCHES)
    assert obs.min_val.item() == lo and obs.max_val.item() == hi
    scale, zp = obs.calculate_qparams()
    s = np.float32(max(hi, 0) - min(lo, 0)) / np.float32(255)
    assert scale.shape == (1,) and scale.dtype is gc.float32 and scale.item() == s
    assert zp.item() == int(np.clip(0 - np.rint(np.float32(min(lo, 0)) / s), 0, 255))


@pytest.mark.parametrize("dtype,zp", [(gc.qint8, 0), (gc.quint8, 128)])
def test_min_max_symmetric(dtype, zp):
    obs = _feed(MinMaxObserver(dtype=dtype, qscheme=gc.per_tensor_symmetric))
    scale, z = obs.calculate_qparams()
    m = max(-min(b.min() for b in BATCHES), max(b.max() for b in BATCHES))
    assert scale.item() == np.float32(m) / np.float32(127.5) and z.item() == zp


def test_reduce_range_and_custom_ranges():
    assert (
        MinMaxObserver(reduce_range=True).quant_min,
        MinMaxObserver(reduce_range=True).quant_max,
    ) == (0, 127)
    o = MinMaxObserver(dtype=gc.qint8, reduce_range=True)
    assert (o.quant_min, o.quant_max) == (-64, 63)
    o = MinMaxObserver(dtype=gc.qint8, quant_min=-8, quant_max=7)
    assert (o.quant_min, o.quant_max) == (-8, 7)
    o = _feed(MinMaxObserver(quant_min=0, quant_max=15, qscheme=gc.per_tensor_symmetric))
    assert o.calculate_qparams()[1].item() == 7  # the middle of the custom range


def test_unobserved_and_constant_inputs_give_pytorch_defaults():
    with pytest.warns(UserWarning, match="must run observer"):
        s, z = MinMaxObserver().calculate_qparams()
    assert s.tolist() == [1.0] and z.tolist() == [0]
    obs = _feed(MinMaxObserver(), [np.zeros((3, 3), np.float32)])
    s, z = obs.calculate_qparams()
    assert s.item() == np.finfo(np.float32).eps and z.item() == 0
    obs = _feed(MinMaxObserver(), [np.zeros((0, 3), np.float32)])  # empty: ignored
    assert obs.min_val.item() == np.inf


def test_moving_average():
    obs = _feed(MovingAverageMinMaxObserver(averaging_constant=0.25))
    lo0, lo1 = BATCHES[0].min(), BATCHES[1].min()
    assert obs.min_val.item() == np.float32(lo0 + np.float32(0.25) * (lo1 - lo0))
    obs.reset_min_max_vals()
    assert obs.min_val.item() == np.inf


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_per_channel_min_max(axis):
    obs = _feed(PerChannelMinMaxObserver(ch_axis=axis, dtype=gc.qint8))
    data = np.stack(BATCHES)  # [2, 16, 8]: the channel axis is axis + 1
    ax = axis % 2 + 1
    lo = np.moveaxis(data, ax, 0).reshape(data.shape[ax], -1).min(axis=1)
    np.testing.assert_array_equal(obs.min_val.numpy(), lo)
    scale, zp = obs.calculate_qparams()
    assert scale.shape == (data.shape[ax],) and zp.shape == (data.shape[ax],)
    q = gc.quantize_per_channel(gc.from_numpy(BATCHES[0]), scale, zp, axis, gc.qint8)
    err = np.abs(q.dequantize().numpy() - BATCHES[0])
    assert (err <= np.expand_dims(scale.numpy(), 1 - axis % 2) / 2 + 1e-6).all()


def test_per_channel_refuses_a_changed_channel_count():
    obs = _feed(PerChannelMinMaxObserver(ch_axis=1))
    with pytest.raises(ValueError, match="8 channels|has seen 8"):
        obs(gc.randn(16, 5))
    obs.reset_min_max_vals()
    obs(gc.randn(16, 5))
    assert obs.min_val.shape == (5,)


def test_observers_are_modules_with_state_and_with_args():
    obs = _feed(MinMaxObserver())
    sd = obs.state_dict()
    assert set(sd) == {"eps", "min_val", "max_val"}
    fresh = MinMaxObserver()
    fresh.load_state_dict(sd)
    assert fresh.calculate_qparams()[0].item() == obs.calculate_qparams()[0].item()
    make = MinMaxObserver.with_args(dtype=gc.qint8, qscheme=gc.per_tensor_symmetric)
    assert make().dtype is gc.qint8 and make().qscheme is gc.per_tensor_symmetric
    assert "min_val=" in repr(obs)


def test_observing_keeps_no_autograd_history_and_reads_float64():
    x = gc.randn(4, 4, requires_grad=True)
    obs = MinMaxObserver()
    assert obs(x) is x
    obs(gc.randn(3, dtype=gc.float64) * 100)
    assert obs.max_val.dtype is gc.float32


@pytest.mark.parametrize(
    "make,exc,match",
    [
        (lambda: MinMaxObserver(dtype=gc.int8), TypeError, "qint8"),
        (lambda: MinMaxObserver(qscheme=gc.per_channel_affine), ValueError, "PerChannel"),
        (lambda: PerChannelMinMaxObserver(qscheme=gc.per_tensor_affine), ValueError, "per_channel"),
        (lambda: MinMaxObserver(qscheme="affine"), ValueError, "qscheme"),
        (lambda: MinMaxObserver(quant_min=1, quant_max=10), ValueError, "include 0"),
        (lambda: MinMaxObserver(quant_min=0, quant_max=300), ValueError, "at most 256"),
        (
            lambda: MinMaxObserver(qscheme=gc.per_tensor_symmetric, reduce_range=True),
            ValueError,
            "reduce range",
        ),
        (lambda: MovingAverageMinMaxObserver(is_dynamic=True), ValueError, "averaging_constant"),
        (lambda: PerChannelMinMaxObserver(ch_axis=1.0), TypeError, "ch_axis"),
    ],
)
def test_bad_constructor_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_bad_inputs():
    with pytest.raises(TypeError, match="MinMaxObserver"):
        MinMaxObserver()(np.ones(3))
    with pytest.raises(TypeError, match="floating point"):
        MinMaxObserver()(gc.tensor([1, 2]))
    with pytest.raises(ValueError, match="ch_axis 3"):
        PerChannelMinMaxObserver(ch_axis=3)(gc.randn(2, 2))


# ----------------------------------------------------------------------------- vs PyTorch
def _torch_args(torch, dtype, qscheme):
    tdt = {gc.qint8: torch.qint8, gc.quint8: torch.quint8}[dtype]
    tqs = getattr(torch, qscheme.name)
    return tdt, tqs


def _compare(torch, ours, theirs, batches):
    for b in batches:
        ours(gc.from_numpy(b))
        theirs(torch.from_numpy(b))
    s, z = ours.calculate_qparams()
    ts, tz = theirs.calculate_qparams()
    np.testing.assert_array_equal(s.numpy(), ts.numpy())
    np.testing.assert_array_equal(z.numpy(), tz.numpy())
    assert z.numpy().dtype == tz.numpy().dtype


CASES = [
    (dt, qs, rr)
    for dt in (gc.quint8, gc.qint8)
    for qs in (gc.per_tensor_affine, gc.per_tensor_symmetric)
    for rr in (False, True)
    if not (rr and dt is gc.quint8 and qs is gc.per_tensor_symmetric)
]


@pytest.mark.parametrize("dtype,qscheme,reduce_range", CASES)
def test_min_max_observers_equal_pytorch(dtype, qscheme, reduce_range):
    torch = pytest.importorskip("torch")
    from torch.ao import quantization as tq

    tdt, tqs = _torch_args(torch, dtype, qscheme)
    kw = dict(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range)
    tkw = dict(dtype=tdt, qscheme=tqs, reduce_range=reduce_range)
    _compare(torch, MinMaxObserver(**kw), tq.MinMaxObserver(**tkw), BATCHES)
    _compare(
        torch,
        MovingAverageMinMaxObserver(0.3, **kw),
        tq.MovingAverageMinMaxObserver(0.3, **tkw),
        BATCHES,
    )


@pytest.mark.parametrize("dtype", [gc.quint8, gc.qint8])
@pytest.mark.parametrize("qscheme", [gc.per_channel_affine, gc.per_channel_symmetric])
@pytest.mark.parametrize("axis", [0, 1])
def test_per_channel_observers_equal_pytorch(dtype, qscheme, axis):
    torch = pytest.importorskip("torch")
    from torch.ao import quantization as tq

    tdt, tqs = _torch_args(torch, dtype, qscheme)
    kw = dict(dtype=dtype, qscheme=qscheme)
    tkw = dict(dtype=tdt, qscheme=tqs)
    _compare(
        torch,
        PerChannelMinMaxObserver(axis, **kw),
        tq.PerChannelMinMaxObserver(axis, **tkw),
        BATCHES,
    )
    _compare(
        torch,
        MovingAveragePerChannelMinMaxObserver(0.2, axis, **kw),
        tq.MovingAveragePerChannelMinMaxObserver(0.2, axis, **tkw),
        BATCHES,
    )


def test_custom_ranges_equal_pytorch():
    torch = pytest.importorskip("torch")
    from torch.ao import quantization as tq

    _compare(
        torch,
        MinMaxObserver(dtype=gc.qint8, quant_min=-8, quant_max=7, reduce_range=True),
        tq.MinMaxObserver(dtype=torch.qint8, quant_min=-8, quant_max=7, reduce_range=True),
        BATCHES,
    )
    _compare(
        torch,
        MinMaxObserver(quant_min=0, quant_max=15, qscheme=gc.per_tensor_symmetric),
        tq.MinMaxObserver(quant_min=0, quant_max=15, qscheme=torch.per_tensor_symmetric),
        BATCHES,
    )
