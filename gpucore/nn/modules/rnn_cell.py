"""RNNCell, LSTMCell and GRUCell: one time step of the recurrent layers, with PyTorch's
parameter names (weight_ih, weight_hh, bias_ih, bias_hh), initialisation and shapes (batched
[B, input_size] or unbatched [input_size] input). A step is the layers' fused op on a sequence of
length 1 (one GEMM for the input, one for the state, one pass for the gates)."""

from __future__ import annotations

import math

from ...creation import empty, zeros
from ...errors import DTypeError, ShapeError
from ...ops.recurrent import GATES, run_direction
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


def _new(shape, device, dtype):
    t = empty(*shape, dtype=dtype)
    return t if device is None else t.to(device)


class RNNCellBase(Module):
    """The shared body of the cells (``mode`` as the layers')."""

    def __init__(self, mode, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise TypeError(f"{name}: {what} should be of type int >= 0, got {v!r}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gh = GATES[mode] * hidden_size
        self.weight_ih = Parameter(_new((gh, input_size), device, dtype))
        self.weight_hh = Parameter(_new((gh, hidden_size), device, dtype))
        if bias:
            self.bias_ih = Parameter(_new((gh,), device, dtype))
            self.bias_hh = Parameter(_new((gh,), device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)]."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        return s if nl == "tanh" else s + f", nonlinearity={nl}"

    def _check(self, input, states) -> bool:
        """Checks the input and states (PyTorch's messages); True for an unbatched input."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ShapeError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.dtype != self.weight_ih.dtype:
            raise DTypeError(
                f"{name}: input must have the type {self.weight_ih.dtype}, got {input.dtype}"
            )
        if input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected "
                f"{self.input_size} (input of shape {tuple(input.shape)})"
            )
        for i, h in enumerate(states):
            if h is None:
                continue
            if h.ndim != input.ndim:
                raise ShapeError(
                    f"{name}: Expected hidden{i} to be {input.ndim}D like the input, got "
                    f"{h.ndim}D (shape {tuple(h.shape)})"
                )
            if input.ndim == 2 and h.shape[0] != input.shape[0]:
                raise ShapeError(
                    f"{name}: Input batch size {input.shape[0]} doesn't match hidden{i} batch "
                    f"size {h.shape[0]}"
                )
            if h.shape[-1] != self.hidden_size:
                raise ShapeError(
                    f"{name}: hidden{i} has inconsistent hidden_size: got {h.shape[-1]}, "
                    f"expected {self.hidden_size}"
                )
            if h.dtype != input.dtype:
                raise DTypeError(
                    f"{name}: hidden{i} must have the type {input.dtype}, got {h.dtype}"
                )
        return input.ndim == 1

    def _step(self, input, h, c):
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        b = x.shape[0]

        def state(s):
            if s is None:
                return zeros(b, self.hidden_size, dtype=x.dtype, device=x.device)
            return s.unsqueeze(0) if unbatched else s

        xg = F.linear(x, self.weight_ih, self.bias_ih).unsqueeze(0)
        c0 = state(c) if self.mode == "LSTM" else None
        _, hn, cn = run_direction(self.mode, xg, self.weight_hh, self.bias_hh, state(h), c0)
        if unbatched:
            hn = hn.squeeze(0)
            cn = None if cn is None else cn.squeeze(0)
        return hn, cn


class RNNCell(RNNCellBase):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu), as torch.nn.RNNCell."""

    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNNCell: Unknown nonlinearity: {nonlinearity}. Select from 'tanh' or 'relu'."
            )
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(mode, input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        self._check(input, (hx,))
        return self._step(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    """One LSTM step, as torch.nn.LSTMCell: forward(input, (h, c)=None) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        h, c = (None, None) if hx is None else hx
        self._check(input, (h, c))
        return self._step(input, h, c)


class GRUCell(RNNCellBase):
    """One GRU step, as torch.nn.GRUCell: forward(input, h=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        self._check(input, (hx,))
        return self._step(input, hx, None)[0]
