"""The exception hierarchy and the errors bad input raises (type and a fragment of the message)."""

import numpy as np
import pytest

import gpucore
from gpucore import errors

HIERARCHY = [
    ("ShapeError", ValueError),
    ("DTypeError", TypeError),
    ("GradDTypeError", RuntimeError),
    ("ArgumentTypeError", TypeError),
    ("DeviceError", RuntimeError),
    ("SerializationError", ValueError),
    ("GpucoreIndexError", IndexError),
    ("AutogradError", RuntimeError),
]


@pytest.mark.parametrize("name,builtin", HIERARCHY, ids=[h[0] for h in HIERARCHY])
def test_hierarchy_and_exports(name, builtin):
    cls = getattr(gpucore, name)
    assert cls is getattr(errors, name)
    assert issubclass(cls, gpucore.GpucoreError) and issubclass(cls, builtin)
    assert name in errors.__all__
    # catchable both ways
    with pytest.raises(builtin):
        raise cls("x")
    with pytest.raises(gpucore.GpucoreError):
        raise cls("x")


def test_root_is_an_exception():
    assert issubclass(gpucore.GpucoreError, Exception)
    assert not issubclass(gpucore.GpucoreError, (ValueError, TypeError, RuntimeError))


# Bad input -> (exception type, message fragment). Every one is also a GpucoreError.
CASES = [
    ("dim out of range", lambda: gpucore.ones(2, 3).sum(2), IndexError, "dim 2"),
    ("size dim", lambda: gpucore.ones(2, 3).size(-3), IndexError, "(2, 3)"),
    ("transpose dim", lambda: gpucore.ones(2, 3).transpose(0, 5), IndexError, "dim 5"),
    ("softmax dim", lambda: gpucore.ones(2, 3).softmax(2), IndexError, "dim 2"),
    ("index", lambda: gpucore.ones(2, 3)[2], IndexError, "(2, 3)"),
    ("index neg", lambda: gpucore.ones(2, 3)[:, -4], IndexError, "(2, 3)"),
    ("index tensor", lambda: gpucore.ones(4)[gpucore.tensor([1, 4])], IndexError, "(4,)"),
    ("too many indices", lambda: gpucore.ones(4)[0, 0], IndexError, "(4,)"),
    ("float index", lambda: gpucore.ones(4)[gpucore.tensor([0.0])], IndexError, "long"),
    ("item", lambda: gpucore.ones(2, 2).item(), ValueError, "(2, 2)"),
    ("float()", lambda: float(gpucore.ones(3)), ValueError, "(3,)"),
    ("int()", lambda: int(gpucore.ones(3)), ValueError, "one-element"),
    ("bool()", lambda: bool(gpucore.ones(3)), ValueError, "ambiguous"),
    ("broadcast", lambda: gpucore.ones(2, 3) + gpucore.ones(4), ValueError, "broadcast"),
    ("matmul", lambda: gpucore.ones(2, 3) @ gpucore.ones(2, 3), ValueError, "(2, 3)"),
    ("reshape", lambda: gpucore.ones(6).reshape(4, 2), ValueError, "(4, 2)"),
    ("view", lambda: gpucore.ones(2, 3).T.view(6), ValueError, "reshape"),
    ("nine dims", lambda: gpucore.zeros(*[1] * 9), ValueError, "8 dims"),
    ("negative dim", lambda: gpucore.zeros(3, -2), ValueError, "negative"),
    ("unknown dtype", lambda: gpucore.zeros(2, dtype="complex64"), TypeError, "complex64"),
    ("numpy dtype", lambda: gpucore.from_numpy(np.zeros(2, np.complex64)), TypeError, "complex64"),
    (
        "int grad",
        lambda: gpucore.ones(2, dtype=gpucore.int64).requires_grad_(),
        TypeError,
        "floating",
    ),
    ("rand int", lambda: gpucore.rand(2, dtype=gpucore.int32), TypeError, "int32"),
    (
        "bfloat16 numpy",
        lambda: gpucore.ones(2, dtype=gpucore.bfloat16).numpy(),
        TypeError,
        "bfloat16",
    ),
    ("unknown device", lambda: gpucore.ones(2).to("cuda"), RuntimeError, "cuda"),
    ("creation device", lambda: gpucore.ones(2, device="cuda"), RuntimeError, "cuda"),
    (
        "numpy requires grad",
        lambda: gpucore.ones(2, requires_grad=True).numpy(),
        RuntimeError,
        "detach",
    ),
    (
        "backward non-scalar",
        lambda: (gpucore.ones(2, requires_grad=True) * 2).backward(),
        RuntimeError,
        "scalar",
    ),
    (
        "grad shape",
        lambda: setattr(gpucore.ones(2, requires_grad=True), "grad", gpucore.ones(3)),
        ValueError,
        "(3,)",
    ),
]


@pytest.mark.parametrize("name,fn,exc,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises(name, fn, exc, fragment):
    with pytest.raises(exc) as info:
        fn()
    assert isinstance(info.value, gpucore.GpucoreError), type(info.value)
    assert fragment in str(info.value), str(info.value)


def test_backward_twice_without_retain_graph():
    x = gpucore.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert isinstance(info.value, gpucore.GpucoreError)
    assert "retain_graph" in str(info.value)


def test_errors_leave_tensors_usable():
    x = gpucore.arange(6.0)
    with pytest.raises(IndexError):
        x[10] = 1.0
    with pytest.raises(ValueError):
        x[0:2] = gpucore.ones(3)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
