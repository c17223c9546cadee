"""Neural-network building blocks. ``gpucore.nn.functional`` holds the functional forms."""

from . import functional  # noqa: F401
