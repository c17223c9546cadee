"""Vulkan kernels: random family (see kernels/__init__.py for the helpers)."""

from __future__ import annotations
