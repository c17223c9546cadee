"""The interface every backend implements. A backend knows arrays, dtypes and kernels; it knows
no Tensor: the registry (``gpucore/ops/registry.py``) picks a backend, hands it the op's
operands, and wraps the arrays it returns into Tensors.

Operands are tensor-like: objects with ``_data`` (a numpy array: host memory, or a view over
the device memory of the backend named by ``_dev``), ``_dtype`` (a gpucore dtype, which may
differ from the array's storage type, as bfloat16 stored as uint16 does) and ``_dev`` (None for
host memory, else the backend that owns ``_data``). A Tensor is one; nothing in a backend may
rely on more than these three attributes.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Backend(Protocol):
    """What the registry and the dispatch policy need from a backend."""

    name: str
    # None when the arrays ``run`` returns live in host memory, else the backend that owns
    # them (the registry records it as the result tensors' ``_dev``).
    owner: Backend | None

    def supports(self, op, inputs, specs) -> bool:
        """Whether a kernel of this backend runs ``op`` on these operands and output specs
        (``(shape, dtype)`` or a list of them)."""

    def run(self, op, specs, inputs, attrs: dict) -> tuple:
        """Run ``op``: one fresh C-contiguous array per output spec, in order."""

    def run_inplace(self, op, arrays: list, attrs: dict) -> None:
        """Run an in-place op (no outputs: the kernel writes into ``arrays``, this backend's)."""

    def upload(self, arr: np.ndarray, dtype) -> np.ndarray:
        """A copy of host array ``arr`` in this backend's memory."""

    def host_view(self, arr: np.ndarray) -> np.ndarray:
        """``arr`` (this backend's array), readable by the host once pending work is done."""
