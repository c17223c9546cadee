"""Parametrizations as torch.nn.utils.parametrize: a module's parameter or buffer computed from
other tensors by small modules, recomputed on every access.

``register_parametrization(module, "weight", p)`` moves the tensor to
``module.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when ``p``'s
``right_inverse`` returns several tensors) and makes ``module.weight`` a property returning
``p(original)``: the module's class is swapped for a subclass named ``Parametrized<Class>``
that holds the property, as PyTorch does, so state_dict keys, ``named_parameters`` and gradients
are PyTorch's. Assigning ``module.weight = t`` stores ``right_inverse(t)`` in the originals.
Inside ``cached()`` each parametrized tensor is computed once.
"""

from __future__ import annotations

import contextlib

from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from ..module import Module
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = [
    "register_parametrization",
    "remove_parametrizations",
    "is_parametrized",
    "cached",
    "ParametrizationList",
]

_cache_enabled = 0
_cache: dict = {}


@contextlib.contextmanager
def cached():
    """Compute each parametrized tensor once inside the block (then drop the results)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _as_original(value: Tensor, like: Tensor) -> Tensor:
    """``value`` kept as a parameter when ``like`` was one (with its requires_grad), else as a
    plain tensor (a buffer)."""
    if isinstance(like, Parameter):
        return Parameter(value.detach(), like.requires_grad)
    return value.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s) they are
    computed from: ``original``, or ``original0``, ``original1``, ... when the first
    parametrization's ``right_inverse`` returns a sequence."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False):
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    new = module.right_inverse(new)
        self.is_tensor = isinstance(new, Tensor)
        if self.is_tensor:
            # the same object holds the right inverse's value, as PyTorch keeps it (an optimizer
            # holding the parameter keeps working)
            if new is not original:
                with no_grad():
                    if tuple(new.shape) == tuple(original.shape) and new.dtype is original.dtype:
                        original.copy_(new)
                    else:
                        original.data = new
            self._set_original("original", original)
        else:
            self.ntensors = len(new)
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError(
                        f"'right_inverse' must return a Tensor or a Sequence of tensors, got "
                        f"element {i} of type {type(t).__name__}"
                    )
                self._set_original(f"original{i}", _as_original(t, original))
        if not unsafe:
            value = self()
            if tuple(value.shape) != tuple(original.shape) or value.dtype is not original.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the shape or dtype of the "
                    f"tensor: {tuple(original.shape)} {original.dtype} became "
                    f"{tuple(value.shape)} {value.dtype} (pass unsafe=True to allow it)"
                )

    def _set_original(self, name: str, t: Tensor) -> None:
        if isinstance(t, Parameter):
            setattr(self, name, t)
        else:
            self.register_buffer(name, t)

    def right_inverse(self, value: Tensor) -> None:
        """Store ``value`` in the originals through the parametrizations' right inverses."""
        with no_grad():
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement right_inverse"
                    )
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self) -> Tensor:
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _inject_new_class(module: Module) -> None:
    cls = module.__class__
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})


def _inject_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether the module (or its tensor ``tensor_name``) has a parametrization."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the original
    tensor (or chain it after the ones already registered on that name); returns the module."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe and not plist.unsafe:
            before = getattr(module, tensor_name)
            after = parametrization(before)
            if tuple(after.shape) != tuple(before.shape) or after.dtype is not before.dtype:
                raise ValueError(
                    f"Registering a parametrization may not change the shape or dtype of the "
                    f"tensor: {tuple(before.shape)} became {tuple(after.shape)} (unsafe=True "
                    "allows it)"
                )
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    return module


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Undo the parametrizations of ``tensor_name``: it becomes a parameter (or buffer) again,
    holding the parametrized value (``leave_parametrized``) or the original; returns the
    module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                # the same object keeps the value, so an optimizer holding it still does
                if tuple(value.shape) == tuple(original.shape) and value.dtype is original.dtype:
                    original.copy_(value)
                else:
                    original.data = value
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                "parametrized in terms of a sequence of tensors."
            )
        # computed under the caller's grad mode, as PyTorch: a value that requires grad becomes
        # a new Parameter, one computed under no_grad a plain tensor (a buffer)
        value = getattr(module, tensor_name)
        original = Parameter(value.detach(), True) if value.requires_grad else value.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module
