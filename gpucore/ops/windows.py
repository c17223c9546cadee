"""Window functions (torch.hann_window, hamming_window, blackman_window, bartlett_window,
kaiser_window): creation functions, computed in float64 and rounded once to ``dtype`` (the
default floating dtype unless given), on ``device`` (the default device unless given). A
periodic window of length L is the symmetric window of length L + 1 without its last value;
length 1 gives [1], length 0 an empty tensor, as PyTorch.

kernels: none (host values, uploaded where asked).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..creation import _check_device, _finish, _store
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public, type_name


def _window(name, n, periodic, dtype, device, requires_grad, fn) -> Tensor:
    be = _check_device(device, name)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name}(): window_length must be an int, got {type_name(n)}")
    if n < 0:
        raise ValueError(f"{name}(): requires non-negative window_length, got window_length={n}")
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    if not dt.is_floating_point:
        raise DTypeError(f"{name}(): expects floating point dtypes, got {dt}")
    if n <= 1:
        vals = np.ones(int(n))
    else:
        m = int(n) + 1 if periodic else int(n)
        vals = fn(np.arange(m, dtype=np.float64), m)[: int(n)]
    return _finish(_store(vals, dt), dt, requires_grad, be)


def _cosine_sum(coeffs):
    def fn(k, m):
        x = 2 * np.pi * k / (m - 1)
        out = np.full(k.shape, coeffs[0])
        for j, a in enumerate(coeffs[1:], 1):
            out += ((-1) ** j) * a * np.cos(j * x)
        return out

    return fn


@public("hann_window", function=True, method=False)
def hann_window(
    window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Hann window ``0.5 - 0.5 cos(2 pi k / (N - 1))``, as torch.hann_window."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((0.5, 0.5)))  # fmt: skip


@public("hamming_window", function=True, method=False)
def hamming_window(
    window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
    dtype=None, layout=None, device=None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Hamming window ``alpha - beta cos(2 pi k / (N - 1))``, as torch.hamming_window."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((float(alpha), float(beta))))  # fmt: skip


@public("blackman_window", function=True, method=False)
def blackman_window(
    window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Blackman window ``0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))``, as
    torch.blackman_window."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((0.42, 0.5, 0.08)))  # fmt: skip


def _bartlett(k, m):
    return 1 - np.abs(2 * k / (m - 1) - 1)


@public("bartlett_window", function=True, method=False)
def bartlett_window(
    window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The triangular Bartlett window ``1 - |2k / (N - 1) - 1|``, as torch.bartlett_window."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   _bartlett)  # fmt: skip


@public("kaiser_window", function=True, method=False)
def kaiser_window(
    window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
    device=None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Kaiser window ``I0(beta sqrt(1 - (2k / (N - 1) - 1)**2)) / I0(beta)``, as
    torch.kaiser_window."""
    b = float(beta)

    def fn(k, m):
        return np.i0(b * np.sqrt(np.clip(1 - (2 * k / (m - 1) - 1) ** 2, 0, None))) / np.i0(b)

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, fn)
