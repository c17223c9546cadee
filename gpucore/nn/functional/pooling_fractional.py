"""fractional_max_pool2d / fractional_max_pool3d (and their ``*_with_indices`` names): max
pooling over pseudo-random windows (Graham, Fractional Max-Pooling), PyTorch's interval rule
per plane from ``_random_samples`` (drawn from gpucore's generator when not given). A gather of
each output's window then a max (a composition: gradients on every backend)."""

from __future__ import annotations

import operator

import numpy as np

from ...errors import ShapeError
from ...ops.random import rand
from ...tensor import Tensor
from ._utils import _check_tensor, _const


def _intervals(samples: np.ndarray, size: int, out: int, pool: int, dtype) -> np.ndarray:
    """PyTorch's generate_intervals for an array of samples, in the input's float type:
    start i = int((i + u) * alpha) - int(u * alpha), the last window flush with the end."""
    u = samples.astype(dtype)[..., None]
    seq = np.empty(samples.shape + (out,), np.int64)
    if out > 1:
        alpha = dtype(size - pool) / dtype(out - 1)
        i = np.arange(out - 1, dtype=dtype)
        seq[..., :-1] = ((i + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    seq[..., -1] = size - pool
    return seq


def _fractional(op, n, input, kernel_size, output_size, output_ratio, samples):
    _check_tensor(op, input)
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(
            f"{op}(): expected a {n + 1}-D or {n + 2}-D input, got shape {tuple(input.shape)}"
        )
    batched = input.ndim == n + 2
    x = input if batched else input.unsqueeze(0)
    spatial = tuple(x.shape[2:])

    def ints(v, name):
        try:
            t = tuple(operator.index(e) for e in v) if isinstance(v, (tuple, list)) else None
            t = t if t is not None else (operator.index(v),) * n
        except TypeError:
            t = ()
        if len(t) != n:
            raise ValueError(f"{op}(): {name} must be an int or {n} ints, got {v!r}")
        return t

    k = ints(kernel_size, "kernel_size")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op}(): requires specifying either an output_size or an output_ratio")
    if output_size is None:
        r = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * n
        if len(r) != n or not all(0 < float(v) < 1 for v in r):
            raise ValueError(f"{op}(): output_ratio must be in (0, 1), got {output_ratio!r}")
        out = tuple(int(s * float(v)) for s, v in zip(spatial, r))
    else:
        out = ints(output_size, "output_size")
    for d in range(n):
        if k[d] < 1 or out[d] < 1 or out[d] + k[d] - 1 > spatial[d]:
            raise ShapeError(
                f"{op}(): pool size {k[d]} too large relative to input size {spatial[d]} and "
                f"output size {out[d]} (dim {d}; needs output + pool - 1 <= input)"
            )
    nb, c = x.shape[:2]
    if samples is None:
        samples = rand(nb, c, n, dtype=x.dtype)
    elif not isinstance(samples, Tensor) or tuple(samples.shape) != (nb, c, n):
        raise ShapeError(f"{op}(): _random_samples must be a tensor of shape {(nb, c, n)}")
    u = np.asarray(samples.detach().cpu().numpy())
    ftype = np.float64 if x.dtype.itemsize == 8 else np.float32
    # axis d's sample: 2-D takes (W, H) from samples (0, 1), 3-D (T, H, W) from (0, 1, 2)
    which = (1, 0) if n == 2 else (0, 1, 2)
    starts = [_intervals(u[:, :, which[d]], spatial[d], out[d], k[d], ftype) for d in range(n)]
    # flat input index of every (output position, window offset), per plane
    strides = [int(np.prod(spatial[d + 1 :])) for d in range(n)]
    idx = np.zeros((nb, c) + out + k, np.int64)
    for d in range(n):
        pos = starts[d].reshape((nb, c) + (1,) * d + (out[d],) + (1,) * (n - 1 - d) + (1,) * n)
        off = np.arange(k[d]).reshape((1,) * (n - 1 + 2 + 1 + d) + (k[d],) + (1,) * (n - 1 - d))
        idx = idx + (pos + off) * strides[d]
    kk = int(np.prod(k))
    cols = _const(idx.reshape(nb, c, int(np.prod(out)) * kk))
    if x._dev is not None:
        cols = cols.to(x.device)
    vals = x.reshape(nb, c, int(np.prod(spatial))).gather(2, cols).reshape((nb, c) + out + (kk,))
    y, arg = vals.max(-1)
    ind = cols.reshape((nb, c) + out + (kk,)).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    if not batched:
        y, ind = y.squeeze(0), ind.squeeze(0)
    return y, ind


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples=None,
):
    """(values, flat H*W indices) of fractional_max_pool2d."""
    return _fractional(
        "fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio, _random_samples
    )


def fractional_max_pool2d(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples=None,
):
    """Fractional max pooling of [N, C, H, W] (torch.nn.functional.fractional_max_pool2d):
    windows of kernel_size at pseudo-random steps giving output_size (or input * output_ratio);
    _random_samples [N, C, 2] in [0, 1) fixes the steps (W from sample 0, H from sample 1)."""
    y, ind = fractional_max_pool2d_with_indices(
        input, kernel_size, output_size, output_ratio, True, _random_samples
    )
    return (y, ind) if return_indices else y


def fractional_max_pool3d_with_indices(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples=None,
):
    """(values, flat D*H*W indices) of fractional_max_pool3d."""
    return _fractional(
        "fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio, _random_samples
    )


def fractional_max_pool3d(
    input: Tensor,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices: bool = False,
    _random_samples=None,
):
    """Fractional max pooling of [N, C, D, H, W] (torch.nn.functional.fractional_max_pool3d);
    _random_samples [N, C, 3] (D, H, W)."""
    y, ind = fractional_max_pool3d_with_indices(
        input, kernel_size, output_size, output_ratio, True, _random_samples
    )
    return (y, ind) if return_indices else y
