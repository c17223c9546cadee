"""More loss modules: CTCLoss (F.ctc_loss), MultiMarginLoss, MultiLabelMarginLoss,
TripletMarginWithDistanceLoss and LinearCrossEntropyLoss (F.linear_cross_entropy with its own
Linear)."""

from __future__ import annotations

import math

from .. import functional as F
from .linear import Linear
from .loss import _Loss, _WeightedLoss


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


class LinearCrossEntropyLoss(_WeightedLoss):
    """F.linear_cross_entropy with its own Linear(in_features, num_classes * prod(out_features),
    bias) (stored flat, reshaped to [C, *out_features, in] in forward), as
    torch.nn.LinearCrossEntropyLoss; weight, reduction, ignore_index (None: -100),
    label_smoothing and options as there."""

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple = (),
        bias: bool = False,
        device=None,
        dtype=None,
        reduction: str = "mean",
        weight=None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options=None,
    ) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ValueError(
                f"LinearCrossEntropyLoss: expected weight shape to be {(num_classes,)}, got "
                f"{tuple(weight.shape)}"
            )
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(
                f"LinearCrossEntropyLoss: expected label_smoothing to be in range [0, 1], got "
                f"{label_smoothing}"
            )
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        total = num_classes * math.prod(self.out_features)
        self.linear = Linear(in_features, total, bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input, target):
        shape = (self.num_classes, *self.out_features)
        w = self.linear.weight.reshape(shape + (self.linear.in_features,))
        b = None if self.linear.bias is None else self.linear.bias.reshape(shape)
        return F.linear_cross_entropy(
            input,
            w,
            target,
            linear_bias=b,
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
