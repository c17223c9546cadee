"""AdaptiveLogSoftmaxWithLoss (torch.nn.AdaptiveLogSoftmaxWithLoss): the adaptive softmax of
Grave et al. for large vocabularies: a head over the frequent classes and one entry per tail
cluster, each cluster a low-rank projection of its own. PyTorch's module, written with gpucore
ops (the rows of each cluster picked on the host from the targets)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...creation import tensor
from ...errors import ShapeError
from ...ops.elementwise import where
from ...ops.joining import cat
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from .container import ModuleList, Sequential
from .linear import Linear

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _checked_cutoffs(cutoffs, n_classes: int) -> list:
    """``cutoffs`` as a list, after checking that they split [0, n_classes) into a shortlist
    and at least one cluster: integers, strictly increasing, each in [1, n_classes - 1]."""
    bounds = list(cutoffs)
    what = f"AdaptiveLogSoftmaxWithLoss(): cutoffs {bounds}"
    if not bounds:
        raise ValueError(f"{what} is empty; give at least one class boundary")
    if any(int(b) != b for b in bounds):
        raise ValueError(f"{what} must hold integers")
    if any(b >= a for b, a in zip(bounds, bounds[1:])):
        raise ValueError(f"{what} must be strictly increasing (sorted, no repeats)")
    if bounds[0] < 1 or bounds[-1] > n_classes - 1:
        raise ValueError(f"{what} must lie in [1, n_classes - 1] = [1, {n_classes - 1}]")
    return bounds


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: classes below cutoffs[0] in the head, the others in clusters split at
    ``cutoffs`` whose projections shrink by ``div_value`` per cluster. forward(input, target)
    gives (output: each target's log-probability, loss: their negated mean); log_prob(input)
    the full [N, n_classes] log-distribution; predict(input) the most likely classes."""

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs,
        div_value: float = 4.0,
        head_bias: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        bounds = _checked_cutoffs(cutoffs, n_classes)
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.n_classes = in_features, n_classes
        self.div_value, self.head_bias = div_value, head_bias
        # consecutive pairs of cutoffs delimit the clusters; the last ends at n_classes
        self.cutoffs = bounds + [n_classes]
        self.shortlist_size = bounds[0]
        self.n_clusters = len(bounds)
        # the head scores the shortlisted classes plus one logit per cluster
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        clusters = []
        for depth, (first, end) in enumerate(zip(self.cutoffs, self.cutoffs[1:]), start=1):
            # rarer clusters get narrower projections: div_value times per step
            width = int(in_features // div_value**depth)
            down = Linear(in_features, width, bias=False, **factory)
            clusters.append(Sequential(down, Linear(width, end - first, bias=False, **factory)))
        self.tail = ModuleList(clusters)

    def reset_parameters(self) -> None:
        """Re-initialise the head and the tail projections as at construction (in the order
        they were made)."""
        for layer in self.modules():
            if isinstance(layer, Linear):
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        name = "AdaptiveLogSoftmaxWithLoss"
        if target_.ndim == 1:
            if input_.ndim != 2:
                raise ShapeError(
                    f"{name}: 1D target tensor expects 2D input tensors, but found inputs with "
                    f"size {tuple(input_.shape)}"
                )
            if input_.shape[0] != target_.shape[0]:
                raise ShapeError(
                    f"{name}: Input and target should have the same size in the batch dimension."
                )
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise ShapeError(
                    f"{name}: 0D target tensor expects 1D input tensors, but found inputs with "
                    f"size {tuple(input_.shape)}"
                )
        else:
            raise ShapeError(f"{name}: 0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        tgt = np.asarray(target_.detach().cpu().numpy()).astype(np.int64).reshape(-1)
        if tgt.size and (tgt.min() < 0 or tgt.max() >= self.n_classes):
            raise IndexError(
                f"{name}: Target values should be in [0, {self.n_classes - 1}], but values in "
                f"range [{tgt.min()}, {tgt.max()}] were found."
            )
        gather = tgt.copy()
        output = input.new_zeros((tgt.size,))
        for i in range(1, len(self.cutoffs)):
            lo, hi = self.cutoffs[i - 1], self.cutoffs[i]
            rows = np.nonzero((tgt >= lo) & (tgt < hi))[0]
            if rows.size == 0:
                continue
            gather[rows] = self.shortlist_size + i - 1
            r = _index(rows, input)
            logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, r)), dim=1)
            local = logprob.gather(1, _index((tgt[rows] - lo)[:, None], input)).squeeze(1)
            output = output.index_add(0, r, local)
        head = F.log_softmax(self.head(input), dim=1)
        output = output + head.gather(1, _index(gather[:, None], input)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head = F.log_softmax(head_output, dim=1)
        parts = [head[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            k = self.shortlist_size + i
            parts.append(cluster + head[:, k : k + 1])
        return cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of every class, [N, n_classes]."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row (the head's argmax, or the full distribution's
        where that is a cluster)."""
        head_output = self.head(input)
        output = head_output.argmax(1)
        tail = output >= self.shortlist_size
        if not bool(tail.any().item()):
            return output
        full = self._get_full_log_prob(input, head_output).argmax(1)
        return where(tail, full, output)


def _index(a: np.ndarray, like: Tensor) -> Tensor:
    """int64 indices from the host, on ``like``'s device."""
    t = tensor(np.ascontiguousarray(a, np.int64))
    return t.to(like.device) if like._dev is not None else t
