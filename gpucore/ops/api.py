"""The public API of the ops, declared in one style: ``gpucore.<fn>`` and Tensor's members.

Every public function and every Tensor method, operator or property an op module provides is
declared once, next to its op, with ``public`` (or ``defop(..., variants=...)`` for an op whose
public form is just ``apply(op, *inputs)``). Declaring records it here:

- ``FUNCTIONS``: what ``gpucore`` exports (``gpucore/__init__.py`` takes them from this table),
- ``METHODS``: what the op modules attach to Tensor (``tensor.pyi`` is generated from it),
- ``INPLACE``: the in-place forms (``x.exp_()``), attached by ``ops/inplace.py``.

So a name is typed once, and the stub generator (``tools/gen_stubs.py``) and the tests see the
whole API from these tables.
"""

from __future__ import annotations

from collections.abc import Callable

from ..tensor import Tensor

FUNCTIONS: dict[str, Callable] = {}
METHODS: dict[str, object] = {}
# "exp_" -> ("exp", saves_self): the in-place form of Tensor.exp; saves_self says whether the
# out-of-place op may save its input for backward (then the in-place form works on a copy).
INPLACE: dict[str, tuple[str, bool]] = {}


def tensor_member(name: str, value) -> None:
    """Attach ``value`` (a function, property or operator) to Tensor as ``name``."""
    if name in METHODS or name in vars(Tensor):
        raise ValueError(f"Tensor.{name} is declared twice")
    METHODS[name] = value
    setattr(Tensor, name, value)


def export(name: str, fn: Callable) -> None:
    """Make ``fn`` a public function ``gpucore.<name>``."""
    if name in FUNCTIONS:
        raise ValueError(f"gpucore.{name} is declared twice")
    FUNCTIONS[name] = fn


def public(
    *names: str,
    function: bool = True,
    method: bool = True,
    inplace: bool = False,
    saves_self: bool = True,
):
    """Declare the decorated function public under ``names`` (PyTorch's names; the first is the
    primary one, the rest aliases such as ``clip`` for ``clamp``).

    function: export it as ``gpucore.<name>`` for each plain name. method: attach it to Tensor
    as ``<name>`` (its first argument becomes self); dunder names (``__neg__``) are always
    Tensor-only. inplace: also give Tensor the in-place forms ``<name>_`` (``x.exp_()``);
    ``saves_self=False`` when the op never saves its input (``add``), which spares a copy.
    """

    def deco(fn):
        for n in names:
            dunder = n.startswith("__")
            if method or dunder:
                tensor_member(n, fn)
            if function and not dunder:
                export(n, fn)
            if inplace and not dunder:
                if n + "_" in INPLACE:
                    raise ValueError(f"Tensor.{n}_ is declared twice")
                INPLACE[n + "_"] = (n, saves_self)
        return fn

    return deco
