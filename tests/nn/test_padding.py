"""pad, functional and the padding modules (ConstantPad, ZeroPad, ReflectionPad, ReplicationPad in
1d, 2d and 3d): constant (and cropping), reflect, replicate and circular padding against numpy,
dtypes, errors, and PyTorch's modules where installed."""

import numpy as np
import pytest
from helpers import check_op, to_np
from nn_cases import PAD_CASES
from nn_checks import module_tests

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def np_pad(x, pad, mode="constant", value=0.0):
    """numpy reference: positive pads with np.pad, then negative pads crop."""
    k = len(pad) // 2
    widths = [(0, 0)] * x.ndim
    for i in range(k):
        widths[x.ndim - 1 - i] = (max(pad[2 * i], 0), max(pad[2 * i + 1], 0))
    np_mode = {
        "constant": "constant",
        "reflect": "reflect",
        "replicate": "edge",
        "circular": "wrap",
    }[mode]
    kw = {"constant_values": value} if mode == "constant" else {}
    out = np.pad(x, widths, mode=np_mode, **kw)
    sl = [slice(None)] * x.ndim
    for i in range(k):
        d = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        sl[d] = slice(max(-lo, 0), out.shape[d] - max(-hi, 0))
    return out[tuple(sl)]


F_PAD_CASES = [
    ("constant", (1, 2), (2, 3, 4)),
    ("constant", (1, 0, 2, 1), (2, 3, 4)),
    ("constant", (0, 1, 1, 0, 2, 1), (2, 3, 4)),  # a leading dim padded too
    ("constant", (-1, 2, 1, -2), (2, 3, 5, 4)),
    ("constant", (1, 1, 1, 1, 1, 1, 1, 1), (2, 3, 4, 2)),
    ("reflect", (2, 1), (2, 3, 4)),
    ("reflect", (1, 2, 2, 0), (2, 3, 3, 4)),
    ("reflect", (3, 3, 2, 2), (3, 4, 5)),
    ("reflect", (-1, 2, 0, 1), (1, 2, 3, 3)),
    ("reflect", (1, 1, 1, 1, 1, 1), (1, 2, 3, 3, 4)),
    ("replicate", (3, 1), (2, 2, 3)),
    ("replicate", (2, 5, 0, 3), (2, 2, 3, 3)),
    ("replicate", (-1, 1, 2, -1), (2, 3, 3)),
    ("replicate", (1, 2, 0, 1, 2, 0), (2, 2, 2, 3)),
    ("circular", (2, 1, 1, 3), (1, 2, 3, 4)),
    ("circular", (-1, 1), (2, 3, 4)),
]


@pytest.mark.parametrize("mode,pad,shape", F_PAD_CASES)
def test_pad(mode, pad, shape):
    check_op(lambda x: F.pad(x, pad, mode=mode), lambda x: np_pad(x, pad, mode), [shape])


def test_pad_value_and_dtypes():
    check_op(
        lambda x: F.pad(x, (1, 2, 0, 1), value=2.5),
        lambda x: np_pad(x, (1, 2, 0, 1), value=2.5),
        [(2, 3, 4)],
    )
    xi = gpucore.tensor(np.arange(6).reshape(2, 3))
    out = F.pad(xi, (1, 1), value=7)
    assert out.dtype is gpucore.int64
    assert to_np(out).tolist() == [[7, 0, 1, 2, 7], [7, 3, 4, 5, 7]]
    assert tuple(F.pad(gpucore.zeros(1, 1, 3, 3), (0, 0, -3, 0)).shape) == (1, 1, 0, 3)
    assert F.pad(gpucore.zeros(2, 3), ()).shape == (2, 3)
    x = gpucore.zeros(1, 2, 3)
    assert F.pad(x, (1, 1), mode="reflect", value=0.0).shape == (1, 2, 5)  # 0 is allowed


def test_pad_errors():
    x = gpucore.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match="too large"):
        F.pad(gpucore.zeros(3), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="mode"):
        F.pad(x, (1, 1), mode="symmetric")
    with pytest.raises(ValueError, match="reflect.*value"):
        F.pad(x, (1, 1, 1, 1), mode="reflect", value=1.0)
    with pytest.raises(ValueError, match="reflect padding must be less"):
        F.pad(x, (3, 3, 0, 0), mode="reflect")
    with pytest.raises(ValueError, match="circular.*more than once"):
        F.pad(x, (4, 0, 0, 0), mode="circular")
    with pytest.raises(NotImplementedError, match="last 1, 2 or 3 dims"):
        F.pad(x, (1, 1), mode="replicate")  # 4-D input, one padded dim
    with pytest.raises(NotImplementedError, match="last 1, 2 or 3 dims"):
        F.pad(x, (1, 1, 1, 1, 1, 1, 1, 1), mode="reflect")
    with pytest.raises(gpucore.ShapeError, match="negative output size"):
        F.pad(x, (-2, -2))
    with pytest.raises(gpucore.ShapeError, match="pad"):
        F.pad(x, (-4, 4))
    with pytest.raises(TypeError, match="pad.*ints"):
        F.pad(x, (1.5, 1))
    with pytest.raises(TypeError, match="pad"):
        F.pad(np.zeros((2, 2)), (1, 1))


# ============================================================================= modules
# Where gpucore is stricter than PyTorch (marked "PyTorch:"), the error comes earlier or clearer.
def _module_errors():
    z = gpucore.zeros
    return [
        # padding (PyTorch: bad tuples fail only in forward)
        (lambda: nn.ZeroPad2d((1, 2, 3)), ValueError, "4 ints"),
        (lambda: nn.ReflectionPad1d((1.5, 1)), ValueError, "2 ints"),
        (lambda: nn.ReflectionPad2d((3, 3, 0, 0))(z(1, 1, 3, 3)), ValueError, "less than"),
        (lambda: nn.ReflectionPad1d(1)(z(1, 1, 2, 3)), NotImplementedError, "4-D"),
        (lambda: nn.ConstantPad2d(1, 0.0)(z(3)), ValueError, "too large"),
    ]


MODULE_ERRORS = _module_errors()


(
    test_module_forward,
    test_module_input_gradients,
    test_module_errors,
    test_module_match_torch,
) = module_tests(PAD_CASES, MODULE_ERRORS)
