"""Variable-length sequences for the recurrent layers, as torch.nn.utils.rnn: PackedSequence,
pack_padded_sequence, pad_packed_sequence, pad_sequence, pack_sequence, unpack_sequence and
unpad_sequence.

A PackedSequence holds the steps of a batch of sequences sorted by decreasing length, step after
step: ``data[sum(batch_sizes[:t]) : sum(batch_sizes[:t + 1])]`` are the ``batch_sizes[t]``
sequences still running at step t. Every conversion here is a composition of differentiable ops
(slices, cat, stack, index_select), so gradients flow through packing and unpacking."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...creation import full, tensor
from ...dtypes import int64
from ...errors import ShapeError
from ...ops.joining import cat, stack
from ...tensor import Tensor

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "pack_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class PackedSequence(NamedTuple):
    """data [sum(batch_sizes), *], batch_sizes (int64, one per step), sorted_indices and
    unsorted_indices (int64 permutations of the batch, or None when it came sorted)."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args, **kwargs) -> PackedSequence:
        """The same sequence with data moved / cast (the index tensors stay on the host)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._replace(data=data)

    def cpu(self) -> PackedSequence:
        return self._replace(data=self.data.cpu())

    def float(self) -> PackedSequence:
        return self._replace(data=self.data.float())

    def double(self) -> PackedSequence:
        return self._replace(data=self.data.double())

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def _lengths(lengths, fn: str) -> np.ndarray:
    a = lengths.numpy() if isinstance(lengths, Tensor) else np.asarray(lengths)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ShapeError(
            f"{fn}: lengths must be a 1-D sequence of integers, got {a.dtype}{list(a.shape)}"
        )
    return a.astype(np.int64)


def _sizes(bs) -> tuple:
    return tuple(int(v) for v in (bs.numpy() if isinstance(bs, Tensor) else bs))


def pack_padded_sequence(
    input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch [T, B, *] ([B, T, *] with batch_first) of sequences of the given
    lengths. enforce_sorted=True requires lengths in decreasing order; False sorts them (and
    records the permutation, undone by pad_packed_sequence and the layers' final states)."""
    fn = "pack_padded_sequence"
    lens = _lengths(lengths, fn)
    b_dim = 0 if batch_first else 1
    if input.ndim < 2 or lens.shape[0] != input.shape[b_dim]:
        raise ShapeError(
            f"{fn}: input of shape {tuple(input.shape)} has batch size "
            f"{input.shape[b_dim] if input.ndim >= 2 else None}, lengths has {lens.shape[0]} "
            "entries; expected one length per sequence"
        )
    if lens.size and lens.min() <= 0:
        raise ValueError(
            f"{fn}: Length of all samples has to be greater than 0, but found an element in "
            "'lengths' that is <= 0"
        )
    if lens.size and lens.max() > input.shape[1 - b_dim]:
        raise ShapeError(
            f"{fn}: a length {int(lens.max())} exceeds the padded length "
            f"{input.shape[1 - b_dim]} of input {tuple(input.shape)}"
        )
    sorted_idx = unsorted_idx = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise ValueError(
                f"{fn}: `lengths` array must be sorted in decreasing order when "
                "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                "pack_padded_sequence and/or pack_sequence to sidestep this requirement if you "
                "do not need ONNX exportability."
            )
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_idx = tensor(order, dtype=int64)
        unsorted_idx = tensor(np.argsort(order, kind="stable"), dtype=int64)
        lens = lens[order]
        input = input.index_select(b_dim, sorted_idx)
    if batch_first:
        input = input.transpose(0, 1)
    t_max = int(lens[0]) if lens.size else 0
    bs = [int((lens > t).sum()) for t in range(t_max)]
    data = cat([input[t, :n] for t, n in enumerate(bs)], 0)
    return PackedSequence(data, tensor(bs, dtype=int64), sorted_idx, unsorted_idx)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple:
    """Inverse of pack_padded_sequence: (padded [T, B, *] or [B, T, *], lengths int64 [B]), in
    the batch order the sequence was packed from."""
    bs = _sizes(sequence.batch_sizes)
    t_max = len(bs)
    if total_length is not None:
        if total_length < t_max:
            raise ValueError(
                "pad_packed_sequence: Expected total_length to be at least the length of the "
                f"longest sequence in input, but got total_length={total_length} and max "
                f"sequence length being {t_max}"
            )
    padded = packed_to_padded(sequence, padding_value, total_length)[0]
    b = bs[0] if bs else 0
    lens = np.array([sum(1 for n in bs if n > i) for i in range(b)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lens = lens[sequence.unsorted_indices.numpy()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, tensor(lens, dtype=int64)


def packed_to_padded(sequence: PackedSequence, padding_value: float = 0.0, total_length=None):
    """(padded [T, B, *] in the packed (sorted) batch order, batch sizes as a tuple)."""
    bs = _sizes(sequence.batch_sizes)
    data = sequence.data
    b = bs[0] if bs else 0
    feat = tuple(data.shape[1:])
    steps, off = [], 0
    for n in bs:
        step = data[off : off + n]
        off += n
        if n < b:
            pad = full((b - n, *feat), padding_value, dtype=data.dtype, device=data.device)
            step = cat([step, pad], 0)
        steps.append(step)
    if total_length is not None and total_length > len(bs):
        pad = full((b, *feat), padding_value, dtype=data.dtype, device=data.device)
        steps.extend([pad] * (total_length - len(bs)))
    if not steps:
        return data.new_zeros((0, 0, *feat)), bs
    return stack(steps, 0), bs


def padded_to_packed(out: Tensor, batch_sizes, like: PackedSequence) -> PackedSequence:
    """The steps of ``out`` [T, B, *] (packed batch order) as a PackedSequence shaped as
    ``like``."""
    data = cat([out[t, :n] for t, n in enumerate(_sizes(batch_sizes))], 0)
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)


def pad_sequence(
    sequences,
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack tensors [L_i, *] into [max L, B, *] ([B, max L, *] with batch_first), padding each
    on the ``padding_side`` ("right" or "left") with padding_value."""
    if padding_side not in ("right", "left"):
        raise ValueError(
            "pad_sequence: Expected padding_side to be one of left or right, but got "
            f"{padding_side}."
        )
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pad_sequence: received an empty list of sequences")
    trail = tuple(seqs[0].shape[1:])
    for i, s in enumerate(seqs):
        if s.ndim < 1 or tuple(s.shape[1:]) != trail:
            raise ShapeError(
                f"pad_sequence: sequence {i} has shape {tuple(s.shape)}, sequence 0 "
                f"{tuple(seqs[0].shape)}; every sequence must be [L_i, *{list(trail)}]"
            )
    t_max = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        n = t_max - s.shape[0]
        if n:
            pad = full((n, *trail), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors [L_i, *] (decreasing L_i unless enforce_sorted=False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of tensors [L_i, *] a PackedSequence holds, in the original batch order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [padded[i, :n] for i, n in enumerate(lengths.tolist())]


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The list of tensors [L_i, *] in a padded batch (right padding)."""
    lens = _lengths(lengths, "unpad_sequence")
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, : int(n)] for i, n in enumerate(lens)]
