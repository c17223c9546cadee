"""The calls tests/test_bad_arguments.py makes: a valid call per public function (generic, or from
TEMPLATES where the signature cannot say), and the bad variants derived from it.

A valid call's Tensor arguments are its *slots* (a Tensor argument, or a Tensor in a list
argument such as cat's). Every variant changes slots or dims of the valid call:

- ``type``: one slot replaced by None, a str, a float or a numpy array;
- ``shape``: one slot replaced by a 0-d tensor or one of shape (2, 5, 6);
- ``dim``: a dim-like argument out of range (7, -9) or of the wrong type ("x", 1.5);
- ``dtype``: one slot as bool, uint8, int64 or float64;
- ``empty``: every slot with its first (then its last) dim of size 0;
- ``noncontig``: every slot as a non-contiguous view of the same values.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import NamedTuple

import numpy as np

import gpucore as gc

# Parameters that hold a dim (an int checked against the input's rank).
DIM_PARAMS = ("dim", "dim0", "dim1", "start_dim", "end_dim", "source", "destination")


def make(shape, kind: str = "float", seed: int = 0) -> gc.Tensor:
    """A tensor of a template: float32 in (-2, 2), int64 class indices ``index:<high>``, or bool."""
    rng = np.random.default_rng(seed + 7 * len(shape))
    if kind == "bool":
        return gc.tensor(rng.random(shape) < 0.5)
    if kind.startswith("index:"):
        return gc.tensor(rng.integers(0, int(kind[6:]), size=shape, dtype=np.int64))
    return gc.tensor(rng.uniform(-2, 2, size=shape).astype(np.float32))


def t(*shape, kind: str = "float", seed: int = 0) -> gc.Tensor:
    return make(shape, kind, seed)


# Valid calls where the generic one (every required positional parameter a float32 tensor of
# shape (3, 4)) is wrong: a shape that must fit, an index, a size, a list of tensors. name ->
# () -> (args, kwargs). A function that needs one and has none fails test_valid_call.
TEMPLATES = {
    "addmm": lambda: ((t(3, 5), t(3, 4, seed=1), t(4, 5, seed=2)), {}),
    "bmm": lambda: ((t(2, 3, 4), t(2, 4, 5, seed=1)), {}),
    "mm": lambda: ((t(3, 4), t(4, 5, seed=1)), {}),
    "mvlgamma": lambda: ((t(3, 4) + 3, 2), {}),
    "polygamma": lambda: ((1, t(3, 4) + 3), {}),
    "matmul": lambda: ((t(3, 4), t(4, 5, seed=1)), {}),
    "broadcast_to": lambda: ((t(1, 4), (3, 4)), {}),
    "broadcast_tensors": lambda: ((t(3, 1), t(1, 4, seed=1)), {}),
    "cat": lambda: (([t(3, 4), t(2, 4, seed=1)],), {}),
    "concat": lambda: (([t(3, 4), t(2, 4, seed=1)],), {}),
    "stack": lambda: (([t(3, 4), t(3, 4, seed=1)], 1), {}),
    "chunk": lambda: ((t(3, 4), 2, 1), {}),
    "split": lambda: ((t(3, 4), 2, 1), {}),
    "narrow": lambda: ((t(3, 4), 1, 1, 2), {}),
    "expand": lambda: ((t(1, 4), 3, 4), {}),
    "reshape": lambda: ((t(3, 4), (4, 3)), {}),
    "permute": lambda: ((t(3, 4), (1, 0)), {}),
    "movedim": lambda: ((t(2, 3, 4), 0, 2), {}),
    "swapaxes": lambda: ((t(3, 4), 0, 1), {}),
    "transpose": lambda: ((t(3, 4), 0, 1), {}),
    "unsqueeze": lambda: ((t(3, 4), 1), {}),
    "gather": lambda: ((t(3, 4), 1, t(3, 2, kind="index:4")), {}),
    "bitwise_and": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
    "bitwise_or": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
    "bitwise_xor": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
    "bitwise_not": lambda: ((t(3, 4, kind="index:99"),), {}),
    "bitwise_left_shift": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:8")), {}),
    "bitwise_right_shift": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:8")), {}),
    "index_select": lambda: ((t(3, 4), 1, t(3, kind="index:4")), {}),
    "scatter_add": lambda: ((t(3, 4), 1, t(3, 2, kind="index:4"), t(3, 2, seed=1)), {}),
    "masked_fill": lambda: ((t(3, 4), t(3, 4, kind="bool"), 0.5), {}),
    "where": lambda: ((t(3, 4, kind="bool"), t(3, 4, seed=1), t(3, 4, seed=2)), {}),
    "softmax": lambda: ((t(3, 4), 1), {}),
    "log_softmax": lambda: ((t(3, 4), 1), {}),
    "logsumexp": lambda: ((t(3, 4), 1), {}),
    "clamp": lambda: ((t(3, 4), -0.5, 0.5), {}),
    "clip": lambda: ((t(3, 4), -0.5, 0.5), {}),
    "pow": lambda: ((t(3, 4).abs(), t(3, 4, seed=1)), {}),
    "max": lambda: ((t(3, 4), 1), {}),
    "min": lambda: ((t(3, 4), 1), {}),
    "rand": lambda: ((3, 4), {}),
    "randn": lambda: ((3, 4), {}),
    "randint": lambda: ((0, 5, (3, 4)), {}),
    "randint_like": lambda: ((t(3, 4), 0, 5), {}),
}
# the tensor functions of issue 14 (sorting, scans, scatter, rearranging, einsum, sampling)
TEMPLATES.update(
    {
        "addbmm": lambda: ((t(3, 5), t(2, 3, 4, seed=1), t(2, 4, 5, seed=2)), {}),
        "baddbmm": lambda: ((t(2, 3, 5), t(2, 3, 4, seed=1), t(2, 4, 5, seed=2)), {}),
        "bucketize": lambda: ((t(3, 4), gc.tensor([-1.0, 0.0, 1.0])), {}),
        "searchsorted": lambda: ((gc.tensor([-1.0, 0.0, 1.0]), t(3, 4)), {}),
        "cummax": lambda: ((t(3, 4), 1), {}),
        "cummin": lambda: ((t(3, 4), 1), {}),
        "cumprod": lambda: ((t(3, 4), 1), {}),
        "cumsum": lambda: ((t(3, 4), 1), {}),
        "logcumsumexp": lambda: ((t(3, 4), 1), {}),
        "einsum": lambda: (("ij,kj->ik", t(3, 4), t(5, 4, seed=1)), {}),
        "flip": lambda: ((t(3, 4), (0,)), {}),
        "roll": lambda: ((t(3, 4), 1, 1), {}),
        "repeat_interleave": lambda: ((t(3, 4), 2, 1), {}),
        "meshgrid": lambda: ((t(3), t(4, seed=1)), {"indexing": "ij"}),
        "index_add": lambda: ((t(3, 4), 1, gc.tensor([0, 2]), t(3, 2, seed=1)), {}),
        "index_copy": lambda: ((t(3, 4), 1, gc.tensor([3, 1]), t(3, 2, seed=1)), {}),
        "index_fill": lambda: ((t(3, 4), 1, gc.tensor([0, 2]), 0.5), {}),
        "scatter": lambda: ((t(3, 4), 1, t(3, 2, kind="index:4"), t(3, 2, seed=1)), {}),
        "scatter_reduce": lambda: (
            (t(3, 4), 1, t(3, 2, kind="index:4"), t(3, 2, seed=1), "amax"),
            {},
        ),
        # distinct values in every dtype: which of tied elements PyTorch's topk picks is unspecified
        "topk": lambda: (
            (gc.tensor(np.random.default_rng(0).permutation(12).reshape(3, 4) - 6.0), 2),
            {},
        ),
        "multinomial": lambda: ((t(3, 4).abs(), 2), {}),
        "randperm": lambda: ((5,), {}),
        "tril_indices": lambda: ((3, 4), {}),
        "triu_indices": lambda: ((3, 4, 1), {}),
        "bincount": lambda: ((t(6, kind="index:4"),), {}),
        "ger": lambda: ((t(3), t(4, seed=1)), {}),
        "outer": lambda: ((t(3), t(4, seed=1)), {}),
        "kthvalue": lambda: (
            (gc.tensor(np.random.default_rng(1).permutation(12).reshape(3, 4) - 6.0), 2, 1),
            {},
        ),
        "take_along_dim": lambda: ((t(3, 4), t(3, 2, kind="index:4"), 1), {}),
    }
)
# the missing tensor functions of issue 14 (stacking, products, statistics, masks)
TEMPLATES.update(
    {
        "cartesian_prod": lambda: ((t(3), t(4, seed=1)), {}),
        "combinations": lambda: ((t(4),), {}),
        "dot": lambda: ((t(4), t(4, seed=1)), {}),
        "mv": lambda: ((t(3, 4), t(4, seed=1)), {}),
        "masked_select": lambda: ((t(3, 4), t(3, 4, kind="bool")), {}),
        "masked_scatter": lambda: ((t(3, 4), t(3, 4, kind="bool"), t(3, 4, seed=1)), {}),
        "quantile": lambda: ((t(3, 4), 0.3, 1), {}),
        "nanquantile": lambda: ((t(3, 4), 0.3, 1), {}),
        "split_with_sizes": lambda: ((t(3, 4), [1, 3], 1), {}),
        "tensor_split": lambda: ((t(3, 4), 3, 1), {}),
        "hsplit": lambda: ((t(3, 4), 2), {}),
        "vsplit": lambda: ((t(3, 4), [1]), {}),
        "dsplit": lambda: ((t(3, 4, 2), 2), {}),
        "tile": lambda: ((t(3, 4), (2, 1)), {}),
        "unflatten": lambda: ((t(3, 4), 1, (2, 2)), {}),
        "cross": lambda: ((t(4, 3), t(4, 3, seed=1), 1), {}),
        "tensordot": lambda: ((t(3, 4), t(4, 5, seed=1), 1), {}),
        "cdist": lambda: ((t(3, 4), t(5, 4, seed=1)), {}),
        "atleast_1d": lambda: ((t(3, 4),), {}),
        "atleast_2d": lambda: ((t(4),), {}),
        "atleast_3d": lambda: ((t(3, 4),), {}),
        "block_diag": lambda: ((t(2, 3), t(3, seed=1)), {}),
    }
)
# the top-level functional forms (gpucore/nn/functional/toplevel.py), torch's signatures
TEMPLATES.update(
    {
        # optional tensors (bias, weight) left out: a None there is valid, not a bad type
        "conv1d": lambda: ((t(2, 3, 5), t(4, 3, 3, seed=1)), {}),
        "conv2d": lambda: ((t(2, 3, 5, 5), t(4, 3, 3, 3, seed=1)), {}),
        "conv_transpose2d": lambda: ((t(2, 3, 4, 4), t(3, 4, 3, 3, seed=1)), {}),
        "adaptive_avg_pool1d": lambda: ((t(1, 3, 4), 2), {}),
        "avg_pool1d": lambda: ((t(1, 3, 4), 2), {}),
        "max_pool2d": lambda: ((t(1, 3, 4, 4), 2), {}),
        "conv3d": lambda: ((t(2, 3, 4, 4, 3), t(4, 3, 2, 2, 2, seed=1)), {}),
        "max_pool3d": lambda: ((t(1, 3, 4, 4, 4), 2), {}),
        "conv_transpose3d": lambda: ((t(2, 3, 3, 2, 3), t(3, 4, 2, 2, 2, seed=1)), {}),
        "pixel_shuffle": lambda: ((t(1, 8, 2, 3), 2), {}),
        "channel_shuffle": lambda: ((t(1, 4, 2, 3), 2), {}),
        "group_norm": lambda: ((t(2, 4, 3), 2), {}),
        "layer_norm": lambda: ((t(3, 4), (4,)), {}),
        "batch_norm": lambda: (
            (t(3, 4), None, None, t(4, seed=3), t(4, seed=4).abs() + 0.5, False, 0.1, 1e-5, False),
            {},
        ),
        "instance_norm": lambda: (
            (t(2, 3, 4), None, None, None, None, True, 0.1, 1e-5, False),
            {},
        ),
        "embedding": lambda: ((t(5, 4), t(3, kind="index:5")), {}),
        "dropout": lambda: ((t(3, 4), 0.5, True), {}),
        "threshold": lambda: ((t(3, 4), 0.1, 2.0), {}),
        "rrelu": lambda: ((t(3, 4),), {}),
    }
)
# the torch names added for issue 14's scripts (gpucore/ops/shorthands.py, trig.py, membership.py)
TEMPLATES.update(
    {
        "addmv": lambda: ((t(3), t(3, 4, seed=1), t(4, seed=2)), {}),
        "concatenate": lambda: (([t(3, 4), t(2, 4, seed=1)],), {}),
        "vdot": lambda: ((t(4), t(4, seed=1)), {}),
        "addr": lambda: ((t(3, 4), t(3, seed=1), t(4, seed=2)), {}),
        "select": lambda: ((t(3, 4), 1, 2), {}),
        "take": lambda: ((t(3, 4), t(5, kind="index:12")), {}),
        "tensor_split": lambda: ((t(3, 4), 2, 1), {}),
        "matrix_power": lambda: ((t(3, 3), 2), {}),
        "swapdims": lambda: ((t(3, 4), 0, 1), {}),
        "moveaxis": lambda: ((t(2, 3, 4), 0, 2), {}),
        "isin": lambda: ((t(3, 4), t(5, seed=1)), {}),
        "index_put": lambda: ((t(3, 4), (t(2, kind="index:3"),), t(4, seed=1)), {}),
        "acosh": lambda: ((t(3, 4).abs() + 1.0,), {}),
    }
)
TEMPLATES["bernoulli"] = lambda: ((t(3, 4).abs() / 2,), {})
TEMPLATES["is_nonzero"] = lambda: ((t(1),), {})
for _name in ("det", "slogdet", "logdet", "inverse", "matrix_exp"):
    TEMPLATES[_name] = lambda: ((t(4, 4) + 3 * gc.eye(4),), {})
TEMPLATES["cholesky"] = lambda: ((t(4, 4) @ t(4, 4).mT + 4 * gc.eye(4),), {})
for _name in ("vstack", "row_stack", "hstack", "column_stack", "dstack"):
    TEMPLATES[_name] = lambda: (([t(3, 4), t(3, 4, seed=1)],), {})

# issue 14's remaining torch names (gpucore/ops/numeric.py, histograms.py, windows.py, ...)
TEMPLATES.update(
    {
        "gcd": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
        "lcm": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
        "histogramdd": lambda: ((t(6, 2), 3), {}),
        "hann_window": lambda: ((5,), {}),
        "hamming_window": lambda: ((5,), {}),
        "blackman_window": lambda: ((5,), {}),
        "bartlett_window": lambda: ((5,), {}),
        "kaiser_window": lambda: ((5,), {}),
        "triangular_solve": lambda: ((t(4, 2), t(4, 4) + 3 * gc.eye(4)), {}),
        "cholesky_solve": lambda: ((t(4, 2), t(4, 4).tril() + 3 * gc.eye(4)), {}),
        "cholesky_inverse": lambda: ((t(4, 4).tril() + 3 * gc.eye(4),), {}),
        "vander": lambda: ((t(4),), {}),
        "chain_matmul": lambda: ((t(3, 4), t(4, 5, seed=1)), {}),
        "put": lambda: ((t(3, 4), t(2, kind="index:12"), t(2, seed=1)), {}),
        "index_reduce": lambda: ((t(3, 4), 1, t(2, kind="index:4"), t(3, 2, seed=1), "amax"), {}),
        "select_scatter": lambda: ((t(3, 4), t(4, seed=1), 0, 1), {}),
        "slice_scatter": lambda: ((t(3, 4), t(1, 4, seed=1), 0, 1, 2), {}),
        "diagonal_scatter": lambda: ((t(3, 4), t(3, seed=1)), {}),
        "as_strided": lambda: ((t(3, 4), (2, 2), (1, 2)), {}),
        "as_strided_copy": lambda: ((t(3, 4), (2, 2), (1, 2)), {}),
        "as_strided_scatter": lambda: ((t(3, 4), t(2, 2, seed=1), (2, 2), (1, 2)), {}),
        "unravel_index": lambda: ((t(5, kind="index:12"), (3, 4)), {}),
        "expand_copy": lambda: ((t(1, 4), (3, 4)), {}),
        "narrow_copy": lambda: ((t(3, 4), 1, 1, 2), {}),
        "permute_copy": lambda: ((t(3, 4), (1, 0)), {}),
        "select_copy": lambda: ((t(3, 4), 1, 2), {}),
        "split_copy": lambda: ((t(3, 4), 2, 1), {}),
        "split_with_sizes_copy": lambda: ((t(3, 4), [1, 3], 1), {}),
        "transpose_copy": lambda: ((t(3, 4), 0, 1), {}),
        "unfold_copy": lambda: ((t(3, 4), 1, 2, 1), {}),
        "unsqueeze_copy": lambda: ((t(3, 4), 1), {}),
        "view_copy": lambda: ((t(3, 4), (4, 3)), {}),
        "addmv_": lambda: ((t(3), t(3, 4, seed=1), t(4, seed=2)), {}),
        "fill_": lambda: ((t(3, 4), 0.5), {}),
        "gcd_": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
        "lcm_": lambda: ((t(3, 4, kind="index:99"), t(3, 4, kind="index:99", seed=1)), {}),
        "index_put_": lambda: ((t(3, 4), (t(2, kind="index:3"),), t(4, seed=1)), {}),
        "threshold_": lambda: ((t(3, 4), 0.1, 2.0), {}),
        "acosh_": lambda: ((t(3, 4).abs() + 1.0,), {}),
        "clamp_": lambda: ((t(3, 4), -0.5, 0.5), {}),
        "clip_": lambda: ((t(3, 4), -0.5, 0.5), {}),
        "clamp_max_": lambda: ((t(3, 4), 0.5), {}),
        "clamp_min_": lambda: ((t(3, 4), -0.5), {}),
        "ldexp_": lambda: ((t(3, 4), t(3, 4, seed=1)), {}),
        "xlogy_": lambda: ((t(3, 4), t(3, 4, seed=1).abs() + 0.1), {}),
        "resize_as_": lambda: ((t(3, 4), t(2, 6, seed=1)), {}),
        "renorm": lambda: ((t(3, 4), 2, 0, 1.0), {}),
        "poisson": lambda: ((t(3, 4).abs(),), {}),
        "binomial": lambda: ((t(3, 4).abs().round(), t(3, 4, seed=1).abs() / 2), {}),
        "arccosh_": lambda: ((t(3, 4).abs() + 1.0,), {}),
    }
)


# the names of ops/README.md's "Not yet" list (toplevel.py, householder.py, lowrank.py)
TEMPLATES.update(
    {
        "conv_tbc": lambda: ((t(5, 2, 3), t(2, 3, 4, seed=1), t(4, seed=2)), {}),
        "embedding_renorm_": lambda: ((t(5, 4), t(3, kind="index:5"), 1.0, 2.0), {}),
        "feature_dropout": lambda: ((t(3, 4, 2), 0.5, True), {}),
        "feature_dropout_": lambda: ((t(3, 4, 2), 0.5, True), {}),
        "native_channel_shuffle": lambda: ((t(1, 4, 2, 3), 2), {}),
        "pixel_unshuffle": lambda: ((t(1, 2, 4, 6), 2), {}),
        "rms_norm": lambda: ((t(3, 4), (4,)), {}),
        "orgqr": lambda: ((t(4, 3), t(2, seed=1)), {}),
        "svd_lowrank": lambda: ((t(5, 4), 2), {}),
        "pca_lowrank": lambda: ((t(5, 4), 2), {}),
        "bilinear": lambda: ((t(5, 3), t(5, 4, seed=1), t(2, 3, 4, seed=2)), {}),
        "prelu": lambda: ((t(2, 3, 4), t(3, seed=1).abs()), {}),
        "ormqr": lambda: ((t(4, 3), t(2, seed=1), t(4, 2, seed=2)), {}),
        "nonzero_static": lambda: ((t(3, 4),), {"size": 5}),
        "unsafe_chunk": lambda: ((t(3, 4), 2, 1), {}),
        "unsafe_split": lambda: ((t(3, 4), 2, 1), {}),
        "unsafe_split_with_sizes": lambda: ((t(3, 4), [1, 3], 1), {}),
        "lu": lambda: ((t(4, 4) + 3 * gc.eye(4),), {}),
        "lu_unpack": lambda: (gc.linalg.lu_factor(t(4, 3)), {}),
        "lu_solve": lambda: ((t(4, 2), *gc.linalg.lu_factor(t(4, 4) + 3 * gc.eye(4))), {}),
        "convolution": lambda: (
            (t(2, 3, 5), t(4, 3, 2, seed=1), None, (1,), (0,), (1,), False, (0,), 1),
            {},
        ),
        "lobpcg": lambda: ((t(6, 6) @ t(6, 6).mT + 6 * gc.eye(6),), {}),
    }
)


def generic_call(fn):
    """Every required positional parameter a float32 tensor of shape (3, 4), distinct values."""
    args = []
    for p in inspect.signature(fn).parameters.values():
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(t(3, 4, seed=len(args)))
    return tuple(args), {}


def valid_call(name, fn):
    return TEMPLATES[name]() if name in TEMPLATES else generic_call(fn)


# ----------------------------------------------------------------------------- slots
def slots(args, kwargs) -> list:
    """Where the Tensors of a call are: ("a", i) for args[i], ("a", i, j) for args[i][j],
    ("k", name) for a keyword."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, gc.Tensor):
            out.append(("a", i))
        elif isinstance(a, (list, tuple)):
            out += [("a", i, j) for j, e in enumerate(a) if isinstance(e, gc.Tensor)]
    out += [("k", k) for k, v in kwargs.items() if isinstance(v, gc.Tensor)]
    return out


def get(args, kwargs, slot):
    if slot[0] == "k":
        return kwargs[slot[1]]
    return args[slot[1]] if len(slot) == 2 else args[slot[1]][slot[2]]


def put(args, kwargs, slot, value):
    """A copy of (args, kwargs) with ``value`` at ``slot``."""
    args, kwargs = list(args), dict(kwargs)
    if slot[0] == "k":
        kwargs[slot[1]] = value
    elif len(slot) == 2:
        args[slot[1]] = value
    else:
        seq = list(args[slot[1]])
        seq[slot[2]] = value
        args[slot[1]] = type(args[slot[1]])(seq)
    return tuple(args), kwargs


def map_slots(args, kwargs, f):
    for s in slots(args, kwargs):
        args, kwargs = put(args, kwargs, s, f(get(args, kwargs, s)))
    return args, kwargs


def noncontiguous(x: gc.Tensor) -> gc.Tensor:
    """The same values as a non-contiguous view (transposed, or every other element)."""
    a = x.numpy()
    if a.ndim >= 2:
        return gc.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
    if a.ndim == 1 and a.size:
        return gc.tensor(np.repeat(a, 2))[::2]
    return x


def with_dim_zero(x: gc.Tensor, last: bool) -> gc.Tensor:
    if x.ndim == 0:
        return x
    shape = list(x.shape)
    shape[-1 if last else 0] = 0
    return gc.tensor(np.zeros(shape, x.numpy().dtype))


_DTYPES = (gc.bool, gc.uint8, gc.int64, gc.float64)


class Case(NamedTuple):
    label: str
    kind: str  # valid, type, shape, dtype, empty, noncontig, dim
    args: tuple
    kwargs: dict
    strict: bool = False  # a type variant that must raise whatever PyTorch does


def tensor_param(fn, slot) -> bool:
    """Whether the parameter at ``slot`` is annotated ``Tensor`` (gpucore/ops/api.py checks
    those: no number or array may stand in for it)."""
    params = inspect.signature(fn).parameters
    if slot[0] == "k":
        p = params[slot[1]]
    elif len(slot) == 3:
        return False  # an element of a list argument (cat's tensors)
    else:  # past the last one: the *args it belongs to
        p = list(params.values())[min(slot[1], len(params) - 1)]
    return p.annotation in ("Tensor", gc.Tensor)


def variants(fn, args, kwargs):
    """Every bad variant (a Case) of a valid call."""
    sl = slots(args, kwargs)
    for s in sl:
        x = get(args, kwargs, s)
        for bad in (None, "abc", 3.0, x.numpy()):
            strict = bad is None or isinstance(bad, str) or tensor_param(fn, s)
            label = f"type {s} {type(bad).__name__}"
            yield Case(label, "type", *put(args, kwargs, s, bad), strict)
        for shape in ((), (2, 5, 6)):
            yield Case(f"shape {s} {shape}", "shape", *put(args, kwargs, s, make(shape, seed=3)))
        for dt in _DTYPES:
            if dt is not x.dtype:
                yield Case(f"dtype {s} {dt}", "dtype", *put(args, kwargs, s, x.to(dt)))
    if sl:
        for last in (False, True):
            empty = map_slots(args, kwargs, lambda x, last=last: with_dim_zero(x, last))
            yield Case(f"empty {'last' if last else 'first'} dim", "empty", *empty)
        yield Case("noncontig", "noncontig", *map_slots(args, kwargs, noncontiguous))
    sig = inspect.signature(fn)
    for name in DIM_PARAMS:
        if name in sig.parameters:
            for bad in (7, -9, "x", 1.5):
                ba = sig.bind_partial(*args, **kwargs)
                ba.arguments[name] = bad
                yield Case(f"dim {name}={bad!r}", "dim", ba.args, ba.kwargs)


# ----------------------------------------------------------------------------- gpucore's call
# the exceptions a bad call may raise (with a message naming the function)
ALLOWED = (gc.GpucoreError, TypeError, ValueError, IndexError)


def our_call(fn, case: Case, names, quiet: bool = True) -> tuple:
    """``case`` called on gpucore's ``fn`` (its warnings ignored when ``quiet``): (result, error,
    problem). error: the ALLOWED exception it raised, else None; problem: what is wrong, else None
    (another kind of exception, a numpy error, AttributeError or KeyError, a message naming none
    of ``names``, or a ``strict`` case accepted)."""
    try:
        with warnings.catch_warnings() if quiet else contextlib.nullcontext():
            if quiet:
                warnings.simplefilter("ignore")
            got, err = fn(*case.args, **case.kwargs), None
    except ALLOWED as e:
        got, err = None, e
    except Exception as e:  # noqa: BLE001 - the point: no other kind may escape
        return None, None, f"raised {type(e).__module__}.{type(e).__name__}: {e}"
    if err is not None:
        kind = f"{type(err).__module__}.{type(err).__name__}"
        if kind.startswith("numpy") or isinstance(err, (AttributeError, KeyError)):
            return got, err, f"raised {kind}: {err}"
        if not any(n in str(err) for n in names):
            return got, err, f"{type(err).__name__} does not name the function: {err}"
    elif case.strict:
        return got, err, "accepted a non-Tensor where a Tensor is required"
    return got, err, None


# ----------------------------------------------------------------------------- PyTorch reference
def to_torch(v):
    """A call argument as PyTorch takes it: Tensors (also inside lists) become torch tensors."""
    import torch  # optional: only the comparisons with PyTorch need it

    if isinstance(v, gc.Tensor):
        return torch.from_numpy(np.array(v.numpy(), copy=True))
    if isinstance(v, (list, tuple)) and any(isinstance(e, gc.Tensor) for e in v):
        return type(v)(to_torch(e) for e in v)
    return v


def torch_call(fn, case: Case):
    """(result, None) or (None, exception) of ``case`` called on the PyTorch function ``fn``."""
    try:
        args = [to_torch(a) for a in case.args]
        kwargs = {k: to_torch(v) for k, v in case.kwargs.items()}
        with warnings.catch_warnings():  # deprecations, zero degrees of freedom: not ours
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - any refusal counts
        return None, e


def _flat(r):
    return [x for e in r for x in _flat(e)] if isinstance(r, (tuple, list)) else [r]


def _dt(x) -> str:
    return str(x.dtype).split(".")[-1]


def mismatch(got, want, atol, rtol, values: bool = True) -> str | None:
    """Why gpucore's result differs from PyTorch's (outputs, shapes, dtypes and, with
    ``values``, the values), or None."""
    got, want = _flat(got), _flat(want)
    if len(got) != len(want):
        return f"{len(got)} outputs, torch {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, (bool, int, float)):  # equal, allclose, is_nonzero: Python values
            if type(g) is not type(w) or (values and g != w):
                return f"output {k}: {g!r}, torch {w!r}"
            continue
        if not isinstance(g, gc.Tensor):
            return f"output {k} is a {type(g).__name__}, not a Tensor"
        if tuple(g.shape) != tuple(w.shape) or _dt(g) != _dt(w):
            return f"output {k}: {tuple(g.shape)} {_dt(g)}, torch {tuple(w.shape)} {_dt(w)}"
        if not values:
            continue
        a, b = g.numpy().astype(np.float64), w.double().numpy()
        if not np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True):
            return f"output {k}: values differ (max |diff| {np.nanmax(np.abs(a - b))})"
    return None
