"""More loss modules: CTCLoss (F.ctc_loss), MultiMarginLoss, MultiLabelMarginLoss and
TripletMarginWithDistanceLoss."""

from __future__ import annotations

from .. import functional as F
from .loss import _Loss


class CTCLoss(_Loss):
    """F.ctc_loss: log_probs [T, N, C], targets (padded or concatenated), input_lengths,
    target_lengths; blank, reduction, zero_infinity as PyTorch."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            self.blank,
            self.reduction,
            self.zero_infinity,
        )


class MultiMarginLoss(_Loss):
    """F.multi_margin_loss: multi-class hinge loss with p (1 or 2), margin and class weights (a
    buffer)."""

    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight=None,
        size_average=None,
        reduce=None,
        reduction: str = "mean",
    ):
        super().__init__(size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("MultiMarginLoss: only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError("MultiMarginLoss: weight must be a 1-D tensor")
        self.p = p
        self.margin = margin
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multi_margin_loss(
            input, target, p=self.p, margin=self.margin, weight=self.weight,
            reduction=self.reduction,
        )  # fmt: skip


class MultiLabelMarginLoss(_Loss):
    """F.multilabel_margin_loss: targets list each sample's classes, ended by -1."""

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """F.triplet_margin_with_distance_loss: distance_function (default pairwise_distance),
    margin, swap, reduction."""

    def __init__(
        self,
        *,
        distance_function=None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ):
        super().__init__(reduction=reduction)
        if not margin > 0:
            raise ValueError(
                f"TripletMarginWithDistanceLoss: margin must be greater than 0, got {margin}"
            )
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip
