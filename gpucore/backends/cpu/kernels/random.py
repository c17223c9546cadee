"""CPU kernels of the random sampling ops (gpucore/ops/random.py): the Philox4x32-10 streams of
cpu/philox.c, written into ``out``."""

from __future__ import annotations

import numpy as np

from .... import _cpu
from .common import kernel


@kernel("uniform")
def _uniform(out, *, shape, seed, offset, low, high):
    _cpu.uniform(seed, offset, out.reshape(-1), float(low), float(high))


@kernel("normal")
def _normal(out, *, shape, seed, offset, mean, std):
    _cpu.normal(seed, offset, out.reshape(-1), float(mean), float(std))


@kernel("dropout_mask")
def _dropout_mask(out, *, shape, seed, offset, p):
    flat = out.reshape(-1)
    _cpu.uniform(seed, offset, flat, 0.0, 1.0)
    # (u >= p) as 0/1 times the float32 scale: the values rand(...) >= p then * scale give
    scale = np.float32(1.0 / (1.0 - p)) if p < 1.0 else np.float32(1.0)
    np.multiply(flat >= np.float32(p), scale, out=flat, dtype=np.float32)


def _words(seed, offset, n) -> np.ndarray:
    words = np.empty(n, np.uint32)
    _cpu.philox(seed, offset, words)
    return words


@kernel("rand_bits")
def _rand_bits(out, *, shape, seed, offset, bits):
    words = _words(seed, offset, out.size)
    vals = (words >> np.uint32(32 - bits)).astype(np.float32) * np.float32(2.0**-bits)
    np.copyto(out.reshape(-1), vals)


@kernel("randint")
def _randint(out, *, shape, seed, offset, low, high):
    n = out.size
    words = _words(seed, offset, 2 * n)
    w64 = words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))
    span = high - low
    r = w64 if span == 2**64 else w64 % np.uint64(span)
    # low + r lies in int64 range; two's-complement wraparound of the cast makes the sum exact.
    np.copyto(out.reshape(-1), r.view(np.int64) + np.int64(low))


@kernel("multinomial")
def _multinomial(out, p, *, seed, offset, num_samples, replacement):
    k = p.shape[-1]
    p2 = p.reshape(-1, k).astype(np.float64)
    rows = p2.shape[0]
    per = num_samples if replacement else k
    u = np.empty(rows * per, np.float32)
    _cpu.uniform(seed, offset, u, 0.0, 1.0)
    u = u.reshape(rows, per).astype(np.float64)
    o2 = out.reshape(rows, num_samples)
    if replacement:
        # one searchsorted for all rows: row r's normalised cdf (in [0, 1]) shifted by r
        cdf = np.cumsum(p2, axis=1)
        cdf /= cdf[:, -1:]
        shift = np.arange(rows, dtype=np.float64)[:, None]
        at = np.searchsorted((cdf + shift).ravel(), (u + shift).ravel(), side="right")
        at = at.reshape(rows, num_samples) - np.arange(rows)[:, None] * k
        np.copyto(o2, np.minimum(at, k - 1))
        return
    with np.errstate(divide="ignore"):
        keys = -np.log(u) / p2  # exponential races; zero weights never win (inf keys)
    if num_samples < k:  # the num_samples smallest keys, then in order
        keys_part = np.argpartition(keys, num_samples - 1, axis=1)[:, :num_samples]
        order = np.argsort(np.take_along_axis(keys, keys_part, 1), axis=1, kind="stable")
        np.copyto(o2, np.take_along_axis(keys_part, order, 1))
    else:
        np.copyto(o2, np.argsort(keys, axis=1, kind="stable"))


@kernel("randperm")
def _randperm(out, *, shape, seed, offset):
    n = out.size
    words = _words(seed, offset, 2 * n)
    keys = words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))
    np.copyto(out, np.argsort(keys, kind="stable"))
