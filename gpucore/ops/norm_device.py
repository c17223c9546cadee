"""layer_norm's backward for device tensors (gpucore/ops/norm.py): native_layer_norm runs on the
Vulkan device (a shader reading float32, float16 or bfloat16) but its backward op has no shader,
and running it would take the host round trip (and be refused inside a captured graph); so the
gradients are composed from gpucore ops on the device, in float32."""

from __future__ import annotations

from .. import dtypes as D


def device_ln_grads(x, w, mean, rstd, g, k, affine, want):
    """layer_norm's (gx, gw, gb) from the saved mean / rstd in gpucore ops, in float32 whatever
    x's dtype (the C kernel's arithmetic), rounded once to it: for device tensors, where
    LAYER_NORM_BACKWARD has no kernel and would go through the host."""
    dims = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    keep = tuple(x.shape[: x.ndim - k]) + (1,) * k
    f32 = x.dtype is not D.float32
    x32, g32 = (x.float(), g.float()) if f32 else (x, g)
    r = rstd.reshape(keep)
    r = r.float() if f32 else r
    xhat = (x32 - (mean.reshape(keep).float() if f32 else mean.reshape(keep))) * r
    gw = gb = gx = None
    if want[0]:
        gy = g32 * (w.float() if f32 else w) if affine[0] else g32
        gx = r * (gy - gy.mean(dims, keepdim=True) - xhat * (gy * xhat).mean(dims, keepdim=True))
        gx = gx.to(x.dtype)
    if want[1]:
        gw = (g32 * xhat).sum(lead).to(w.dtype)
    if want[2]:
        gb = g32.sum(lead).to(w.dtype)
    return gx, gw, gb
