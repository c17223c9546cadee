"""``gpucore.backends.cuda``: PyTorch's CUDA switches, accepted so that scripts setting them run
(``gpucore.backends.cuda.matmul.allow_tf32 = True``). gpucore has no CUDA backend
(``is_built()`` is False); the values are kept, with PyTorch's defaults, and change nothing."""

from __future__ import annotations

__all__ = [
    "cudnn_sdp_enabled",
    "enable_cudnn_sdp",
    "enable_flash_sdp",
    "enable_math_sdp",
    "enable_mem_efficient_sdp",
    "flash_sdp_enabled",
    "is_built",
    "math_sdp_enabled",
    "matmul",
    "mem_efficient_sdp_enabled",
]

_MATMUL_DEFAULTS = {
    "allow_tf32": False,
    "allow_fp16_reduced_precision_reduction": True,
    "allow_fp16_reduced_precision_reduction_split_k": True,
    "allow_bf16_reduced_precision_reduction": True,
    "allow_bf16_reduced_precision_reduction_split_k": True,
    "allow_fp16_accumulation": False,
    "fp32_precision": "none",
}


class CuBLASModule:
    """``matmul``: cuBLAS's switches. Only PyTorch's names may be read or set (others raise
    AttributeError ``Unknown attribute``, as in PyTorch)."""

    def __init__(self) -> None:
        object.__setattr__(self, "_values", dict(_MATMUL_DEFAULTS))

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name: str, value) -> None:
        if name not in _MATMUL_DEFAULTS:
            raise AttributeError("Unknown attribute " + name)
        self._values[name] = value


matmul = CuBLASModule()

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """False: gpucore is not built with CUDA."""
    return False


def enable_flash_sdp(enabled: bool) -> None:
    """Accepted; gpucore's attention has one implementation per device."""
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    """The value ``enable_flash_sdp`` last set (default True)."""
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Accepted; gpucore's attention has one implementation per device."""
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """The value ``enable_mem_efficient_sdp`` last set (default True)."""
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Accepted; gpucore's attention has one implementation per device."""
    _sdp["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    """The value ``enable_math_sdp`` last set (default True)."""
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Accepted; gpucore's attention has one implementation per device."""
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """The value ``enable_cudnn_sdp`` last set (default True)."""
    return _sdp["cudnn"]
