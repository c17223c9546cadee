"""Module: the base class of layers and models, with PyTorch's semantics.

Attributes that are Parameters, Modules or registered buffers are tracked in ordered dicts, so
``parameters()``, ``state_dict()`` and ``to()`` see the whole tree. ``state_dict`` keys are dotted
paths (``0.weight``, ``encoder.fc.bias``), as in PyTorch, so checkpoints map one to one.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..errors import ShapeError
from ..tensor import Tensor
from .backward_hooks import hook_tables, wrap_inputs, wrap_outputs
from .parameter import Buffer, Parameter, _Uninitialized


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys it did not find, and those it did not use."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


class StateDictError(ShapeError, RuntimeError):
    """load_state_dict found missing, unexpected or mis-shaped keys. A ShapeError, and a
    RuntimeError as PyTorch raises there, so either ``except`` catches it."""


def _check_name(kind: str, name) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "" or "." in name:
        raise KeyError(f"{kind} name can't be empty or contain '.', got {name!r}")


# Bumped whenever any module's parameters, buffers or submodules are assigned, registered,
# deleted or moved (``to``): caches keyed on a module's tensors (gpucore.compile(model)'s
# compiled graphs) check it instead of walking the module on every call.
STRUCTURE_VERSION: list = [0]


class Module:
    """Base class for all layers and models. Subclasses define ``forward``."""

    training: bool
    # the backward-hook tables, set on the instance by the first register_full_backward_*hook
    _full_backward_state = None

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    # ----------------------------------------------------------------------------- attributes
    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() was called in "
                f"{type(self).__name__}.__init__"
            )
        params, bufs, mods = self._parameters, self._buffers, self._modules
        if isinstance(value, Parameter):
            self._drop(name)
            params[name] = value
        elif isinstance(value, Module):
            self._drop(name)
            mods[name] = value
        elif isinstance(value, Buffer):
            self._drop(name)
            bufs[name] = value
            if not value.persistent:
                self._non_persistent.add(name)
        elif name in params:
            STRUCTURE_VERSION[0] += 1
            if value is not None:
                raise TypeError(
                    f"cannot assign a {type(value).__name__} to parameter {name!r} "
                    "(expected a gpucore.nn.Parameter or None)"
                )
            params[name] = None
        elif name in mods:
            STRUCTURE_VERSION[0] += 1
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} to submodule {name!r}")
            mods[name] = None
        elif name in bufs:
            STRUCTURE_VERSION[0] += 1
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign a {type(value).__name__} to buffer {name!r}")
            bufs[name] = value
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name: str) -> None:
        STRUCTURE_VERSION[0] += 1
        for d in (self.__dict__, self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        self._non_persistent.discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                STRUCTURE_VERSION[0] += 1
                del table[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def _check_new(self, kind: str, name: str, table: str) -> None:
        _check_name(kind, name)
        if name not in getattr(self, table) and hasattr(self, name):
            raise KeyError(f"attribute {name!r} already exists in {type(self).__name__}")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Track ``param`` (or None, a declared but absent parameter) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter({name!r}): expected a Parameter or None")
        self._check_new("parameter", name, "_parameters")
        self._drop(name)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Track a tensor that is state but not a parameter (e.g. BatchNorm's running_mean)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer({name!r}): expected a Tensor or None")
        self._check_new("buffer", name, "_buffers")
        self._drop(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Track ``module`` (or None) as a child under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module({name!r}): {type(module).__name__} is not a Module")
        self._check_new("module", name, "_modules")
        self._drop(name)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path ``target`` ('' is self)."""
        mod = self
        for part in target.split(".") if target else []:
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r}")
            mod = mod._modules[part]
        return mod

    # ----------------------------------------------------------------------------- traversal
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(dotted name, module) for self and every submodule, depth first; shared ones once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(
                memo, f"{prefix}.{name}" if prefix else name, remove_duplicate
            )

    def modules(self) -> Iterator[Module]:
        """Self and every submodule (see named_modules)."""
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        """(name, module) of the direct children (each once)."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self) -> Iterator[Module]:
        """The direct children."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mp, m in mods:
            for name, v in getattr(m, table).items():
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in seen:
                        continue
                    seen.add(id(v))
                yield (f"{mp}.{name}" if mp else name), v

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ):
        """(dotted name, Parameter) pairs; a parameter shared by two modules appears once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of self (and, with recurse, of every submodule), each once."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(dotted name, buffer) pairs, as named_parameters."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The registered buffers (see named_buffers)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ----------------------------------------------------------------------------- state
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name (detached unless keep_vars)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into this module's parameters and buffers (in place, shapes must match;
        with assign=True the checkpoint's tensors replace them instead, as PyTorch).

        Returns (missing_keys, unexpected_keys). A shape mismatch always raises; with
        strict=True, so do missing and unexpected keys (StateDictError, listing them all).
        """
        own = self.state_dict(keep_vars=True)
        for k, v in state_dict.items():  # a Lazy module's weights take the checkpoint's shapes
            if isinstance(own.get(k), _Uninitialized) and isinstance(v, Tensor):
                own[k].materialize(tuple(v.shape))
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = []
        for k, v in state_dict.items():
            if k in own and isinstance(v, Tensor) and tuple(v.shape) != tuple(own[k].shape):
                mismatched.append(
                    f"{k}: checkpoint shape {tuple(v.shape)}, model shape {tuple(own[k].shape)}"
                )
            elif k in own and not isinstance(v, Tensor):
                mismatched.append(f"{k}: expected a Tensor, got {type(v).__name__}")
        problems = []
        if mismatched:
            problems.append("size mismatch for " + "; ".join(mismatched))
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if problems:
            raise StateDictError(
                f"error(s) in loading state_dict for {type(self).__name__}: " + " | ".join(problems)
            )
        if assign:
            self._assign_state(state_dict, own)
            return _IncompatibleKeys(missing, unexpected)
        with no_grad():
            for k, dst in own.items():
                if k in state_dict:
                    dst.copy_(state_dict[k])
        return _IncompatibleKeys(missing, unexpected)

    def _assign_state(self, state_dict, own) -> None:
        for k in own:
            if k not in state_dict:
                continue
            path, _, name = k.rpartition(".")
            mod = self.get_submodule(path)
            v = state_dict[k]
            if name in mod._parameters:
                old = mod._parameters[name]
                mod._parameters[name] = Parameter(v.detach(), requires_grad=old._requires_grad)
            else:
                mod._buffers[name] = v.detach()

    # ----------------------------------------------------------------------------- modes
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout, batch statistics) on self and all submodules."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(): mode is expected to be a bool, got {mode!r}")
        object.__setattr__(self, "training", bool(mode))
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set requires_grad on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to None by default, as PyTorch 2)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                with no_grad():
                    p.grad.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call fn on every submodule (children first) and on self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply_tensors(self, fn) -> Module:
        STRUCTURE_VERSION[0] += 1  # parameters get new data, buffers new tensors
        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is not None:
                        new = fn(p)
                        if new is not p:
                            p.data = new
                            if p.grad is not None:
                                p.grad = fn(p.grad)
                for name, b in m._buffers.items():
                    if b is not None:
                        m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers in place: ``to('vulkan')``, ``to(float64)``,
        ``to(memory_format=gpucore.channels_last)``. Only floating tensors change dtype (integer
        buffers keep theirs) and only 4-D / 5-D ones change layout, as in PyTorch."""
        for a in (*args, kwargs.get("dtype")):
            if a is not None and _is_dtype(a) and not D.as_dtype(a).is_floating_point:
                raise TypeError(
                    f"Module.to() only accepts floating point dtypes, got {D.as_dtype(a)}"
                )

        def conv(t: Tensor) -> Tensor:
            # a dtype changes floating tensors only, a memory_format 4-D and 5-D ones only
            keep = {"dtype": t.is_floating_point(), "memory_format": t.ndim in (4, 5)}
            out = t.to(
                *[a for a in args if not _is_dtype(a) or t.is_floating_point()],
                **{k: v for k, v in kwargs.items() if keep.get(k, True)},
            )
            return out

        return self._apply_tensors(conv)

    def cpu(self) -> Module:
        """Move parameters and buffers to the CPU (``to('cpu')``)."""
        return self.to("cpu")

    def vulkan(self) -> Module:
        """Move parameters and buffers to the Vulkan device (``to('vulkan')``)."""
        return self.to("vulkan")

    def float(self) -> Module:
        """Cast floating parameters and buffers to float32."""
        return self.to(D.float32)

    def double(self) -> Module:
        """Cast floating parameters and buffers to float64."""
        return self.to(D.float64)

    def half(self) -> Module:
        """Cast floating parameters and buffers to float16."""
        return self.to(D.float16)

    # ----------------------------------------------------------------------------- calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def register_forward_hook(self, hook):
        """hook(module, inputs, output) runs after forward; a non-None return replaces output."""
        key = object()
        self._forward_hooks[key] = hook
        return _RemovableHandle(self._forward_hooks, key)

    def register_forward_pre_hook(self, hook):
        """hook(module, inputs) runs before forward; a non-None return replaces the inputs."""
        key = object()
        self._forward_pre_hooks[key] = hook
        return _RemovableHandle(self._forward_pre_hooks, key)

    def register_full_backward_hook(self, hook):
        """hook(module, grad_input, grad_output) runs when the gradients of the module's tensor
        inputs are computed (grad_input all None when none requires grad); a non-None return
        replaces grad_input (gpucore/nn/backward_hooks.py)."""
        return self._add_backward_hook("hooks", hook)

    def register_full_backward_pre_hook(self, hook):
        """hook(module, grad_output) runs when the gradients of the module's outputs arrive; a
        non-None return replaces grad_output."""
        return self._add_backward_hook("pre_hooks", hook)

    def _add_backward_hook(self, table: str, hook):
        hooks = hook_tables(self)[table]
        key = object()
        hooks[key] = hook
        return _RemovableHandle(hooks, key)

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks:
            for hook in list(self._forward_pre_hooks.values()):
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        # full backward hooks see the inputs forward gets and the output the caller gets
        backward_hooks = self._full_backward_state
        if backward_hooks is not None:
            args, rec = wrap_inputs(self, backward_hooks, args)
        out = self.forward(*args, **kwargs)
        if self._forward_hooks:
            for hook in list(self._forward_hooks.values()):
                r = hook(self, args, out)
                if r is not None:
                    out = r
        if backward_hooks is not None:
            out = wrap_outputs(rec, out)
        return out

    # ----------------------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        """Extra text inside ``repr(module)``: override to show a layer's settings."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = []
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            child_lines.append(f"({name}): {sub}")
        lines = extra_lines + child_lines
        if not lines:
            return f"{type(self).__name__}()"
        if len(extra_lines) == 1 and not child_lines:
            return f"{type(self).__name__}({extra_lines[0]})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(
            set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        )


def _is_dtype(a) -> bool:
    return isinstance(a, D.dtype) or (isinstance(a, str) and a in D.BY_NAME)


class _RemovableHandle:
    def __init__(self, table, key):
        self._table = table
        self._key = key

    def remove(self) -> None:
        self._table.pop(self._key, None)
