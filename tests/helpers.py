"""Shared test helpers: one call checks an op's forward against numpy (float64) and its backward
with gradcheck, in the spirit of tinygrad's ``helper_test_op``.

    check_op(lambda x, y: x * y, None, [(3, 4), (4,)])

runs ``gc_fn`` on float32 tensors (contiguous, then as non-contiguous strided views) and on
float64 tensors, compares each with ``np_fn`` evaluated in float64 on the same values, then runs
``gpucore.autograd.gradcheck`` (and optionally ``gradgradcheck``) on float64 inputs.

Backends: by default the checks run under the current device policy (GPUCORE_DEVICE). Set
GPUCORE_TEST_BACKENDS=cpu,vulkan to run every check_op once per listed policy against the same
numpy reference (a policy whose device is missing is skipped).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os

import numpy as np

import gpucore
from gpucore.autograd import gradcheck, gradgradcheck

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _test_policies() -> list:
    names = [n.strip() for n in os.environ.get("GPUCORE_TEST_BACKENDS", "").split(",")]
    names = [n for n in names if n]
    if not names:
        return [None]  # the current policy
    from gpucore import dispatch

    return [n for n in names if n != "vulkan" or dispatch.vulkan_backend(allow_cpu=True)]


POLICIES = _test_policies()


def on_policy(policy):
    """A context running ops under ``policy`` ('cpu', 'vulkan'), or unchanged for None."""
    if policy is None:
        return contextlib.nullcontext()
    return gpucore.dispatch.device_policy(policy)


def np_gelu(x, approximate="none"):
    """numpy reference of gelu in float64."""
    x = np.asarray(x, np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * _erfc(-x / math.sqrt(2))  # erfc: no cancellation for very negative x


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_im2col(x, k, s=(1, 1), p=(0, 0), d=(1, 1)):
    n, c, h, w = x.shape
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    cols = np.zeros((n, c * k[0] * k[1], oh * ow))
    for ci in range(c):
        for ki in range(k[0]):
            for kj in range(k[1]):
                r0, c0 = ki * d[0], kj * d[1]
                patch = xp[
                    :,
                    ci,
                    r0 : r0 + s[0] * (oh - 1) + 1 : s[0],
                    c0 : c0 + s[1] * (ow - 1) + 1 : s[1],
                ]
                cols[:, (ci * k[0] + ki) * k[1] + kj] = patch.reshape(n, -1)
    return cols


def np_col2im(cols, shape, k, s=(1, 1), p=(0, 0), d=(1, 1)):
    n, c, h, w = shape
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    xp = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    for ci in range(c):
        for ki in range(k[0]):
            for kj in range(k[1]):
                r0, c0 = ki * d[0], kj * d[1]
                xp[
                    :,
                    ci,
                    r0 : r0 + s[0] * (oh - 1) + 1 : s[0],
                    c0 : c0 + s[1] * (ow - 1) + 1 : s[1],
                ] += cols[:, (ci * k[0] + ki) * k[1] + kj].reshape(n, oh, ow)
    return xp[:, :, p[0] : p[0] + h, p[1] : p[1] + w]


def same_as_torch(ours, theirs) -> None:
    """A gpucore tensor equals a torch tensor: dtype by name, values exactly (NaN equal to NaN;
    bfloat16 compared through float32, which numpy can hold)."""
    import torch  # noqa: PLC0415 - only the tests that already import torch call this

    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    a = ours.float().numpy() if ours.dtype is gpucore.bfloat16 else ours.numpy(force=True)
    b = theirs.float().numpy() if theirs.dtype is torch.bfloat16 else theirs.numpy()
    np.testing.assert_array_equal(a, b)


def rand(shape, low=-2.0, high=2.0, seed=0) -> np.ndarray:
    """float64 values that are exactly representable in float32 (so both paths see the same)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(np.float32).astype(np.float64)


def to_np(t) -> np.ndarray:
    """A gpucore tensor's values as a numpy array (bfloat16 widened to float32)."""
    return t.detach().numpy(force=True)


def strided(a: np.ndarray, dtype=gpucore.float32) -> gpucore.Tensor:
    """A non-contiguous tensor view (every other element of a wider last dim) holding ``a``."""
    if a.ndim == 0 or a.size == 0:
        return gpucore.tensor(a, dtype=dtype)
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), np.float64)
    big[..., ::2] = a
    t = gpucore.tensor(big, dtype=dtype)[..., ::2]
    assert not t.is_contiguous() or a.shape[-1] == 1
    return t


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what=""):
    """Compare a gpucore tensor (or a tuple of them) with numpy results, shapes included."""
    if isinstance(actual, (tuple, list)):
        assert isinstance(expected, (tuple, list)) and len(actual) == len(expected), what
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol, atol, what)
        return
    got = to_np(actual) if isinstance(actual, gpucore.Tensor) else np.asarray(actual)
    exp = np.asarray(expected)
    assert tuple(got.shape) == tuple(exp.shape), f"{what}: shape {got.shape} != {exp.shape}"
    if exp.dtype.kind in "biu":
        np.testing.assert_array_equal(got, exp, err_msg=what)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64), exp, rtol=rtol, atol=atol, equal_nan=True, err_msg=what
        )


def check_op(
    gc_fn,
    np_fn,
    shapes,
    *,
    rtol=1e-5,
    atol=1e-6,
    grad=True,
    gradgrad=False,
    low=-2.0,
    high=2.0,
    vals=None,
    noncontig=True,
    grad_atol=1e-5,
    grad_rtol=1e-3,
    seed=0,
):
    """Check ``gc_fn`` (gpucore) against ``np_fn`` (numpy, float64; None: reuse ``gc_fn``).

    shapes: one shape per input; or give ``vals`` (float64 arrays) directly. Forward runs on
    float32 contiguous inputs, float32 strided views and float64; gradcheck on float64.
    """
    np_fn = gc_fn if np_fn is None else np_fn
    if vals is None:
        vals = [rand(s, low, high, seed + i) for i, s in enumerate(shapes)]
    vals = [np.asarray(v, np.float64) for v in vals]
    expected = np_fn(*[v.copy() for v in vals])
    for policy in POLICIES:
        with on_policy(policy):
            _check_op_once(
                gc_fn, vals, expected, rtol, atol, grad, gradgrad, noncontig, grad_atol, grad_rtol
            )


def _check_op_once(
    gc_fn, vals, expected, rtol, atol, grad, gradgrad, noncontig, grad_atol, grad_rtol
):
    out = gc_fn(*[gpucore.tensor(v, dtype=gpucore.float32) for v in vals])
    _check_dtype(out, gpucore.float32)
    assert_close(out, expected, rtol, atol, "float32 forward")
    if noncontig:
        out = gc_fn(*[strided(v) for v in vals])
        assert_close(out, expected, rtol, atol, "float32 forward on strided views")
    out = gc_fn(*[gpucore.tensor(v, dtype=gpucore.float64) for v in vals])
    _check_dtype(out, gpucore.float64)
    assert_close(out, expected, 1e-9, 1e-12, "float64 forward")

    if grad or gradgrad:
        xs = [gpucore.tensor(v, dtype=gpucore.float64, requires_grad=True) for v in vals]
        if grad:
            assert gradcheck(gc_fn, xs, atol=grad_atol, rtol=grad_rtol)
        if gradgrad:
            assert gradgradcheck(gc_fn, xs, atol=grad_atol, rtol=grad_rtol)


def _check_dtype(out, dt):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if o.dtype.is_floating_point:
            assert o.dtype is dt, f"float output has dtype {o.dtype}, expected {dt}"


def check_grad(gc_fn, *inputs, atol=1e-5, rtol=1e-3, gradgrad=False):
    """gradcheck (and gradgradcheck) on float64 copies of numpy arrays or tensors."""
    xs = []
    for a in inputs:
        if isinstance(a, gpucore.Tensor):
            xs.append(a)
        else:
            xs.append(
                gpucore.tensor(np.asarray(a, np.float64), dtype=gpucore.float64, requires_grad=True)
            )
    assert gradcheck(gc_fn, xs, atol=atol, rtol=rtol)
    if gradgrad:
        assert gradgradcheck(gc_fn, xs, atol=atol, rtol=rtol)


def sum_to(g: np.ndarray, shape) -> np.ndarray:
    """numpy: sum a broadcast gradient back to ``shape`` (the reference for broadcasting)."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def leaf(values, dtype=gpucore.float64):
    """A tensor of ``values`` (float64 unless ``dtype``) that requires grad: a graph leaf."""
    return gpucore.tensor(values, dtype=dtype, requires_grad=True)


def num_grad(f, x: np.ndarray, eps=1e-6) -> np.ndarray:
    """Central-difference gradient of a scalar numpy function f at x (float64)."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.reshape(-1)[i] += eps
        xm.reshape(-1)[i] -= eps
        g.reshape(-1)[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


# ----------------------------------------------------------------------------- op references
def op_reference(name: str, **attrs):
    """(ref, low, high) of registry op ``name`` from the samples declared next to it: its float64
    numpy reference (taking the inputs, with ``attrs`` bound) and the range its first sample
    input spans (so log gets positive inputs). Tests that list ops derive their references here,
    so a new op needs no edit in them."""
    from gpucore.ops.registry import REGISTRY

    for s in REGISTRY[name].samples():
        if all(s.attrs.get(k) == v for k, v in attrs.items()) and s.inputs and s.inputs[0].size > 1:
            x = s.inputs[0]
            return functools.partial(s.ref, **s.attrs), float(x.min()), float(x.max())
    raise LookupError(f"op {name!r} declares no sample with attributes {attrs}")


def unary_code_ops() -> dict:
    """Each unary code of cpu/opcodes.def -> (registry op, attrs): gelu_tanh is gelu's tanh form."""
    from gpucore import _cpu

    out = {}
    for code in _cpu.OPCODES["unary"]:
        if code == "gelu_tanh":
            out[code] = ("gelu", {"approximate": "tanh"})
        elif code == "gelu":
            out[code] = ("gelu", {"approximate": "none"})
        else:
            out[code] = (code, {})
    return out
