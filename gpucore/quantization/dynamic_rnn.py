"""Dynamically quantized LSTM and GRU (PyTorch's ``torch.ao.nn.quantized.dynamic.LSTM`` /
``GRU``), made by ``quantize_dynamic`` or ``from_float``.

Every W_ih and W_hh becomes an int8 ``dynamic.Linear`` (one scale per output channel, symmetric;
the float biases kept): the input projection of all steps is one int8 GEMM per layer and
direction, and each step's ``h W_hh^T`` one more, on h quantized per call (uint8, affine), both
through ``_cpu.qgemm``. The gate nonlinearities and state updates run in float32 as gpucore
tensor ops, so a capture (``gpucore.compile``) records each time step as graph ops (the runtime
fuses each step's int8 product into one ``qlinear_dynamic`` node) and the model compiled for
the CPU gives the eager outputs bit for bit, as ``(output, (h_n, c_n))`` / ``(output, h_n)``
(the capture flattens them into graph outputs, ``CompiledModel`` rebuilds the structure).
Compiled for Vulkan, each int8 product keeps the CPU's bits for the same input, but the float
sigmoid / tanh shaders differ from the C kernels by about one ulp: the outputs agree to float32
rounding (~1e-7 on unit-scale states), not bitwise (a state rounding differently can also move
a later step's activation quantization by one step).
``gpucore.onnx.export`` writes the unrolled steps as ONNX
Runtime's dynamic quantization of each product (gpucore/onnx/README.md). Inference only (no
autograd history); padded input (no PackedSequence), no ``proj_size``. State dict: the int8
layers ``ih_l{k}[_reverse]`` and ``hh_l…`` (each ``weight``, ``weight_scale``,
``weight_zero_point``, ``bias``).
"""

from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..creation import zeros
from ..errors import ArgumentTypeError, ShapeError
from ..nn.module import Module
from ..nn.modules.linear import Linear as FloatLinear
from ..nn.modules.rnn import GRU as FloatGRU
from ..nn.modules.rnn import LSTM as FloatLSTM
from ..ops.joining import cat, stack
from ..tensor import Tensor
from .dynamic import Linear
from .traced import capturing

__all__ = ["LSTM", "GRU"]


def _host(t: Tensor) -> Tensor:
    """``t`` detached as float32 on the CPU."""
    t = t.detach().float()
    return t.cpu() if t.is_vulkan else t


def _qlinear(w: Tensor, b: Tensor | None) -> Linear:
    lin = FloatLinear(w.shape[1], w.shape[0], bias=b is not None)
    with no_grad():
        lin.weight.copy_(w.detach().float().cpu())
        if b is not None:
            lin.bias.copy_(b.detach().float().cpu())
    return Linear.from_float(lin)


def _batch_zeros(x: Tensor, lead: tuple, width: int) -> Tensor:
    """Zeros [*lead, B, width] for x [T, B, I]. Under a capture, made from x with tensor ops
    (``|x[0, :, :1] * 0|``: +0 for every x the layer accepts, inf and NaN giving NaN outputs in
    a graph anyway), so the graph follows a dynamic batch (``dynamic_axes``, the ONNX export)
    instead of holding a constant of the example's batch."""
    if capturing() and x.shape[0] and x.shape[2]:
        return (x[0, :, :1] * 0.0).abs().expand(*lead, x.shape[1], width)
    return zeros(*lead, x.shape[1], width)


class _DynamicRNN(Module):
    _FLOAT_MODULE = None
    _MODE = ""

    @classmethod
    def from_float(cls, mod: Module):
        """Quantize a float ``nn.LSTM`` / ``nn.GRU``: each weight per output channel to int8."""
        name = cls.__name__
        if not isinstance(mod, cls._FLOAT_MODULE):
            raise ArgumentTypeError(
                f"dynamic {name}.from_float(): expects a gpucore.nn.{name}, got "
                f"{type(mod).__name__}"
            )
        if mod.proj_size:
            raise ValueError(f"dynamic {name}.from_float(): proj_size is not supported")
        out = cls.__new__(cls)
        Module.__init__(out)
        for k in ("input_size", "hidden_size", "num_layers", "bias", "batch_first"):
            object.__setattr__(out, k, getattr(mod, k))
        object.__setattr__(out, "bidirectional", mod.bidirectional)
        cells = []
        for names in mod._all_weights:
            w = [getattr(mod, n) for n in names]
            b_ih, b_hh = (w[2], w[3]) if mod.bias else (None, None)
            sfx = names[0][len("weight_ih") :]  # _l{k}[_reverse]
            setattr(out, "ih" + sfx, _qlinear(w[0], b_ih))  # child modules: in the state dict
            setattr(out, "hh" + sfx, _qlinear(w[1], b_hh))
            cells.append(("ih" + sfx, "hh" + sfx))
        object.__setattr__(out, "_cells", cells)
        return out

    def _direction(self, x, ih, hh, h, c, reverse, zero_h=False):
        """One layer and direction on float32 [T, B, I] x: (outputs [T, B, H], h_n, c_n).
        Views by ``unbind`` and ``split`` (one call each, not one slice per gate and step: a
        slice costs as much as eight additions of these sizes); the values are the same.
        ``zero_h``: h is all +0 (no initial state given), whose product ``hh(h)`` is its bias
        exactly (zeros quantize to 0 with zero point 0: the sums are 0, ``0 * scale + bias``),
        so the first step adds the bias to zeros instead (no int8 product; a graph keeps a
        dynamic batch, where a product of constants would be folded at the example's)."""
        hs = self.hidden_size
        xg = ih(x)  # every step's input projection: one int8 GEMM
        lstm = self._MODE == "LSTM"
        if lstm:
            xs = xg.unbind(0)
        else:  # r and z take one addition and one sigmoid together
            xrz, xn = (v.unbind(0) for v in xg.split([2 * hs, hs], 2))
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        out = [None] * x.shape[0]
        for t in steps:
            if zero_h:
                a = _batch_zeros(x, (), hh.out_features)
                a = a + hh._bias if hh._bias is not None else a
                zero_h = False
            else:
                a = hh(h)
            if lstm:
                i, f, gg, o = (xs[t] + a).split(hs, 1)
                c = f.sigmoid() * c + i.sigmoid() * gg.tanh()
                h = o.sigmoid() * c.tanh()
            else:
                a_rz, a_n = a.split([2 * hs, hs], 1)
                r, z = (xrz[t] + a_rz).sigmoid().split(hs, 1)
                n = (xn[t] + r * a_n).tanh()
                h = n + z * (h - n)
            out[t] = h
        if not out:  # an empty sequence: no output steps, the states unchanged (the float layer)
            return zeros(0, x.shape[1], hs), h, c
        return stack(out), h, c

    def forward(self, input: Tensor, hx=None):
        """As the float layer's forward (padded input; states optional), in float32 on the CPU:
        ``(output, (h_n, c_n))`` for the LSTM, ``(output, h_n)`` for the GRU. Written with
        gpucore's tensor ops (the int8 products through ``dynamic.Linear``), so a capture
        (``gpucore.compile``) records every step as graph ops; the model compiled for the CPU
        returns the same structure with these outputs bit for bit (on Vulkan the sigmoid / tanh
        shaders differ by about one ulp: close, not bitwise; module docstring)."""
        name = f"dynamic quantized {type(self).__name__}"
        if not isinstance(input, Tensor) or input.ndim not in (2, 3):
            raise ShapeError(f"{name}: expects a 2-D or 3-D float Tensor input")
        if input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {input.shape[-1]}"
            )
        lstm = self._MODE == "LSTM"
        with no_grad():
            x = _host(input)
            unbatched = x.ndim == 2
            x = x.unsqueeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
            dirs = 2 if self.bidirectional else 1
            n, b, hs = self.num_layers * dirs, x.shape[1], self.hidden_size
            if hx is None:
                h0 = c0 = _batch_zeros(x, (n,), hs)
            else:
                states = [_host(v) for v in (hx if lstm else (hx,))]
                states = [v.unsqueeze(1) if unbatched else v for v in states]
                for v in states:
                    if tuple(v.shape) != (n, b, hs):
                        raise ShapeError(
                            f"{name}: Expected hidden size {(n, b, hs)}, got {list(v.shape)}"
                        )
                h0, c0 = (states[0], states[1]) if lstm else (states[0], None)
            hn, cn = [], []
            for layer in range(self.num_layers):
                outs = []
                for d in range(dirs):
                    k = layer * dirs + d
                    ih, hh = (getattr(self, nm) for nm in self._cells[k])
                    c = c0[k] if lstm else None
                    o, h, c = self._direction(x, ih, hh, h0[k], c, d == 1, hx is None)
                    outs.append(o)
                    hn.append(h)
                    cn.append(c)
                x = cat(outs, dim=2) if dirs > 1 else outs[0]
            out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
            res_h = stack(hn)
            res_h = res_h.squeeze(1) if unbatched else res_h
            if lstm:
                res_c = stack(cn)
                res_h = (res_h, res_c.squeeze(1) if unbatched else res_c)
            return out.contiguous(), res_h

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s + ", dtype=qint8"


class LSTM(_DynamicRNN):
    """An LSTM with int8 weights (PyTorch's ``torch.ao.nn.quantized.dynamic.LSTM``)."""

    _FLOAT_MODULE = FloatLSTM
    _MODE = "LSTM"

    def __repr__(self) -> str:
        return f"DynamicQuantizedLSTM({self.extra_repr()})"


class GRU(_DynamicRNN):
    """A GRU with int8 weights (PyTorch's ``torch.ao.nn.quantized.dynamic.GRU``)."""

    _FLOAT_MODULE = FloatGRU
    _MODE = "GRU"

    def __repr__(self) -> str:
        return f"DynamicQuantizedGRU({self.extra_repr()})"
