"""Backends: each runs registry ops on its own storage. ``cpu`` is always present."""
