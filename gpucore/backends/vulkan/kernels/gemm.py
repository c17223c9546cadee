"""GEMM: batched matrix products with a fused epilogue (shaders/gemm.comp).

``gemm(be, out, a, b, *, alpha, beta, bias, activation, variant)`` is the entry point for every
matrix product on the device. Today only the registry's ``matmul`` kernel below calls it (plain
product, no epilogue); the bias + activation epilogue is there for a fused Linear op, which does
not exist yet (F.linear is matmul + add). It records dispatches and returns at once; it
allocates only for the rare operand that must be copied (negative strides, an ``out`` the shader
cannot write in place, the previous ``out`` when ``beta != 0``).

Variants (one shader family, specialization constant VARIANT):

- ``regblock``: register-blocked, no shared memory, no barriers; values of A handed round a
  subgroup with subgroupShuffle. For CPU-type devices (lavapipe), where barriers and storage loads
  are expensive and a register permute is cheap. Needs the device's reported subgroup size to be
  the one shaders run with (true on lavapipe; GPUs that vary it per pipeline would need
  VK_EXT_subgroup_size_control), so 'auto' only picks it on CPU-type devices.
- ``tiled``: BM x BN blocks, BK-deep A/B tiles in shared memory, register micro-tiles, vec4 global
  loads where aligned. For GPUs; a tile size is enabled only when its shared memory and
  invocation count fit the device's limits.

float16 / bfloat16 A and B (both of one type) run on gemm_half.spv (gemm.comp built with HALF=1):
loaded as 16-bit values and widened to float32, accumulated in float32 into a float32 C; the
registry kernels round C to the half type afterwards (the CPU's float32 product, rounded).

``variant=None`` picks per device (``ctx.is_cpu`` and subgroup shuffles -> regblock) and the tile
configuration per shape; GPUCORE_VULKAN_GEMM=tiled|regblock forces one (tests and benchmarks).
Every (variant, tile, load mode) is its own pipeline: lavapipe compiles one in 0.4-3 s on first
use (Mesa's on-disk shader cache makes later processes fast), so the set is kept small.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from .... import _cpu
from .... import dtypes as D
from ....errors import DeviceError, DTypeError, ShapeError
from . import gemm64
from .common import contiguous, copy_array, kernel
from .elementwise import cast_array

# gemm.comp's activation codes (the flags word from bit _ACT_SHIFT; activation.glsl) and its
# FLAG_* bits, from cpu/opcodes.def
ACTIVATIONS = {None: _cpu.OPCODES["act"]["none"], **_cpu.OPCODES["act"]}
VARIANTS = ("tiled", "regblock")
_FLAGS = _cpu.OPCODES["gemm_flags"]
_FLAG_BIAS, _FLAG_BETA, _FLAG_EPILOGUE = (
    _FLAGS[k] for k in ("FLAG_BIAS", "FLAG_BETA", "FLAG_EPILOGUE")
)
_ACT_SHIFT = _FLAGS["ACT_SHIFT"]
# The shader's VARIANT and A / B load modes (AMODE / BMODE: scalar with the fast index along
# k / m (n), or vec4), from cpu/opcodes.def.
_REGBLOCK, _TILED = (_cpu.OPCODES["gemm_variant"][k] for k in ("REGBLOCK", "TILED"))
_AMODE, _BMODE = _cpu.OPCODES["gemm_a_mode"], _cpu.OPCODES["gemm_b_mode"]
_SCALAR_K, _SCALAR_M, _VEC4_K, _VEC4_M = (
    _AMODE[k] for k in ("A_SCALAR_K", "A_SCALAR_M", "A_VEC4_K", "A_VEC4_M")
)
_SCALAR_N, _SCALAR_KB, _VEC4_N, _VEC4_KB = (
    _BMODE[k] for k in ("B_SCALAR_N", "B_SCALAR_K", "B_VEC4_N", "B_VEC4_K")
)

# TILED configurations, largest first: (BM, BN, BK, TM, TN) -> (BM/TM)*(BN/TN) invocations.
TILED_CONFIGS = (
    (128, 128, 8, 8, 8),  # 256 invocations, 8 KiB shared
    (64, 64, 16, 4, 4),  # 256 invocations, 8 KiB shared
    (32, 32, 16, 4, 4),  # 64 invocations, 4 KiB shared
    (16, 16, 8, 2, 2),  # 64 invocations, 1 KiB shared
)
# REGBLOCK: rows per subgroup by M, vec4 columns per lane by N, subgroups per workgroup.
REGBLOCK_TM = (4, 8, 16, 32)
REGBLOCK_MAX_SUBGROUPS = 4
# Tall blocks once M has two of them: each B vec4 a lane loads (a per-lane loop on lavapipe, the
# cost that bounds this kernel) then feeds 128 rows. N = 1024 on lavapipe, GFLOP/s (medians of 5
# interleaved runs): TM 32 x 4 subgroups 10.1, TM 64 x 2 12.8, TM 128 x 1 14.1. Taller blocks
# measured no faster and take seconds more to compile (256 rows: 8 s).
REGBLOCK_TALL_TM = 128


def _env_variant() -> str | None:
    v = os.environ.get("GPUCORE_VULKAN_GEMM", "").strip().lower()
    if v in ("", "auto"):
        return None
    if v not in VARIANTS:
        raise ValueError(
            f"GPUCORE_VULKAN_GEMM={v!r}: expected one of 'tiled', 'regblock' or 'auto'"
        )
    return v


def subgroup_shuffle_size(ctx) -> int:
    """The subgroup size when compute shaders on this device have subgroup shuffles and the size
    suits REGBLOCK (a multiple of 4, at most 64); else 0."""
    sg = ctx.subgroup_size
    ok = ctx.has_subgroup_ops(ctx.vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT)
    return sg if ok and sg % 4 == 0 and 4 <= sg <= 64 else 0


def choose_variant(ctx, variant: str | None = None) -> str:
    """The variant a GEMM runs with: ``variant`` if given, else GPUCORE_VULKAN_GEMM, else regblock
    on CPU-type devices that have subgroup shuffles and tiled everywhere else."""
    if variant is None:
        variant = _env_variant()
    if variant is None:
        return "regblock" if ctx.is_cpu and subgroup_shuffle_size(ctx) else "tiled"
    if variant not in VARIANTS:
        raise ValueError(f"gemm: variant must be 'tiled', 'regblock' or None, got {variant!r}")
    if variant == "regblock" and not subgroup_shuffle_size(ctx):
        raise DeviceError(
            f"gemm: the 'regblock' variant needs subgroup shuffles in compute shaders and a "
            f"subgroup size that is a multiple of 4 (this device: {ctx.info.name}, subgroup size "
            f"{ctx.subgroup_size}); use variant 'tiled' (GPUCORE_VULKAN_GEMM=tiled)"
        )
    return variant


def tiled_config(ctx, m: int, n: int) -> tuple:
    """(BM, BN, BK, TM, TN): the largest tile that the shape fills and the device allows (shared
    memory, invocations per workgroup)."""
    shared = ctx.limits["maxComputeSharedMemorySize"]
    inv = ctx.limits["maxComputeWorkGroupInvocations"]
    fits = [
        c
        for c in TILED_CONFIGS
        if (c[0] + c[1]) * c[2] * 4 <= shared and (c[0] // c[3]) * (c[1] // c[4]) <= inv
    ]
    if not fits:
        raise DeviceError(
            f"gemm: no tile configuration fits this device ({shared} bytes of shared memory, "
            f"{inv} invocations per workgroup)"
        )
    for c in fits:
        if m >= c[0] and n >= c[1]:
            return c
    return fits[-1]


def regblock_config(m: int, n: int, sg: int) -> tuple:
    """(TM, TN, subgroups per workgroup) for REGBLOCK: rows per subgroup cover M with little
    waste (tall single-subgroup blocks once M fills two), two vec4 columns per lane once N fills
    them."""
    tn = 1 if n <= 4 * sg else 2
    if m >= 2 * REGBLOCK_TALL_TM:
        return REGBLOCK_TALL_TM, tn, 1
    tm = next((t for t in REGBLOCK_TM if m <= t), REGBLOCK_TM[-1])
    nsg = max(1, min(REGBLOCK_MAX_SUBGROUPS, -(-m // tm)))
    return tm, tn, nsg


# ----------------------------------------------------------------------------- layout helpers
def _merge_batch(shape: tuple, strides: list) -> list:
    """Merge batch dims into groups [(size, stride per operand)], innermost last: dim i folds into
    i+1 when every operand's stride_i == stride_{i+1} * size_{i+1}; size-1 dims vanish."""
    groups: list = []
    for i in range(len(shape) - 1, -1, -1):
        size = shape[i]
        if size == 1:
            continue
        st = [s[i] for s in strides]
        if groups:
            gsize, gst = groups[-1]
            if all(s == g * gsize for s, g in zip(st, gst)):
                groups[-1] = (gsize * size, gst)
                continue
        groups.append((size, st))
    groups.reverse()
    return groups or [(1, [0] * len(strides))]


def _vec4_ok(offset: int, *multiples: int) -> bool:
    return offset % 4 == 0 and all(x % 4 == 0 for x in multiples)


# gemm_half's HALF_KIND (half.glsl's HALF_F16 / HALF_BF16) by A and B's numpy dtype (bfloat16 is
# stored as uint16)
_HALF_KIND = {np.dtype(np.float16): 1, np.dtype(np.uint16): 2}


def _check(a, b, out, bias):
    if a.dtype != b.dtype or (a.dtype != np.float32 and a.dtype not in _HALF_KIND):
        raise DTypeError(
            f"gemm: a and b must both be float32, float16 or bfloat16, got {a.dtype}, {b.dtype}"
        )
    for name, x in (("a", a), ("b", b), ("out", out)):
        if name == "out" and x.dtype != np.float32:
            raise DTypeError(f"gemm: {name} must be float32, got {x.dtype}")
        if x.ndim < 2:
            raise ShapeError(f"gemm: {name} must have at least 2 dims, got shape {x.shape}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2 or out.shape[-2:] != (m, n):
        raise ShapeError(
            f"gemm: shapes a {a.shape}, b {b.shape}, out {out.shape} do not form "
            "out[..., M, N] = a[..., M, K] @ b[..., K, N]"
        )
    if not (a.shape[:-2] == b.shape[:-2] == out.shape[:-2]):
        raise ShapeError(
            f"gemm: batch dims must be equal (expand broadcast operands first), got a {a.shape}, "
            f"b {b.shape}, out {out.shape}"
        )
    if bias is not None and bias.dtype != np.float32:
        raise DTypeError(f"gemm: bias must be float32, got {bias.dtype}")


# ----------------------------------------------------------------------------- entry point
def gemm(
    be,
    out: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    bias: np.ndarray | None = None,
    activation: str | None = None,
    variant: str | None = None,
) -> None:
    """Record ``out = act(alpha * (a @ b) + beta * out + bias)`` on the device.

    a: (..., M, K), b: (..., K, N), out: (..., M, N) device arrays with equal batch dims, out
    float32, a and b float32 or both float16 / bfloat16 (accumulated in float32)
    (a and b may be broadcast views with 0 strides, or transposed views: any strides work, unit
    strides get vec4 loads). out must not overlap a, b or bias; with ``beta == 0`` it is not read
    (beta != 0 costs one device copy of out).
    bias: None or a float32 device array broadcastable to out (a Linear bias is (N,)).
    activation: None, 'relu', 'gelu' (erf form), 'gelu_tanh', 'sigmoid' or 'tanh', applied last.
    variant: None (per device, or GPUCORE_VULKAN_GEMM), 'tiled' or 'regblock'.
    """
    _check(a, b, out, bias)
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"gemm: activation must be one of {sorted(k for k in ACTIVATIONS if k)} or None, "
            f"got {activation!r}"
        )
    if out.size == 0:
        return
    if _banded(be, out, a, b, alpha, beta, bias, activation, variant):
        return
    var = choose_variant(be.ctx, variant)
    a = _nonneg(be, a)
    b = _nonneg(be, b)
    if bias is not None:
        bias = _full_bias(be, bias, out)
    x = None
    if _direct_ok(be, out, var):
        target = out
        if beta != 0.0:  # C is overwritten by the raw product before the epilogue reads X
            x = be.empty_array(out.shape, out.dtype)
            copy_array(be, x, out)
    else:
        # REGBLOCK stores vec4 rows: go through a temporary with rows padded to 4 floats.
        n = out.shape[-1]
        pad = -(-n // 4) * 4 if var == "regblock" else n
        target = be.empty_array(out.shape[:-1] + (pad,), out.dtype)[..., :n]
        if beta != 0.0:
            x = _nonneg(be, out)
    _record(be, var, target, a, b, bias, x, float(alpha), float(beta), ACTIVATIONS[activation])
    if target is not out:
        copy_array(be, out, target)


def _full_bias(be, bias: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``bias`` as a (broadcast) view of out's shape, with no negative strides."""
    try:
        return np.broadcast_to(_nonneg(be, bias), out.shape)
    except ValueError:
        raise ShapeError(
            f"gemm: bias of shape {bias.shape} does not broadcast to out {out.shape}"
        ) from None


def _span(arr: np.ndarray) -> int:
    """Bytes from an array's lowest to its highest element (what one binding must cover)."""
    if arr.size == 0:
        return 0
    return arr.itemsize + sum((n - 1) * abs(st) for n, st in zip(arr.shape, arr.strides))


def _banded(be, out, a, b, alpha, beta, bias, activation, variant) -> bool:
    """Run the product as two halves when an operand is larger than one storage binding
    (maxStorageBufferRange: 128 MiB on lavapipe; AlexNet's first Linear weight is 144 MiB), each
    half going through ``gemm`` again (so it splits further while needed); False when everything
    fits. The half cuts the dimension that shrinks the largest operand: N for a B whose columns
    lie far apart (a Linear's transposed weight), K for one whose rows do (the second half
    accumulates with beta = 1; bias and activation apply once, after the last), M for A or out.
    Each output element keeps one product order, so a run is deterministic."""
    limit = be.max_range - be.align  # room for the aligned-down start of a binding
    if bias is not None:
        bias = _full_bias(be, bias, out)
    big = max((a, b, out) + (() if bias is None else (bias,)), key=_span)
    if _span(big) <= limit:
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if big is b:
        sk, sn = (abs(x) for x in b.strides[-2:])
        dim = "n" if (sn >= sk and n > 1) or k == 1 else "k"
    elif big is a:
        sm, sk = (abs(x) for x in a.strides[-2:])
        dim = "m" if (sm >= sk and m > 1) or k == 1 else "k"
    else:  # out or the bias: cut across its larger stride
        sm, sn = (abs(x) for x in big.strides[-2:])
        dim = "m" if (sm >= sn and m > 1) or n == 1 else "n"
    size = {"m": m, "n": n, "k": k}[dim]
    if size == 1:  # a batch dimension is what is large: nothing to halve here
        return False  # (``operand`` then refuses it with the binding limit in the message)
    h = size // 2
    kw = {"alpha": alpha, "variant": variant}
    if dim == "m":
        for sl in (slice(0, h), slice(h, m)):
            bb = None if bias is None else bias[..., sl, :]
            gemm(be, out[..., sl, :], a[..., sl, :], b, beta=beta, bias=bb,
                 activation=activation, **kw)  # fmt: skip
    elif dim == "n":
        for sl in (slice(0, h), slice(h, n)):
            bb = None if bias is None else bias[..., sl]
            gemm(be, out[..., sl], a, b[..., sl], beta=beta, bias=bb, activation=activation, **kw)
    else:
        gemm(be, out, a[..., :h], b[..., :h, :], beta=beta, **kw)
        gemm(be, out, a[..., h:], b[..., h:, :], beta=1.0, bias=bias, activation=activation, **kw)
    return True


def _nonneg(be, arr: np.ndarray) -> np.ndarray:
    return contiguous(be, arr) if any(s < 0 for s in arr.strides) else arr


def _direct_ok(be, out: np.ndarray, var: str) -> bool:
    """Whether the shader can write ``out`` in place (else a temporary is used)."""
    if any(s < 0 for s in out.strides):
        return False
    op = be.operand(out)
    n = out.shape[-1]
    if n > 1 and op.strides[-1] != 1:
        return False
    if var == "tiled":
        return True
    # REGBLOCK: whole vec4s per row -> aligned rows, N a multiple of 4
    return (
        n % 4 == 0
        and op.offset % 4 == 0
        and all(s % 4 == 0 for s, size in zip(op.strides[:-1], out.shape[:-1]) if size > 1)
    )


def _record(be, var, c, a, b, bias, x, alpha, beta, act):
    ctx = be.ctx
    m, k = a.shape[-2:]
    n = b.shape[-1]
    arrays = [a, b, c] + [t for t in (bias, x) if t is not None]
    ops = [be.operand(t) for t in arrays]
    oa, ob, oc = ops[:3]
    obias = ops[3] if bias is not None else None
    ox = ops[-1] if x is not None else None
    sa_m, sa_k = oa.strides[-2:]
    sb_k, sb_n = ob.strides[-2:]
    sc_m = oc.strides[-2]
    sbias_m, sbias_n = obias.strides[-2:] if obias is not None else (0, 0)
    sx_m, sx_n = ox.strides[-2:] if ox is not None else (0, 0)
    groups = _merge_batch(c.shape[:-2], [o.strides[:-2] for o in ops])
    inner_size, inner = groups[-1]
    sa_b, sb_b, sc_b = inner[:3]
    sbias_b = inner[3] if obias is not None else 0
    sx_b = inner[-1] if ox is not None else 0

    flags = act << _ACT_SHIFT
    flags |= _FLAG_BIAS if bias is not None else 0
    flags |= _FLAG_BETA if x is not None else 0
    if act or bias is not None or x is not None or alpha != 1.0:
        flags |= _FLAG_EPILOGUE

    if var == "regblock":
        sg = subgroup_shuffle_size(ctx)
        tm, tn, nsg = regblock_config(m, n, sg)
        if sb_n == 1 and n >= 4 and _vec4_ok(ob.offset, sb_k, sb_b, n):
            bmode = _VEC4_N
        elif sb_k == 1 and k >= 4 and _vec4_ok(ob.offset, sb_n, sb_b, k):
            bmode = _VEC4_KB
        else:
            bmode = _SCALAR_N
        spec = (_REGBLOCK, 4, 4, 4, tm, tn, _SCALAR_K, bmode, sg)
        local = sg * nsg
        rows, cols = tm * nsg, 4 * sg * tn
    else:
        bm, bn, bk, tm, tn = tiled_config(ctx, m, n)
        if sa_k == 1 and _vec4_ok(oa.offset, sa_m, sa_b, k):
            amode = _VEC4_K
        elif sa_m == 1 and _vec4_ok(oa.offset, sa_k, sa_b, m):
            amode = _VEC4_M
        else:
            amode = _SCALAR_M if sa_m == 1 else _SCALAR_K
        if sb_n == 1 and _vec4_ok(ob.offset, sb_k, sb_b, n):
            bmode = _VEC4_N
        elif sb_k == 1 and _vec4_ok(ob.offset, sb_n, sb_b, k):
            bmode = _VEC4_KB
        else:
            bmode = _SCALAR_KB if sb_k == 1 else _SCALAR_N
        spec = (_TILED, bm, bn, bk, tm, tn, amode, bmode, 8)
        local = (bm // tm) * (bn // tn)
        rows, cols = bm, bn

    # bindings 0..4: a, b, c, bias, x (absent ones bound to a; the shader does not read them)
    bindings = [
        oa.binding(False),
        ob.binding(False),
        oc.binding(True),
        (obias or oa).binding(False),
        (ox or oa).binding(False),
    ]
    half = _HALF_KIND.get(a.dtype)
    if half:
        spec += (half,)
    pipe = ctx.pipelines.get("gemm_half" if half else "gemm", 5, spec, local)
    label = f"gemm_{var}"
    maxg = ctx.limits["maxComputeWorkGroupCount"]
    # Grid limits: split rows / columns / batches into launches that fit (rarely more than one).
    row_step, col_step, z_step = rows * maxg[1], cols * maxg[0], maxg[2]
    outer = groups[:-1]
    for idx in itertools.product(*(range(size) for size, _ in outer)):
        base = [o.offset for o in ops]
        for i, (_, st) in zip(idx, outer):
            base = [off + i * s for off, s in zip(base, st)]
        a0, b0, c0 = base[:3]
        bias0 = base[3] if obias is not None else 0
        x0 = base[-1] if ox is not None else 0
        for z0 in range(0, inner_size, z_step):
            nz = min(z_step, inner_size - z0)
            for m0 in range(0, m, row_step):
                mm = min(row_step, m - m0)
                for n0 in range(0, n, col_step):
                    nn = min(col_step, n - n0)
                    push = _push_gemm(
                        mm,
                        nn,
                        k,
                        a0 + z0 * sa_b + m0 * sa_m,
                        b0 + z0 * sb_b + n0 * sb_n,
                        c0 + z0 * sc_b + m0 * sc_m + n0,
                        bias0 + z0 * sbias_b + m0 * sbias_m + n0 * sbias_n,
                        x0 + z0 * sx_b + m0 * sx_m + n0 * sx_n,
                        sa_m,
                        sa_k,
                        sa_b,
                        sb_k,
                        sb_n,
                        sb_b,
                        sc_m,
                        sc_b,
                        sbias_m,
                        sbias_n,
                        sbias_b,
                        sx_m,
                        sx_n,
                        sx_b,
                        flags,
                        alpha,
                        beta,
                    )
                    grid = (-(-nn // cols), -(-mm // rows), nz)
                    ctx.stream.dispatch(pipe, bindings, push, grid, label=label, keep=arrays)


def _push_gemm(*values) -> np.ndarray:
    """The shader's push-constant block: 23 uints then alpha, beta as float32 (see gemm.comp)."""
    words = values[:-2]
    if min(words) < 0 or max(words) > 0xFFFFFFFF:
        raise ShapeError("gemm: an offset or stride does not fit in 32 bits")
    out = np.empty(len(values), np.uint32)
    out[:-2] = words
    out[-2:] = np.array(values[-2:], dtype=np.float32).view(np.uint32)
    return out


# ----------------------------------------------------------------------------- registry kernels
_FLOATS = (D.float32, D.float16, D.bfloat16)


def _accepts_same_float(inputs, specs):
    """Every operand (and the result) float32, or every one float16, or every one bfloat16.
    (A list of specs: the quantized Linear asks with its output's and its weight's.)"""
    dt = (specs[0] if isinstance(specs, list) else specs)[1]
    return dt in _FLOATS and all(t._dtype is dt for t in inputs)


def _rounded(be, out, run):
    """run(c) into out, through a float32 C rounded to out's half type when out is one."""
    if out.dtype == np.float32:
        run(out)
        return
    c = be.empty_array(out.shape, np.float32)
    run(c)
    cast_array(be, out, c)


def _widened(be, t):
    """A float32 device copy of a half array (bias and X stay float32 in gemm.comp)."""
    if t is None or t.dtype == np.float32:
        return t
    w = be.empty_array(t.shape, np.float32)
    cast_array(be, w, t)
    return w


def _accepts_matmul(inputs, specs):
    """``_accepts_same_float``, or float64 operands of at least 2 dims (gemm64.comp)."""
    if specs[1] is D.float64:
        a, b = inputs
        return a._dtype is b._dtype is D.float64 and gemm64.supported(a.shape, b.shape)
    return _accepts_same_float(inputs, specs)


@kernel("matmul", accepts=_accepts_matmul)
def _matmul(be, out, a, b):
    if out.dtype == np.float64:
        gemm64.gemm64(be, out, a, b)
        return
    _rounded(be, out, lambda c: gemm(be, c, a, b))


_matmul.float64_math = True  # float64 products need shaderFloat64 (VulkanBackend.supports)


@kernel("linear", accepts=_accepts_same_float)
def _linear(be, out, x, w, b=None):
    b = _widened(be, b)
    _rounded(be, out, lambda c: gemm(be, c, x, w.T, bias=b))


_matmul.half = _linear.half = True  # gemm_half.spv reads the halves (backend.py never widens)
