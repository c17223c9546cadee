"""Vulkan kernels: im2col / col2im (shaders/im2col.comp), the lowering of conv2d and average
pooling, and max_pool2d / max_pool2d_backward (shaders/pool.comp, at the end).

Layout and semantics are cpu/im2col.c's (see cpu/README.md): col [n, c*kh*kw, oh*ow], row
``(ci*kh + ki)*kw + kj``. im2col writes one col element per invocation; col2im is a gather, one
x element per invocation summing the col entries im2col would have read from it, in the CPU's
order, so both match the CPU kernels bit for bit and need no atomics.

Only the plane index ``b*c + ci`` matters to the shader: x is [planes, h, w] and col is
[planes, kh*kw*oh*ow]. Work larger than one storage binding (maxStorageBufferRange) is split
into dispatches over ranges of planes; a single plane larger than a binding raises the backend's
DeviceError (run that conv on the CPU).
"""

from __future__ import annotations

from .... import _cpu
from .... import dtypes as D
from .common import _push, contiguous, groups_1d, kernel, launch, local_size

# im2col.comp's MODE, from cpu/opcodes.def
IM2COL, COL2IM = _cpu.OPCODES["im2col_mode"]["IM2COL"], _cpu.OPCODES["im2col_mode"]["COL2IM"]


def _conv_push(total, x_off, col_off, h, w, kernel, stride, padding, dilation, oh, ow):
    # Mirrors im2col.comp's Push block (15 words).
    return _push(total, x_off, col_off, h, w, *kernel, *stride, *padding, *dilation, oh, ow)


def _planes_per_dispatch(be, plane_x: int, plane_col: int, item: int = 4) -> int:
    limit = be.ctx.limits["maxStorageBufferRange"] - be.align  # room for the aligned-down start
    biggest = item * max(plane_x, plane_col, 1)
    return max(1, limit // biggest)


def _run(be, mode, x, col, n, c, h, w, kernel, stride, padding, dilation):
    oh = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    planes = n * c
    plane_x = h * w
    plane_col = kernel[0] * kernel[1] * oh * ow
    if planes == 0:  # oh, ow >= 1 (the op's shape check), so only an empty batch is empty
        return
    xf = x.reshape(planes, plane_x)
    cf = col.reshape(planes, plane_col)
    step = _planes_per_dispatch(be, plane_x, plane_col, x.itemsize)
    # float64 (the compiled executor's float64 conv2d): word pairs, im2col only
    spec = (mode,) if x.itemsize == 4 else (mode, 2)
    local = local_size(be)
    for p0 in range(0, planes, step):
        p1 = min(planes, p0 + step)
        xs, cs = xf[p0:p1], cf[p0:p1]
        total = (p1 - p0) * (plane_col if mode == IM2COL else plane_x)
        push = _conv_push(
            total,
            be.operand(xs).offset,
            be.operand(cs).offset,
            h,
            w,
            kernel,
            stride,
            padding,
            dilation,
            oh,
            ow,
        )
        launch(
            be,
            "im2col",
            spec,
            [(xs, mode == COL2IM), (cs, mode == IM2COL)],
            push,
            groups_1d(total, local),
            local=local,
            label="im2col" if mode == IM2COL else "col2im",
        )


@kernel("im2col")
def _im2col(be, out, x, kernel, stride, padding, dilation, src):
    n, c, h, w = x.shape
    _run(be, IM2COL, contiguous(be, x), out, n, c, h, w, kernel, stride, padding, dilation)


@kernel("col2im")
def _col2im(be, out, col, shape, kernel, stride, padding, dilation):
    n, c, h, w = shape
    _run(be, COL2IM, out, contiguous(be, col), n, c, h, w, kernel, stride, padding, dilation)


# ----------------------------------------------------------------------------- max pooling
# shaders/pool.comp: MODE FORWARD = max_pool2d (values + int64 indices), BACKWARD =
# max_pool2d_backward (a gather over input pixels comparing the stored indices; no atomics).
POOL_FWD, POOL_BWD = _cpu.OPCODES["pool_mode"]["FORWARD"], _cpu.OPCODES["pool_mode"]["BACKWARD"]


def _pool_push(total, x_off, v_off, i_off, h, w, kernel, stride, padding, dilation, oh, ow):
    # Mirrors pool.comp's Push block (16 words); i_off in 32-bit words.
    return _push(total, x_off, v_off, i_off, h, w, *kernel, *stride, *padding, *dilation, oh, ow)


def _pool_run(be, mode, x, v, ind, kernel, stride, padding, dilation):
    """x [N, C, H, W], v and ind [N, C, OH, OW] (float32, int64), all contiguous on the device."""
    n, c, h, w = x.shape
    oh, ow = v.shape[2:]
    planes = n * c
    if planes == 0:
        return
    xf = x.reshape(planes, h * w)
    vf = v.reshape(planes, oh * ow)
    inf = ind.reshape(planes, oh * ow)
    step = _planes_per_dispatch(be, h * w, 2 * oh * ow)  # indices: two words an element
    local = local_size(be)
    for p0 in range(0, planes, step):
        p1 = min(planes, p0 + step)
        xs, vs, i_s = xf[p0:p1], vf[p0:p1], inf[p0:p1]
        total = (p1 - p0) * (oh * ow if mode == POOL_FWD else h * w)
        push = _pool_push(
            total,
            be.operand(xs).offset,
            be.operand(vs).offset,
            2 * be.operand(i_s).offset,
            h,
            w,
            kernel,
            stride,
            padding,
            dilation,
            oh,
            ow,
        )
        fwd = mode == POOL_FWD
        launch(
            be,
            "pool",
            (mode,),
            [(xs, not fwd), (vs, fwd), (i_s, fwd)],
            push,
            groups_1d(total, local),
            local=local,
            label="max_pool2d" if fwd else "max_pool2d_backward",
        )


def _accepts_pool(inputs, specs):
    """float32 input; float32 values and int64 indices."""
    return inputs[0]._dtype is D.float32 and specs[0][1] is D.float32 and specs[1][1] is D.int64


def _accepts_pool_backward(inputs, specs):
    """float32 gradient, int64 indices; float32 result."""
    g, ind = inputs
    return g._dtype is D.float32 and ind._dtype is D.int64 and specs[1] is D.float32


@kernel("max_pool2d", accepts=_accepts_pool)
def _max_pool2d(be, outs, x, kernel, stride, padding, dilation, ceil_mode, src):
    vals, ind = outs
    _pool_run(be, POOL_FWD, contiguous(be, x), vals, ind, kernel, stride, padding, dilation)


@kernel("max_pool2d_backward", accepts=_accepts_pool_backward)
def _max_pool2d_backward(be, out, g, indices, input_shape, kernel, stride, padding, dilation):
    _pool_run(
        be,
        POOL_BWD,
        out,
        contiguous(be, g),
        contiguous(be, indices),
        kernel,
        stride,
        padding,
        dilation,
    )
