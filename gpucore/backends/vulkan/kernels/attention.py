"""Attention kernels (gpucore/ops/attention.py): the forward of scaled_dot_product_attention
through shaders/attention.comp (fused.attention, the runtime's shader: one dispatch, online
softmax, any strides). The shader keeps no logsumexp, so the op runs here only without
with_lse, with a float (additive) mask or none, and one query head per key/value head; the
rest goes to the C extension, and gradients on the device are the op's composition."""

from __future__ import annotations

from .... import dtypes as D
from .common import kernel
from .fused import attention as _attention


def _accepts(inputs, specs) -> bool:
    q, k = inputs[0], inputs[1]
    if specs[1][0] != (0,) or k.shape[1] != q.shape[1]:  # lse wanted, or grouped heads
        return False
    return all(t._dtype is D.float32 for t in inputs)


@kernel("scaled_dot_product_attention", accepts=_accepts)
def _sdpa(be, outs, q, k, v, mask=None, *, scale, causal, with_lse):
    _attention(be, outs[0], q, k, v, mask, float(scale), bool(causal))
