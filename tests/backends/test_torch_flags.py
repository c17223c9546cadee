"""gpucore.backends.cudnn / cuda / mps: PyTorch's switches exist with PyTorch's defaults, can be
set, and sit beside gpucore's real backends (cpu, vulkan) without disturbing them."""

import pytest

import gpucore
from gpucore.backends import cuda, cudnn, mps

FLAGS = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}


def test_cudnn_flags_have_pytorchs_defaults_and_are_settable():
    for name, default in FLAGS.items():
        assert getattr(gpucore.backends.cudnn, name) is default
    assert cudnn.benchmark_limit == 10 and not cudnn.is_available() and cudnn.version() is None
    assert not cudnn.is_acceptable(gpucore.ones(1))
    try:
        gpucore.backends.cudnn.benchmark = True
        gpucore.backends.cudnn.deterministic = True
        assert cudnn.benchmark is True and cudnn.deterministic is True
    finally:
        cudnn.benchmark, cudnn.deterministic = False, False


def test_cudnn_flags_context_restores():
    with cudnn.flags(enabled=False, deterministic=True):
        assert cudnn.enabled is False and cudnn.deterministic is True
    assert cudnn.enabled is True and cudnn.deterministic is False


def test_cuda_matmul_switches():
    m = gpucore.backends.cuda.matmul
    assert m.allow_tf32 is False and m.allow_fp16_reduced_precision_reduction is True
    assert m.fp32_precision == "none"
    m.allow_tf32 = True
    try:
        assert gpucore.backends.cuda.matmul.allow_tf32 is True
    finally:
        m.allow_tf32 = False
    with pytest.raises(AttributeError, match="Unknown attribute allow_tf33"):
        m.allow_tf33 = True
    with pytest.raises(AttributeError, match="Unknown attribute nope"):
        m.nope  # noqa: B018
    assert cuda.is_built() is False


@pytest.mark.parametrize("kind", ["flash", "mem_efficient", "math", "cudnn"])
def test_sdp_switches(kind):
    enabled = getattr(cuda, f"{kind}_sdp_enabled")
    assert enabled() is True
    getattr(cuda, f"enable_{kind}_sdp")(False)
    assert enabled() is False
    getattr(cuda, f"enable_{kind}_sdp")(True)


def test_mps():
    assert mps.is_available() is False and mps.is_built() is False


def test_the_real_backends_are_still_there():
    from gpucore.backends import base, cpu

    assert hasattr(base, "Backend") or base.__doc__
    assert cpu.__name__ == "gpucore.backends.cpu"
    assert gpucore.vulkan.is_available() in (True, False)


def test_same_defaults_as_torch():
    torch = pytest.importorskip("torch")
    for name in FLAGS:
        assert getattr(cudnn, name) == getattr(torch.backends.cudnn, name)
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "fp32_precision"):
        assert getattr(cuda.matmul, name) == getattr(torch.backends.cuda.matmul, name)
    assert mps.is_available() == torch.backends.mps.is_available()
