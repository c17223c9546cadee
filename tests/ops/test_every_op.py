"""Every registry op, on every backend, against its float64 reference (PyTorch's OpInfo, ggml's
test-backend-ops): the samples are declared next to each op (``defop(..., samples=...)``).

- forward: float64 and float32 on the CPU, float32 under the 'vulkan' policy; an op with a Vulkan
  kernel must actually run there on its float32 samples (else its shader would go untested);
- backward: ``gradcheck`` in float64 on the CPU for differentiable ops, and on Vulkan the float32
  gradients against the CPU's float64 ones;
- an op without samples fails, so a new op cannot go unchecked.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore import dispatch
from gpucore.autograd import gradcheck
from gpucore.backends.vulkan.kernels import KERNELS as VULKAN_KERNELS
from gpucore.ops.registry import REGISTRY, apply

OPS = sorted(REGISTRY)
_FLOAT = (gpucore.float32, gpucore.float64)


def _samples(name):
    op = REGISTRY[name]
    if op.samples is None:
        pytest.fail(f"op {name!r} declares no samples: add defop(..., samples=...) next to it")
    return op, op.samples()


def _tensors(sample, dtype, requires_grad=False):
    out = []
    for a in sample.inputs:
        if a.dtype.kind == "f":
            out.append(gpucore.tensor(a, dtype=dtype, requires_grad=requires_grad))
        else:
            out.append(gpucore.tensor(a))
    return out


def _run(op, sample, tensors):
    if sample.call is not None:
        return sample.call(op, *tensors, **sample.attrs)
    return apply(op, *tensors, **sample.attrs)


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _compare(name, sample, got, dtype):
    want = _as_tuple(sample.ref(*sample.inputs, **sample.attrs))
    got = _as_tuple(got)
    assert len(got) == len(want), f"{name}: {len(got)} outputs, the reference has {len(want)}"
    atol, rtol = (sample.atol, sample.rtol) if dtype is gpucore.float32 else sample.tol64
    for k, (g, w) in enumerate(zip(got, want)):
        g = g.numpy() if isinstance(g, gpucore.Tensor) else np.asarray(g)
        w = np.asarray(w)
        assert g.shape == w.shape, f"{name} output {k}: shape {g.shape}, reference {w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {k} {sample}")
        else:
            np.testing.assert_allclose(
                g.astype(np.float64),
                w,
                atol=atol,
                rtol=rtol,
                err_msg=f"{name} output {k} {sample} ({dtype})",
            )


def test_every_op_declares_samples():
    missing = sorted(n for n, op in REGISTRY.items() if op.samples is None)
    assert not missing, f"ops without samples (defop(..., samples=...)): {missing}"


@pytest.mark.parametrize("name", OPS)
def test_forward_on_the_cpu(name):
    op, samples = _samples(name)
    for s in samples:
        for dt in _FLOAT:
            with gpucore.device_policy("cpu"):
                _compare(name, s, _run(op, s, _tensors(s, dt)), dt)


def _differentiable(op, sample):
    return (
        op.backward is not None and sample.grad and any(a.dtype.kind == "f" for a in sample.inputs)
    )


def _first_output(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize("name", OPS)
def test_backward_on_the_cpu_by_finite_differences(name):
    op, samples = _samples(name)
    for s in samples:
        if not _differentiable(op, s):
            continue
        with gpucore.device_policy("cpu"):
            ins = _tensors(s, gpucore.float64, requires_grad=True)
            diff = [t for t in ins if t.requires_grad]

            def f(*xs, _ins=ins, _s=s):
                it = iter(xs)
                args = [next(it) if t.requires_grad else t for t in _ins]
                return _first_output(_run(op, _s, args))

            assert gradcheck(f, tuple(diff), atol=1e-6, rtol=1e-4), f"{name} {s}"


def _grads(op, sample, dtype):
    ins = _tensors(sample, dtype, requires_grad=True)
    out = _first_output(_run(op, sample, ins))
    weight = gpucore.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)), dtype=dtype)
    (out * weight).sum().backward()
    return [t.grad.numpy() if t.grad is not None else None for t in ins if t.requires_grad]


@pytest.mark.parametrize("name", OPS)
def test_vulkan_matches_the_reference(name, vulkan):
    op, samples = _samples(name)
    for s in samples:
        with dispatch.trace_ops() as ran:
            got = _run(op, s, _tensors(s, gpucore.float32))
        _compare(name, s, got, gpucore.float32)
        where = {backend for n, backend, _ in ran if n == name}
        if name in VULKAN_KERNELS and s.on_vulkan and all(a.size for a in s.inputs):
            assert where == {"vulkan"}, (
                f"{name} has a Vulkan kernel but its sample {s} ran on {sorted(where)}; if the "
                "kernel rightly refuses these inputs, declare the sample with on_vulkan=False"
            )
        if _differentiable(op, s) and all(a.size for a in s.inputs):
            with gpucore.device_policy("cpu"):
                want = _grads(op, s, gpucore.float64)
            for g, w in zip(_grads(op, s, gpucore.float32), want):
                assert (g is None) == (w is None), f"{name} gradient {s}: {g} vs {w}"
                if w is not None:
                    np.testing.assert_allclose(
                        g, w, atol=10 * s.atol, rtol=10 * s.rtol, err_msg=f"{name} gradient {s}"
                    )
