"""ctc_loss (torch.nn.functional.ctc_loss): the Connectionist Temporal Classification loss.

The per-sequence negative log-likelihoods come from the fused op gpucore.ops.ctc (the log-space
alpha recursion forward, alpha and beta backward, in C: cpu/ctc.c); the reductions and
zero_infinity are compositions on top. Device tensors are moved to the host for the recursion
(a sequential loop over time; the result and the gradient come back to the device), so they
give the host's values.
"""

from __future__ import annotations

import operator

import numpy as np

from ... import dtypes as D
from ...errors import DTypeError, ShapeError
from ...ops import ctc as _ctc
from ...ops.elementwise import where
from ...tensor import Tensor
from ._utils import _check_reduction, _check_tensor, _const


def _lengths(name: str, v, n: int) -> np.ndarray:
    """input_lengths / target_lengths (a tensor or a sequence of ints) as int64 [n]."""
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point or v.dtype is D.bool_:
            raise DTypeError(f"ctc_loss(): {name} must be an integer tensor, got {v.dtype}")
        arr = np.asarray(v.detach().cpu().numpy(), np.int64).reshape(-1)
    else:
        try:
            arr = np.array([operator.index(e) for e in v], np.int64)
        except TypeError:
            raise TypeError(
                f"ctc_loss(): {name} must be a tensor or a sequence of ints, got {v!r}"
            ) from None
    if arr.shape[0] != n:
        raise ShapeError(f"ctc_loss(): {name} must be of size batch_size ({n}), got {arr.shape[0]}")
    return arr


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The CTC loss of log_probs [T, N, C] (log_softmax outputs; [T, C] unbatched) against
    targets, as torch.nn.functional.ctc_loss: targets padded [N, S] or concatenated
    [sum(target_lengths)] (1-D), input_lengths / target_lengths tensors or sequences of N ints,
    class ``blank`` the blank. reduction 'mean' divides each loss by its target length (at least
    1) and averages over the batch, 'sum' adds, 'none' keeps [N]. zero_infinity replaces the
    infinite losses of impossible alignments (and their gradients) with zeros."""
    _check_tensor("ctc_loss", log_probs, "log_probs")
    _check_reduction("ctc_loss", reduction)
    if not isinstance(targets, Tensor):
        raise TypeError(
            f"ctc_loss(): targets must be a gpucore Tensor, got {type(targets).__name__}"
        )
    if log_probs.ndim not in (2, 3):
        raise ShapeError(
            f"ctc_loss(): log_probs must be [T, N, C] (or [T, C] unbatched), got "
            f"{tuple(log_probs.shape)}"
        )
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    t, n, c = lp.shape
    if unbatched:
        input_lengths = (
            [input_lengths]
            if not isinstance(input_lengths, Tensor)
            else (input_lengths.reshape(-1))
        )
        target_lengths = (
            [target_lengths]
            if not isinstance(target_lengths, Tensor)
            else (target_lengths.reshape(-1))
        )
    il = _lengths("input_lengths", input_lengths, n)
    tl = _lengths("target_lengths", target_lengths, n)
    if not 0 <= operator.index(blank) < c:
        raise ValueError(f"ctc_loss(): blank must be in label range [0, {c}), got {blank}")
    for name, arr in (("input_lengths", il), ("target_lengths", tl)):
        if (arr < 0).any():
            raise ValueError(
                f"ctc_loss(): Expected {name} to have value at least 0, but got value "
                f"{int(arr.min())}"
            )
    if (il > t).any():
        raise ValueError(
            f"ctc_loss(): Expected input_lengths to have value at most {t}, but got value "
            f"{int(il.max())}"
        )
    tg = np.asarray(targets.detach().cpu().numpy()).astype(np.int64)
    if targets.ndim == 1:  # concatenated (an unbatched input's targets too, as PyTorch)
        if tg.shape[0] != int(tl.sum()):
            raise ShapeError(
                f"ctc_loss(): concatenated targets must hold sum(target_lengths) = "
                f"{int(tl.sum())} labels, got {tg.shape[0]}"
            )
        offsets = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
        s = int(tl.max()) if n else 0
    else:
        if tg.ndim != 2 or tg.shape[0] != n:
            raise ShapeError(
                f"ctc_loss(): padded targets must be [N, S] with N = {n}, got "
                f"{tuple(targets.shape)}"
            )
        s = tg.shape[1]
        if n and int(tl.max()) > s:
            raise ShapeError(
                f"ctc_loss(): Expected targets to have size at least {int(tl.max())} at "
                f"dimension 1, but got size {s}"
            )
        offsets = np.arange(n, dtype=np.int64) * s
        tg = tg.reshape(-1)
    for b in range(n):
        lab = tg[offsets[b] : offsets[b] + tl[b]]
        if lab.size and (lab.min() < 0 or lab.max() >= c):
            raise IndexError(
                f"ctc_loss(): targets of sequence {b} must be classes in [0, {c}), got "
                f"{lab.tolist()}"
            )
    dev = lp.device if lp._dev is not None else None
    host = lp.to("cpu") if dev is not None else lp
    if host.dtype not in (D.float32, D.float64):
        host = host.float()
    nll, _ = _ctc.ctc_nll(
        host, _const(tg), _const(offsets), _const(il), _const(tl), blank, s, zero_infinity
    )
    nll = nll.to(lp.dtype)
    if dev is not None:
        nll = nll.to(dev)
    if zero_infinity:
        nll = where(nll == float("inf"), nll.detach().new_zeros(nll.shape), nll)
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    if reduction == "sum":
        return nll.sum()
    div = _const(np.maximum(tl, 1), nll.dtype, device=nll.device)
    return (nll / div).mean()
