"""Bad arguments to every public function of ``gpucore.nn.functional`` (its ``__all__``, so a new
function is covered the day it is exported), on the CPU and on Vulkan: the variants of
tests/bad_argument_cases.py (wrong types, shapes, out-of-range and non-int dims, bool / uint8 /
int64 / float64 tensors, empty and non-contiguous tensors) of the valid calls in
tests/nn/functional_bad_argument_cases.py.

Each call must either raise a GpucoreError, TypeError, ValueError or IndexError whose message
names the function (never AttributeError, KeyError, a numpy error or a crash), or succeed:

- None or a str for a Tensor, and anything but a Tensor for a parameter annotated ``Tensor``,
  must raise (None is fine for a ``Tensor | None`` parameter: a bias);
- a call PyTorch (``torch.nn.functional.<name>``) accepts must succeed with PyTorch's result
  (values, shape, dtype), unless LIMITATIONS says why not;
- a call PyTorch refuses may succeed.

Without PyTorch the exception checks still run.
"""

from __future__ import annotations

import warnings

import pytest
from bad_argument_cases import mismatch, our_call, torch_call
from functional_bad_argument_cases import TEMPLATES, Case, f_variants, valid_call

import gpucore as gc
import gpucore.nn.functional as F
from gpucore import dispatch

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

FUNCS = sorted(F.__all__)
# Random results (dropout masks, fractional pooling's windows): compared with PyTorch by shape
# and dtype only.
RANDOM = {
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
    "gumbel_softmax",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
}
# What gpucore refuses although PyTorch accepts: function -> prefixes of the case labels, each
# with the reason in a comment.
LIMITATIONS = {
    # gpucore checks target.shape == input.shape (gpucore/nn/functional/loss.py); PyTorch
    # broadcasts a 0-d target silently
    "multilabel_soft_margin_loss": ("shape ('a', 1) ()",),
    "soft_margin_loss": ("shape ('a', 1) ()",),
    # gpucore checks bias.shape == (out_features,); PyTorch broadcasts a 0-d bias
    "linear": ("shape ('a', 2) ()",),
    # PyTorch's mean over an empty batch reads uninitialised memory (-5.6e22, 3.3e35, ...):
    # gpucore refuses it
    "multi_margin_loss": ("empty first dim",),
    "multilabel_margin_loss": ("empty first dim",),
    # linear's bias check (above), for the output projection's bias
    "multi_head_attention_forward": ("shape ('a', 12) ()",),
    # gpucore wants one dtype for input, weight and bias; PyTorch casts a float64 bias to the
    # float32 input's dtype
    "conv_tbc": ("dtype ('a', 2) gpucore.float64",),
}
# Also a limitation, for every function: gpucore.nn.functional takes floating point inputs only
# (its _check_tensor, and int64 class indices where PyTorch wants them), where PyTorch also runs
# some of them on bool / uint8 / int64 tensors (relu6, l1_loss, avg_pool2d on int64...). A dtype
# variant refused that way, with a DTypeError that names the function, is not a problem.
_FLOAT_ONLY = ("must be a floating point tensor", "must be an int64 tensor of class indices")


def _limitation(name, case, err) -> bool:
    if case.label.startswith(LIMITATIONS.get(name, ())):
        return True
    msg = str(err)
    return (
        case.kind == "dtype"
        and isinstance(err, gc.DTypeError)
        and msg.startswith(f"{name}(): ")
        and any(m in msg for m in _FLOAT_ONLY)
    )


# Known gpucore bugs: function -> {the bug: case labels}; a label ending in " [vulkan]" fails on
# Vulkan only. Those cases are run by test_known_bugs, marked xfail(strict=True), and skipped by
# test_bad_arguments.
BUGS = {}


def _torch_call(name, case):
    """(result, None) or (None, exception) of the same call in PyTorch."""
    # the lookup inside the call: a function PyTorch lacks counts as a refusal
    return torch_call(lambda *a, **k: getattr(TF, name)(*a, **k), case)


def _mismatch(name, got, want, atol, rtol) -> str | None:
    return mismatch(got, want, atol, rtol, values=name not in RANDOM)


def _check(name, case: Case, tol) -> str | None:
    """None when the call behaves (see the module docstring), else what went wrong."""
    fn = getattr(F, name)
    # an in-place function (F.relu_) changes its arguments: PyTorch's call goes first
    early = _torch_call(name, case) if torch is not None and name.endswith("_") else None
    got, err, problem = our_call(fn, case, (name,))
    if problem is not None:
        return problem
    if torch is None or (err is not None and case.strict):  # a strict variant must raise
        return None
    want, terr = early or _torch_call(name, case)
    if err is not None:
        if terr is None and not _limitation(name, case, err):
            return f"raised {type(err).__name__} ({err}) where torch succeeds"
        return None
    return None if terr is not None else _mismatch(name, got, want, *tol)


def _cases(name):
    fn = getattr(F, name)
    args, kwargs = valid_call(name, fn)
    return [Case("valid", "valid", args, kwargs), *f_variants(fn, args, kwargs)]


@pytest.mark.parametrize("name", FUNCS)
def test_valid_call(name):
    """The call the variants start from works: a function whose signature the generic call
    (every required parameter a float32 tensor of shape (3, 4)) cannot satisfy needs a
    TEMPLATES entry in tests/nn/functional_bad_argument_cases.py."""
    fn = getattr(F, name)
    args, kwargs = valid_call(name, fn)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        where = "its TEMPLATES entry" if name in TEMPLATES else "the generic call"
        pytest.fail(f"{name}: {where} fails ({type(e).__name__}: {e}); add or fix a template")


def _bug_labels(name, backend) -> dict:
    """{case label: the bug} of BUGS for a function on a backend."""
    out = {}
    for bug, labels in BUGS.get(name, {}).items():
        for label in labels:
            if not label.endswith(" [vulkan]"):
                out[label] = bug
            elif backend == "vulkan":
                out[label.removesuffix(" [vulkan]")] = bug
    return out


@pytest.mark.parametrize("name", FUNCS)
def test_bad_arguments(name, tolerance, request):
    known = _bug_labels(name, request.node.callspec.params["tolerance"])
    problems = []
    for case in _cases(name):
        if case.label in known:
            continue
        why = _check(name, case, tolerance)
        if why is not None:
            problems.append(f"{case.label}: {why}")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


_BUG_PARAMS = [
    pytest.param(
        name,
        label,
        backend,
        marks=pytest.mark.xfail(strict=True, reason=f"{name}: {bug}"),
        id=f"{backend}-{name}-{label}",
    )
    for name in sorted(BUGS)
    for backend in ("cpu", "vulkan")
    for label, bug in sorted(_bug_labels(name, backend).items())
]


@pytest.mark.parametrize(("name", "label", "backend"), _BUG_PARAMS)
def test_known_bugs(name, label, backend, request):
    """Each BUGS entry still fails (strict xfail: a fix turns it into an XPASS failure, to be
    moved out of BUGS)."""
    tol = (1e-5, 1e-4)
    if backend == "vulkan":
        request.getfixturevalue("vulkan")
        tol = (1e-4, 1e-3)
    case = next(c for c in _cases(name) if c.label == label)
    why = _check(name, case, tol)
    if why is None and torch is None:
        pytest.skip("shown only by the comparison with PyTorch, which is not installed")
    assert why is None, why


def test_bugs_and_limitations_name_real_cases():
    """Every BUGS / LIMITATIONS entry names an exported function and an existing case."""
    for name, labels in LIMITATIONS.items():
        have = [c.label for c in _cases(name)]
        assert all(any(h.startswith(x) for h in have) for x in labels), (name, labels)
    for name in BUGS:
        have = {c.label for c in _cases(name)}
        assert set(_bug_labels(name, "vulkan")) <= have, name


def test_every_function_gets_every_kind_of_variant():
    """The harness reaches what it claims: each kind of variant occurs for most functions."""
    kinds: dict = {}
    for name in FUNCS:
        for case in _cases(name):
            kinds.setdefault(case.kind, set()).add(name)
    for kind in ("type", "shape", "dtype", "empty", "noncontig"):
        assert len(kinds.get(kind, ())) >= len(FUNCS) - 2, kind
    assert len(kinds["dim"]) >= 5


def test_the_vulkan_variants_run_on_the_device(vulkan):
    """Under the 'vulkan' policy the valid calls reach the device (else the Vulkan half of
    test_bad_arguments would only test the CPU again)."""
    with dispatch.trace_ops() as ops, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in FUNCS:
            fn = getattr(F, name)
            args, kwargs = valid_call(name, fn)
            fn(*args, **kwargs)
    on_device = {op for op, backend, _ in ops if backend == "vulkan"}
    assert len(on_device) >= 20, sorted(on_device)
