"""The graph being captured in this process (``gpucore.vulkan.graph``), or None.

A leaf module (no imports) so that the optimizers and other code that must behave differently
inside a capture can ask without importing the Vulkan backend.
"""

from __future__ import annotations

CAPTURING: list = [None]  # the VulkanGraph between capture_begin and capture_end


def capturing() -> bool:
    """True while a ``VulkanGraph`` is being captured."""
    return CAPTURING[0] is not None
