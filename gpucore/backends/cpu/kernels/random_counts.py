"""Kernels of gpucore/ops/random_counts.py: poisson, binomial and standard_gamma, drawn by numpy
from its Philox bit generator keyed by the op's (seed, offset) (``np_counts``).

numpy's rejection samplers consume an unbounded number of words, so a call cannot be given a
fixed slice of one shared counter stream (it could run into the next call's slice). Instead
each call's (seed, offset) is the 128-bit Philox *key* and the counter starts at 0: every call
has a stream of its own, and no two calls' streams can overlap."""

from __future__ import annotations

import numpy as np

from .common import kernel

_MASK64 = (1 << 64) - 1


def counts_rng(seed: int, offset: int) -> np.random.Generator:
    """numpy's generator of the call at (seed, offset): Philox keyed by both words, counter 0."""
    key = np.array([seed & _MASK64, offset & _MASK64], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key, counter=0))


def np_counts(kind: str, seed: int, offset: int, *params) -> np.ndarray:
    """The samples of (seed, offset) in float64: the kernels' definition and the ops' sample
    reference."""
    rng = counts_rng(seed, offset)
    if kind == "poisson":
        return rng.poisson(np.asarray(params[0], np.float64)).astype(np.float64)
    if kind == "standard_gamma":
        return rng.standard_gamma(np.asarray(params[0], np.float64)).astype(np.float64)
    count, prob = np.broadcast_arrays(*(np.asarray(p, np.float64) for p in params))
    trials = np.clip(np.nan_to_num(np.rint(count), nan=0.0, posinf=0.0), 0, None).astype(np.int64)
    return rng.binomial(trials, np.clip(prob, 0, 1)).astype(np.float64)


@kernel("poisson")
def _poisson(out, rate, seed, offset):
    np.copyto(out, np_counts("poisson", seed, offset, rate), casting="unsafe")


@kernel("binomial")
def _binomial(out, count, prob, seed, offset):
    np.copyto(out, np_counts("binomial", seed, offset, count, prob), casting="unsafe")


@kernel("standard_gamma")
def _standard_gamma(out, concentration, seed, offset):
    np.copyto(out, np_counts("standard_gamma", seed, offset, concentration), casting="unsafe")
