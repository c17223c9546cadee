"""gpucore.set_default_device / get_default_device, as torch's: creation functions, random
sampling and new nn parameters follow it; ``*_like`` and explicit ``device=`` do not change."""

import numpy as np
import pytest

import gpucore as gc


@pytest.fixture
def restore():
    yield
    gc.set_default_device(None)


def test_default_is_the_cpu(restore):
    assert gc.get_default_device() == gc.device("cpu")
    gc.set_default_device("cpu")
    assert gc.get_default_device().type == "cpu"
    assert gc.zeros(2).device.type == "cpu"


def test_bad_devices(restore):
    with pytest.raises(gc.DeviceError, match="cuda"):
        gc.set_default_device("cuda")
    with pytest.raises(gc.DeviceError):
        gc.set_default_device("tpu")
    with pytest.raises(TypeError, match="set_default_device"):
        gc.set_default_device(1.5)
    assert gc.get_default_device().type == "cpu"


def test_vulkan_default(restore, vulkan):
    gc.set_default_device("vulkan")
    assert gc.get_default_device() == gc.device("vulkan")
    made = [
        gc.tensor([1.0, 2.0]), gc.zeros(2, 3), gc.ones(3), gc.empty(2), gc.full((2,), 3.0),
        gc.arange(4), gc.linspace(0, 1, 5), gc.logspace(0, 1, 3), gc.eye(3), gc.rand(3),
        gc.randn(3), gc.randint(0, 5, (3,)), gc.randperm(4), gc.hann_window(4),
    ]  # fmt: skip
    made += [gc.Tensor(2, 3), gc.Tensor([1.0, 2.0]), gc.FloatTensor(2), gc.LongTensor([1, 2])]
    assert all(t.device.type == "vulkan" for t in made)
    assert gc.Tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    assert gc.zeros(2, device="cpu").device.type == "cpu"  # an explicit device wins
    host = gc.from_numpy(np.ones(3, np.float32))
    assert host.device.type == "cpu"  # from_numpy shares memory: stays on the host, as PyTorch
    assert gc.zeros_like(host).device.type == "cpu"  # *_like follows its tensor
    lin = gc.nn.Linear(4, 3)
    assert lin.weight.device.type == "vulkan" and lin.bias.device.type == "vulkan"
    x = gc.randn(2, 4)
    y = lin(x)
    gc.set_default_device("cpu")
    with gc.device_policy("cpu"):
        want = x.cpu() @ lin.weight.detach().cpu().T + lin.bias.detach().cpu()
    np.testing.assert_allclose(y.detach().cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_torch_agrees_on_the_api():
    torch = pytest.importorskip("torch")
    assert str(gc.get_default_device()) == str(torch.get_default_device())


def test_internal_constants_stay_with_cpu_inputs(restore):
    # histogram's edges, ctc_loss's lengths / divisors and affine_grid's base grid are made on
    # the inputs' device, not on the default one (no device policy: CPU inputs run on the CPU)
    torch = pytest.importorskip("torch")
    if gc.dispatch.vulkan_backend(allow_cpu=True) is None:
        pytest.skip("no Vulkan device")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(50)
    lp = np.log(rng.dirichlet(np.ones(5), (6, 2)))
    theta = rng.standard_normal((2, 2, 3))
    want_h = torch.histogram(torch.tensor(x), bins=7)
    want_c = torch.nn.functional.ctc_loss(
        torch.tensor(lp), torch.tensor([[1, 2], [3, 3]]), [6, 5], [2, 1]
    )
    want_g = torch.nn.functional.affine_grid(torch.tensor(theta), [2, 1, 3, 4], False)
    gc.set_default_device("vulkan")
    hist, edges = gc.histogram(gc.tensor(x, device="cpu"), bins=7)
    assert hist.device.type == edges.device.type == "cpu"
    np.testing.assert_allclose(hist.numpy(), want_h.hist.numpy())
    np.testing.assert_allclose(edges.numpy(), want_h.bin_edges.numpy())
    loss = gc.nn.functional.ctc_loss(
        gc.tensor(lp, device="cpu"), gc.tensor([[1, 2], [3, 3]], device="cpu"), [6, 5], [2, 1]
    )
    assert loss.device.type == "cpu"
    np.testing.assert_allclose(loss.item(), want_c.item(), rtol=1e-10)
    grid = gc.nn.functional.affine_grid(gc.tensor(theta, device="cpu"), [2, 1, 3, 4], False)
    assert grid.device.type == "cpu"
    np.testing.assert_allclose(grid.numpy(), want_g.numpy(), rtol=1e-12)
