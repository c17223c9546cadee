"""``gpucore.backends.mps``: Apple's Metal backend of PyTorch is not gpucore's (on a Mac gpucore
runs on the GPU through MoltenVK: see ``gpucore.accelerator``)."""

from __future__ import annotations


def is_available() -> bool:
    """False: no MPS backend."""
    return False


def is_built() -> bool:
    """False: no MPS backend."""
    return False
