"""Vulkan kernel of ``native_layer_norm`` (gpucore/ops/norm.py): the runtime's fused layer-norm
shader (shaders/layer_norm.comp, kernels/fused.py) with its STATS outputs, each row's mean and
rstd. float32, float16 and bfloat16 are read and written by the shader itself (float32 inside,
one rounding per result): eager gpucore.nn.functional.layer_norm on device tensors runs it, one
dispatch, instead of a composition of ops (a widened one for halves). The backward has no
shader: gpucore/ops/norm_device.py composes it on the device in float32."""

from __future__ import annotations

import math

from .... import dtypes as D
from .common import kernel
from .fused import layer_norm

_FLOATS = (D.float32, D.float16, D.bfloat16)


def _accepts(inputs, specs):
    dt = inputs[0]._dtype
    return (
        dt in _FLOATS and all(t._dtype is dt for t in inputs) and all(odt is dt for _, odt in specs)
    )


@kernel("native_layer_norm", accepts=_accepts)
def _native_layer_norm(be, outs, x, w, b, k, eps, affine):
    out, mean, rstd = outs
    n = math.prod(x.shape[x.ndim - k :])
    layer_norm(
        be,
        out.reshape(-1),
        x.reshape(-1),
        w if affine[0] else None,
        b if affine[1] else None,
        n,
        eps,
        mean=mean,
        rstd=rstd,
    )


_native_layer_norm.half = True  # layer_norm.comp reads and writes halves (never widened)
