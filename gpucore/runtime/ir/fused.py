"""The runtime's own ops: what the passes fuse primitive subgraphs into.

Each is declared once (``defruntime``) with a float64 numpy reference (``evaluate``: constant
folding and the tests), its lowering to the C extension's bindings (the compiled executor runs
the calls; the interpreted executor runs the same calls from Python, so both give the same
bits), and its memory properties.

- ``gemm(a, b[, bias]; trans_a, trans_b, alpha, act)``: ``act(alpha * op(a) @ op(b) + bias)``
  with batch dims broadcast as matmul's; ``op`` transposes the last two dims when its flag is
  set; ``act`` is None or relu, sigmoid, tanh, gelu, gelu_tanh (the GEMM epilogues);
- ``layer_norm(x[, weight][, bias]; n, eps, has_weight, has_bias)``: over the last n elements;
- ``attention(q, k, v[, mask]; scale, causal, heads_last)``: softmax(q k^T * scale + mask) v on
  [B, H, S, D] operands of any strides (a bool mask: True may attend); heads_last: the output
  is written as [B, S, H, D] (the heads merged back without a copy);
- ``conv2d_act(x, w[, bias][, res]; stride, padding, dilation, bias, res, act)``: conv2d
  (groups 1) ``[+ res]`` (a tensor of the output's shape) then ``act`` (None or relu), the
  epilogue fused into the convolution's tiles (``conv2d_forward``'s res / act: the bits of the
  separate add and relu);
- ``silu(x)``: x * sigmoid(x);
- ``strided(x; shape, strides, offset)``: a view of a contiguous x (strides and offset in
  elements): what a chain of view ops composes into.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _cpu
from ...backends.cpu.kernels.linalg import _gemm_operand
from . import packing
from .ops import defruntime, run_calls

ACTIVATIONS = {
    None: -1,
    "relu": _cpu.UNARY_RELU,
    "sigmoid": _cpu.UNARY_SIGMOID,
    "tanh": _cpu.UNARY_TANH,
    "gelu": _cpu.UNARY_GELU,
    "gelu_tanh": _cpu.UNARY_GELU_TANH,
}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def np_activation(name, y: np.ndarray) -> np.ndarray:
    """The epilogue activations in float64 numpy (the references)."""
    if name is None:
        return y
    if name == "relu":
        return np.maximum(y, 0)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-y))
    if name == "tanh":
        return np.tanh(y)
    if name == "gelu":
        return 0.5 * y * (1 + _erf(y / math.sqrt(2)))
    if name == "gelu_tanh":
        return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))
    raise ValueError(f"gemm: unknown activation {name!r}")


def _run_lowered(lower, fallback):
    def run(out, arrays, attrs, scratch, dtypes):
        calls = lower(out, arrays, attrs, scratch)
        if calls is None:
            calls = lower(out, [np.ascontiguousarray(a) for a in arrays], attrs, scratch)
        if calls is None:
            np.copyto(out, fallback(arrays, attrs, dtypes), casting="unsafe")
        else:
            run_calls(calls)

    return run


# ------------------------------------------------------------------------------------ gemm
def _gemm_eval(arrays, attrs, dtypes=None):
    a, b = (x.astype(np.float64) for x in arrays[:2])
    if attrs["trans_a"]:
        a = np.swapaxes(a, -1, -2)
    if attrs["trans_b"]:
        b = np.swapaxes(b, -1, -2)
    y = attrs["alpha"] * np.matmul(a, b)
    if len(arrays) > 2:
        y = y + arrays[2]
    return np_activation(attrs["act"], y).astype(arrays[0].dtype)


def _operand(x: np.ndarray, batch: tuple, trans: bool):
    """(flat buffer, transposed?, batch stride) of x broadcast to ``batch``, or None when the
    kernel could not read it in place."""
    full = np.broadcast_to(x, batch + x.shape[-2:])
    buf, t, stride = _gemm_operand(full)
    if not np.shares_memory(buf, x) and buf.size:
        return None
    return buf.reshape(-1), int(t) ^ int(trans), stride


# The GELUs of a GEMM of at least AFTER_ROWS rows run as one call over the result after it
# rather than in its epilogue (gemm.c: per row of each finished panel, many short calls); the
# same function elementwise, so the same bits. One AVX2 thread, bias in the tiles, ms per call
# (epilogue / after, exact GELU): 128x3072x768 10.62 / 10.43, 512x1024x256 6.27 / 6.09,
# 1024x3072x768 92.3 / 88.8; 32x2048x512 1.24 / 1.25 (tanh 1.25 / 1.32) stays in the epilogue.
_AFTER = ("gelu", "gelu_tanh")
AFTER_ROWS = 64


def _gemm_calls(out, arrays, attrs, scratch, pack=False):
    """gemm_ex's call; ``pack``: constant operands pre-packed (the compiled executor's lowering;
    the interpreted executor runs the unpacked call, which gives the same bits)."""
    a, b = arrays[:2]
    bias = arrays[2] if len(arrays) > 2 else None
    if a.dtype not in _FLOATS or b.dtype != a.dtype or out.dtype != a.dtype:
        return None
    if bias is not None and (bias.dtype != a.dtype or not bias.flags.c_contiguous):
        return None
    ta, tb = attrs["trans_a"], attrs["trans_b"]
    m, n = out.shape[-2:]
    k = a.shape[-1] if not ta else a.shape[-2]
    batch = out.shape[:-2]
    if b.ndim == 2 and not ta and a.flags.c_contiguous and batch:
        # [*, M, K] @ [K, N]: one GEMM of M * prod(batch) rows
        a, m, batch = a.reshape(-1, k), math.prod(batch) * m, ()
    pa = _operand(a, batch, ta)
    pb = _operand(b, batch, tb)
    if pa is None or pb is None:
        return None
    nb = math.prod(batch)
    opa, opb = pa[0], pb[0]
    if pack:
        sa, sb = (pa[2], pb[2]) if nb > 1 else (0, 0)
        opa = packing.gemm_operand(arrays[0], opa, "a", m, n, k, pa[1], sa, pb[1])
        opb = packing.gemm_operand(arrays[1], opb, "b", m, n, k, pb[1], sb, pb[1])
    act = ACTIVATIONS[attrs["act"]]
    after = attrs["act"] in _AFTER and m * max(nb, 1) >= AFTER_ROWS
    args = (opa, opb, out.reshape(-1), nb, m, n, k, pa[1], pb[1], float(attrs["alpha"]), 0.0)
    args += (pa[2], pb[2], m * n, bias, -1 if after else act)
    if after:
        return [("gemm_ex", args), ("unary", (act, out.reshape(-1), out.reshape(-1)))]
    return [("gemm_ex", args)]


def _gemm_lower(out, arrays, attrs, scratch):
    return _gemm_calls(out, arrays, attrs, scratch, pack=True)


def gemm_layout_calls(out, arrays, attrs, in_t: int, out_t: int) -> list:
    """The compiled call of a 2-D gemm (alpha 1, trans_a 0, C-contiguous constant b; planner/
    layout.py's chains) whose A operand's memory holds A^T (in_t) and / or that writes C^T into
    ``out``'s memory (out_t: ``C^T = op(B)^T op(A)^T``, the bias per row of C^T, act None or
    relu): the sums of ``_gemm_calls``' call, the same bits."""
    a, b = arrays[:2]
    bias = arrays[2] if len(arrays) > 2 else None
    m, n = out.shape
    tb = int(attrs["trans_b"])
    k = b.shape[1] if tb else b.shape[0]
    ta = int(in_t)
    af, bf, cf = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    act = ACTIVATIONS[attrs["act"]]
    if out_t:
        ta2, tb2 = 1 - tb, 1 - ta
        opa = packing.gemm_operand(arrays[1], bf, "a", n, m, k, ta2, 0, tb2)
        return [
            ("gemm_ex", (opa, af, cf, 1, n, m, k, ta2, tb2, 1.0, 0.0, 0, 0, n * m, bias, act, 1))
        ]
    opb = packing.gemm_operand(arrays[1], bf, "b", m, n, k, tb, 0, tb)
    after = attrs["act"] in _AFTER and m >= AFTER_ROWS
    args = (af, opb, cf, 1, m, n, k, ta, tb, 1.0, 0.0, 0, 0, m * n, bias, -1 if after else act)
    if after:
        return [("gemm_ex", args), ("unary", (act, cf, cf))]
    return [("gemm_ex", args)]


def _gemm_strided(attrs, index, arr) -> bool:
    return index < 2 and arr.ndim >= 2


GEMM = defruntime(
    "gemm",
    evaluate=_gemm_eval,
    run=_run_lowered(_gemm_calls, _gemm_eval),
    lower=_gemm_lower,
    strided_inputs=_gemm_strided,
)


# ------------------------------------------------------------------------------ layer norm
def _ln_eval(arrays, attrs, dtypes=None):
    x = arrays[0].astype(np.float64)
    n = attrs["n"]
    rows = x.reshape(-1, n) if n else x.reshape(0, 0)
    mean = rows.mean(axis=1, keepdims=True)
    var = ((rows - mean) ** 2).mean(axis=1, keepdims=True)
    y = (rows - mean) / np.sqrt(var + attrs["eps"])
    i = 1
    if attrs["has_weight"]:
        y = y * arrays[i].reshape(-1)
        i += 1
    if attrs["has_bias"]:
        y = y + arrays[i].reshape(-1)
    return y.reshape(x.shape).astype(arrays[0].dtype)


def _ln_lower(out, arrays, attrs, scratch):
    x = arrays[0]
    if x.dtype not in _FLOATS or not x.flags.c_contiguous:
        return None
    i = 1
    w = b = None
    if attrs["has_weight"]:
        w, i = arrays[1].reshape(-1), 2
    if attrs["has_bias"]:
        b = arrays[i].reshape(-1)
    n = attrs["n"]
    rows = x.size // n if n else 0
    return [("layer_norm", (x.reshape(-1), w, b, out.reshape(-1), rows, n, float(attrs["eps"])))]


LAYER_NORM = defruntime(
    "layer_norm",
    evaluate=_ln_eval,
    run=_run_lowered(_ln_lower, _ln_eval),
    lower=_ln_lower,
    inplace=True,
)


# ------------------------------------------------------------------------------- attention
def _att_eval(arrays, attrs, dtypes=None):
    q, k, v = (x.astype(np.float64) for x in arrays[:3])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * attrs["scale"]
    if len(arrays) > 3:
        mask = arrays[3]
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if attrs["causal"]:
        sq, skv = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, skv), bool)), s, -np.inf)
    with np.errstate(invalid="ignore"):
        top = s.max(axis=-1, keepdims=True)
        p = np.exp(s - top)
        p = p / p.sum(axis=-1, keepdims=True)
        # a row with every score -inf (fully masked) is 0, as PyTorch's SDPA
        p = np.where(np.isneginf(top), 0.0, p)
    out = np.matmul(p, v).astype(arrays[0].dtype)
    return np.ascontiguousarray(out.transpose(0, 2, 1, 3)) if attrs.get("heads_last") else out


def _att_lower(out, arrays, attrs, scratch):
    q, k, v = arrays[:3]
    mask = arrays[3] if len(arrays) > 3 else None
    if q.dtype not in _FLOATS:
        return None
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or out.ndim != 4:
        return None
    if attrs.get("heads_last"):
        out = out.transpose(0, 2, 1, 3)  # written as [B, S, H, D] through the view's strides
    if mask is not None:
        mask = np.broadcast_to(mask, out.shape[:-1] + (k.shape[-2],))
    return [("attention", (q, k, v, mask, out, float(attrs["scale"]), int(attrs["causal"]), 0))]


ATTENTION = defruntime(
    "attention",
    evaluate=_att_eval,
    run=_run_lowered(_att_lower, _att_eval),
    lower=_att_lower,
    strided_inputs=lambda attrs, index, arr: arr.ndim == 4,
)


# ------------------------------------------------------------------------------------ silu
def _silu_eval(arrays, attrs, dtypes=None):
    x = arrays[0].astype(np.float64)
    return (x / (1 + np.exp(-x))).astype(arrays[0].dtype)


def _silu_lower(out, arrays, attrs, scratch):
    (x,) = arrays
    if x.dtype not in _FLOATS or out.dtype != x.dtype:
        return None
    flat_x, flat_o = x.reshape(-1), out.reshape(-1)
    return [
        ("unary", (_cpu.UNARY_SIGMOID, flat_x, flat_o)),
        ("binary", (_cpu.BINARY_MUL, flat_x, flat_o, flat_o)),
    ]


SILU = defruntime(
    "silu",
    evaluate=_silu_eval,
    run=_run_lowered(_silu_lower, _silu_eval),
    lower=_silu_lower,
    inplace=False,  # reads x after writing out: never in place
)


# ------------------------------------------------------------------------------ conv2d_act
def _conv_parts(arrays, attrs):
    """(x, w, bias or None, res or None) of a conv2d_act node's inputs."""
    x, w, i = arrays[0], arrays[1], 2
    bias = res = None
    if attrs["bias"]:
        bias, i = arrays[2], 3
    if attrs["res"]:
        res = arrays[i]
    return x, w, bias, res


def _conv_act_eval(arrays, attrs, dtypes=None):
    x, w, bias, res = (
        None if a is None else a.astype(np.float64) for a in _conv_parts(arrays, attrs)
    )
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            win = xp[
                :,
                :,
                i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                j * dw : j * dw + sw * (ow - 1) + 1 : sw,
            ]
            y += np.einsum("nchw,oc->nohw", win, w[:, :, i, j])
    if bias is not None:
        y += bias.reshape(1, -1, 1, 1)
    if res is not None:
        y += res
    if attrs["act"] == "relu":
        y = np.maximum(y, 0.0)
    return y.astype(arrays[0].dtype)


def _conv_act_lower(out, arrays, attrs, scratch):
    x, w, bias, res = _conv_parts(arrays, attrs)
    if out.dtype not in _FLOATS or any(
        a is not None and (a.dtype != out.dtype or not a.flags.c_contiguous)
        for a in (x, w, bias, res)
    ):
        return None
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    geometry = (n, c, h, wd, kh, kw, *attrs["stride"], *attrs["padding"], *attrs["dilation"], o)
    w = packing.conv_weight(w, out.shape[2] * out.shape[3], geometry)  # constant: pre-packed
    act = _cpu.UNARY_RELU if attrs["act"] == "relu" else -1
    return [("conv2d_forward", (x, w, bias, out) + geometry + (res, act))]


CONV2D_ACT = defruntime(
    "conv2d_act",
    evaluate=_conv_act_eval,
    run=_run_lowered(_conv_act_lower, _conv_act_eval),
    lower=_conv_act_lower,
    inplace=False,  # the tiles are written before the residual's last read: never in place
)


# --------------------------------------------------------------------------------- strided
def strided_view(x: np.ndarray, attrs: dict) -> np.ndarray:
    """The ``strided`` op's view of contiguous ``x`` (element strides and offset); ValueError
    when the layout would reach outside x (a corrupt or hostile graph), never a stray read."""
    shape, strides, offset = attrs["shape"], attrs["strides"], attrs["offset"]
    if len(shape) != len(strides) or any(s < 0 for s in shape) or offset < 0:
        raise ValueError(f"strided: bad layout {shape} / {strides} at {offset}")
    if math.prod(shape):
        lo = offset + sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
        hi = offset + sum((s - 1) * st for s, st in zip(shape, strides) if st > 0)
        if lo < 0 or hi >= x.size:
            raise ValueError(
                f"strided: the view {shape} / {strides} at {offset} reaches outside its source "
                f"of {x.size} elements"
            )
    item = x.dtype.itemsize
    flat = x.reshape(-1)
    base = flat[attrs["offset"] :] if flat.size else flat
    return np.lib.stride_tricks.as_strided(
        base, attrs["shape"], tuple(s * item for s in attrs["strides"]), writeable=False
    )


STRIDED = defruntime(
    "strided",
    evaluate=lambda arrays, attrs, dtypes=None: np.array(strided_view(arrays[0], attrs)),
    view=strided_view,
)
