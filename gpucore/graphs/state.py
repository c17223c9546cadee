"""The graph being captured in this process (``gpucore.vulkan.graph``), or None.

A leaf module (no imports) so that the optimizers and other code that must behave differently
inside a capture can ask without importing the Vulkan backend.
"""

from __future__ import annotations

CAPTURING: list = [None]  # the VulkanGraph between capture_begin and capture_end


def capturing() -> bool:
    """True while a ``VulkanGraph`` is being captured."""
    return CAPTURING[0] is not None


# While a sampling op of a capture runs (graphs/rng.py): (the capturing thread's id, the
# generator's device state buffer, the capture's base offset), read by the Vulkan random fill;
# None otherwise.
SAMPLING: list = [None]
