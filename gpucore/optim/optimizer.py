"""Optimizer: the base class of gpucore's optimizers, with PyTorch's interface.

- ``param_groups``: a list of dicts, one per group, each holding ``'params'`` (a list of tensors)
  and every option of the optimizer (filled from the defaults where the group does not set it).
  Schedulers and users read and write ``group['lr']`` (and any other option) between steps.
- ``state``: a dict keyed by parameter tensor (identity), each value a dict of that parameter's
  state (buffers on the parameter's device and in its dtype, and a ``'step'`` count as an int).
- ``state_dict()`` / ``load_state_dict()`` in PyTorch's layout: ``{'state': {index: {...}},
  'param_groups': [{..., 'params': [index, ...]}]}`` where parameters are numbered in group order.
  It holds only tensors, numbers, strings, bools, None, lists, tuples and dicts, so
  ``gpucore.save`` can write it. As in PyTorch, the tensors are the live state (not copies):
  save it, or clone it, before stepping again if you want a snapshot.

A subclass passes its defaults to ``__init__`` and implements ``_update(p, grad, group)`` for one
parameter; the base class runs it for every parameter that has a gradient, under no_grad. A
subclass may instead update a whole group at once by overriding ``_step_group(group, params)``
(SGD, Adam and RMSprop do: one multi-tensor C call per group, see
``gpucore.ops.optim.foreach_update``).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from copy import deepcopy
from itertools import chain

from .. import _caller_warnings as caller_warnings
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.grad_mode import enable_grad, no_grad
from ..creation import zeros
from ..errors import DeviceError
from ..graphs import state as _graphs
from ..nn.module import _RemovableHandle
from ..ops.optim import foreach_update
from ..tensor import Tensor
from ._capturable import refuse_uncapturable


class _RequiredParameter:
    """Marks a default that every parameter group must set (PyTorch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

# hooks run around every optimizer's step (register_optimizer_step_pre_hook / _post_hook)
_GLOBAL_PRE_HOOKS: dict = {}
_GLOBAL_POST_HOOKS: dict = {}
_ANY_HOOKS = [False]  # set by the first registration of any step hook


def _register(table: dict, hook) -> _RemovableHandle:
    if not _ANY_HOOKS[0]:
        _ANY_HOOKS[0] = True
        # the base step runs its hooks from now on; until a hook exists it pays no wrapper call
        Optimizer.step = _hooked(Optimizer.__dict__["step"])
    key = object()
    table[key] = hook
    return _RemovableHandle(table, key)


def register_optimizer_step_pre_hook(hook) -> _RemovableHandle:
    """``hook(optimizer, args, kwargs)`` runs before every optimizer's step (before the
    optimizers' own pre-hooks); it may return ``(new_args, new_kwargs)`` for the step."""
    return _register(_GLOBAL_PRE_HOOKS, hook)


def register_optimizer_step_post_hook(hook) -> _RemovableHandle:
    """``hook(optimizer, args, kwargs)`` runs after every optimizer's step (after the
    optimizers' own post-hooks)."""
    return _register(_GLOBAL_POST_HOOKS, hook)


def _hooked(step):
    """``step`` as the public Optimizer.step: it marks the optimizer as stepped (the schedulers'
    order warning, as PyTorch) and runs the step hooks around it."""

    @functools.wraps(step)
    def wrapped(self, *args, **kwargs):
        self._opt_called = True
        if not _ANY_HOOKS[0]:  # no hook was ever registered: the common case, one check
            return step(self, *args, **kwargs)
        if self.__dict__.get("_in_hooked_step"):  # a subclass's step calling super().step()
            return step(self, *args, **kwargs)
        # as PyTorch: the hooks see the step's positional arguments with the optimizer first,
        # and new (args, kwargs) from a pre-hook are the whole call, optimizer included
        args = (self, *args)
        pre, post = self.__dict__.get("_step_pre_hooks"), self.__dict__.get("_step_post_hooks")
        for hook in (*_GLOBAL_PRE_HOOKS.values(), *(pre or {}).values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{hook} must return None or a tuple of (new_args, new_kwargs), but got "
                        f"{result}."
                    )
                args, kwargs = result
        self._in_hooked_step = True
        try:
            out = step(*args, **kwargs)
        finally:
            self._in_hooked_step = False
        for hook in (*(post or {}).values(), *_GLOBAL_POST_HOOKS.values()):
            hook(self, args, kwargs)
        return out

    wrapped._marks_opt_called = True
    return wrapped


def poison_all(name: str, tensors, e: DeviceError) -> None:
    """After DeviceError ``e`` interrupted ``name``, an update of many device tensors (an
    optimizer step: one dispatch per parameter): poison every device tensor of ``tensors()``.
    Some may hold new values and some old ones; each later use raises DeviceError saying why.
    Overwriting a poisoned tensor whole (``copy_``, ``load_state_dict``) makes it usable
    again."""
    reason = (
        f"this tensor was being updated by {name} when the Vulkan device failed ({e}); the "
        "update may be partly applied, so its values are undefined: load them again (for "
        "example with load_state_dict from a checkpoint) before using it"
    )
    for t in tensors():
        if t._dev is not None:
            try:
                t._dev.poison(t._data, reason)
            except DeviceError:  # the device refuses all work already: nothing to mark
                pass


class Optimizer:
    """Base class of all optimizers.

    params: an iterable of tensors, of (name, tensor) pairs, or of dicts (parameter groups) with
    a ``'params'`` entry and per-group options. defaults: the options' default values.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {type(params).__name__}; wrap it in a list: [param]"
            )
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs):
        # Mark the optimizer as stepped (for the scheduler's order warning, as PyTorch does).
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_marks_opt_called", False):
            cls.step = _hooked(step)

    def register_step_pre_hook(self, hook) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``; it may return
        ``(new_args, new_kwargs)`` to call the step with. Returns a handle with ``remove()``."""
        return _register(self.__dict__.setdefault("_step_pre_hooks", {}), hook)

    def register_step_post_hook(self, hook) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step`` (an EMA update, logging).
        Returns a handle with ``remove()``."""
        return _register(self.__dict__.setdefault("_step_post_hooks", {}), hook)

    def __getstate__(self) -> dict:
        # the step hooks are not part of a pickled or deep-copied optimizer, as in PyTorch (a
        # lambda cannot be pickled, and a copy's hooks would act on this optimizer)
        state = dict(self.__dict__)
        state.pop("_step_pre_hooks", None)
        state.pop("_step_post_hooks", None)
        state.pop("_in_hooked_step", None)
        return state

    # ----------------------------------------------------------------------------- groups
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (others come from the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            param_group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        param_group["params"] = params

        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params (index "
                    f"{i}) is {type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"can't optimize a non-leaf Tensor (param {i}, shape {tuple(p.shape)}); "
                    "optimize the leaf it was computed from, or detach() it"
                )
            if not p.dtype.is_floating_point:
                raise TypeError(
                    f"optimizer can only optimize floating-point tensors, but param {i} is "
                    f"{p.dtype}"
                )

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization parameter "
                    + name
                )
            param_group.setdefault(name, default)

        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            caller_warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this "
                "will cause an error",
            )
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ----------------------------------------------------------------------------- stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to None by default)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p._grad is None:  # the slot, not the property: this runs every step
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    g = p.grad
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    with no_grad():
                        g.zero_()

    def step(self, closure=None):
        """One update of every parameter that has a gradient; ``closure`` (re-evaluates the
        model and returns the loss) is called first, with gradients enabled."""
        self._opt_called = True  # (the scheduler's order warning; _hooked once a hook exists)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        # no_grad() written out, and the device failure's poisoning in an except: context
        # managers cost more than a small model's whole update
        prev = _grad_state.enabled
        _grad_state.enabled = False
        try:
            for group in self.param_groups:
                self._check_group(group)
                if _graphs.CAPTURING[0] is not None:
                    refuse_uncapturable(self, group)
                params = [p for p in group["params"] if p._grad is not None]
                if params:
                    self._step_group(group, params)
        except DeviceError as e:
            poison_all(f"{type(self).__name__}.step", self._written, e)
            raise
        finally:
            _grad_state.enabled = prev
        return loss

    def _written(self):
        """Every tensor a step may write: the parameters and their state tensors."""
        for group in self.param_groups:
            for p in group["params"]:
                yield p
                for v in self.state.get(p, {}).values():
                    if isinstance(v, Tensor):
                        yield v

    def _check_group(self, group: dict) -> None:
        """Validate a group's options before a step (they may have been edited)."""

    def _step_group(self, group: dict, params: list) -> None:
        """Update the parameters of one group that have a gradient (``params``, in group order):
        ``_update`` for each, in turn."""
        for p in params:
            self._update(p, p.grad, group)

    def _step_counted_group(self, op, group: dict, params: list, pass_steps: bool) -> None:
        """The one-call group update of optimizers that count steps per parameter (Adam,
        RMSprop): ``self._tensors(p, grad, group, state)`` gives each parameter's tensors and
        its new step count, stored back after the update (and passed to the kernel when
        ``pass_steps``)."""
        if not self._distinct(params):
            return Optimizer._step_group(self, group, params)
        batch, steps, states = [], [], []
        for p in params:
            state = self.state[p]  # once: a Tensor key hashes in Python
            tensors, step = self._tensors(p, p._grad, group, state)
            batch.append(tensors)
            steps.append(step)
            states.append(state)
        foreach_update(op, batch, {"step": steps} if pass_steps else {}, **self._attrs(group))
        for state, step in zip(states, steps):
            state["step"] = step

    @staticmethod
    def _distinct(params: list) -> bool:
        """No parameter listed twice (PyTorch warns but steps a repeated parameter twice, one
        update after the other, which a one-call group update cannot do)."""
        return len({id(p) for p in params}) == len(params)

    def _update(self, p: Tensor, grad: Tensor, group: dict) -> None:
        """Update one parameter (its state is ``self.state[p]``, created on first access)."""
        raise NotImplementedError

    # ----------------------------------------------------------------------------- state
    def _buffer(self, state: dict, key: str, p: Tensor) -> tuple[Tensor, bool]:
        """state[key], created as zeros like p when missing (and moved next to p if p moved);
        returns (buffer, created)."""
        buf = state.get(key)
        if buf is None:
            if _graphs.capturing():
                raise RuntimeError(
                    f"{type(self).__name__}: state '{key}' would be created inside a captured "
                    "graph (a replay would not create it again but keep updating it as if new). "
                    "Warm up first: run a few eager steps (optimizer.step()) before capturing"
                )
            buf = _zeros_like(p)
            state[key] = buf
            return buf, True
        # slots, not properties: this runs for every buffer of every parameter at every step
        if buf._dev is not p._dev or buf._dtype is not p._dtype or not buf._data.flags.c_contiguous:
            buf = _place_like(buf, p)
            state[key] = buf
        return buf, False

    def state_dict(self) -> dict:
        """The optimizer's state in PyTorch's layout (see the module docstring)."""
        index: dict[int, int] = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {
            (index[id(k)] if isinstance(k, Tensor) else k): dict(v) for k, v in self.state.items()
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict made by ``state_dict()`` (possibly saved and loaded, possibly on
        another device): group options are replaced, state tensors are copied to each
        parameter's device and floating dtype. The optimizer never aliases the dict's tensors."""
        if (
            not isinstance(state_dict, dict)
            or "param_groups" not in state_dict
            or ("state" not in state_dict)
        ):
            raise ValueError(
                "load_state_dict: expected a dict with 'state' and 'param_groups' (as made by "
                "Optimizer.state_dict())"
            )
        groups = self.param_groups
        saved_groups = deepcopy(list(state_dict["param_groups"]))
        if len(groups) != len(saved_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups but the optimizer "
                f"has {len(groups)}"
            )
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group ({i}) of {len(s['params'])} "
                    f"parameters that doesn't match the size of optimizer's group "
                    f"({len(g['params'])})"
                )
        id_map = {
            _as_index(old): p
            for old, p in zip(
                chain.from_iterable(s["params"] for s in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        }
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            key = _as_index(k)
            if key in id_map:
                p = id_map[key]
                state[p] = {
                    name: self._load_state_value(p, name, val, key) for name, val in dict(v).items()
                }
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups

    # State entries that are plain numbers in gpucore (PyTorch keeps some as 0-d tensors):
    # name -> the Python type a loaded value is converted to. Subclasses extend it.
    _scalar_state: dict = {"step": int}

    def _load_state_value(self, p: Tensor, name, value, index):
        """A loaded state value for parameter p (see ``_cast``); LBFGS, whose state is not shaped
        like its parameters, overrides it."""
        kind = self._scalar_state.get(name)
        if kind is not None:
            return kind(value.item() if isinstance(value, Tensor) else value)
        return _cast(p, name, value, index)

    def __repr__(self) -> str:
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- helpers
def _as_index(k):
    """State-dict parameter ids are ints; accept their string form (e.g. from JSON)."""
    if isinstance(k, str) and k.lstrip("-").isdigit():
        return int(k)
    return k


def _zeros_like(p: Tensor) -> Tensor:
    z = zeros(tuple(p.shape), dtype=p.dtype)
    return z if p._dev is None else z.to("vulkan")


def _place_like(t: Tensor, p: Tensor) -> Tensor:
    """A contiguous copy of t in p's dtype and on p's device, sharing no memory with t."""
    with no_grad():
        out = t.detach()
        if out.dtype is not p.dtype:
            out = out.to(p.dtype)
        if out.device.type != p.device.type:
            out = out.to(p.device)
        if out._data is t._data or not out.is_contiguous():
            out = out.clone()
    return out


def _cast(p: Tensor, name, value, index):
    """A loaded state value for parameter p: tensors copied next to p (floating ones in p's
    dtype; the shape of p for the buffers), containers recursively."""
    if isinstance(value, Tensor):
        if value.is_floating_point():
            if value.shape != p.shape:
                raise ValueError(
                    f"load_state_dict: state '{name}' of parameter {index} has shape "
                    f"{tuple(value.shape)} but the parameter has shape {tuple(p.shape)}"
                )
            return _place_like(value, p)
        with no_grad():
            out = value.detach().to(p.device)
            return out.clone() if out._data is value._data else out
    if isinstance(value, dict):
        return {k: _cast(p, k, v, index) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(p, None, v, index) for v in value)
    return value
