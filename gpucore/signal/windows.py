"""gpucore.signal.windows: torch.signal.windows' window functions (SciPy's definitions):
bartlett, blackman, cosine, exponential, gaussian, general_cosine, general_hamming, hamming,
hann, kaiser, nuttall. Each takes the length ``M`` and ``sym`` (True: symmetric, for filter
design; False: periodic, for spectral analysis) plus its parameters, keyword-only as PyTorch;
values are computed in float64 with PyTorch's formulas and rounded once to ``dtype`` (the
default floating dtype unless given), on ``device`` (the default device unless given).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..creation import _check_device, _finish, _store
from ..tensor import Tensor

__all__ = [
    "bartlett",
    "blackman",
    "cosine",
    "exponential",
    "gaussian",
    "general_cosine",
    "general_hamming",
    "hamming",
    "hann",
    "kaiser",
    "nuttall",
]


def _make(name, M, dtype, device, requires_grad, values) -> Tensor:
    be = _check_device(device, name)
    if isinstance(M, bool) or not isinstance(M, (int, np.integer)):
        raise TypeError(f"signal.windows.{name}(): M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"signal.windows.{name}(): M must be non-negative, got {M}")
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    if dt not in (D.float32, D.float64):  # PyTorch's windows refuse the others with ValueError
        raise ValueError(
            f"signal.windows.{name}(): expects a float32 or float64 dtype, got {dt}; build the "
            "window in float32 and convert it with .to()"
        )
    vals = np.ones(int(M)) if M <= 1 else np.asarray(values(int(M)), np.float64)
    return _finish(_store(vals, dt), dt, requires_grad, be)


def _span(start: float, step: float, m: int) -> np.ndarray:
    return start + step * np.arange(m, dtype=np.float64)


def general_cosine(M: int, *, a, sym: bool = True, dtype=None, layout=None, device=None,
                   requires_grad: bool = False) -> Tensor:  # fmt: skip
    """``sum_i (-1)^i a_i cos(2 pi i k / N)``, N = M - 1 (sym) or M (periodic), as
    torch.signal.windows.general_cosine."""
    if not isinstance(a, (list, tuple)) or not a:
        raise TypeError("signal.windows.general_cosine(): a must be a non-empty list of floats")
    return _cosine_sum("general_cosine", M, a, sym, dtype, device, requires_grad)


def _cosine_sum(name, M, a, sym, dtype, device, requires_grad) -> Tensor:
    def values(m):
        k = _span(0.0, 2 * math.pi / (m - 1 if sym else m), m)
        out = np.full(m, float(a[0]))
        for i, c in enumerate(a[1:], 1):
            out += ((-1) ** i) * float(c) * np.cos(i * k)
        return out

    return _make(name, M, dtype, device, requires_grad, values)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=None,
                    device=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """``alpha - (1 - alpha) cos(2 pi k / N)``, as torch.signal.windows.general_hamming."""
    return _cosine_sum("general_hamming", M, [alpha, 1.0 - alpha], sym, dtype, device,
                       requires_grad)  # fmt: skip


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Hamming window (general_hamming with alpha 0.54)."""
    return _cosine_sum("hamming", M, [0.54, 0.46], sym, dtype, device, requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
         requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Hann window (general_hamming with alpha 0.5)."""
    return _cosine_sum("hann", M, [0.5, 0.5], sym, dtype, device, requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Blackman window (general_cosine with a = [0.42, 0.5, 0.08])."""
    return _cosine_sum("blackman", M, [0.42, 0.5, 0.08], sym, dtype, device, requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The minimum 4-term Blackman-Harris window of Nuttall (general_cosine)."""
    a = [0.3635819, 0.4891775, 0.1365995, 0.0106411]
    return _cosine_sum("nuttall", M, a, sym, dtype, device, requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The triangular window ``1 - |2k / N - 1|``, as torch.signal.windows.bartlett."""

    def values(m):
        return 1 - np.abs(_span(-1.0, 2.0 / (m - 1 if sym else m), m))

    return _make("bartlett", M, dtype, device, requires_grad, values)


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
           requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The cosine (sine) window ``sin(pi (k + 0.5) / N)``, N = M (sym) or M + 1."""

    def values(m):
        c = math.pi / (m if sym else m + 1)
        return np.sin(_span(0.5 * c, c, m))

    return _make("cosine", M, dtype, device, requires_grad, values)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype=None, layout=None, device=None,
                requires_grad: bool = False) -> Tensor:  # fmt: skip
    """``exp(-|k - center| / tau)``, center (M - 1) / 2 by default (M / 2 when periodic), as
    torch.signal.windows.exponential (a center cannot be given with sym=True)."""
    if sym and center is not None:
        raise ValueError("signal.windows.exponential(): center must be None for symmetric windows")
    if tau <= 0:
        raise ValueError(f"signal.windows.exponential(): tau must be positive, got {tau}")

    def values(m):
        c = (m - 1 if sym else m) / 2.0 if center is None else float(center)
        return np.exp(-np.abs(_span(-c, 1.0, m)) / tau)

    return _make("exponential", M, dtype, device, requires_grad, values)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=None,
             device=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """``exp(-((k - (N)/2) / std)**2 / 2)``, N = M - 1 (sym) or M, as
    torch.signal.windows.gaussian."""
    if std <= 0:
        raise ValueError(f"signal.windows.gaussian(): std must be positive, got {std}")

    def values(m):
        k = _span(-(m - 1 if sym else m) / 2.0, 1.0, m) / std
        return np.exp(-(k**2) / 2)

    return _make("gaussian", M, dtype, device, requires_grad, values)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=None,
           device=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """``I0(beta sqrt(1 - (2k / N - 1)**2)) / I0(beta)``, as torch.signal.windows.kaiser."""
    if beta < 0:
        raise ValueError(f"signal.windows.kaiser(): beta must be non-negative, got {beta}")

    def values(m):
        n = m - 1 if sym else m
        k = _span(-1.0, 2.0 / n, m)
        return np.i0(beta * np.sqrt(np.clip(1 - k**2, 0, None))) / np.i0(beta)

    return _make("kaiser", M, dtype, device, requires_grad, values)
