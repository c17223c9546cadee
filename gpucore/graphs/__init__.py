"""Captured steps on the Vulkan device: PyTorch's CUDA Graphs model (``gpucore.vulkan`` exports
it). ``graph.py``: ``VulkanGraph`` and the ``graph`` context manager; ``callables.py``:
``make_graphed_callables``; ``state.py``: which graph is being captured (read by the optimizers);
``rng.py``: the generators' positions in device memory, so captured sampling draws fresh numbers."""

from .callables import make_graphed_callables
from .graph import VulkanGraph, graph, graph_pool_handle, is_current_stream_capturing

__all__ = [
    "VulkanGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]
