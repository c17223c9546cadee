"""CPU kernels, keyed by registry op name: ``fn(out, *inputs, **attrs)`` on numpy arrays.

float32/float64 math goes to the C extension (gpucore._cpu); integer and bool tensors use numpy,
which is exact for them. ``out`` is always a fresh C-contiguous array; inputs may be strided views.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _cpu
from ...errors import GpucoreIndexError

KERNELS: dict = {}
_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))


def kernel(*names):
    """Register the decorated function as the CPU kernel of the named ops."""

    def deco(fn):
        for n in names:
            if n in KERNELS:
                raise ValueError(f"CPU kernel for {n!r} registered twice")
            KERNELS[n] = fn
        return fn

    return deco


def _isf(a: np.ndarray) -> bool:
    return a.dtype in _FLOAT


def _c(a: np.ndarray, dtype=None) -> np.ndarray:
    """C-contiguous (and of ``dtype`` if given), copying only when needed."""
    if dtype is not None and a.dtype != dtype:
        return np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


# ----------------------------------------------------------------------------- unary
_UNARY_NP = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "relu": lambda x: np.maximum(x, 0),
}


def _unary(name, code):
    def run(out, x, **attrs):
        if _isf(out):
            _cpu.unary(code, _c(x, out.dtype).reshape(-1), out.reshape(-1))
        else:
            np.copyto(out, _UNARY_NP[name](x), casting="unsafe")

    return run


for _name in ("neg", "abs", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "sign", "sin",
              "cos", "reciprocal"):
    kernel(_name)(_unary(_name, getattr(_cpu, "UNARY_" + _name.upper())))


@kernel("log1p")
def _log1p(out, x):
    # No C kernel yet: numpy's log1p writes into out (float16/bfloat16 arrive as float32).
    with np.errstate(all="ignore"):
        np.log1p(x, out=out, casting="unsafe")


@kernel("gelu")
def _gelu(out, x, approximate):
    code = _cpu.UNARY_GELU_TANH if approximate == "tanh" else _cpu.UNARY_GELU
    _cpu.unary(code, _c(x, out.dtype).reshape(-1), out.reshape(-1))


def _unary_bwd(code_name):
    def run(out, g, saved, **attrs):
        code = getattr(_cpu, code_name)
        if code_name == "UNARY_GELU" and attrs.get("approximate") == "tanh":
            code = _cpu.UNARY_GELU_TANH
        _cpu.unary_backward(code, _c(g).reshape(-1), _c(saved).reshape(-1), out.reshape(-1))

    return run


kernel("relu_backward")(_unary_bwd("UNARY_RELU"))
kernel("sigmoid_backward")(_unary_bwd("UNARY_SIGMOID"))
kernel("tanh_backward")(_unary_bwd("UNARY_TANH"))
kernel("gelu_backward")(_unary_bwd("UNARY_GELU"))


# ----------------------------------------------------------------------------- binary
_BINARY_NP = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _binary(name):
    code = getattr(_cpu, "BINARY_" + name.upper())
    fn = _BINARY_NP[name]

    def run(out, a, b):
        if _isf(a):
            _cpu.binary(code, a, b, out)
        else:
            if name == "pow" and (np.asarray(b) < 0).any():
                raise ValueError("pow(): integers to negative integer powers are not allowed")
            with np.errstate(all="ignore"):
                fn(a, b, out=out, casting="unsafe")

    return run


for _name in _BINARY_NP:
    kernel(_name)(_binary(_name))


def _logical(np_fn):
    def run(out, a, b):
        np_fn(a, b, out=out)

    return run


for _name in ("logical_and", "logical_or", "logical_xor"):
    kernel(_name)(_logical(getattr(np, _name)))


@kernel("logical_not")
def _logical_not(out, x):
    np.logical_not(x, out=out)


@kernel("where")
def _where(out, cond, a, b):
    if _isf(a):
        _cpu.where(cond, a, b, out)
    else:
        np.copyto(out, np.where(cond, a, b))


@kernel("clamp")
def _clamp(out, x, min, max):  # noqa: A002
    if _isf(x):
        src = x
        if min is not None:
            _cpu.binary(_cpu.BINARY_MAXIMUM, src, np.asarray(min, out.dtype), out)
            src = out
        if max is not None:
            _cpu.binary(_cpu.BINARY_MINIMUM, src, np.asarray(max, out.dtype), out)
    else:
        np.copyto(out, np.clip(x, min, max), casting="unsafe")


# ----------------------------------------------------------------------------- copies, casts
@kernel("clone")
def _clone(out, x):
    if x.dtype.itemsize in (1, 2, 4, 8) and x.dtype == out.dtype:
        _cpu.copy(x, out)
    else:
        np.copyto(out, x)


@kernel("to_dtype")
def _to_dtype(out, x, dtype):
    with np.errstate(all="ignore"):
        np.copyto(out, x, casting="unsafe")


# ----------------------------------------------------------------------------- reductions
def _oni(x: np.ndarray, dims: tuple):
    """x as a contiguous [outer, n, inner] array reducing ``dims``."""
    shape = x.shape
    if not dims:
        return _c(x), x.size, 1, 1
    if dims == tuple(range(dims[0], dims[-1] + 1)):
        xc = _c(x)
        outer = math.prod(shape[: dims[0]])
        n = math.prod(shape[dims[0] : dims[-1] + 1])
        inner = math.prod(shape[dims[-1] + 1 :])
        return xc, outer, n, inner
    keep = tuple(i for i in range(x.ndim) if i not in dims)
    xc = np.ascontiguousarray(x.transpose(keep + dims))
    return xc, math.prod(shape[i] for i in keep), math.prod(shape[i] for i in dims), 1


def _reduce_float(code, out, x, dims):
    xc, outer, n, inner = _oni(x, dims)
    _cpu.reduce(code, xc.reshape(-1), out.reshape(-1), outer, n, inner)


@kernel("sum")
def _sum(out, x, dims, keepdim, shape):
    if _isf(x):
        _reduce_float(_cpu.REDUCE_SUM, out, x, dims)
    else:
        np.copyto(out, np.sum(x, axis=dims, keepdims=keepdim, dtype=np.int64))


@kernel("mean")
def _mean(out, x, dims, keepdim, shape):
    _reduce_float(_cpu.REDUCE_MEAN, out, x, dims)


def _extreme(code, np_fn):
    def run(out, x, dims, keepdim, shape):
        if _isf(x):
            _reduce_float(code, out, x, dims)
        else:
            np.copyto(out, np_fn(x, axis=dims, keepdims=keepdim))

    return run


kernel("amax")(_extreme(_cpu.REDUCE_MAX, np.amax))
kernel("amin")(_extreme(_cpu.REDUCE_MIN, np.amin))


def _dim_reduce(vcode, icode, np_arg):
    def run(outs, x, dim, keepdim):
        vals, idx = outs
        if x.ndim == 0:
            vals[...] = x
            idx[...] = 0
            return
        if _isf(x):
            _reduce_float(vcode, vals, x, (dim,))
            _reduce_float(icode, idx, x, (dim,))
        else:
            i = np_arg(x, axis=dim, keepdims=True)
            np.copyto(idx, i.reshape(idx.shape))
            np.copyto(vals, np.take_along_axis(x, i, axis=dim).reshape(vals.shape))

    return run


kernel("max_dim")(_dim_reduce(_cpu.REDUCE_MAX, _cpu.REDUCE_ARGMAX, np.argmax))
kernel("min_dim")(_dim_reduce(_cpu.REDUCE_MIN, _cpu.REDUCE_ARGMIN, np.argmin))


def _arg(code, np_fn):
    def run(out, x, dim, keepdim):
        if dim is None or x.ndim == 0:
            x = x.reshape(-1)
            dim = 0
        if _isf(x):
            _reduce_float(code, out, x, (dim,))
        else:
            np.copyto(out, np_fn(x, axis=dim).reshape(out.shape))

    return run


kernel("argmax")(_arg(_cpu.REDUCE_ARGMAX, np.argmax))
kernel("argmin")(_arg(_cpu.REDUCE_ARGMIN, np.argmin))


@kernel("all")
def _all(out, x, dims, keepdim):
    np.copyto(out, np.all(x, axis=dims, keepdims=keepdim))


@kernel("any")
def _any(out, x, dims, keepdim):
    np.copyto(out, np.any(x, axis=dims, keepdims=keepdim))


# ----------------------------------------------------------------------------- matmul
def _gemm_operand(arr: np.ndarray):
    """(contiguous buffer, transposed?, batch stride) describing a batch of matrices."""
    r, c = arr.shape[-2:]
    batch = math.prod(arr.shape[:-2])
    if batch > 1 and all(s == 0 for s in arr.strides[:-2]):
        buf, trans, _ = _gemm_operand(arr[(0,) * (arr.ndim - 2)])
        return buf, trans, 0
    v = arr.reshape(batch, r, c)
    if v.flags.c_contiguous:
        return v, 0, r * c
    vt = v.transpose(0, 2, 1)
    if vt.flags.c_contiguous:
        return vt, 1, r * c
    return np.ascontiguousarray(v), 0, r * c


@kernel("matmul")
def _matmul(out, a, b):
    if a.ndim == 2 and a.flags.c_contiguous and b.flags.c_contiguous:
        # plain matrices: the buffers go to C as they are (it checks their sizes)
        m, k = a.shape
        n = b.shape[1]
        _cpu.gemm(a, b, out, 1, m, n, k, 0, 0, 1.0, 0.0, 0, 0, 0)
        return
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = math.prod(out.shape[:-2])
    abuf, ta, sa = _gemm_operand(a)
    bbuf, tb, sb = _gemm_operand(b)
    _cpu.gemm(
        abuf.reshape(-1), bbuf.reshape(-1), out.reshape(-1), batch, m, n, k, ta, tb, 1.0, 0.0,
        sa, sb, m * n,
    )


@kernel("linear")
def _linear(out, x, w, b=None):
    m, k = x.shape
    n = w.shape[0]
    xbuf, tx, _ = _gemm_operand(x)
    wbuf, tw, _ = _gemm_operand(w)
    if b is not None and not b.flags.c_contiguous:
        b = np.ascontiguousarray(b)
    # w is [out, in]: the product uses it transposed, which folds into the packing.
    _cpu.gemm_ex(
        xbuf.reshape(-1), wbuf.reshape(-1), out.reshape(-1), 1, m, n, k, tx, 1 - tw, 1.0, 0.0,
        0, 0, m * n, b, -1,
    )


# ----------------------------------------------------------------------------- softmax, xent
def _softmax_geom(x: np.ndarray, dim: int):
    if x.ndim == 0:
        return _c(x), 1, 1, 1
    return _oni(x, (dim,))


def _softmax_kernel(log):
    def run(out, x, dim):
        xc, outer, n, inner = _softmax_geom(x, dim)
        _cpu.softmax(xc.reshape(-1), out.reshape(-1), outer, n, inner, log)

    return run


def _softmax_bwd_kernel(log):
    def run(out, g, y, dim):
        gc, outer, n, inner = _softmax_geom(g, dim)
        yc, *_ = _softmax_geom(y, dim)
        _cpu.softmax_backward(gc.reshape(-1), yc.reshape(-1), out.reshape(-1), outer, n, inner, log)

    return run


kernel("softmax")(_softmax_kernel(0))
kernel("log_softmax")(_softmax_kernel(1))
kernel("softmax_backward")(_softmax_bwd_kernel(0))
kernel("log_softmax_backward")(_softmax_bwd_kernel(1))


@kernel("cross_entropy")
def _xent(outs, logits, target, ignore_index):
    loss, lse = outs
    n, c = logits.shape
    try:
        _cpu.cross_entropy_forward(_c(logits), _c(target), loss, lse, n, c, ignore_index)
    except IndexError as e:
        raise GpucoreIndexError(f"cross_entropy(): {e}") from None


@kernel("cross_entropy_backward")
def _xent_bwd(out, logits, target, lse, g, ignore_index):
    n, c = logits.shape
    _cpu.cross_entropy_backward(
        _c(logits), _c(target), _c(lse), _c(g), out, n, c, ignore_index
    )


# ----------------------------------------------------------------------------- im2col
@kernel("im2col")
def _im2col(out, x, kernel, stride, padding, dilation, src):
    n, c, h, w = x.shape
    _cpu.im2col(_c(x), out, n, c, h, w, *kernel, *stride, *padding, *dilation)


@kernel("col2im")
def _col2im(out, col, shape, kernel, stride, padding, dilation):
    n, c, h, w = shape
    _cpu.col2im(_c(col), out, n, c, h, w, *kernel, *stride, *padding, *dilation)


@kernel("conv2d")
def _conv2d(out, x, w, b=None, *, stride, padding, dilation):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    _cpu.conv2d_forward(_c(x), _c(w), None if b is None else _c(b), out, n, c, h, wd, kh, kw,
                        *stride, *padding, *dilation, o)


@kernel("conv2d_backward")
def _conv2d_backward(outs, x, w, g, *, need, stride, padding, dilation):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    gx, gw, gb = (t if nd else None for t, nd in zip(outs, need))
    _cpu.conv2d_backward(_c(x), _c(w), _c(g), gx, gw, gb, n, c, h, wd, kh, kw, *stride,
                         *padding, *dilation, o)


# ----------------------------------------------------------------------------- max pooling
@kernel("max_pool2d")
def _max_pool2d(outs, x, kernel, stride, padding, dilation, ceil_mode, src):
    """One C pass per window (cpu/maxpool.c): values and flat indices, PyTorch's scan rules;
    ceil_mode's windows past the input just see fewer positions."""
    vals, idx = outs
    n, c, h, w = x.shape
    oh, ow = vals.shape[2:]
    if n * c == 0:
        return
    _cpu.max_pool2d(_c(x), vals, idx, n * c, h, w, *kernel, *stride, *padding, *dilation,
                    oh, ow)


@kernel("max_pool2d_backward")
def _max_pool2d_backward(out, g, indices, input_shape, kernel, stride, padding, dilation):
    """Scatter-add at the indices, plane by plane in C (overlapping windows sum in output
    order)."""
    n, c, h, w = input_shape
    oh, ow = g.shape[2:]
    if n * c == 0:
        return
    try:
        _cpu.max_pool2d_backward(_c(g), _c(indices), out, n * c, h, w, *kernel, *stride,
                                 *padding, *dilation, oh, ow)
    except IndexError:
        _check_index(indices, h * w, "max_pool2d_backward")
        raise


# ----------------------------------------------------------------------------- indexing
def _index_guard(fn):
    try:
        return fn()
    except IndexError as e:
        raise GpucoreIndexError(f"index out of range: {e}") from None


@kernel("index")
def _index(out, x, key, src):
    _index_guard(lambda: np.copyto(out, x[key]))


@kernel("index_backward")
def _index_backward(out, g, shape, key, basic):
    out.fill(0)
    if basic:
        out[key] = g
    else:
        np.add.at(out, key, g)


@kernel("index_put")
def _index_put(out, x, v, key, basic):
    np.copyto(out, x)
    _index_guard(lambda: out.__setitem__(key, v))


def _check_index(index: np.ndarray, size: int, op: str):
    if index.size and (index.min() < 0 or index.max() >= size):
        raise GpucoreIndexError(
            f"{op}(): index values must be in [0, {size}); got values in "
            f"[{int(index.min())}, {int(index.max())}]"
        )


@kernel("gather")
def _gather(out, x, index, dim, src):
    _check_index(index, x.shape[dim], "gather")
    sl = tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(index.shape))
    np.copyto(out, np.take_along_axis(x[sl], index, axis=dim))


@kernel("scatter_add")
def _scatter_add(out, x, index, src, dim):
    _check_index(index, x.shape[dim], "scatter_add")
    np.copyto(out, x)
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    src_part = src[tuple(slice(0, s) for s in index.shape)]
    np.add.at(out, tuple(grids), src_part)


@kernel("cat")
def _cat(out, *ts, dim, sizes):
    np.concatenate(ts, axis=dim, out=out)


@kernel("one_hot")
def _one_hot(out, t, num_classes):
    out.fill(0)
    np.put_along_axis(out, t[..., None].astype(np.int64), 1, axis=-1)


@kernel("copy_slices")
def _copy_slices(out, base, src, view_ops, src_shape):
    np.copyto(out, base)
    v = out
    for op, attrs in view_ops:
        v = op.view(v, **attrs)
    np.copyto(v, src)


# ----------------------------------------------------------------------------- optimizers
# In-place updates (gpucore/ops/optim_ops.py): ``out`` is None; the kernel updates the parameter
# (first input) and its state buffers (every input but grad) in place, float32/float64 in C.
def _inplace_only(out, name):
    if out is not None:
        raise TypeError(f"{name} updates its inputs in place and has no output; run it with "
                        "gpucore.ops.optim_ops.fused_update, not apply()")


@kernel("sgd_step")
def _sgd_step(out, param, grad, *buf, lr, momentum, dampening, weight_decay, nesterov, maximize,
              first):
    _inplace_only(out, "sgd_step")
    _cpu.sgd_step(param, grad, buf[0] if buf else None, lr, momentum, dampening, weight_decay,
                  int(nesterov), int(maximize), int(first))


@kernel("adam_step")
def _adam_step(out, param, grad, exp_avg, exp_avg_sq, *vmax, step, lr, beta1, beta2, eps,
               weight_decay, amsgrad, decoupled, maximize):
    _inplace_only(out, "adam_step")
    _cpu.adam_step(param, grad, exp_avg, exp_avg_sq, vmax[0] if amsgrad else None, step, lr,
                   beta1, beta2, eps, weight_decay, int(decoupled), int(maximize))


@kernel("rmsprop_step")
def _rmsprop_step(out, param, grad, square_avg, *rest, lr, alpha, eps, weight_decay, momentum,
                  centered, maximize):
    _inplace_only(out, "rmsprop_step")
    grad_avg = rest[0] if centered else None
    buf = rest[-1] if momentum > 0 else None
    _cpu.rmsprop_step(param, grad, square_avg, grad_avg, buf, lr, alpha, eps, weight_decay,
                      momentum, int(maximize))


# ----------------------------------------------------------------------------- fast lane
# Ops that cpu/fastpath.c runs whole (checks, output, kernel, Tensor) when called without
# attributes: op name -> (C entry, kernel code). Inputs in the op's order.
FAST = {
    **{name: (_cpu.fast_unary, getattr(_cpu, "UNARY_" + name.upper()))
       for name in ("neg", "abs", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "sign",
                    "sin", "cos", "reciprocal")},
    **{name: (_cpu.fast_binary, getattr(_cpu, "BINARY_" + name.upper()))
       for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum")},
    **{name + "_backward": (_cpu.fast_unary_backward, getattr(_cpu, "UNARY_" + name.upper()))
       for name in ("relu", "sigmoid", "tanh")},
}
