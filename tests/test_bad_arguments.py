"""Bad arguments to every public function (``api.FUNCTIONS``, so a new function is covered the
day it is declared), on the CPU and on Vulkan: wrong types (None, str, float, numpy array where a
Tensor is expected), wrong shapes, out-of-range and non-int dims, other dtypes (bool, uint8,
int64, float64), empty and non-contiguous tensors (the variants: tests/bad_argument_cases.py).

Each call must either raise a GpucoreError, TypeError, ValueError or IndexError whose message
names the function (never AttributeError, KeyError, a numpy error or a crash), or succeed:

- None or a str for a Tensor, and anything but a Tensor for a parameter annotated ``Tensor``,
  must raise (a number or array may stand in only where the function takes numbers: ``add``);
- a call PyTorch accepts must succeed with PyTorch's result (values, shape, dtype), unless
  LIMITATIONS says why not;
- a call PyTorch refuses may succeed (gpucore promotes where PyTorch insists on equal dtypes).

Without PyTorch the exception checks still run.
"""

from __future__ import annotations

import pytest
from bad_argument_cases import TEMPLATES, Case, mismatch, our_call, torch_call, valid_call, variants

import gpucore as gc
from gpucore import dispatch
from gpucore.ops import api

try:
    import torch
except ImportError:
    torch = None

FUNCS = sorted(api.FUNCTIONS)
# Random results: compared with PyTorch by shape and dtype only.
RANDOM = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like"}
RANDOM |= {"multinomial", "randperm", "normal", "bernoulli", "dropout", "poisson", "binomial"}
RANDOM |= {"feature_dropout", "feature_dropout_", "svd_lowrank", "pca_lowrank", "lobpcg"}
# Functions PyTorch has under another name than torch.<name>.
TORCH_NAMES = {
    "expand": lambda x, *sizes: x.expand(*sizes),
    "gelu": lambda *a, **k: torch.nn.functional.gelu(*a, **k),
}
# What gpucore refuses although PyTorch accepts: function -> prefixes of the case labels, each
# with the reason in a comment.
LIMITATIONS = {
    # PyTorch takes a uint8 condition with a deprecation warning; gpucore wants bool
    "where": ("dtype ('a', 0) gpucore.uint8",),
    # the empty variant empties running_mean too: (0,) statistics for 4 channels, which
    # gpucore's F.batch_norm refuses by shape
    "batch_norm": ("empty first dim",),
    # gpucore's as_strided reads a contiguous tensor's elements (a copy), not a storage
    "as_strided": ("noncontig",),
    "as_strided_copy": ("noncontig",),
    "as_strided_scatter": ("noncontig",),
}
# The top-level forms of nn.functional (gpucore/nn/functional/toplevel.py) share F's limitation
# (tests/nn/test_functional_bad_arguments.py): floating point inputs only, where PyTorch runs
# some on integer tensors; such a refusal is a DTypeError naming the function.
NN_FORMS = {"cosine_similarity", "pairwise_distance", "conv1d", "conv2d", "conv_transpose2d"}
NN_FORMS |= {"max_pool2d", "avg_pool1d", "adaptive_avg_pool1d", "pixel_shuffle", "selu", "celu"}
NN_FORMS |= {"threshold", "hardshrink", "rrelu", "layer_norm", "group_norm", "batch_norm"}
NN_FORMS |= {"instance_norm", "embedding", "dropout", "conv3d", "conv_transpose3d", "max_pool3d"}
NN_FORMS |= {"dropout_", "alpha_dropout_", "feature_alpha_dropout_", "celu_", "selu_", "rrelu_"}
NN_FORMS |= {"threshold_"}  # the top-level in-place forms (gpucore/ops/inplace_forms.py)
NN_FORMS |= {"conv_tbc", "feature_dropout", "feature_dropout_", "embedding_renorm_", "rms_norm"}
NN_FORMS |= {"native_channel_shuffle", "pixel_unshuffle", "bilinear", "prelu", "convolution"}


def _float_only(name, case, err) -> bool:
    return (
        name in NN_FORMS
        and case.kind == "dtype"
        and isinstance(err, gc.DTypeError)
        and any(m in str(err) for m in ("floating point", "int64 (or int32) tensor of indices"))
    )


def _torch_call(name, case):
    """(result, None) or (None, exception) of the same call in PyTorch."""
    return torch_call(TORCH_NAMES.get(name) or getattr(torch, name), case)


def _mismatch(name, got, want, atol, rtol) -> str | None:
    return mismatch(got, want, atol, rtol, values=name not in RANDOM)


def _check(name, fn, case: Case, tol) -> str | None:
    """None when the call behaves (see the module docstring), else what went wrong."""
    # an in-place function (gpucore.exp_) changes its arguments: PyTorch's call goes first
    early = _torch_call(name, case) if torch is not None and name.endswith("_") else None
    got, err, problem = our_call(fn, case, (name, getattr(fn, "__name__", name)), quiet=False)
    if problem is not None:
        return problem
    if torch is None:
        return None
    want, terr = early if early is not None else _torch_call(name, case)
    if err is not None:
        limited = case.label.startswith(LIMITATIONS.get(name, ())) or _float_only(name, case, err)
        if terr is None and not limited:
            return f"raised {type(err).__name__} ({err}) where torch succeeds"
        return None
    return None if terr is not None else _mismatch(name, got, want, *tol)


@pytest.mark.parametrize("name", FUNCS)
def test_valid_call(name):
    """The call the variants start from works: a function whose signature the generic call
    (every required parameter a float32 tensor of shape (3, 4)) cannot satisfy needs a
    TEMPLATES entry in tests/bad_argument_cases.py."""
    fn = api.FUNCTIONS[name]
    args, kwargs = valid_call(name, fn)
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        where = "its TEMPLATES entry" if name in TEMPLATES else "the generic call"
        pytest.fail(f"{name}: {where} fails ({type(e).__name__}: {e}); add or fix a template")


@pytest.mark.parametrize("name", FUNCS)
def test_bad_arguments(name, tolerance):
    fn = api.FUNCTIONS[name]
    args, kwargs = valid_call(name, fn)
    problems = []
    for case in [Case("valid", "valid", args, kwargs), *variants(fn, args, kwargs)]:
        why = _check(name, fn, case, tolerance)
        if why is not None:
            problems.append(f"{case.label}: {why}")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def test_every_function_gets_every_kind_of_variant():
    """The harness reaches what it claims: each kind of variant occurs for most functions."""
    kinds: dict = {}
    for name in FUNCS:
        fn = api.FUNCTIONS[name]
        for case in variants(fn, *valid_call(name, fn)):
            kinds.setdefault(case.kind, set()).add(name)
    for kind in ("type", "shape", "dtype", "empty", "noncontig"):
        # all but the functions that take no tensor (rand, randn, randint, randperm,
        # tril_indices, triu_indices, the five window functions) and a margin
        assert len(kinds.get(kind, ())) >= len(FUNCS) - 13, kind
    assert len(kinds["dim"]) >= 20


def test_the_vulkan_variants_run_on_the_device(vulkan):
    """Under the 'vulkan' policy the valid calls reach the device (else the Vulkan half of
    test_bad_arguments would only test the CPU again)."""
    with dispatch.trace_ops() as ops:
        for name in FUNCS:
            if name not in RANDOM:
                args, kwargs = valid_call(name, api.FUNCTIONS[name])
                api.FUNCTIONS[name](*args, **kwargs)
    on_device = {op for op, backend, _ in ops if backend == "vulkan"}
    assert len(on_device) >= 20, sorted(on_device)
