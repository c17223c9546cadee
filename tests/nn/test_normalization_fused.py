"""F.layer_norm / rms_norm / group_norm / batch_norm on host tensors through the fused ops
(gpucore/ops/norm.py, norm_batch.py) and the fast lanes (cpu/python/fastpath_nn.c; softmax's
backward too): against PyTorch and float64 numpy on odd shapes, strided inputs, weight / bias
None, eps; gradcheck and gradgradcheck; running statistics against PyTorch over several steps
(momentum, momentum=None); the fast lane and the general path give the same bits; on Vulkan
the composition gives the same answer; bad arguments raise naming the function and shapes."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F
from gpucore import _cpu
from gpucore.autograd import gradcheck, gradgradcheck
from gpucore.errors import ShapeError


def t(a, grad=False, dt=gpucore.float64):
    return gpucore.tensor(np.asarray(a), dtype=dt, requires_grad=grad)


def rng(seed):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- against PyTorch
CASES = {
    "layer_norm": [((3, 5, 7), (7,)), ((2, 3, 4), (3, 4)), ((2, 3), (3,))],
    "rms_norm": [((3, 5, 7), (7,)), ((2, 3, 4), (3, 4)), ((6, 33), (33,))],
    "group_norm": [((3, 6, 5), 3), ((2, 4, 3, 3), 2), ((2, 4), 2), ((1, 6, 7), 1)],
    "batch_norm": [((5, 3),), ((2, 3, 7),), ((3, 2, 3, 3),), ((2, 2, 2, 2, 3),)],
}


def _call(lib, fn, x, arg, w, b, eps, **kw):
    F_ = lib.nn.functional
    if fn == "layer_norm":
        return F_.layer_norm(x, arg, w, b, eps)
    if fn == "rms_norm":
        return F_.rms_norm(x, arg, w, eps)
    if fn == "group_norm":
        return F_.group_norm(x, arg, w, b, eps)
    return F_.batch_norm(x, kw["rm"], kw["rv"], w, b, kw["training"], 0.1, eps)


def _params(fn, shape, arg, r):
    ps = tuple(arg) if fn in ("layer_norm", "rms_norm") else (shape[1],)
    return r.standard_normal(ps), r.standard_normal(ps)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("fn", list(CASES))
def test_against_torch(fn, dt):
    torch = pytest.importorskip("torch")
    for i, case in enumerate(CASES[fn]):
        shape, arg = case[0], (case[1] if len(case) > 1 else None)
        r = rng(i)
        x = r.standard_normal(shape) * 2 + 1
        x = np.swapaxes(np.swapaxes(x, 0, -1).copy(), 0, -1)  # strided (not C-contiguous)
        w, b = _params(fn, shape, arg, r)
        g = r.standard_normal(shape)
        for wi, bi in ((w, b), (w, None), (None, b), (None, None)):
            if fn == "rms_norm" and bi is not None:
                continue
            if fn == "group_norm" and wi is None and bi is not None:
                continue  # PyTorch 2.13's backward fails ("tensor does not have a device")
            for eps, training in ((1e-5, True), (0.3, False)):
                if fn != "batch_norm" and not training:
                    continue
                got, want = [], []
                for lib, mk in (
                    (gpucore, lambda a, gr: t(a, gr, getattr(gpucore, dt))),
                    (
                        torch,
                        lambda a, gr: torch.tensor(a, dtype=getattr(torch, dt), requires_grad=gr),
                    ),
                ):
                    # PyTorch's group_norm backward fails on strided float64 inputs
                    xs = mk(x if lib is gpucore else x.copy(), True)
                    ws = mk(wi, True) if wi is not None else None
                    bs = mk(bi, True) if bi is not None else None
                    kw = {}
                    if fn == "batch_norm":
                        c = shape[1]
                        kw = dict(
                            rm=mk(np.linspace(-1, 1, c), False),
                            rv=mk(np.linspace(0.5, 2, c), False),
                            training=training,
                        )
                    out = _call(lib, fn, xs, arg, ws, bs, eps, **kw)
                    (out * mk(g, False)).sum().backward()
                    res = [out, xs.grad] + [p.grad for p in (ws, bs) if p is not None]
                    res += [kw["rm"], kw["rv"]] if kw else []
                    (got if lib is gpucore else want).append(
                        [np.asarray(a.detach().numpy(), np.float64) for a in res]
                    )
                tol = 2e-5 if dt == "float32" else 1e-10
                for a, e in zip(got[0], want[0]):
                    np.testing.assert_allclose(a, e, rtol=tol, atol=tol, err_msg=f"{fn} {case}")


# --------------------------------------------------------------------------- gradients
GRAD_FNS = [
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (5,), w, b)),
    ("rms_norm", lambda x, w, b: F.rms_norm(x, (5,), w) + b),
    (
        "group_norm",
        lambda x, w, b: F.group_norm(x.reshape(3, 5, 4).transpose(1, 2), 2, w[:4], b[:4]),
    ),
    (
        "batch_norm train",
        lambda x, w, b: F.batch_norm(x.transpose(0, 1), None, None, w[:4], b[:4], True),
    ),
    (
        "batch_norm eval",
        lambda x, w, b: F.batch_norm(
            x.transpose(0, 1), t(np.linspace(-1, 1, 4)), t(np.linspace(0.5, 2, 4)), w[:4], b[:4]
        ),
    ),
]


@pytest.mark.parametrize("name, f", GRAD_FNS, ids=[n for n, _ in GRAD_FNS])
def test_gradcheck_and_gradgradcheck(name, f):
    r = rng(3)
    x = t(r.standard_normal((3, 4, 5)), True)
    w, b = t(r.standard_normal(5), True), t(r.standard_normal(5), True)
    if name.startswith("batch_norm"):
        x = t(r.standard_normal((4, 3, 5)), True)
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


# --------------------------------------------------------------------------- running stats
@pytest.mark.parametrize("momentum", [0.1, 0.7, None])
@pytest.mark.parametrize(
    "cls, shape",
    [
        ("BatchNorm1d", (6, 3)),
        ("BatchNorm1d", (4, 3, 5)),
        ("BatchNorm2d", (2, 3, 4, 4)),
        ("BatchNorm3d", (2, 3, 2, 3, 2)),
    ],
)
def test_module_running_stats_over_steps(cls, shape, momentum):
    torch = pytest.importorskip("torch")
    m = getattr(nn, cls)(3, momentum=momentum)
    tm = getattr(torch.nn, cls)(3, momentum=momentum)
    r = rng(5)
    for step in range(4):
        x = r.standard_normal(shape) * (step + 1) + step
        out = m(t(x, dt=gpucore.float32)).detach().numpy()
        want = tm(torch.tensor(x, dtype=torch.float32)).detach().numpy()
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            m.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            m.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5, atol=1e-6
        )
    assert int(m.num_batches_tracked.item()) == 4
    m.eval()
    tm.eval()
    x = r.standard_normal(shape)
    np.testing.assert_allclose(
        m(t(x, dt=gpucore.float32)).detach().numpy(),
        tm(torch.tensor(x, dtype=torch.float32)).detach().numpy(),
        rtol=1e-5,
        atol=1e-5,
    )


def test_running_stats_version_bumped_and_ops_traced():
    rm, rv = gpucore.zeros(3), gpucore.ones(3)
    v0 = rm._vbox[0]
    x = gpucore.randn(4, 3, 2)
    with gpucore.dispatch.trace_ops() as ops:
        F.batch_norm(x, rm, rv, training=True)
        F.group_norm(x, 3)
        F.rms_norm(x, (2,))
    assert [n for n, _, _ in ops] == ["native_batch_norm", "native_group_norm", "native_rms_norm"]
    assert rm._vbox[0] > v0


# --------------------------------------------------------------------------- fast lanes
@pytest.fixture
def lane_open():
    """The policy 'cpu' opens the lanes whatever ran before ('auto' keeps them closed until its
    first op has looked for a device)."""
    old = gpucore.dispatch.get_device_policy()
    gpucore.dispatch.set_device_policy("cpu")
    yield
    gpucore.dispatch.set_device_policy(old)


def test_fast_lane_same_bits_as_general_path(lane_open):
    r = rng(8)
    x = t(r.standard_normal((4, 16, 64)), True, gpucore.float32)
    w, b = (
        t(r.standard_normal(64), True, gpucore.float32),
        t(r.standard_normal(64), True, gpucore.float32),
    )
    c = t(r.standard_normal(16), True, gpucore.float32)
    g = t(r.standard_normal((4, 16, 64)), dt=gpucore.float32)
    # the lanes themselves answer (None would mean the general path on both sides)
    assert _cpu.fast_norm_rows(x, (64,), w, b, 1e-5, False, False) is not None
    assert _cpu.fast_softmax(x, -1, 0) is not None
    assert _cpu.fast_softmax_backward(g, g, -1, 1) is not None
    assert _cpu.fast_group_norm(x, 4, c, c, 1e-5, False) is not None
    stats = {}

    def run(f, key):
        for p in (x, w, b, c):
            p.grad = None
        rm, rv = (
            t(np.linspace(-1, 1, 16), dt=gpucore.float32),
            t(np.linspace(1, 2, 16), dt=gpucore.float32),
        )
        out = f(rm, rv)
        if key.endswith("sum"):
            out.sum().backward()  # an expanded (strided) gradient
        else:
            out.backward(g)
        stats[key] = (rm.numpy(), rv.numpy())
        return [out.detach().numpy()] + [p.grad.numpy() for p in (x, w, b, c) if p.grad is not None]

    fns = [
        lambda rm, rv: F.layer_norm(x, (64,), w, b),
        lambda rm, rv: F.rms_norm(x, (64,), w) * 1,
        lambda rm, rv: F.softmax(x, -1),
        lambda rm, rv: F.log_softmax(x, 1),
        lambda rm, rv: F.group_norm(x, 4, c, c),
        lambda rm, rv: F.batch_norm(x, rm, rv, c, c, True, 0.3),
        lambda rm, rv: F.batch_norm(x, rm, rv, c, None, False),
    ]
    for i, f in enumerate(fns):
        with gpucore.no_grad():  # the lanes without statistics (no graph)
            consts = [t(np.full(16, 0.5), dt=gpucore.float32) for _ in range(4)]
            fast_nograd = f(*consts[:2]).numpy()
            with gpucore.dispatch.trace_ops():
                np.testing.assert_array_equal(fast_nograd, f(*consts[2:]).numpy())
        for mode in ("", " sum"):
            fast = run(f, "fast" + mode)
            with gpucore.dispatch.trace_ops() as ops:  # closes the fast lanes: the general path
                slow = run(f, "slow" + mode)
            assert ops, f"case {i}"
            for a, e in zip(fast, slow):
                np.testing.assert_array_equal(a, e, err_msg=f"case {i}{mode}")
            for a, e in zip(stats["fast" + mode], stats["slow" + mode]):
                np.testing.assert_array_equal(a, e, err_msg=f"case {i}{mode} running statistics")


@pytest.mark.parametrize("x_grad", [True, False], ids=["x_grad", "x_const"])
def test_fast_lanes_take_parameter_weights(lane_open, x_grad):
    """A module's weights are Parameters: the norm lanes take them (fast_operand_kind), record
    the graph for them (also when only they require grad), and give the general path's bits,
    values and gradients."""
    r = rng(9)
    x = t(r.standard_normal((4, 16, 64)), x_grad, gpucore.float32)
    w, b = (nn.Parameter(t(r.standard_normal(64), dt=gpucore.float32)) for _ in range(2))
    cw, cb = (nn.Parameter(t(r.standard_normal(16), dt=gpucore.float32)) for _ in range(2))
    g = t(r.standard_normal((4, 16, 64)), dt=gpucore.float32)
    rm, rv = (
        t(np.linspace(-1, 1, 16), dt=gpucore.float32),
        t(np.linspace(1, 2, 16), dt=gpucore.float32),
    )
    # the lanes themselves answer (None would mean the general path)
    out, mean, rstd = _cpu.fast_norm_rows(x, (64,), w, b, 1e-5, False, True)
    assert _cpu.fast_norm_rows_backward(x, w, mean, rstd, g, 64, False, (True,) * 3) is not None
    assert _cpu.fast_group_norm(x, 4, cw, cb, 1e-5, False) is not None
    assert _cpu.fast_batch_norm(x, cw, cb, rm, rv, False, 0.1, 1e-5, False) is not None

    def run(f):
        for p in (x, w, b, cw, cb):
            p.grad = None
        rm, rv = (
            t(np.linspace(-1, 1, 16), dt=gpucore.float32),
            t(np.linspace(1, 2, 16), dt=gpucore.float32),
        )
        f(rm, rv).backward(g)
        grads = [p.grad for p in (x, w, b, cw, cb) if p.grad is not None]
        return [f(rm, rv).detach().numpy(), rm.numpy(), rv.numpy()] + [p.numpy() for p in grads]

    fns = {
        "layer_norm": (lambda rm, rv: F.layer_norm(x, (64,), w, b), 3),
        "rms_norm": (lambda rm, rv: F.rms_norm(x, (64,), w), 2),
        "group_norm": (lambda rm, rv: F.group_norm(x, 4, cw, cb), 3),
        "batch_norm train": (lambda rm, rv: F.batch_norm(x, rm, rv, cw, cb, True, 0.3), 3),
        "batch_norm eval": (lambda rm, rv: F.batch_norm(x, rm, rv, cw, cb, False), 3),
    }
    for name, (f, ngrads) in fns.items():
        fast = run(f)
        assert len(fast) == 3 + ngrads - (not x_grad), f"{name}: a gradient is missing"
        with gpucore.dispatch.trace_ops() as ops:  # the general path
            slow = run(f)
        assert ops, name
        assert len(fast) == len(slow), name
        for a, e in zip(fast, slow):
            np.testing.assert_array_equal(a, e, err_msg=name)


def test_vulkan_composition_agrees(vulkan):
    r = rng(9)
    x = r.standard_normal((2, 4, 6)).astype(np.float32)
    w, b = r.standard_normal(4).astype(np.float32), r.standard_normal(4).astype(np.float32)
    w6 = r.standard_normal(6).astype(np.float32)
    fs = [
        lambda x, w, b, w6: F.group_norm(x, 2, w, b),
        lambda x, w, b, w6: F.batch_norm(x, None, None, w, b, True),
        lambda x, w, b, w6: F.rms_norm(x, (6,), w6),
        lambda x, w, b, w6: F.layer_norm(x, (6,), w6),
    ]
    for f in fs:
        host = f(*(gpucore.tensor(a) for a in (x, w, b, w6))).numpy()
        dev = f(*(gpucore.tensor(a, device="vulkan") for a in (x, w, b, w6))).numpy()
        np.testing.assert_allclose(dev, host, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: F.rms_norm(gpucore.ones(2, 3), (4,)), r"rms_norm.*\(4,\).*\(2, 3\)"),
        (
            lambda: F.rms_norm(gpucore.ones(2, 3), (3,), gpucore.ones(2)),
            r"rms_norm.*weight.*\(2,\)",
        ),
        (lambda: F.group_norm(gpucore.ones(2, 6, 3), 4), r"group_norm.*\(2, 6, 3\).*num_groups=4"),
        (
            lambda: F.group_norm(gpucore.ones(2, 6), 3, gpucore.ones(3)),
            r"group_norm.*weight.*\(3\,\)",
        ),
        (
            lambda: F.batch_norm(gpucore.ones(2, 3), gpucore.zeros(4), gpucore.ones(3)),
            r"batch_norm.*running_mean.*\(4,\)",
        ),
        (
            lambda: F.batch_norm(gpucore.ones(1, 3), None, None, training=True),
            r"batch_norm.*more than 1 value.*\(1, 3\)",
        ),
        (
            lambda: F.batch_norm(gpucore.ones(2, 3), None, None),
            r"batch_norm.*running_mean and running_var",
        ),
        (
            lambda: F.layer_norm(gpucore.ones(2, 3), (3,), gpucore.ones(4)),
            r"layer_norm.*weight.*\(4,\)",
        ),
    ],
)
def test_bad_arguments_name_the_function_and_shapes(call, match):
    with pytest.raises((ShapeError, ValueError), match=match):
        call()
