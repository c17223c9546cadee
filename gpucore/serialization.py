"""PyTorch's ``torch.serialization`` names: ``save``, ``load``, and the allow-list of classes
that ``load(weights_only=True)`` may rebuild.

``add_safe_globals([cls, ...])``, ``safe_globals([...])`` (a context manager), ``get_safe_globals``
and ``clear_safe_globals`` behave as PyTorch's, with what gpucore's safe format can represent
(details: ``gpucore.io.safe_globals``): while a class is listed, ``gpucore.save`` stores its
objects in the safe format as the class's name plus their state, as plain data (an
``argparse.Namespace`` of hyper-parameters, a dataclass, an Enum member), and
``gpucore.load(weights_only=True)`` rebuilds them; a file holding an object of a class that is
not listed at load time raises an error naming it. Without the list, such objects make ``save``
write the pickle format, which only ``load(weights_only=False)`` reads. Entries that are not
classes (functions) are kept but have no effect: the safe format never calls a function.
"""

from __future__ import annotations

from .io import DEFAULT_PROTOCOL, load, save
from .io.pickle_format import WeightsOnlyError
from .io.safe_globals import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = [
    "save",
    "load",
    "add_safe_globals",
    "safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
    "WeightsOnlyError",
    "DEFAULT_PROTOCOL",
]
