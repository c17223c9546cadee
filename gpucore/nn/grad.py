"""gpucore.nn.grad (also ``nn.functional.grad``), as torch.nn.grad: the gradients of a
convolution with respect to its input and to its weight as functions (conv1d_input,
conv1d_weight, conv2d_input, ..., conv3d_weight), computed by autograd through F.conv*d (a
convolution is linear in each of them, so the result does not depend on the other operand's
stand-in) and differentiable in turn."""

from __future__ import annotations

from .. import autograd
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..creation import zeros
from ..errors import ShapeError
from ..tensor import Tensor
from . import functional as F

_CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _grad(name: str, dims: int, wrt: str, given: Tensor, size, grad_output: Tensor, conv_args):
    """The gradient of conv{dims}d with respect to ``wrt`` ('input' or 'weight', of shape
    ``size``), the other operand being ``given``, for the output gradient grad_output."""
    size = tuple(int(s) for s in size)
    keep = is_grad_enabled() and (given.requires_grad or grad_output.requires_grad)
    with enable_grad():
        stand_in = zeros(size, dtype=given.dtype, device=given.device, requires_grad=True)
        x, w = (stand_in, given) if wrt == "input" else (given, stand_in)
        y = _CONVS[dims](x, w, None, *conv_args)
        if tuple(y.shape) != tuple(grad_output.shape):
            raise ShapeError(
                f"{name}(): grad_output has shape {tuple(grad_output.shape)}, the convolution's "
                f"output has {tuple(y.shape)}"
            )
        (g,) = autograd.grad(y, (stand_in,), grad_output, create_graph=keep)
    return g


def conv1d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0,
                 dilation=1, groups: int = 1) -> Tensor:  # fmt: skip
    """The gradient of conv1d with respect to its input (of shape input_size)."""
    args = (stride, padding, dilation, groups)
    return _grad("conv1d_input", 1, "input", weight, input_size, grad_output, args)


def conv1d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0,
                  dilation=1, groups: int = 1) -> Tensor:  # fmt: skip
    """The gradient of conv1d with respect to its weight (of shape weight_size)."""
    args = (stride, padding, dilation, groups)
    return _grad("conv1d_weight", 1, "weight", input, weight_size, grad_output, args)


def conv2d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0,
                 dilation=1, groups: int = 1) -> Tensor:  # fmt: skip
    """The gradient of conv2d with respect to its input (of shape input_size)."""
    args = (stride, padding, dilation, groups)
    return _grad("conv2d_input", 2, "input", weight, input_size, grad_output, args)


def conv2d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0,
                  dilation=1, groups: int = 1) -> Tensor:  # fmt: skip
    """The gradient of conv2d with respect to its weight (of shape weight_size)."""
    args = (stride, padding, dilation, groups)
    return _grad("conv2d_weight", 2, "weight", input, weight_size, grad_output, args)


def conv3d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0,
                 dilation=1, groups: int = 1) -> Tensor:  # fmt: skip
    """The gradient of conv3d with respect to its input (of shape input_size)."""
    args = (stride, padding, dilation, groups)
    return _grad("conv3d_input", 3, "input", weight, input_size, grad_output, args)


def conv3d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0,
                  dilation=1, groups: int = 1) -> Tensor:  # fmt: skip
    """The gradient of conv3d with respect to its weight (of shape weight_size)."""
    args = (stride, padding, dilation, groups)
    return _grad("conv3d_weight", 3, "weight", input, weight_size, grad_output, args)
