"""gpucore.nn.utils.rnn against torch.nn.utils.rnn: packing, unpacking and padding (values,
batch sizes, permutations, lengths, gradients through them) and their argument errors; numpy
checks of the same where torch is missing."""

import numpy as np
import pytest

import gpucore
from gpucore.nn.utils import rnn as R


def _seqs(lengths, feat=(3,), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (n, *feat)) for n in lengths]


def _np(t):
    return None if t is None else t.detach().numpy() if hasattr(t, "detach") else t.numpy()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_pad_roundtrip_matches_torch(batch_first, enforce_sorted):
    torch = pytest.importorskip("torch")
    tr = torch.nn.utils.rnn
    lengths = [5, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4]
    seqs = _seqs(lengths)
    padded = np.stack([np.pad(s, ((0, 5 - len(s)), (0, 0))) for s in seqs], 0 if batch_first else 1)
    g_in = gpucore.tensor(padded, requires_grad=True)
    t_in = torch.tensor(padded, requires_grad=True)
    gp = R.pack_padded_sequence(
        g_in, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted
    )
    tp = tr.pack_padded_sequence(
        t_in, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted
    )
    np.testing.assert_array_equal(_np(gp.data), _np(tp.data))
    np.testing.assert_array_equal(gp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    for a, b in (
        (gp.sorted_indices, tp.sorted_indices),
        (gp.unsorted_indices, tp.unsorted_indices),
    ):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for total in (None, 7):
        ga, gl = R.pad_packed_sequence(gp, batch_first, padding_value=-2.0, total_length=total)
        ta, tl = tr.pad_packed_sequence(tp, batch_first, padding_value=-2.0, total_length=total)
        np.testing.assert_array_equal(_np(ga), _np(ta))
        np.testing.assert_array_equal(gl.numpy(), tl.numpy())
    w = np.arange(ga.numel()).reshape(tuple(ga.shape)) % 7
    (ga * gpucore.tensor(w)).sum().backward()
    (ta * torch.tensor(w, dtype=ta.dtype)).sum().backward()
    np.testing.assert_array_equal(g_in.grad.numpy(), t_in.grad.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first, side):
    torch = pytest.importorskip("torch")
    seqs = _seqs([2, 5, 3], feat=(2, 2))
    g = R.pad_sequence([gpucore.tensor(s) for s in seqs], batch_first, 1.5, side)
    t = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first, 1.5, side)
    np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_pack_sequence_unpack_and_unpad():
    seqs = _seqs([2, 4, 3])
    p = R.pack_sequence([gpucore.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(p.batch_sizes.numpy(), [3, 3, 2, 1])
    # step by step, longest first: the sequences sorted by length (1, 2, 0)
    want = np.concatenate(
        [np.stack([seqs[i][t] for i in (1, 2, 0) if t < len(seqs[i])]) for t in range(4)]
    )
    np.testing.assert_array_equal(p.data.numpy(), want)
    for got, s in zip(R.unpack_sequence(p), seqs):
        np.testing.assert_array_equal(got.numpy(), s)
    padded = R.pad_sequence([gpucore.tensor(s) for s in seqs], batch_first=True)
    for got, s in zip(R.unpad_sequence(padded, gpucore.tensor([2, 4, 3]), batch_first=True), seqs):
        np.testing.assert_array_equal(got.numpy(), s)
    assert p.to(gpucore.float32).data.dtype == gpucore.float32
    assert not p.is_cuda


def test_errors():
    x = gpucore.zeros(4, 3, 2)
    with pytest.raises(ValueError, match="must be sorted in decreasing order"):
        R.pack_padded_sequence(x, [1, 3, 2])
    with pytest.raises(ValueError, match="has to be greater than 0"):
        R.pack_padded_sequence(x, [3, 0, 2], enforce_sorted=False)
    with pytest.raises(ValueError, match="one length per sequence"):
        R.pack_padded_sequence(x, [3, 2])
    p = R.pack_padded_sequence(x, [4, 3, 2])
    with pytest.raises(ValueError, match="total_length=2 and max sequence length being 4"):
        R.pad_packed_sequence(p, total_length=2)
    with pytest.raises(ValueError, match="padding_side"):
        R.pad_sequence([x[0]], padding_side="middle")
