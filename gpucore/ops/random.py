"""Random sampling: rand, randn, randint (+ ``_like``), multinomial, randperm, the in-place fills
and dropout's mask.

Sampling is registry ops like any other: each op is a pure function of its attributes (shape,
the Philox stream position ``seed``/``offset``, the distribution's parameters), so the kernels
write the same values wherever they run; the public functions take the stream position from a
``Generator`` and run the op on the device the caller asked for (``apply_on``), not on the one
the dispatch policy would pick. Values (cpu/philox.c, shaders/random.comp):

- ``uniform``: ``low + (high - low) * ((word >> 8) * 2**-24)`` in float32;
- ``normal``: Box-Muller over word pairs in float32 (the Vulkan shader matches the host's libm to
  an ulp or so of its intermediates, see backends/vulkan/kernels/random.py);
- ``dropout_mask``: ``1 / (1 - p)`` where the uniform sample is ``>= p``, else 0 (1 when p == 1);
- ``rand_bits``: ``(word >> (32 - bits)) * 2**-bits``, the exact p-bit fractions rand draws for
  float16 / bfloat16;
- ``randint``: ``low + (w[2i] | w[2i+1] << 32) % (high - low)`` as int64;
- ``multinomial``: row r draws uniform ``u`` (as ``uniform``, one word per sample with
  replacement, one per category without); with replacement sample j is the first category whose
  normalised cumulative probability exceeds ``u[j]``; without, the ``num_samples`` smallest
  ``-log(u[c]) / p[c]`` (exponential races: the Gumbel-top-k draw of sequential sampling);
- ``randperm``: the stable argsort of n 64-bit keys ``w[2i] | w[2i+1] << 32``.

kernels: backends/cpu/kernels/random.py (cpu/philox.c), backends/vulkan/kernels/random.py
(shaders/random.comp).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dispatch
from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..creation import _check_device, _finish, _shape_arg, _sizes, _store, _to_backend
from ..errors import DTypeError, ShapeError
from ..graphs import state as _graph_state
from ..random import default_generator
from ..tensor import Tensor
from .api import public
from .registry import apply_on, defop
from .samples import Sample

# ----------------------------------------------------------------------------- reference
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)


def np_philox(seed: int, offset: int, n: int) -> np.ndarray:
    """Words [0, n) of the Philox4x32-10 stream at (seed, block offset), in plain numpy: the
    samples' independent reference (Salmon et al., Random123)."""
    blocks = -(-n // 4)
    ctr = (np.arange(blocks, dtype=np.uint64) + np.uint64(offset % 2**64)) & np.uint64(2**64 - 1)
    c = [ctr & _MASK32, ctr >> np.uint64(32), np.zeros_like(ctr), np.zeros_like(ctr)]
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
        p0, p1 = np.uint64(_M0) * c[0], np.uint64(_M1) * c[2]
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0),
            p1 & _MASK32,
            (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
            p0 & _MASK32,
        ]
    return np.stack(c, axis=1).reshape(-1)[:n].astype(np.uint32)


def _np_uniform(shape, seed, offset, low, high):
    u = (np_philox(seed, offset, math.prod(shape)) >> 8).astype(np.float32) * np.float32(2**-24)
    return (np.float32(low) + (np.float32(high) - np.float32(low)) * u).reshape(shape)


def _np_normal(shape, seed, offset, mean, std):
    n = math.prod(shape)
    w = np_philox(seed, offset, 2 * -(-n // 2)).astype(np.float64)
    u1 = (np.floor(w[0::2] / 256) + 1) * 2.0**-24
    u2 = np.floor(w[1::2] / 256) * 2.0**-24
    r, th = np.sqrt(-2 * np.log(u1)), 2 * np.pi * u2
    z = np.stack([r * np.cos(th), r * np.sin(th)], axis=1).reshape(-1)[:n]
    return (mean + std * z).reshape(shape)


def _np_dropout_mask(shape, seed, offset, p):
    u = _np_uniform(shape, seed, offset, 0.0, 1.0)
    return np.where(u >= p, np.float32(1 / (1 - p)) if p < 1 else np.float32(1), np.float32(0))


def _np_rand_bits(shape, seed, offset, bits):
    w = np_philox(seed, offset, math.prod(shape)) >> np.uint32(32 - bits)
    return (w.astype(np.float64) * 2.0**-bits).reshape(shape)


def _np_randint(shape, seed, offset, low, high):
    w = np_philox(seed, offset, 2 * math.prod(shape)).astype(np.uint64)
    w64 = w[0::2] | (w[1::2] << np.uint64(32))
    return (np.array([low + int(v) % (high - low) for v in w64], np.int64)).reshape(shape)


def _stream_samples(ref, **attrs):
    """Small, odd-sized and large draws at stream positions that cross block and 2**32
    boundaries."""
    return lambda: [
        Sample(shape=(3, 5), seed=7, offset=0, ref=ref, **attrs),
        Sample(shape=(7,), seed=2**40 + 3, offset=2**32 - 1, ref=ref, **attrs),
        Sample(shape=(4100,), seed=123, offset=10, ref=ref, **attrs),
        Sample(shape=(0, 3), seed=1, offset=0, ref=ref, **attrs),
    ]


# ----------------------------------------------------------------------------- ops
def _float32_of(shape, **_):
    return (tuple(shape), D.float32)


UNIFORM = defop(
    "uniform",
    infer=_float32_of,
    samples=_stream_samples(_np_uniform, low=-2.0, high=3.0, tol64=(0, 0)),
)
NORMAL = defop(
    "normal",
    infer=_float32_of,
    # float32 arithmetic against the float64 formula: a few float32 ulps
    samples=_stream_samples(
        _np_normal, mean=0.5, std=2.0, atol=2e-5, rtol=2e-5, tol64=(2e-5, 2e-5)
    ),
)
DROPOUT_MASK = defop(
    "dropout_mask",
    infer=_float32_of,
    samples=lambda: [
        s for p in (0.3, 1.0) for s in _stream_samples(_np_dropout_mask, p=p, tol64=(0, 0))()
    ],
)
RAND_BITS = defop(
    "rand_bits",
    infer=_float32_of,
    samples=lambda: [
        s for b in (8, 11) for s in _stream_samples(_np_rand_bits, bits=b, tol64=(0, 0))()
    ],
)
RANDINT = defop(
    "randint",
    infer=lambda shape, **_: (tuple(shape), D.int64),
    samples=lambda: [
        Sample(shape=(3, 5), seed=7, offset=0, low=-3, high=10, ref=_np_randint),
        Sample(shape=(4100,), seed=9, offset=2**32 - 1, low=0, high=2**40, ref=_np_randint),
    ],
)


def _np_multinomial(p, seed, offset, num_samples, replacement):
    """The samples' reference, in float64 over the float32 uniforms."""
    p2 = p.reshape(-1, p.shape[-1]).astype(np.float64)
    rows, k = p2.shape
    per = num_samples if replacement else k
    u = _np_uniform((rows, per), seed, offset, 0.0, 1.0).astype(np.float64)
    out = np.empty((rows, num_samples), np.int64)
    for r in range(rows):
        if replacement:
            cdf = np.cumsum(p2[r]) / p2[r].sum()
            out[r] = np.minimum(np.searchsorted(cdf, u[r], side="right"), k - 1)
        else:
            with np.errstate(divide="ignore"):
                keys = -np.log(u[r]) / p2[r]
            out[r] = np.argsort(keys, kind="stable")[:num_samples]
    return out.reshape(p.shape[:-1] + (num_samples,))


MULTINOMIAL = defop(
    "multinomial",
    infer=lambda p, num_samples, **_: (tuple(p.shape[:-1]) + (num_samples,), D.int64),
    samples=lambda: [
        Sample(
            np.array([0.1, 0.0, 0.5, 0.4]),
            seed=3,
            offset=0,
            num_samples=6,
            replacement=True,
            ref=_np_multinomial,
        ),
        Sample(
            np.random.default_rng(1).uniform(0, 1, (3, 7)),
            seed=2**40,
            offset=2**32 - 1,
            num_samples=4,
            replacement=False,
            ref=_np_multinomial,
        ),
        Sample(
            np.array([[0.0, 2.0, 1.0, 0.0, 1.0]]),
            seed=5,
            offset=7,
            num_samples=3,
            replacement=False,
            ref=_np_multinomial,
        ),
    ],
)


def _np_randperm(shape, seed, offset):
    n = shape[0]
    w = np_philox(seed, offset, 2 * n).astype(np.uint64)
    return np.argsort(w[0::2] | (w[1::2] << np.uint64(32)), kind="stable").astype(np.int64)


RANDPERM = defop(
    "randperm",
    infer=lambda shape, **_: (tuple(shape), D.int64),
    samples=lambda: [
        Sample(shape=(10,), seed=7, offset=0, ref=_np_randperm),
        Sample(shape=(1000,), seed=2**40 + 3, offset=2**32 - 1, ref=_np_randperm),
        Sample(shape=(0,), seed=1, offset=0, ref=_np_randperm),
    ],
)


# ----------------------------------------------------------------------------- sampling
def _backend(be):
    return dispatch.CPU if be is None else be


def _sample(op, shape, be, generator, words: int, **attrs) -> Tensor:
    """Run sampling op ``op`` on ``be`` (None: the host), taking ``words`` stream words. Inside
    a captured graph the device kernel reads the generator's position from the graph's device
    buffer, so that each replay draws fresh numbers (gpucore/graphs/rng.py)."""
    gen = generator or default_generator
    graph = _graph_state.CAPTURING[0]
    if graph is not None and be is not None:
        with graph._rng.capture(gen, be):
            seed, offset = gen.take(words)
            return apply_on(be, op, shape=tuple(shape), seed=seed, offset=offset, **attrs)
    seed, offset = gen.take(words)
    return apply_on(_backend(be), op, shape=tuple(shape), seed=seed, offset=offset, **attrs)


def _uniform_f32(shape, low: float, high: float, generator=None, be=None) -> np.ndarray:
    """float32 uniform samples as an array on ``be`` (None: the host); bit for bit the same on
    every backend."""
    n = math.prod(shape)
    t = _sample(UNIFORM, shape, be, generator, n, low=float(low), high=float(high))
    return t._data


def _normal_f32(shape, mean: float, std: float, generator=None, be=None) -> np.ndarray:
    """float32 normal samples as an array on ``be`` (None: the host)."""
    n = math.prod(shape)
    t = _sample(NORMAL, shape, be, generator, 2 * ((n + 1) // 2), mean=float(mean), std=float(std))
    return t._data


def _dropout_mask(like: Tensor, p: float, generator=None) -> Tensor:
    """``(rand(like.shape) >= p).to(like.dtype) * (1 / (1 - p))`` (no scaling when p == 1) on
    like's device, drawing from the generator as that expression does: one kernel for float32."""
    if like.dtype is not D.float32:
        with no_grad():
            mask = rand(tuple(like.shape), generator=generator, device=like.device) >= p
            mask = mask.to(like.dtype)
            return mask * (1.0 / (1.0 - p)) if p < 1.0 else mask
    shape = tuple(like.shape)
    return _sample(DROPOUT_MASK, shape, like._dev, generator, math.prod(shape), p=float(p))


def _random_device(device):
    """None for the host, else the Vulkan backend (sampling runs on both)."""
    return _check_device(device, "random")


# Precision (significand bits) of the low-precision floats: rand draws exactly p-bit fractions
# for them, so values stay exact and below 1 (rounding a 24-bit fraction could give 1.0).
_RAND_BITS = {D.float16: 11, D.bfloat16: 8}


def _random_result(t: Tensor, dtype, requires_grad: bool, be=None) -> Tensor:
    """A float32 sample tensor as a leaf of ``dtype`` on ``be``."""
    if dtype is not D.float32:
        t = _finish(_store(t._host(), dtype), dtype, False)  # converted on the host
    return _to_backend(t, be, requires_grad)


def _random_dtype(dtype):
    dt = D.as_dtype(dtype) if dtype is not None else D.default_float()
    if not dt.is_floating_point:
        raise DTypeError(
            f"random floats need a floating dtype, got {dt}; use randint() for integers"
        )
    return dt


@public("rand", method=False)
def rand(
    *args, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Uniform samples in [0, 1) from the Philox stream.

    float32 (and float64) values are ``(word >> 8) * 2**-24``; float16 and bfloat16 values are
    ``(word >> (32 - p)) * 2**-p`` with p their precision (11, 8), one word per element.
    """
    be = _random_device(device)
    shape = _sizes(args, size, "rand")
    dt = _random_dtype(dtype)
    bits = _RAND_BITS.get(dt)
    n = math.prod(shape)
    if bits is None:
        t = _sample(UNIFORM, shape, be, generator, n, low=0.0, high=1.0)
    else:
        t = _sample(RAND_BITS, shape, None, generator, n, bits=bits)
    return _random_result(t, dt, requires_grad, be)


@public("randn", method=False)
def randn(
    *args, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Standard normal samples (Box-Muller over the Philox stream, computed in float32)."""
    be = _random_device(device)
    shape = _sizes(args, size, "randn")
    dt = _random_dtype(dtype)
    n = math.prod(shape)
    t = _sample(NORMAL, shape, be, generator, 2 * ((n + 1) // 2), mean=0.0, std=1.0)
    return _random_result(t, dt, requires_grad, be)


def _int_bound(v, what: str) -> int:
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"randint(): {what} must be an int, got {v!r}")
    return int(v)


@public("randint", method=False)
def randint(
    low, high=None, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """Integers uniform in [low, high) (int64 by default): ``randint(high, size)`` or
    ``randint(low, high, size)``.

    Element i is ``low + (w[2i] | w[2i+1] << 32) % (high - low)`` over the Philox words w.
    """
    be = _check_device(device, "randint")
    if size is None and isinstance(high, (tuple, list)):
        high, size = None, high  # randint(high, size), PyTorch's two-argument form
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint(): missing the size argument, e.g. randint(0, 10, (3, 4))")
    low, high = _int_bound(low, "low"), _int_bound(high, "high")
    if high <= low:
        raise ValueError(f"randint(): empty range [{low}, {high}); high must be > low")
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    if not dt.is_floating_point:
        info = (0, 1) if dt is D.bool_ else (int(np.iinfo(dt.np).min), int(np.iinfo(dt.np).max))
        if low < info[0] or high - 1 > info[1]:
            raise ValueError(
                f"randint(): range [{low}, {high}) does not fit dtype {dt} "
                f"(values in [{info[0]}, {info[1]}])"
            )
    elif low < -(2**63) or high - 1 > 2**63 - 1:
        raise ValueError(f"randint(): range [{low}, {high}) exceeds int64")
    shape = _shape_arg((size,) if isinstance(size, (tuple, list)) else (size,), "randint")
    t = _sample(RANDINT, shape, None, generator, 2 * math.prod(shape), low=low, high=high)
    return _finish(_store(t._data, dt), dt, requires_grad, be)


@public("rand_like", method=False)
def rand_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """rand of t's shape, on t's device unless ``device`` says otherwise (as PyTorch)."""
    return rand(
        t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad
    )


@public("randn_like", method=False)
def randn_like(t: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """randn of t's shape, on t's device unless ``device`` says otherwise (as PyTorch)."""
    return randn(
        t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad
    )


@public("randint_like", method=False)
def randint_like(t: Tensor, low, high=None, dtype=None, device=None) -> Tensor:
    """randint of t's shape and dtype, on t's device unless ``device`` says otherwise."""
    if high is None:
        low, high = 0, low
    return randint(low, high, t.shape, dtype=dtype or t.dtype, device=device or t.device)


@public("multinomial")
def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, *, generator=None
) -> Tensor:
    """int64 category indices drawn from the rows of ``input`` (non-negative weights, not
    necessarily summing to 1), as torch.multinomial: ``num_samples`` per row, each category at
    most once unless ``replacement``. Draws come from the Philox stream (``manual_seed`` makes
    them reproducible)."""
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial(): input must be 1-D or 2-D, got shape {tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"multinomial(): input must be a float tensor, got {input.dtype}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(f"multinomial(): num_samples must be an int, got {num_samples!r}")
    k = input.shape[-1]
    if num_samples <= 0:
        raise ValueError(f"multinomial(): num_samples must be positive, got {num_samples}")
    if k == 0:
        raise ShapeError("multinomial(): input has no categories (its last dim has size 0)")
    if not replacement and num_samples > k:
        raise ValueError(
            f"multinomial(): cannot sample {num_samples} > {k} categories without replacement"
        )
    p = input._host()
    if input.dtype is D.bfloat16:  # stored as uint16 bit patterns
        p = D.bf16_to_f32(p)
    p = np.asarray(p, np.float64).reshape(-1, k)
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError(
            "multinomial(): probability tensor contains either inf, nan or element < 0"
        )
    if (p.sum(axis=1) <= 0).any():
        raise ValueError("multinomial(): invalid distribution (sum of probabilities <= 0)")
    if not replacement and ((p > 0).sum(axis=1) < num_samples).any():
        raise ValueError(
            f"multinomial(): cannot draw {num_samples} samples without replacement from a row "
            "with fewer non-zero probabilities"
        )
    rows = p.shape[0]
    seed, offset = (generator or default_generator).take(rows * (num_samples if replacement else k))
    out = apply_on(
        dispatch.CPU,
        MULTINOMIAL,
        input,
        seed=seed,
        offset=offset,
        num_samples=int(num_samples),
        replacement=bool(replacement),
    )
    return _to_backend(out, input._dev, False)


@public("randperm", method=False)
def randperm(
    n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False, **_ignored
) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 by default), as torch.randperm: the stable
    argsort of n 64-bit Philox draws (``manual_seed`` makes it reproducible)."""
    be = _check_device(device, "randperm")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm(): n must be a non-negative int, got {n!r}")
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    if not dt.is_floating_point and dt is not D.bool_ and n > 0:
        if n - 1 > np.iinfo(dt.np).max:
            raise ValueError(f"randperm(): n {n} does not fit dtype {dt}")
    t = _sample(RANDPERM, (int(n),), None, generator, 2 * int(n))
    return _finish(_store(t._data, dt), dt, requires_grad, be)
