"""RNN, LSTM and GRU: multi-layer, optionally bidirectional recurrent layers with PyTorch's
constructor arguments, parameter names (``weight_ih_l{k}[_reverse]``, ``weight_hh_l…``,
``bias_ih_l…``, ``bias_hh_l…``, ``weight_hr_l…``), initialisation, input and state shapes, and
PackedSequence inputs.

Each layer and direction is one input-projection GEMM over all steps (``linear``) and one fused
recurrence (gpucore/ops/recurrent.py: a C loop over time on the CPU, a composition of ops on
Vulkan). Dropout applies between layers in training, as PyTorch's."""

from __future__ import annotations

import math
import numbers

from ... import _caller_warnings as caller_warnings
from ...creation import empty, zeros
from ...errors import DTypeError, ShapeError
from ...ops.joining import cat, stack
from ...ops.recurrent import GATES, run_direction
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, packed_to_padded, padded_to_packed


def _new(shape, device, dtype):
    t = empty(*shape, dtype=dtype)
    return t if device is None else t.to(device)


class RNNBase(Module):
    """The shared body of RNN, LSTM and GRU (``mode``: "RNN_TANH", "RNN_RELU", "LSTM", "GRU")."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        name = type(self).__name__
        if (
            not isinstance(dropout, numbers.Number)
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                f"{name}: dropout should be a number in range [0, 1] representing the "
                f"probability of an element being zeroed, got {dropout}"
            )
        if dropout > 0 and num_layers == 1:
            caller_warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
            )
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise TypeError(f"{name}: {what} should be of type int >= 0, got {v!r}")
        if hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be greater than zero, got {hidden_size}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be greater than zero, got {num_layers}")
        if proj_size < 0:
            raise ValueError(
                f"{name}: proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError(
                f"{name}: proj_size has to be smaller than hidden_size, got proj_size="
                f"{proj_size} and hidden_size={hidden_size}"
            )
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gh = GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real_h = proj_size or hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for d in range(dirs):
                in_size = input_size if layer == 0 else real_h * dirs
                sfx = f"_l{layer}{'_reverse' if d else ''}"
                shapes = [("weight_ih", (gh, in_size)), ("weight_hh", (gh, real_h))]
                if bias:
                    shapes += [("bias_ih", (gh,)), ("bias_hh", (gh,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in shapes:
                    setattr(self, base + sfx, Parameter(_new(shape, device, dtype)))
                    names.append(base + sfx)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)]."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """No-op (PyTorch compacts cuDNN's weight buffer here; gpucore has none)."""

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """The parameters per layer and direction, as PyTorch's ``all_weights``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ------------------------------------------------------------------------- checks
    def _check_input(self, x, packed: bool) -> None:
        name = type(self).__name__
        w = self.weight_ih_l0
        if not packed and x.ndim not in (2, 3):
            raise ShapeError(f"{name}: Expected input to be 2D or 3D, got {x.ndim}D input instead")
        if x.dtype != w.dtype:
            raise DTypeError(f"{name}: input must have the type {w.dtype}, got type {x.dtype}")
        if x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {x.shape[-1]} (input of shape {tuple(x.shape)})"
            )

    def _check_state(self, t, want: tuple, what: str) -> None:
        name = type(self).__name__
        if tuple(t.shape) != want:
            raise ShapeError(
                f"{name}: Expected {what} size {want}, got {list(t.shape)}; {what} is "
                "[num_layers * num_directions, batch, hidden]"
            )
        if t.dtype != self.weight_ih_l0.dtype:
            raise DTypeError(
                f"{name}: {what} must have the type {self.weight_ih_l0.dtype}, got {t.dtype}"
            )

    # ------------------------------------------------------------------------- forward
    def forward(self, input, hx=None):
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        batch_sizes = None
        unbatched = False
        if packed:
            self._check_input(input.data, True)
            x, batch_sizes = packed_to_padded(input)
            b = int(batch_sizes[0])
            if hx is not None and input.sorted_indices is not None:
                hx = _permute(hx, input.sorted_indices)
        else:
            self._check_input(input, False)
            x = input
            if x.ndim == 2:
                unbatched = True
                x = x.unsqueeze(1)
                if hx is not None:
                    hs = hx if lstm else (hx,)
                    if any(h.ndim != 2 for h in hs):
                        dims = ", ".join(f"{h.ndim}-D" for h in hs)
                        raise ShapeError(
                            f"{name}: For unbatched 2-D input, hx should also be 2-D but got "
                            f"({dims}) tensor(s)"
                        )
                    hx = tuple(h.unsqueeze(1) for h in hs) if lstm else hx.unsqueeze(1)
            else:
                if hx is not None:
                    hs = hx if lstm else (hx,)
                    if any(h.ndim != 3 for h in hs):
                        dims = ", ".join(f"{h.ndim}-D" for h in hs)
                        raise ShapeError(
                            f"{name}: For batched 3-D input, hx should also be 3-D but got "
                            f"({dims}) tensor(s)"
                        )
                if self.batch_first:
                    x = x.transpose(0, 1)
            b = x.shape[1]
        out, hn, cn = self._run(x, hx, b, batch_sizes)
        if packed:
            out = padded_to_packed(out, batch_sizes, input)
            if input.unsorted_indices is not None:
                hn = hn.index_select(1, input.unsorted_indices)
                cn = None if cn is None else cn.index_select(1, input.unsorted_indices)
        elif unbatched:
            out, hn = out.squeeze(1), hn.squeeze(1)
            cn = None if cn is None else cn.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return (out, (hn, cn)) if lstm else (out, hn)

    def _run(self, x, hx, b, batch_sizes):
        lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        real_h = self.proj_size or self.hidden_size
        n = self.num_layers * dirs
        if hx is None:
            h0 = zeros(n, b, real_h, dtype=x.dtype, device=x.device)
            c0 = zeros(n, b, self.hidden_size, dtype=x.dtype, device=x.device) if lstm else None
        else:
            if lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{type(self).__name__}: hx must be a tuple (h_0, c_0)")
                h0, c0 = hx
                self._check_state(h0, (n, b, real_h), "hidden[0]")
                self._check_state(c0, (n, b, self.hidden_size), "hidden[1]")
            else:
                h0, c0 = hx, None
                self._check_state(h0, (n, b, real_h), "hidden")
        hns, cns = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                w = [getattr(self, nm) for nm in self._all_weights[k]]
                w_ih, w_hh = w[0], w[1]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                w_hr = w[-1] if self.proj_size else None
                xg = F.linear(x, w_ih, b_ih)
                o, h, c = run_direction(
                    self.mode,
                    xg,
                    w_hh,
                    b_hh,
                    h0[k],
                    c0[k] if lstm else None,
                    reverse=d == 1,
                    batch_sizes=batch_sizes,
                    w_hr=w_hr,
                )
                outs.append(o)
                hns.append(h)
                cns.append(c)
            x = outs[0] if dirs == 1 else cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, stack(hns, 0), (stack(cns, 0) if lstm else None)


def _permute(hx, index):
    if isinstance(hx, (tuple, list)):
        return tuple(h.index_select(1, index) for h in hx)
    return hx.index_select(1, index)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu), as
    torch.nn.RNN. forward(input, h_0=None) -> (output, h_n)."""

    def __init__(self, *args, **kwargs):
        if len(args) > 3:
            kwargs["nonlinearity"] = args[3]
            args = args[:3] + args[4:]
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNN: Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o; optional projection ``proj_size``), as
    torch.nn.LSTM. forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n), as torch.nn.GRU. forward(input, h_0=None) ->
    (output, h_n)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("GRU: proj_size argument is only supported for LSTM")
        super().__init__("GRU", *args, **kwargs)
