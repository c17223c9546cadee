"""Residency under the 'auto' policy (backends/vulkan/residency.py): host tensors that device ops
keep reading are uploaded once per version, parameters and optimizer state migrate to the device
at their first update, and results are the same bits as with residency off.

'auto' normally refuses a CPU-type device (lavapipe); the ``auto`` fixture lets it use one in this
process, as GPUCORE_VULKAN_ALLOW_CPU=1 does. Byte counts come from gpucore.vulkan.stats(since=...).
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
import gpucore.nn.functional as F
from gpucore import dispatch, nn
from gpucore.backends.cpu import empty_array
from gpucore.backends.vulkan import residency

RNG = np.random.default_rng(7)


@pytest.fixture
def auto():
    """The 'auto' policy with the Vulkan device (lavapipe included) in this thread."""
    be = dispatch.vulkan_backend(allow_cpu=True)
    if be is None:
        pytest.skip("no Vulkan device: " + gpucore.vulkan.unavailable_reason())
    had = "auto" in dispatch._vulkan_cache
    prev = dispatch._vulkan_cache.get("auto")
    dispatch._vulkan_cache["auto"] = be
    dispatch._update_fast()
    try:
        with gpucore.device_policy("auto"):
            yield be
        gpucore.vulkan.synchronize()
    finally:
        if had:
            dispatch._vulkan_cache["auto"] = prev
        else:
            dispatch._vulkan_cache.pop("auto", None)
        dispatch._update_fast()


@pytest.fixture
def no_residency(monkeypatch):
    """Turns residency off for the block it is entered in (``with no_residency():``)."""

    class Off:
        def __enter__(self):
            monkeypatch.setattr(residency, "enabled", False)

        def __exit__(self, *exc):
            monkeypatch.setattr(residency, "enabled", True)

    return Off


def moved(fn):
    """(bytes uploaded, bytes downloaded) while fn() runs, and its result."""
    m = gpucore.vulkan.mark()
    out = fn()
    s = gpucore.vulkan.stats(since=m)
    return s["bytes_uploaded"], s["bytes_downloaded"], out


def host(a) -> gpucore.Tensor:
    return gpucore.tensor(np.asarray(a, np.float32))


def mlp():
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    )


def batches(kind, n):
    """n fresh host batches (x, y) of the model's input and target."""
    out = []
    for _ in range(n):
        if kind == "mlp":
            out.append((host(RNG.standard_normal((64, 256))), host(RNG.standard_normal((64, 256)))))
        else:
            x = host(RNG.standard_normal((64, 1, 8, 8)))
            out.append((x, gpucore.tensor(RNG.integers(0, 10, 64))))
    return out


def train(kind, data, seed=3):
    """Train a fresh model on data (Adam); per step (loss, uploaded, downloaded), and the model."""
    gpucore.manual_seed(seed)
    model = mlp() if kind == "mlp" else cnn()
    opt = gpucore.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = F.mse_loss if kind == "mlp" else F.cross_entropy
    rows = []
    for x, y in data:

        def step(x=x, y=y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        up, down, loss = moved(step)
        rows.append((loss, up, down))
    return rows, model, opt


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_training_moves_only_the_batch_and_equals_no_residency(auto, no_residency, kind):
    data = batches(kind, 4)
    rows, model, opt = train(kind, data)
    with no_residency():
        ref_rows, ref_model, _ = train(kind, data)
    assert [r[0] for r in rows] == [r[0] for r in ref_rows]  # the same bits
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        assert p.device.type == "vulkan", name  # migrated at the first update
        assert q.device.type == "cpu", name  # without residency they stay on the host
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)
    for p in model.parameters():
        for v in opt.state[p].values():
            if isinstance(v, gpucore.Tensor):
                assert v.device.type == "vulkan"
    x, y = data[0]
    batch_bytes = x.numel() * 4 + (y.numel() * 4 if kind == "mlp" else 0)
    # cross_entropy on 64 x 10 logits is below the size threshold: it runs on the CPU, which
    # reads the logits (forward and backward) and hands back their gradient, which the backward
    # of the last Linear reads as it is and transposed (two uploads)
    logits = 0 if kind == "mlp" else 64 * 10 * 4
    for _, up, down in rows[1:]:
        assert up <= batch_bytes + 2 * logits + 1024, (up, batch_bytes)
        assert down <= 2 * logits + 1024, down
    # without residency every step uploads the weights again
    assert all(r[1] > 100_000 for r in ref_rows)


def test_inference_uploads_weights_once_and_keeps_them_on_the_host(auto, no_residency):
    gpucore.manual_seed(1)
    model = mlp()
    x = host(RNG.standard_normal((64, 256)))
    with gpucore.no_grad():
        up0, _, first = moved(lambda: model(x).numpy().copy())
        up1, _, again = moved(lambda: model(host(x.numpy())).numpy().copy())
        with no_residency():
            ref = model(x).numpy().copy()
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert up0 >= weights
    assert up1 == x.numel() * 4  # only the fresh input
    np.testing.assert_array_equal(first, ref)
    np.testing.assert_array_equal(again, ref)
    assert all(p.device.type == "cpu" for p in model.parameters())
    st = gpucore.vulkan.stats()
    assert st["bytes_reused"] > 0


def test_host_writes_invalidate_the_device_copy(auto):
    w = host(RNG.standard_normal((64, 128)))
    a = host(RNG.standard_normal((32, 64)))

    def product():
        return (a @ w).numpy().copy()

    def reference():
        return np.asarray(a.numpy(), np.float64) @ np.asarray(w.numpy(), np.float64)

    first = product()
    up, _, same = moved(product)
    assert up == 0  # both operands reused
    np.testing.assert_array_equal(same, first)
    # an in-place op on the host (small: below the threshold, it runs in the C extension)
    with gpucore.device_policy("cpu"):
        w[0].add_(1.0)
    up, _, got = moved(product)
    assert up == w.numel() * 4
    np.testing.assert_allclose(got, reference(), rtol=1e-4, atol=1e-4)


def test_writes_through_numpy_views_are_seen(auto):
    w = host(RNG.standard_normal((64, 128)))
    a = host(RNG.standard_normal((32, 64)))

    def check():
        got = (a @ w).numpy().copy()
        want = a.numpy().astype(np.float64) @ w.numpy().astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        return got

    check()  # w has a device copy now
    view = w.numpy()  # a user array over w's memory: writes through it bump no version
    view[:] = 2.0
    assert check()[0, 0] != 0
    view[1:] = 3.0  # still alive: w is not cached meanwhile
    check()
    sub = view[::2]  # a numpy view derived from the exported array keeps watching it alive
    del view
    sub[:] = -1.0
    check()
    del sub
    # once every exported array is gone, the copy made next holds their writes and is reused
    up1, _, got = moved(lambda: (a @ w).numpy().copy())
    up2, _, again = moved(lambda: (a @ w).numpy().copy())
    assert up1 == (w.numel() + a.numel()) * 4 and up2 == 0  # check() exported both
    np.testing.assert_array_equal(got, again)
    rows = np.where(np.arange(64) % 2 == 0, -1.0, 3.0)[:, None] * np.ones((1, 128))
    np.testing.assert_allclose(got, a.numpy() @ rows, rtol=1e-4, atol=1e-4)


def test_arrays_exported_before_watching_began_keep_their_storage_uncached(auto, monkeypatch):
    """numpy() is a plain view until the first device copy exists (the CPU path pays nothing);
    a storage exported then can be written at any time, so it is never cached."""
    from gpucore import storage

    monkeypatch.setattr(storage, "WATCHING", [False])
    w = host(RNG.standard_normal((64, 128)))
    a = host(RNG.standard_normal((32, 64)))
    view = w.numpy()
    assert view is w._data  # no watching yet: the tensor's own array
    (a @ w).numpy()
    assert storage.WATCHING[0]  # the device copy of a began it
    view[:] = 0.5
    np.testing.assert_allclose((a @ w).numpy(), a.numpy() @ view, rtol=1e-5)
    moved(lambda: (a @ w).numpy())  # a, exported by the check above, is cached again
    up, _, _ = moved(lambda: (a @ w).numpy())
    assert up == w.numel() * 4  # w uploaded again every time, a reused


def test_memory_shared_with_a_user_array_is_never_cached(auto):
    arr = RNG.standard_normal((64, 128)).astype(np.float32)
    w = gpucore.from_numpy(arr)
    a = host(RNG.standard_normal((32, 64)))
    (a @ w).numpy()
    arr[:] = 1.5  # gpucore cannot see this write
    np.testing.assert_allclose((a @ w).numpy(), a.numpy() @ arr, rtol=1e-5)


def test_optimizer_step_on_the_host_invalidates(auto):
    # A parameter something else shares (here a held state_dict alias) is not migrated: its
    # update runs on the host and the next device read uploads the new values.
    gpucore.manual_seed(2)
    model = nn.Linear(128, 64)
    alias = model.state_dict()["weight"]
    opt = gpucore.optim.SGD(model.parameters(), lr=0.5)
    x = host(RNG.standard_normal((64, 128)))
    for _ in range(2):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    assert model.weight.device.type == "cpu"  # shared: stayed on the host
    assert model.bias.device.type == "vulkan"  # alone: migrated
    np.testing.assert_array_equal(alias.numpy(), model.weight.detach().numpy())
    with gpucore.no_grad():
        up, _, got = moved(lambda: model(x).numpy().copy())
        want = x.numpy() @ model.weight.detach().numpy().T + model.bias.detach().numpy()
    assert up == model.weight.numel() * 4 + x.numel() * 0  # x unchanged: reused
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_migrated_parameters_read_and_save_transparently(auto, tmp_path):
    gpucore.manual_seed(4)
    model = nn.Linear(128, 64)
    opt = gpucore.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = host(RNG.standard_normal((64, 128)))
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    assert model.weight.device.type == "vulkan"
    sd = model.state_dict()
    path = tmp_path / "m.pt"
    gpucore.save({"model": sd, "opt": opt.state_dict()}, path)
    back = gpucore.load(path)
    np.testing.assert_array_equal(back["model"]["weight"].numpy(), model.weight.detach().numpy())
    assert "tensor(" in repr(model.weight)
    fresh = nn.Linear(128, 64)
    fresh.load_state_dict(back["model"])
    with gpucore.no_grad():
        np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())


def test_sole_owner_sees_every_alias(auto):
    t = host(RNG.standard_normal((8, 8)))
    assert residency.sole_owner(t)
    d = t.detach()
    assert not residency.sole_owner(t)
    del d
    v = t.view(64)
    assert not residency.sole_owner(t)
    del v
    arr = t.numpy()
    assert not residency.sole_owner(t)
    del arr
    raw = t._data[2:]
    assert not residency.sole_owner(t)
    del raw
    assert residency.sole_owner(t)
    assert not residency.sole_owner(gpucore.from_numpy(np.ones(4, np.float32)))
    # a tensor over a reshape of its storage's array: the array under it counts too
    r = gpucore.Tensor._wrap(empty_array((16,), np.float32).reshape(4, 4), gpucore.float32)
    assert residency.sole_owner(r)
    root = r._data.base
    assert not residency.sole_owner(r)
    del root
    assert residency.sole_owner(r)


def test_stats_since_a_mark():
    m = gpucore.vulkan.mark()
    s = gpucore.vulkan.stats(since=m)
    assert s["bytes_uploaded"] == 0 and s["dispatches"] == 0
    assert set(s) == set(gpucore.vulkan.stats())
    with pytest.raises(TypeError, match="mark"):
        gpucore.vulkan.stats(since=3)


def test_a_dataloader_batch_is_uploaded_once(auto):
    from gpucore.utils.data import DataLoader, Dataset

    x = host(RNG.standard_normal((128, 256)))
    y = host(RNG.standard_normal((128, 256)))

    class Samples(Dataset):  # one sample at a time: DataLoader collates each batch
        def __len__(self):
            return 128

        def __getitem__(self, i):
            return x[i], y[i]

    gpucore.manual_seed(5)
    model = mlp()
    opt = gpucore.optim.SGD(model.parameters(), lr=0.01)
    ups = []
    for xb, yb in DataLoader(Samples(), batch_size=64):

        def step(xb=xb, yb=yb):
            opt.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            opt.step()

        ups.append(moved(step)[0])
    # the second step: the weights live on the device; the batch (collated into gpucore's
    # memory) is uploaded once although the backward reads the input again
    assert ups[1] <= 2 * 64 * 256 * 4 + 1024, ups


def test_copies_dropped_when_memory_is_short_are_made_again(auto):
    w = host(RNG.standard_normal((64, 128)))
    a = host(RNG.standard_normal((32, 64)))
    first = (a @ w).numpy().copy()
    assert residency.current_copy(auto, w)
    auto._reclaim()  # what the allocator calls before it reports out of memory
    assert not residency.current_copy(auto, w)
    up, _, again = moved(lambda: (a @ w).numpy().copy())
    assert up == (a.numel() + w.numel()) * 4
    np.testing.assert_array_equal(again, first)


def test_a_uint16_tensor_and_its_bfloat16_view_keep_their_own_device_copies(auto):
    """Both are uint16 numpy arrays of one storage: the cached device copy is per dtype, so
    the bfloat16 view's bits are never read as uint16 values (or the other way round)."""
    bits = np.array([0x3F80, 0x4000, 0xC040, 0x7FC0] * 2048, np.uint16)  # 1, 2, -3, NaN
    u = gpucore.tensor(bits)
    assert u.dtype is gpucore.uint16
    v = u.view(gpucore.bfloat16)
    with gpucore.device_policy("vulkan"):
        eq = (u == 0x4000).cpu().numpy()  # uploads u, tagged uint16
        widened = v.float().cpu().numpy()  # must upload (or find) a bfloat16 copy
    np.testing.assert_array_equal(eq, bits == 0x4000)
    want = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(widened, want)
