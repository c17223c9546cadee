"""What NAdam and RAdam share: Adam's two moment buffers, PyTorch's option checks, capturable
steps through ``more_step`` (``_capturable.py``) and the start of every host update (the step
count, the decoupled or coupled weight decay, ``maximize``)."""

from __future__ import annotations

from ..tensor import Tensor
from ._capturable import device_steps, more_step
from ._options import check_options, grad_of
from .optimizer import Optimizer


class AdamLike(Optimizer):
    """An Adam-family optimizer whose capturable update is ``optim_step_capturable`` of kind
    ``_kind``; a subclass writes ``__init__`` (its defaults) and ``_update`` (starting with
    ``self._start(p, grad, group)``)."""

    _kind: str  # the capturable kernel's kind: "nadam", "radam"
    _device_steps = True  # capturable=True keeps step counts on the device (_capturable.py)

    def _check_group(self, group: dict) -> None:
        check_options(group)

    def _step_group(self, group: dict, params: list) -> None:
        if device_steps(group, params):
            more_step(self, group, params, self._kind)
        else:
            super()._step_group(group, params)

    def _start(self, p: Tensor, grad: Tensor, group: dict) -> tuple:
        """Count the step and apply the weight decay: ``p *= 1 - lr * weight_decay`` when
        decoupled, else ``weight_decay * p`` joins the gradient. Returns (state, step,
        exp_avg, exp_avg_sq, g), ``g`` the gradient the update uses (``grad_of``)."""
        state = self.state[p]
        step = int(state.get("step", 0)) + 1
        state["step"] = step
        exp_avg, _ = self._buffer(state, "exp_avg", p)
        exp_avg_sq, _ = self._buffer(state, "exp_avg_sq", p)
        decoupled = bool(group["decoupled_weight_decay"])
        wd = float(group["weight_decay"])
        if decoupled and wd != 0:
            p.mul_(1.0 - float(group["lr"]) * wd)
        return state, step, exp_avg, exp_avg_sq, grad_of(p, grad, group, decay=not decoupled)
