"""Kernels of gpucore/ops/numeric.py: gcd, lcm, frexp and nextafter by numpy (exact; numpy
broadcasts the inputs into ``out``). bfloat16 tensors are uint16 bit patterns here: frexp reads
them as float32 (whose mantissa they fit), nextafter steps their bits."""

from __future__ import annotations

import numpy as np

from ....dtypes import bf16_to_f32, f32_to_bf16
from .common import kernel


@kernel("gcd")
def _gcd(out, a, b):
    np.gcd(a, b, out=out, casting="unsafe")


@kernel("lcm")
def _lcm(out, a, b):
    with np.errstate(all="ignore"):
        np.lcm(a, b, out=out, casting="unsafe")


@kernel("frexp")
def _frexp(outs, x):
    m, e = outs
    if m.dtype == np.uint16:  # bfloat16: exact in float32, and its mantissa fits bfloat16
        mf, ef = np.frexp(bf16_to_f32(x).reshape(x.shape))
        m[...] = f32_to_bf16(mf.astype(np.float32)).reshape(m.shape)
    else:
        mf, ef = np.frexp(x)
        m[...] = mf
    e[...] = ef


def _bf16_bits_nextafter(a, b):
    """nextafter on bfloat16 bit patterns (uint16 arrays of one shape)."""
    fa, fb = bf16_to_f32(a).reshape(a.shape), bf16_to_f32(b).reshape(b.shape)
    bits = a.astype(np.int32)
    up = (fa < fb) == (fa > 0)  # magnitude grows when moving away from zero
    res = np.where(fa == 0, np.where(fb < 0, 0x8001, 0x0001), np.where(up, bits + 1, bits - 1))
    res = np.where(fa == fb, b, res)
    return np.where(np.isnan(fa) | np.isnan(fb), 0x7FC0, res).astype(np.uint16)


@kernel("nextafter")
def _nextafter(out, a, b, fmt=None):
    # float16 / bfloat16 arrive as float32 (exact): step in their own format (fmt), then widen
    if fmt == "float16":
        with np.errstate(over="ignore"):  # 65504 toward inf is inf, as PyTorch
            r = np.nextafter(np.asarray(a, np.float16), np.asarray(b, np.float16))
            np.copyto(out, np.broadcast_to(r, out.shape), casting="unsafe")
    elif fmt == "bfloat16":
        a, b = np.broadcast_arrays(a, b)
        bits = _bf16_bits_nextafter(
            f32_to_bf16(a).reshape(a.shape), f32_to_bf16(b).reshape(b.shape)
        )
        np.copyto(out, bf16_to_f32(bits).reshape(out.shape))
    else:
        np.nextafter(a, b, out=out)
