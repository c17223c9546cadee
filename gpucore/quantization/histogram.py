"""``HistogramObserver``: a running histogram of the observed values and PyTorch's search for the
range that minimises the L2 quantization error (``torch.ao.quantization.HistogramObserver``,
itself caffe2's ``NormMinimization::NonlinearQuantizationParamsSearch``).

What it does, as PyTorch (float32 arithmetic throughout):

1. ``forward`` keeps ``bins`` (2048) equal-width bins over the running [min, max] (``histc``).
   When a new input widens the range, the old histogram is upsampled 16x, each fine bin's
   midpoint is mapped into the new bins and its count added there.
2. ``calculate_qparams`` searches quantiles: starting from the whole range, it repeatedly moves
   whichever end (left quantile alpha or right quantile 1 - beta, in steps of 1e-5) gives up more
   bins, and computes the expected squared error of quantizing the histogram to ``2**8`` levels
   over that sub-range (values inside a destination bin err uniformly; clipped mass is counted
   at the edge bins); it stops at the first step whose error grows.
3. The chosen [min, max] gives (scale, zero_point) with the MinMaxObserver formulas.

Checked against torch 2.13: equal histograms and qparams while the range only grows once; when
it widens later, a few upsampled bins' mass can land one bin over (PyTorch's vectorised linspace
rounds its midpoints by the CPU's vector width and thread count; this uses its scalar formula),
and the search compares float32 sums whose order differs from ATen's, so a near tie can pick a
neighbouring bin. Infinite values are ignored with a warning, as PyTorch.
"""

from __future__ import annotations

import numpy as np

from .. import _caller_warnings as caller_warnings
from .. import dtypes as D
from ..creation import from_numpy
from ..tensor import Tensor
from .observer import EPS, UniformQuantizationObserverBase, host_values
from .qtensor import per_tensor_affine, per_tensor_symmetric

__all__ = ["HistogramObserver"]

_UPSAMPLE = 16  # the finer grid an old histogram is resampled on when the range widens
_STEP = 1e-5  # quantile step of the range search


def _f32(x) -> np.float32:
    return np.float32(x)


def linspace32(start, end, steps: int) -> np.ndarray:
    """``torch.linspace`` in float32: the first half from ``start``, the rest back from ``end``."""
    start, end = _f32(start), _f32(end)
    if steps == 1:
        return np.array([start], np.float32)
    step = (end - start) / _f32(steps - 1)
    i = np.arange(steps)
    half = steps // 2
    lo = start + step * i[:half].astype(np.float32)
    hi = end - step * (steps - i[half:] - 1).astype(np.float32)
    return np.concatenate([lo, hi]).astype(np.float32)


def histc32(x: np.ndarray, bins: int, lo, hi) -> np.ndarray:
    """``torch.histc`` in float32: equal bins over [lo, hi] (widened by 1 on both sides when
    lo == hi), values outside ignored, ``hi`` itself in the last bin."""
    lo, hi = _f32(lo), _f32(hi)
    if lo == hi:
        lo, hi = lo - _f32(1), hi + _f32(1)
    x = x[(x >= lo) & (x <= hi)]
    pos = ((x - lo) * _f32(bins) / (hi - lo)).astype(np.int64)
    pos[pos >= bins] = bins - 1
    return np.bincount(pos, minlength=bins).astype(np.float32)


class HistogramObserver(UniformQuantizationObserverBase):
    """Records a histogram of its inputs and picks the range minimising the L2 quantization
    error (see ``gpucore.quantization.histogram``); per tensor only, as PyTorch."""

    def __init__(
        self,
        bins: int = 2048,
        dtype=D.quint8,
        qscheme=per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = EPS,
        is_dynamic: bool = False,
    ):
        if qscheme not in (per_tensor_affine, per_tensor_symmetric):
            raise ValueError(
                "HistogramObserver's qscheme only supports gpucore.per_tensor_affine and "
                f"gpucore.per_tensor_symmetric, got {qscheme!r}"
            )
        if is_dynamic:
            raise ValueError("HistogramObserver doesn't support dynamic quantization")
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ValueError(f"HistogramObserver: bins must be a positive int, got {bins!r}")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        self.bins = bins
        self.register_buffer("histogram", from_numpy(np.zeros(bins, np.float32)))
        self.register_buffer("min_val", from_numpy(np.array(np.inf, np.float32)))
        self.register_buffer("max_val", from_numpy(np.array(-np.inf, np.float32)))
        self.dst_nbins = 2 ** (8 * dtype.itemsize)
        self.upsample_rate = _UPSAMPLE

    # ------------------------------------------------------------------ recording
    def forward(self, x_orig: Tensor) -> Tensor:
        """Add ``x_orig``'s values to the histogram; returns it unchanged."""
        x = host_values("HistogramObserver", x_orig).reshape(-1)
        if x.size == 0:
            return x_orig
        if np.isinf(x).any():
            caller_warnings.warn("inf detected in input tensor, ignoring input")
            x = x[~np.isinf(x)]
            if x.size == 0:
                return x_orig
        x_min, x_max = x.min(), x.max()
        cur_min, cur_max = self.min_val.numpy()[()], self.max_val.numpy()[()]
        if cur_min == np.inf or cur_max == -np.inf:
            hist, new_min, new_max = histc32(x, self.bins, x_min, x_max), x_min, x_max
        else:
            new_min, new_max = min(cur_min, x_min), max(cur_max, x_max)
            update = histc32(x, self.bins, new_min, new_max)
            old = self.histogram.numpy()
            if new_min == cur_min and new_max == cur_max:
                hist = old + update
            elif cur_min == cur_max:
                hist = histc32(np.array([cur_min]), self.bins, new_min, new_max) * old.sum()
                hist = hist + update
            else:
                hist = update + self._upscale(old, cur_min, cur_max, new_min, new_max)
        self.histogram = from_numpy(np.asarray(hist, np.float32))
        self.min_val = from_numpy(np.asarray(new_min, np.float32))
        self.max_val = from_numpy(np.asarray(new_max, np.float32))
        return x_orig

    def _upscale(self, hist, orig_min, orig_max, new_min, new_max) -> np.ndarray:
        """The old histogram over [orig_min, orig_max] re-binned into the new range."""
        n = self.bins * self.upsample_rate
        fine = np.repeat(hist, self.upsample_rate) / _f32(self.upsample_rate)
        size = (_f32(orig_max) - _f32(orig_min)) / _f32(n)
        mids = linspace32(orig_min, orig_max, n + 1)[:-1] + _f32(0.5) * size
        edges = linspace32(new_min, new_max, self.bins + 1)
        idx = np.searchsorted(edges, mids, side="right") - 1
        np.clip(idx, 0, self.bins - 1, out=idx)
        return np.bincount(idx, weights=fine, minlength=self.bins).astype(np.float32)

    # ------------------------------------------------------------------ the range search
    def _quantization_error(self, start: int, end: int) -> float:
        """Expected squared error of quantizing the histogram over bins [start, end]."""
        bin_width = (float(self.max_val.item()) - float(self.min_val.item())) / self.bins
        dst_width = bin_width * (end - start + 1) / self.dst_nbins
        if dst_width == 0.0:
            return 0.0
        hist = self.histogram.numpy()
        bw, dw = _f32(bin_width), _f32(dst_width)
        src = np.arange(self.bins, dtype=np.int64) - start
        begin = src.astype(np.float32) * bw
        end_ = begin + bw
        top = _f32(self.dst_nbins - 1)
        # floor_divide: the exact floor of the quotient, as torch.div(rounding_mode="floor")
        dst_begin = np.clip(np.floor_divide(begin, dw), 0, top)
        dst_end = np.clip(np.floor_divide(end_, dw), 0, top)
        density = hist / bw
        half = dw / _f32(2)

        def norm(a, b):
            return density * ((b * b * b - a * a * a) / _f32(3))

        center_begin = (dst_begin + _f32(0.5)) * dw
        total = norm(begin - center_begin, np.full(self.bins, half, np.float32))
        total = total + (dst_end - dst_begin - _f32(1)) * norm(-half, half)
        center_end = dst_end * dw + half
        total = total + norm(-half, end_ - center_end)
        return float(total.astype(np.float32).sum(dtype=np.float32))

    def _non_linear_param_search(self):
        """The [min, max] the quantile search settles on (module docstring)."""
        hist = self.histogram.numpy()
        bin_width = (self.max_val.numpy() - self.min_val.numpy()) / _f32(self.bins)
        total = float(hist.sum(dtype=np.float32))
        csum = np.cumsum(hist, dtype=np.float32).tolist()
        alpha, beta = 0.0, 1.0
        start, end = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + _STEP, beta - _STEP
            left, right = start, end
            # PyTorch compares the float32 sums with the bounds rounded to float32
            lo_bound, hi_bound = float(_f32(next_alpha * total)), float(_f32(next_beta * total))
            while left < end and csum[left] < lo_bound:
                left += 1
            while right > start and csum[right] > hi_bound:
                right -= 1
            next_start, next_end = start, end
            if (left - start) > (end - right):
                next_start, alpha = left, next_alpha
            else:
                next_end, beta = right, next_beta
            if next_start == start and next_end == end:
                continue
            err = self._quantization_error(next_start, next_end)
            if err > norm_min:
                break
            norm_min, start, end = err, next_start, next_end
        lo = self.min_val.numpy() + bin_width * _f32(start)
        hi = self.min_val.numpy() + bin_width * _f32(end + 1)
        return np.float32(lo), np.float32(hi)

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """(scale [1] float32, zero_point [1] int) for the range the search picks."""
        mn, mx = self.min_val.numpy()[()], self.max_val.numpy()[()]
        if mn == np.inf and mx == -np.inf:
            caller_warnings.warn(
                "must run observer before calling calculate_qparams. Returning default scale and "
                "zero point",
            )
            return from_numpy(np.array([1.0], np.float32)), from_numpy(np.array([0], np.int64))
        lo, hi = self._non_linear_param_search()
        return self._calculate_qparams(lo, hi)

    def extra_repr(self) -> str:
        return f"min_val={float(self.min_val.item())}, max_val={float(self.max_val.item())}"

    def reset_min_max_vals(self) -> None:
        """Forget what was observed."""
        self.histogram = from_numpy(np.zeros(self.bins, np.float32))
        self.min_val = from_numpy(np.array(np.inf, np.float32))
        self.max_val = from_numpy(np.array(-np.inf, np.float32))
