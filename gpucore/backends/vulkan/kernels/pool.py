"""Vulkan kernels: im2col / col2im (shaders/im2col.comp), the lowering of conv2d and pooling.

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

from . import _push, contiguous, groups_1d, kernel, launch, local_size

IM2COL, COL2IM = 0, 1


def _conv_push(total, x_off, col_off, h, w, kernel, stride, padding, dilation, oh, ow):
    # Mirrors im2col.comp's Push block (15 words).
    return _push(total, x_off, col_off, h, w, *kernel, *stride, *padding, *dilation, oh, ow)


def _planes_per_dispatch(be, plane_x: int, plane_col: int) -> int:
    limit = be.ctx.limits["maxStorageBufferRange"] - be.align  # room for the aligned-down start
    biggest = 4 * max(plane_x, plane_col, 1)
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
    step = _planes_per_dispatch(be, plane_x, plane_col)
    local = local_size(be)
    for p0 in range(0, planes, step):
        p1 = min(planes, p0 + step)
        xs, cs = xf[p0:p1], cf[p0:p1]
        total = (p1 - p0) * (plane_col if mode == IM2COL else plane_x)
        push = _conv_push(total, be.operand(xs).offset, be.operand(cs).offset, h, w,
                          kernel, stride, padding, dilation, oh, ow)
        launch(be, "im2col", (mode,), [(xs, mode == COL2IM), (cs, mode == IM2COL)], push,
               groups_1d(total, local), local=local, label="im2col" if mode == IM2COL else "col2im")


@kernel("im2col")
def _im2col(be, out, x, kernel, stride, padding, dilation, src):
    n, c, h, w = x.shape
    _run(be, IM2COL, contiguous(be, x), out, n, c, h, w, kernel, stride, padding, dilation)


@kernel("col2im")
def _col2im(be, out, col, shape, kernel, stride, padding, dilation):
    n, c, h, w = shape
    _run(be, COL2IM, out, contiguous(be, col), n, c, h, w, kernel, stride, padding, dilation)
