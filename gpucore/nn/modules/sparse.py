"""Embedding and EmbeddingBag."""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import _new


def _padding_idx(cls: str, padding_idx: int | None, num_embeddings: int) -> int | None:
    """padding_idx in [0, num_embeddings) (a negative one counts from the end), or None."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"{cls}: padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})"
        )
    return padding_idx % num_embeddings


def _table(module, cls: str, shape: tuple, _weight, device, dtype, requires_grad=True) -> None:
    """module.weight: the given ``_weight`` (of ``shape``), else a new table initialised by
    module.reset_parameters()."""
    if _weight is None:
        module.weight = Parameter(_new(shape, device, dtype), requires_grad=requires_grad)
        module.reset_parameters()
        return
    if tuple(_weight.shape) != shape:
        raise ShapeError(f"{cls}: _weight has shape {tuple(_weight.shape)}, expected {shape}")
    module.weight = Parameter(_weight, requires_grad=requires_grad)


class Embedding(Module):
    """A lookup table [num_embeddings, embedding_dim] initialised N(0, 1); the padding_idx row
    starts at zero and never receives a gradient."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight=None,
        _freeze: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        padding_idx = _padding_idx("Embedding", padding_idx, num_embeddings)
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        if sparse:
            raise NotImplementedError(
                "Embedding: sparse gradients are not supported (gpucore has no sparse tensors); "
                "use sparse=False"
            )
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        _table(
            self, "Embedding", (num_embeddings, embedding_dim), _weight, device, dtype, not _freeze
        )

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(
            input,
            self.weight,
            self.padding_idx,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.sparse,
        )

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze: bool = True,
        padding_idx=None,
        max_norm=None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ):
        if embeddings.ndim != 2:
            raise ShapeError(
                f"Embedding.from_pretrained(): embeddings must be 2-D, got "
                f"{tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(
            rows,
            cols,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            _weight=embeddings,
            _freeze=freeze,
        )

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        return s


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (torch.nn.EmbeddingBag) from a table
    [num_embeddings, embedding_dim] initialised N(0, 1) (the padding_idx row at zero). forward
    takes a 2-D input (one bag per row) or a 1-D input with offsets, and per_sample_weights
    for mode 'sum'."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight=None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        padding_idx = _padding_idx("EmbeddingBag", padding_idx, num_embeddings)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        if sparse:
            raise NotImplementedError(
                "EmbeddingBag: sparse gradients are not supported (gpucore has no sparse tensors); "
                "use sparse=False"
            )
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        _table(self, "EmbeddingBag", (num_embeddings, embedding_dim), _weight, device, dtype)

    def reset_parameters(self) -> None:
        Embedding.reset_parameters(self)  # the same init (N(0, 1), the padding row zeroed)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze: bool = True,
        max_norm=None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx=None,
    ):
        if embeddings.ndim != 2:
            raise ShapeError(
                f"EmbeddingBag.from_pretrained(): embeddings must be 2-D, got "
                f"{tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        bag = cls(
            rows,
            cols,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            _weight=embeddings,
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
        )
        bag.weight.requires_grad = not freeze
        return bag

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
