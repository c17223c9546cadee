"""float16 / bfloat16 on the Vulkan device beyond elementwise: reductions reading halves with
float32 accumulation, softmax / log_softmax / layer_norm / cross_entropy computed in float32 on
widened inputs, GEMM (matmul, linear) with half inputs and float32 accumulation, all against the
CPU path (which computes in float32 and rounds) within one half-precision rounding step; and
``autocast("vulkan")``'s op lists and a small MLP training step under autocast + GradScaler on
the device against the same step on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, ran_on_device

import gpucore
import gpucore.nn.functional as F
from gpucore import nn

HALF = {"float16": gpucore.float16, "bfloat16": gpucore.bfloat16}
STEP = {"float16": 2.0**-10, "bfloat16": 2.0**-7}  # one rounding step, relative


def half_tensor(a: np.ndarray, dtype) -> gpucore.Tensor:
    with gpucore.device_policy("cpu"):
        return gpucore.tensor(a).to(dtype)


def on_cpu(fn, *ts):
    with gpucore.device_policy("cpu"):
        return fn(*[t.cpu() if isinstance(t, gpucore.Tensor) else t for t in ts])


def close(got: gpucore.Tensor, want: gpucore.Tensor, name: str, steps: float = 1.0, atol=0.0):
    """Same dtype; values within ``steps`` rounding steps of the half type (NaN where NaN)."""
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    g = got.float().cpu().numpy().astype(np.float64)
    w = want.float().cpu().numpy().astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(g, w, rtol=steps * STEP[name], atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", sorted(HALF))
def test_reductions_read_halves_and_accumulate_in_float32(vulkan, name):
    dt = HALF[name]
    a = half_tensor((RNG.standard_normal((40, 30, 9)) * 3).astype(np.float32), dt)
    big = half_tensor(np.full(5000, 1.0, np.float32), dt)  # a float16 accumulator stops at 2048
    fns = {
        "sum": lambda t: t.sum(),
        "sum(0,2)": lambda t: t.sum((0, 2)),
        "mean": lambda t: t.mean(1),
        "amax": lambda t: t.amax(2),
        "amin": lambda t: t.amin(0),
        "max_dim": lambda t: t.max(1)[0],
    }
    v = a.to("vulkan")
    for key, fn in fns.items():
        op = key.split("(")[0]
        with gpucore.dispatch.trace_ops() as ops:
            got = fn(v)
        ran_on_device(ops, op)
        close(got, on_cpu(fn, a), name, steps=0.0 if op in ("amax", "amin", "max_dim") else 1.0)
    with gpucore.dispatch.trace_ops() as ops:
        idx = v.argmax(1)
    ran_on_device(ops, "argmax")
    np.testing.assert_array_equal(idx.cpu().numpy(), on_cpu(lambda t: t.argmax(1), a).numpy())
    exact = half_tensor(np.array([5000.0], np.float32), dt).item()  # 5000 rounded once
    assert big.to("vulkan").sum().item() == exact


@pytest.mark.parametrize("name", sorted(HALF))
def test_softmax_norms_and_losses_compute_in_float32(vulkan, name):
    dt = HALF[name]
    x = half_tensor((RNG.standard_normal((70, 65)) * 4).astype(np.float32), dt)
    w = half_tensor(RNG.standard_normal(65).astype(np.float32), dt)
    target = gpucore.tensor(RNG.integers(0, 65, 70))
    fns = {
        "softmax": lambda t, w, y: F.softmax(t, -1),
        "log_softmax": lambda t, w, y: F.log_softmax(t, -1),
        "layer_norm": lambda t, w, y: F.layer_norm(t, (65,), w, w),
        "cross_entropy": lambda t, w, y: F.cross_entropy(t, y, reduction="none"),
    }
    for op, fn in fns.items():
        with gpucore.dispatch.trace_ops() as ops:
            got = fn(x.to("vulkan"), w.to("vulkan"), target.to("vulkan"))
        # layer_norm on half device tensors: native_layer_norm's shader (float32 inside)
        ran_on_device(ops, {"layer_norm": "native_layer_norm"}.get(op, op))
        close(got, on_cpu(fn, x, w, target), name, steps=2.0, atol=1e-6)


def _float32_then_rounded(fn, dt, *ts):
    """fn on the CPU in float32 from the half inputs' exact values, rounded once to dt."""
    with gpucore.device_policy("cpu"):
        args = [t.cpu().float() if t.dtype.is_floating_point else t.cpu() for t in ts]
        return fn(*args).to(dt)


@pytest.mark.parametrize("name", sorted(HALF))
@pytest.mark.parametrize(
    "shape,dim",
    [((70, 65), 1), ((40, 9, 6), 1), ((3, 40000), 1)],  # rows, columns, chunked rows (2 passes)
)
def test_softmax_reads_and_writes_halves_in_its_shader(vulkan, name, shape, dim):
    """softmax / log_softmax and their backward on half tensors: the shader's own dispatches
    only (no widening casts), float32 inside: within one rounding of the float32 result."""
    dt = HALF[name]
    x = half_tensor((RNG.standard_normal(shape) * 4).astype(np.float32), dt)
    g = half_tensor(RNG.standard_normal(shape).astype(np.float32), dt)
    xv, gv = x.to("vulkan"), g.to("vulkan")
    for fname in ("softmax", "log_softmax"):
        fn = getattr(F, fname)
        one = gpucore.vulkan.stats(since=gpucore.vulkan.mark())["dispatches"]  # the baseline
        m = gpucore.vulkan.mark()
        with gpucore.dispatch.trace_ops() as ops:
            y = fn(xv, dim)
        ran_on_device(ops, fname)
        assert gpucore.vulkan.stats(since=m)["dispatches"] - one <= 2  # fused, or stats + apply
        close(y, _float32_then_rounded(lambda t, f=fn: f(t, dim), dt, x), name, atol=1e-6)
        bwd = "_".join([fname, "backward"])
        with gpucore.dispatch.trace_ops() as ops:
            gx = gpucore.ops.apply(getattr(gpucore.ops.nn, bwd.upper()), gv, y, dim=dim)
        ran_on_device(ops, bwd)
        want = _float32_then_rounded(
            lambda a, b, o=bwd: gpucore.ops.apply(
                getattr(gpucore.ops.nn, o.upper()), a, b, dim=dim
            ),
            dt,
            g,
            y,
        )
        # a difference of near-equal float32 terms: a few roundings of its inputs' size
        close(
            gx,
            want,
            name,
            steps=2.0,
            atol=4 * STEP[name] * float(np.abs(want.float().numpy()).max()),
        )


@pytest.mark.parametrize("name", sorted(HALF))
@pytest.mark.parametrize("classes", [10, 700])  # a row per invocation, a workgroup per row
def test_cross_entropy_reads_and_writes_halves_in_its_shader(vulkan, name, classes):
    dt = HALF[name]
    logits = half_tensor((RNG.standard_normal((33, classes)) * 3).astype(np.float32), dt)
    target = gpucore.tensor(RNG.integers(0, classes, 33))
    target[5] = -100  # ignored
    lv, tv = logits.to("vulkan").requires_grad_(), target.to("vulkan")
    with gpucore.dispatch.trace_ops() as ops:
        loss = F.cross_entropy(lv, tv, reduction="none")
        loss.backward(gpucore.ones_like(loss))
    ran_on_device(ops, "cross_entropy")
    ran_on_device(ops, "cross_entropy_backward")
    assert not any(r[0] == "to_dtype" and r[2] == (33, classes) for r in ops)  # not widened
    want = _float32_then_rounded(
        lambda a, t: F.cross_entropy(a, t, reduction="none"), dt, logits, target
    )
    close(loss.detach(), want, name, steps=2.0, atol=1e-6)
    # the backward reads the saved lse, rounded to the half type as on the CPU (whose kernel
    # computes in float32 between the half tensors): against the CPU's, within two roundings
    lc = logits.cpu().requires_grad_()
    with gpucore.device_policy("cpu"):
        F.cross_entropy(lc, target, reduction="none").backward(gpucore.ones(33, dtype=dt))
    close(lv.grad, lc.grad, name, steps=2.0, atol=STEP[name] / classes)


@pytest.mark.parametrize("name", sorted(HALF))
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_reads_and_writes_halves_in_its_shader(vulkan, name, affine):
    """Forward: one native_layer_norm dispatch on the halves (odd rows share words between
    invocations); backward composed on the device in float32: both within half roundings of
    the CPU (float32 inside, as its C pass)."""
    dt = HALF[name]
    x = half_tensor((RNG.standard_normal((37, 5, 13)) * 3 + 1).astype(np.float32), dt)
    w = half_tensor(RNG.standard_normal((5, 13)).astype(np.float32), dt) if affine else None
    b = half_tensor(RNG.standard_normal((5, 13)).astype(np.float32), dt) if affine else None
    g = half_tensor(RNG.standard_normal((37, 5, 13)).astype(np.float32), dt)

    def run(dev):
        with gpucore.device_policy("cpu" if dev == "cpu" else "vulkan"):
            ts = [t if t is None else t.to(dev).requires_grad_() for t in (x, w, b)]
            m = gpucore.vulkan.mark()
            with gpucore.dispatch.trace_ops() as ops:
                y = F.layer_norm(ts[0], (5, 13), ts[1], ts[2])
            if dev == "vulkan":
                ran_on_device(ops, "native_layer_norm")
                assert gpucore.vulkan.stats(since=m)["dispatches"] == 1  # nothing widened
            y.backward(g.to(dev))
            return [y.detach()] + [t.grad for t in ts if t is not None]

    for got, want in zip(run("vulkan"), run("cpu")):
        scale = float(np.abs(want.float().numpy()).max())
        close(got, want, name, steps=2.0, atol=2 * STEP[name] * scale)


@pytest.mark.parametrize("name", sorted(HALF))
def test_gemm_with_half_inputs_accumulates_in_float32(vulkan, name):
    dt = HALF[name]
    a = half_tensor(RNG.standard_normal((67, 130)).astype(np.float32), dt)
    w = half_tensor(RNG.standard_normal((72, 130)).astype(np.float32), dt)
    bias = half_tensor(RNG.standard_normal(72).astype(np.float32), dt)
    fns = {
        "matmul": lambda x, w, b: x @ w.T,  # B read transposed (k-fast)
        "linear": lambda x, w, b: F.linear(x, w, b),
    }
    for op, fn in fns.items():
        with gpucore.dispatch.trace_ops() as ops:
            got = fn(a.to("vulkan"), w.to("vulkan"), bias.to("vulkan"))
        ran_on_device(ops, op)
        close(got, on_cpu(fn, a, w, bias), name, atol=1e-3)
    # against float64: the float32 accumulation is what keeps K = 130 at one rounding step
    ref = a.float().numpy().astype(np.float64) @ w.float().numpy().astype(np.float64).T
    got = (a.to("vulkan") @ w.to("vulkan").T).float().cpu().numpy()
    np.testing.assert_allclose(got, ref, rtol=STEP[name], atol=1e-2)


def test_autocast_vulkan_follows_pytorchs_cuda_lists(vulkan):
    x = gpucore.randn(70, 64).to("vulkan")
    w = gpucore.randn(32, 64).to("vulkan")
    h = x.half()
    with gpucore.autocast("vulkan"):
        assert gpucore.get_autocast_dtype("vulkan") is gpucore.float16
        assert (x @ w.T).dtype is gpucore.float16  # lower precision
        assert F.linear(x, w).dtype is gpucore.float16
        assert F.softmax(h, -1).dtype is gpucore.float32  # float32 list
        assert F.log_softmax(h, -1).dtype is gpucore.float32
        assert F.layer_norm(h, (64,)).dtype is gpucore.float32
        assert h.sum().dtype is gpucore.float32
        assert h.exp().dtype is gpucore.float32
        assert (h + 1).dtype is gpucore.float16  # neither: the input's dtype
        assert F.relu(h).dtype is gpucore.float16
        assert (x + h).dtype is gpucore.float32  # promotion
        cpu = x.cpu()
        assert (cpu @ w.T.cpu()).dtype is gpucore.float32  # host tensors: no cpu region open
        with gpucore.autocast("vulkan", enabled=False):
            assert (x @ w.T).dtype is gpucore.float32
    with gpucore.autocast("vulkan", dtype=gpucore.bfloat16):
        assert (x @ w.T).dtype is gpucore.bfloat16
    with gpucore.autocast("cpu"):  # the CPU list keeps softmax in the input's dtype
        assert F.softmax(h.cpu(), -1).dtype is gpucore.float16


def _mlp_steps(device: str, steps: int = 3):
    """Three steps of a 64-96-10 MLP under autocast + GradScaler (float16 on Vulkan, the same
    float16 computation forced on the CPU); returns losses, scales and the first weight."""
    gen = np.random.default_rng(7)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10))
    with gpucore.no_grad():
        for p in model.parameters():
            p.copy_(gpucore.tensor((gen.standard_normal(p.shape) * 0.1).astype(np.float32)))
    model.to(device)
    opt = gpucore.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = gpucore.amp.GradScaler(device, init_scale=2.0**12)
    x = gpucore.tensor(gen.standard_normal((64, 64)).astype(np.float32)).to(device)
    y = gpucore.tensor(gen.integers(0, 10, 64)).to(device)
    losses, scales = [], []
    for _ in range(steps):
        opt.zero_grad()
        with gpucore.autocast(device, dtype=gpucore.float16):
            out = model(x)
            assert out.dtype is gpucore.float16
            loss = F.cross_entropy(out, y)
            assert loss.dtype is gpucore.float32
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales, model[0].weight.detach().cpu().numpy()


def test_mlp_training_step_under_autocast_and_grad_scaler_matches_the_cpu(vulkan):
    dev = _mlp_steps("vulkan")
    with gpucore.device_policy("cpu"):
        cpu = _mlp_steps("cpu")
    assert dev[1] == cpu[1]
    np.testing.assert_allclose(dev[0], cpu[0], rtol=2e-3)
    np.testing.assert_allclose(dev[2], cpu[2], rtol=2e-3, atol=2e-4)
    assert dev[0][-1] < dev[0][0]


class _Attention(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.h = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (
            u.reshape(b, t, self.h, c // self.h).transpose(1, 2)
            for u in self.qkv(self.ln(x)).split(c, dim=2)
        )
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        return x + self.proj(F.gelu(y))


def _cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10)
    )


@pytest.mark.parametrize("model", ["attention", "cnn"])
def test_compiled_half_models_on_the_device_equal_the_cpu_runtime(vulkan, model):
    """The runtime's Vulkan executor on float16 graphs: GEMM on halves, attention / conv2d /
    pooling widened to float32 (``VulkanExecutor.widened``), against the CPU executor."""
    from gpucore import runtime

    gpucore.manual_seed(3)
    m, shape = {"attention": (_Attention, (2, 7, 32)), "cnn": (_cnn, (2, 3, 8, 8))}[model]
    m = m().to(gpucore.float16)
    m.eval()
    x = RNG.standard_normal(shape).astype(np.float16)
    dev = runtime.compile(m, [x], device="vulkan")
    assert dev.device == "vulkan"
    assert any(getattr(e, "widened", None) for e in dev.executors())
    want = runtime.compile(m, [x], device="cpu").run_arrays([x])[0]
    got = dev.run_arrays([x])[0]
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=STEP["float16"], atol=1e-3)
