"""gpucore.vulkan.VulkanGraph / graph: a training step captured once and replayed.

A replay runs the commands the capture recorded, on the memory it used, so replaying a step after
copying new data into the captured inputs must give the eager step's bits: each test trains one
model eagerly and a copy of it (same initial weights, same data, same device) eagerly for the
warm-up steps and then by replays, and compares every loss and the final parameters and
optimizer state exactly. Sizes are just above the 4096-element device threshold (lavapipe).
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import nn

STEPS, WARMUP = 20, 3


def mlp():
    return nn.Sequential(nn.Linear(64, 80), nn.ReLU(), nn.Linear(80, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 8 * 8, 10),
    )


def dropout_mlp():
    return nn.Sequential(nn.Linear(64, 80), nn.ReLU(), nn.Dropout(0.3), nn.Linear(80, 10))


MODELS = {
    "mlp": (mlp, (64, 64)),
    "cnn": (cnn, (16, 1, 16, 16)),
    "dropout_mlp": (dropout_mlp, (64, 64)),
}
OPTIMIZERS = {
    "sgd_momentum": lambda ps: gpucore.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam_capturable": lambda ps: gpucore.optim.Adam(ps, lr=1e-2, capturable=True),
    "adamw_capturable": lambda ps: gpucore.optim.AdamW(
        ps, lr=1e-2, weight_decay=0.1, amsgrad=True, capturable=True
    ),
    "rmsprop_capturable": lambda ps: gpucore.optim.RMSprop(
        ps, lr=1e-3, momentum=0.5, centered=True, capturable=True
    ),
    "adamax_capturable": lambda ps: gpucore.optim.Adamax(ps, lr=1e-2, capturable=True),
    "nadam_capturable": lambda ps: gpucore.optim.NAdam(
        ps, lr=1e-2, weight_decay=0.01, capturable=True
    ),
    "radam_capturable": lambda ps: gpucore.optim.RAdam(
        ps, lr=1e-2, decoupled_weight_decay=True, weight_decay=0.1, capturable=True
    ),
    "adadelta_capturable": lambda ps: gpucore.optim.Adadelta(ps, lr=0.5, capturable=True),
}


def batches(shape, n=STEPS, seed=0):
    """New data each step, labelled by a fixed random teacher (so the loss goes down)."""
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((int(np.prod(shape[1:])), 10))
    out = []
    for _ in range(n):
        x = rng.standard_normal(shape).astype(np.float32)
        out.append((x, (x.reshape(shape[0], -1) @ teacher).argmax(1).astype(np.int64)))
    return out


def setup(factory, shape, make_opt, seed=5):
    gpucore.manual_seed(seed)
    with gpucore.device_policy("cpu"):
        model = factory()  # built on the host: both runs start from the same weights
    model = model.to("vulkan")
    opt = make_opt(list(model.parameters()))
    x = gpucore.zeros(*shape).to("vulkan")
    y = gpucore.zeros(shape[0], dtype=gpucore.int64).to("vulkan")
    return model, opt, x, y


def load(x, y, batch):
    x.copy_(gpucore.tensor(batch[0]))
    y.copy_(gpucore.tensor(batch[1]))


def eager_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def snapshot(model, opt) -> list:
    out = [p.detach().numpy().copy() for p in model.parameters()]
    for st in opt.state.values():
        for k in sorted(st):
            v = st[k]
            out.append(v.numpy().copy() if isinstance(v, gpucore.Tensor) else np.array(v))
    return out


def train_eager(factory, shape, make_opt, data):
    model, opt, x, y = setup(factory, shape, make_opt)
    losses = []
    for b in data:
        load(x, y, b)
        losses.append(eager_step(model, opt, x, y).item())
    return losses, snapshot(model, opt)


def warm_up_and_capture(factory, shape, make_opt, data):
    """WARMUP eager steps on data's first batches, then one training step captured: (model, opt,
    x, y, the graph, its loss tensor, the eager losses)."""
    model, opt, x, y = setup(factory, shape, make_opt)
    losses = []
    for b in data[:WARMUP]:
        load(x, y, b)
        losses.append(eager_step(model, opt, x, y).item())
    g = gpucore.vulkan.VulkanGraph()
    opt.zero_grad(set_to_none=True)
    with gpucore.vulkan.graph(g):
        static_loss = F.cross_entropy(model(x), y)
        static_loss.backward()
        opt.step()
    return model, opt, x, y, g, static_loss, losses


def train_graphed(factory, shape, make_opt, data):
    model, opt, x, y, g, static_loss, losses = warm_up_and_capture(factory, shape, make_opt, data)
    assert g.dispatches > 20
    for b in data[WARMUP:]:
        load(x, y, b)
        g.replay()
        losses.append(static_loss.item())
    result = losses, snapshot(model, opt)
    g.reset()
    return result


@pytest.mark.parametrize(
    "model,optim",
    [
        ("mlp", "sgd_momentum"),
        ("mlp", "adam_capturable"),
        ("mlp", "adamw_capturable"),
        ("mlp", "rmsprop_capturable"),
        ("mlp", "adamax_capturable"),
        ("mlp", "nadam_capturable"),
        ("mlp", "radam_capturable"),
        ("mlp", "adadelta_capturable"),
        ("cnn", "sgd_momentum"),
        ("cnn", "adam_capturable"),
        ("dropout_mlp", "sgd_momentum"),  # a fresh mask at every replay, eager's masks
        ("dropout_mlp", "adam_capturable"),
    ],
)
def test_replayed_steps_equal_eager_bit_for_bit(vulkan, model, optim):
    factory, shape = MODELS[model]
    data = batches(shape)
    want_losses, want_state = train_eager(factory, shape, OPTIMIZERS[optim], data)
    got_losses, got_state = train_graphed(factory, shape, OPTIMIZERS[optim], data)
    assert want_losses[-1] < want_losses[0]  # it trains
    np.testing.assert_array_equal(np.array(got_losses), np.array(want_losses))
    assert len(got_state) == len(want_state)
    for got, want in zip(got_state, want_state):
        np.testing.assert_array_equal(got, want)


def test_one_submit_per_replay_and_outputs_overwritten(vulkan):
    model, opt, x, y = setup(mlp, (64, 64), OPTIMIZERS["sgd_momentum"])
    data = batches((64, 64), n=3)
    load(x, y, data[0])
    eager_step(model, opt, x, y)
    g = gpucore.vulkan.VulkanGraph()
    opt.zero_grad(set_to_none=True)
    with gpucore.vulkan.graph(g):
        static_loss = F.cross_entropy(model(x), y)
        static_loss.backward()
        opt.step()
    grad = model[0].weight.grad
    assert grad is not None and grad.device.type == "vulkan"
    seen = []
    for b in data[1:]:
        load(x, y, b)
        gpucore.vulkan.synchronize()
        m = gpucore.vulkan.mark()
        g.replay()
        gpucore.vulkan.synchronize()
        s = gpucore.vulkan.stats(since=m)
        assert s["submits"] == 1 and s["dispatches"] == 0  # one submit, nothing recorded again
        seen.append((static_loss.item(), grad.numpy().copy()))
    assert seen[0][0] != seen[1][0]
    assert not np.array_equal(seen[0][1], seen[1][1])
    assert model[0].weight.grad is grad  # the captured gradient, overwritten in place


def test_reset_frees_and_replay_after_reset_raises(vulkan):
    x = gpucore.ones(64, 80).to("vulkan")
    g = gpucore.vulkan.VulkanGraph()
    with pytest.raises(RuntimeError, match="nothing was captured"):
        g.replay()
    gpucore.vulkan.synchronize()
    live = gpucore.vulkan.stats()["live_bytes"]
    with gpucore.vulkan.graph(g):
        y = (x * 2.0).exp()
    g.replay()
    np.testing.assert_allclose(y.numpy(), np.exp(2.0), rtol=1e-6)
    del y
    assert gpucore.vulkan.stats()["live_bytes"] > live  # reserved while the graph lives
    g.reset()
    assert gpucore.vulkan.stats()["live_bytes"] == live
    with pytest.raises(RuntimeError, match="reset"):
        g.replay()


def test_tensors_made_from_host_data_restart_at_each_replay(vulkan):
    x = gpucore.ones(4096).to("vulkan")
    g = gpucore.vulkan.VulkanGraph()
    with gpucore.vulkan.graph(g):
        acc = gpucore.zeros(4096).to("vulkan")  # host zeros, uploaded inside the capture
        acc.add_(x)
    for _ in range(3):
        g.replay()
        np.testing.assert_array_equal(acc.numpy(), np.ones(4096, np.float32))
    g.reset()


# ----------------------------------------------------------------------------- errors
def _capture_fails(body, exc, match):
    """Capturing ``body`` raises ``exc`` matching ``match``; the graph stays empty and eager
    device work goes on normally afterwards."""
    g = gpucore.vulkan.VulkanGraph()
    with pytest.raises(exc, match=match):
        with gpucore.vulkan.graph(g):
            body()
    assert not gpucore.vulkan.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="nothing was captured"):
        g.replay()
    x = gpucore.ones(4096).to("vulkan")
    np.testing.assert_array_equal((x + x).numpy(), np.full(4096, 2.0, np.float32))


def test_host_reads_inside_a_capture_name_the_op(vulkan):
    x = gpucore.ones(64, 80).to("vulkan")
    _capture_fails(lambda: (x * 2).sum().item(), gpucore.DeviceError, r"Tensor\.item\(\)")
    _capture_fails(lambda: (x * 2).numpy(), gpucore.DeviceError, r"Tensor\.numpy\(\)")
    _capture_fails(lambda: print(x * 2), gpucore.DeviceError, "printing a device tensor")
    _capture_fails(lambda: bool((x * 2).sum() > 0), gpucore.DeviceError, "Python value")


def test_host_only_ops_inside_a_capture_name_the_op(vulkan):
    x = gpucore.ones(64, 80).to("vulkan")
    _capture_fails(lambda: gpucore.sort(x * 2, 0), gpucore.DeviceError, "the op 'sort'")
    _capture_fails(
        lambda: gpucore.nonzero(x), gpucore.DeviceError, r"nonzero\(\)"
    )  # data-dependent shape
    gen = gpucore.Generator(3)
    _capture_fails(
        lambda: gpucore.multinomial(x[0] + 1, 3, generator=gen), gpucore.DeviceError, "multinomial"
    )
    assert gen.get_state() == (3, 0)  # an abandoned capture leaves the generator as it was


def test_uncapturable_optimizer_steps_are_refused(vulkan):
    model, opt, x, y = setup(mlp, (64, 64), lambda ps: gpucore.optim.Adam(ps, lr=1e-2))
    eager_step(model, opt, x, y)
    opt.zero_grad(set_to_none=True)
    _capture_fails(lambda: eager_step(model, opt, x, y), RuntimeError, "capturable is False")
    fresh = gpucore.optim.Adam(model.parameters(), lr=1e-2, capturable=True)  # no warm-up
    _capture_fails(lambda: eager_step(model, fresh, x, y), RuntimeError, "Warm up first")
    sgd = gpucore.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _capture_fails(lambda: eager_step(model, sgd, x, y), RuntimeError, "Warm up first")
    nadam = gpucore.optim.NAdam(model.parameters(), lr=1e-2)
    eager_step(model, nadam, x, y)
    opt.zero_grad(set_to_none=True)
    _capture_fails(lambda: eager_step(model, nadam, x, y), RuntimeError, "capturable is False")


# ----------------------------------------------------------------------------- graphed callables
def test_graphed_module_forward_and_backward_equal_eager(vulkan):
    data = batches((64, 64), n=4, seed=3)
    eager, _, _, _ = setup(mlp, (64, 64), OPTIMIZERS["sgd_momentum"])
    model, _, x, _ = setup(mlp, (64, 64), OPTIMIZERS["sgd_momentum"])
    graphed = gpucore.vulkan.make_graphed_callables(model, (x,))
    assert graphed is model and model.forward.forward_graph.dispatches > 0
    for xb, yb in data:
        xt, yt = gpucore.tensor(xb).to("vulkan"), gpucore.tensor(yb).to("vulkan")
        for m in (eager, model):
            m.zero_grad(set_to_none=True)
            out = m(xt)
            F.cross_entropy(out, yt).backward()
        np.testing.assert_array_equal(model(xt).detach().numpy(), eager(xt).detach().numpy())
        for p, q in zip(model.parameters(), eager.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    model.eval()  # not the captured mode: the module's own forward runs
    assert model(xt).grad_fn is not None and model(xt).grad_fn.name() != "Graphed_callableBackward"


def test_graphed_module_with_dropout_draws_eagers_masks(vulkan):
    """A graphed module's forward replay draws from the generator where it stands: reseeded
    before each call, the graphed and the eager module get the same masks and gradients."""
    data = batches((64, 64), n=3, seed=4)
    eager, _, _, _ = setup(dropout_mlp, (64, 64), OPTIMIZERS["sgd_momentum"])
    model, _, x, _ = setup(dropout_mlp, (64, 64), OPTIMIZERS["sgd_momentum"])
    gpucore.vulkan.make_graphed_callables(model, (x,))
    outs = []
    for i, (xb, yb) in enumerate(data):
        xt, yt = gpucore.tensor(xb).to("vulkan"), gpucore.tensor(yb).to("vulkan")
        for m in (model, eager):
            gpucore.manual_seed(100 + i)
            m.zero_grad(set_to_none=True)
            out = m(xt)
            F.cross_entropy(out, yt).backward()
            outs.append(out.detach().numpy().copy())
        np.testing.assert_array_equal(outs[-2], outs[-1])
        for p, q in zip(model.parameters(), eager.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_graphed_function_gives_input_gradients(vulkan):
    w = gpucore.tensor(np.linspace(-1, 1, 80 * 64, dtype=np.float32).reshape(80, 64))
    w = w.to("vulkan")

    def fn(a):
        return (a @ w).tanh()

    sample = gpucore.zeros(64, 80).to("vulkan").requires_grad_()
    graphed = gpucore.vulkan.make_graphed_callables(fn, (sample,))
    rng = np.random.default_rng(0)
    for _ in range(3):
        a = rng.standard_normal((64, 80)).astype(np.float32)
        g = rng.standard_normal((64, 64)).astype(np.float32)
        outs = []
        for f in (graphed, fn):
            at = gpucore.tensor(a).to("vulkan").requires_grad_()
            out = f(at)
            out.backward(gpucore.tensor(g).to("vulkan"))
            outs.append((out.detach().numpy().copy(), at.grad.numpy().copy()))
        np.testing.assert_array_equal(outs[0][0], outs[1][0])
        np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_bad_arguments_raise_clear_errors(vulkan):
    with pytest.raises(TypeError, match="VulkanGraph"):
        gpucore.vulkan.graph(object())
    with pytest.raises(ValueError, match="capture_error_mode"):
        gpucore.vulkan.VulkanGraph().capture_begin(capture_error_mode="loud")
    g = gpucore.vulkan.VulkanGraph()
    x = gpucore.ones(64, 80).to("vulkan")
    with gpucore.vulkan.graph(g):
        with pytest.raises(RuntimeError, match="captured one at a time"):
            gpucore.vulkan.VulkanGraph().capture_begin()
        y = x * 3.0
    with pytest.raises(RuntimeError, match="reset"):
        g.capture_begin()
    g.reset()
    del y
    with pytest.raises(gpucore.DeviceError, match="'vulkan' device"):
        gpucore.vulkan.make_graphed_callables(lambda a: a * 2, (gpucore.ones(3),))
    with pytest.raises(ValueError, match="1 callables but 2"):
        gpucore.vulkan.make_graphed_callables((lambda a: a,), ((x,), (x,)))
    graphed = gpucore.vulkan.make_graphed_callables(lambda a: a * 2.0, (x,))
    with pytest.raises(ValueError, match=r"shape \(64, 80\)"):
        graphed(gpucore.ones(2, 2).to("vulkan"))
    np.testing.assert_array_equal(graphed(x + 1.0).numpy(), np.full((64, 80), 4.0, np.float32))


def test_a_host_tensor_written_after_capture_makes_replay_raise(vulkan):
    x = gpucore.ones(64, 80).to("vulkan")
    scale = gpucore.full((64, 80), 2.0)  # a host tensor: a constant of the graph
    g = gpucore.vulkan.VulkanGraph()
    with gpucore.vulkan.graph(g):
        y = x * scale
    g.replay()
    np.testing.assert_array_equal(y.numpy(), np.full((64, 80), 2.0, np.float32))
    scale.add_(1.0)
    with pytest.raises(RuntimeError, match="modified after the capture"):
        g.replay()
    g.reset()


def test_replays_queued_without_host_waits_stay_in_order(vulkan):
    """Steps replayed back to back (new data copied in between, losses kept on the device and
    read at the end) give the eager run's losses and weights."""
    factory, shape = MODELS["mlp"]
    make_opt = OPTIMIZERS["adam_capturable"]
    data = batches(shape, n=8, seed=4)
    want_losses, want_state = train_eager(factory, shape, make_opt, data)
    model, opt, x, y, g, static_loss, losses = warm_up_and_capture(factory, shape, make_opt, data)
    kept = []
    for b in data[WARMUP:]:
        load(x, y, b)
        g.replay()
        kept.append(static_loss.clone())  # recorded behind the replay, before the next copy
    losses += [t.item() for t in kept]
    np.testing.assert_array_equal(np.array(losses), np.array(want_losses))
    for got, want in zip(snapshot(model, opt), want_state):
        np.testing.assert_array_equal(got, want)
    g.reset()


def test_several_graphed_callables_chain_as_eager(vulkan):
    eager = [setup(mlp, (64, 64), OPTIMIZERS["sgd_momentum"], seed=s)[0] for s in (1, 2)]
    first, second = (setup(mlp, (64, 64), OPTIMIZERS["sgd_momentum"], seed=s)[0] for s in (1, 2))
    x = gpucore.zeros(64, 64).to("vulkan")
    g1, g2 = gpucore.vulkan.make_graphed_callables((first, second), ((x,), (x,)))
    data = batches((64, 64), n=3, seed=9)
    for xb, yb in data:
        xt, yt = gpucore.tensor(xb).to("vulkan"), gpucore.tensor(yb).to("vulkan")
        losses = []
        for m1, m2 in ((g1, g2), tuple(eager)):
            for m in (m1, m2):
                m.zero_grad(set_to_none=True)
            loss = F.cross_entropy(m1(xt) + m2(xt), yt)
            loss.backward()
            losses.append(loss.item())
        assert losses[0] == losses[1]
        for m, e in zip((first, second), eager):
            for p, q in zip(m.parameters(), e.parameters()):
                np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


# ----------------------------------------------------------------------------- random sampling
def _draws(gen):
    """What the captured block below draws, eagerly: dropout of ones, randn, rand_like."""
    x = gpucore.ones(64, 80).to("vulkan")
    d = F.dropout(x, 0.4)
    z = gpucore.randn(5000, device="vulkan", generator=gen)
    u = gpucore.rand_like(x)
    return d, z, u


def test_random_ops_draw_fresh_numbers_at_each_replay_equal_to_eager(vulkan):
    """Each replay takes the generators' current positions (default and explicit), so N replays
    draw the eager calls' numbers in the same order, and eager sampling between replays stays in
    the same streams; the capture itself draws nothing."""
    gpucore.manual_seed(11)
    gen = gpucore.Generator(22)
    eager = []
    for i in range(4):
        eager.append([t.numpy() for t in _draws(gen)])
        if i == 1:
            eager.append(gpucore.rand(7, device="vulkan").numpy())  # between replays 2 and 3
    gpucore.manual_seed(11)
    gen = gpucore.Generator(22)
    g = gpucore.vulkan.VulkanGraph()
    with gpucore.vulkan.graph(g):
        outs = _draws(gen)
    assert gen.get_state() == (22, 0) and gpucore.get_rng_state()[1] == 0
    got = []
    for i in range(4):
        g.replay()
        got.append([t.numpy().copy() for t in outs])
        if i == 1:
            got.append(gpucore.rand(7, device="vulkan").numpy())
    g.reset()
    assert len(got) == len(eager)
    for a, b in zip(got, eager):
        for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
            np.testing.assert_array_equal(x, y)
    d0, d1 = got[0][0], got[1][0]
    assert not np.array_equal(d0, d1)  # fresh masks
    for d in (d0, d1):  # the mask's distribution: values 0 or 1/(1-p), about 40% zeros
        assert set(np.unique(d)) == {0.0, np.float32(1 / 0.6)}
        assert abs((d == 0).mean() - 0.4) < 0.03
    z = got[0][1]
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05


def test_reseeding_inside_a_capture_is_refused(vulkan):
    x = gpucore.ones(64, 80).to("vulkan")

    def body():
        F.dropout(x, 0.5)
        gpucore.manual_seed(5)
        F.dropout(x, 0.5)

    gpucore.manual_seed(4)
    _capture_fails(body, RuntimeError, "reseeded in the middle of a capture")


def test_captured_sampling_carries_across_32_bit_offsets(vulkan):
    """The replay's base offset plus the fill's relative one is a 64-bit sum in the shader:
    draws that straddle offset 2**32 (and a seed above 2**32) equal eager ones."""
    gen = gpucore.Generator()
    start = (2**40 + 7, 2**32 - 700)
    eager = []
    gen.set_state(start)
    for _ in range(3):
        eager.append(gpucore.rand(5000, device="vulkan", generator=gen).numpy())
    gen.set_state(start)
    g = gpucore.vulkan.VulkanGraph()
    with gpucore.vulkan.graph(g):
        out = gpucore.rand(5000, device="vulkan", generator=gen)
    for want in eager:
        g.replay()
        np.testing.assert_array_equal(out.numpy(), want)
    assert gen.get_state() == (start[0], start[1] + 3 * 1250)
    g.reset()
