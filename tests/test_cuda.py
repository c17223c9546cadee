"""gpucore.cuda and the CUDA-shaped Tensor properties: what PyTorch scripts ask before any model
code gets gpucore's answers (no CUDA; seeding goes to gpucore's generator; asking for a CUDA
device raises DeviceError naming 'vulkan' and 'auto')."""

import pytest

import gpucore
from gpucore.errors import DeviceError


def test_no_cuda_devices():
    assert gpucore.cuda.is_available() is False
    assert gpucore.cuda.device_count() == 0
    assert gpucore.cuda.is_initialized() is False
    assert gpucore.cuda.is_bf16_supported() is False
    device = "cuda" if gpucore.cuda.is_available() else "cpu"  # the usual script line
    assert gpucore.ones(2).to(device).device == gpucore.device("cpu")


def test_no_ops_and_zero_counters():
    assert gpucore.cuda.synchronize() is None
    assert gpucore.cuda.empty_cache() is None
    assert gpucore.cuda.reset_peak_memory_stats() is None
    for fn in (
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
    ):
        assert getattr(gpucore.cuda, fn)() == 0


@pytest.mark.parametrize("fn", ["manual_seed", "manual_seed_all"])
def test_seeding_seeds_gpucores_generator(fn):
    getattr(gpucore.cuda, fn)(1234)
    a = gpucore.rand(5).tolist()
    gpucore.manual_seed(1234)
    assert gpucore.rand(5).tolist() == a
    assert gpucore.cuda.initial_seed() == 1234


def test_reseeding_from_entropy():
    gpucore.manual_seed(0)
    gpucore.cuda.seed()
    first = gpucore.initial_seed()
    gpucore.cuda.seed_all()
    assert gpucore.initial_seed() != first or gpucore.initial_seed() != 0


@pytest.mark.parametrize(
    "call",
    [
        "current_device",
        "get_device_name",
        "get_device_properties",
        "get_device_capability",
        "set_device",
    ],
)
def test_what_needs_a_cuda_device_raises(call):
    args = (0,) if call == "set_device" else ()
    with pytest.raises(DeviceError, match="'vulkan'.*'auto'"):
        getattr(gpucore.cuda, call)(*args)


def test_tensor_device_properties():
    t = gpucore.ones(2)
    assert t.is_cuda is False and t.is_mps is False and t.is_cpu is True


@pytest.mark.parametrize(
    "make",
    [
        lambda: gpucore.device("cuda"),
        lambda: gpucore.device("cuda:0"),
        lambda: gpucore.device("mps"),
        lambda: gpucore.ones(2).to("cuda"),
        lambda: gpucore.ones(2).to(device="cuda:1"),
        lambda: gpucore.zeros(2, device="cuda"),
        lambda: gpucore.ones(2).cuda(),
    ],
)
def test_asking_for_cuda_raises_device_error_naming_the_fix(make):
    with pytest.raises(DeviceError, match="'vulkan'.*'auto'") as err:
        make()
    assert isinstance(err.value, RuntimeError)  # what PyTorch users catch


def test_other_unknown_devices_keep_their_message():
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        gpucore.device("tpu")
    assert gpucore.device("cpu") != "cuda"  # comparing with a foreign name is just False


def test_a_typical_script_header_runs():
    torch = gpucore  # import gpucore as torch
    seed = 42
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    try:
        if torch.cuda.is_available():
            device = torch.device("cuda")
        elif torch.backends.mps.is_available():
            device = torch.device("mps")
        elif torch.accelerator.is_available():
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")
        x = torch.randn(4, 3).to(device)
        assert not x.is_cuda and x.device == device
        assert device.type in ("cpu", "vulkan")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.deterministic = False
