"""The public API of the ops, declared in one style: ``gpucore.<fn>`` and Tensor's members.

Every public function and every Tensor method, operator or property an op module provides is
declared once, next to its op, with ``public`` (or ``defop(..., variants=...)`` for an op whose
public form is just ``apply(op, *inputs)``). Declaring records it here:

- ``FUNCTIONS``: what ``gpucore`` exports (``gpucore/__init__.py`` takes them from this table),
- ``METHODS``: what the op modules attach to Tensor (``tensor.pyi`` is generated from it),
- ``INPLACE``: the in-place forms (``x.exp_()``), attached by ``ops/inplace.py``.

So a name is typed once, and the stub generator (``tools/gen_stubs.py``) and the tests see the
whole API from these tables.

Argument types: a parameter annotated ``Tensor`` must receive a Tensor. The public forms check
it before the body runs (ArgumentTypeError, ``exp(): argument 'input' (position 1) must be
Tensor, not str``, as PyTorch); parameters that also take numbers (``add``'s ``other``) are left
unannotated and checked by the operand normalisation (``ops/common.py``), and ``registry.apply``
checks every op input on its general path.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable

from ..errors import ArgumentTypeError, GpucoreError
from ..tensor import Tensor

FUNCTIONS: dict[str, Callable] = {}
METHODS: dict[str, object] = {}
# "exp_" -> ("exp", saves_self): the in-place form of Tensor.exp; saves_self says whether the
# out-of-place op may save its input for backward (then the in-place form works on a copy).
INPLACE: dict[str, tuple[str, bool]] = {}


def _named_code(fn) -> None:
    """Give a generated function (``def fn`` in a factory, renamed by ``__name__``) its name in
    its code too: tracebacks, and the errors that name the op from the stack (a Tensor without
    data: tensor.py), then say ``exp``, not ``fn``."""
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_name != fn.__name__ and code.co_name == "fn":
        fn.__code__ = code.replace(co_name=fn.__name__, co_qualname=fn.__name__)


def tensor_member(name: str, value) -> None:
    """Attach ``value`` (a function, property or operator) to Tensor as ``name``."""
    if name in METHODS or name in vars(Tensor):
        raise ValueError(f"Tensor.{name} is declared twice")
    _named_code(value)
    METHODS[name] = value
    setattr(Tensor, name, value)


def export(name: str, fn: Callable) -> None:
    """Make ``fn`` a public function ``gpucore.<name>``."""
    if name in FUNCTIONS:
        raise ValueError(f"gpucore.{name} is declared twice")
    _named_code(fn)
    FUNCTIONS[name] = fn


def type_name(value) -> str:
    """A value's type as PyTorch's argument errors name it: ``float``, ``NoneType``,
    ``numpy.ndarray``."""
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def not_tensor(fn: str, arg: str | None, position: int | None, value) -> ArgumentTypeError:
    """The error for a non-Tensor ``value`` given where ``fn`` expects a Tensor."""
    where = f"argument {position}" if arg is None else f"argument '{arg}'"
    if arg is not None and position is not None:
        where += f" (position {position})"
    return ArgumentTypeError(f"{fn}(): {where} must be Tensor, not {type_name(value)}")


# The errors a public form puts its name in front of (a composition's inner op, ``addmm``
# failing in ``add``, or a helper named its caller: ``randint_like`` in ``randint``).
_NAMED = (GpucoreError, TypeError, ValueError, IndexError)


def _relabel(e: BaseException, name: str, names: tuple) -> None:
    """Put ``name()`` in front of e's message unless it names the function already."""
    a = e.args
    if len(a) == 1 and isinstance(a[0], str) and not any(f in a[0] for f in names):
        e.args = (f"{name}(): {a[0]}",)


_OPTIONAL_TENSOR = ("Tensor | None", "Optional[Tensor]", "None | Tensor")


def checked(name: str, fn: Callable, inside=None, region: list | None = None) -> Callable:
    """The public form of a function declared elsewhere (``gpucore.nn.functional``): the same
    argument checks and error naming as ``public``'s functions. ``inside``: fn's form to call
    instead while ``region[0]`` is set (autocast's casting form while a region is open), so that
    outside one the form calls fn itself, with no wrapper layer between (~0.1 µs a call)."""
    return _checked(name, fn, 0, 1, inside, region)


def _checks_annotation(annotation) -> bool:
    """Whether a parameter annotated so gets the Tensor check (``Tensor``, ``Tensor | None``)."""
    return annotation in ("Tensor", Tensor) or annotation in _OPTIONAL_TENSOR


def _has_checks(fn: Callable, first: int) -> bool:
    """Whether fn has a parameter from index ``first`` on whose annotation asks for a check,
    read from the code object for a plain function (inspect.signature cost the import ~30 ms
    over the ~1000 public forms)."""
    code = getattr(fn, "__code__", None)
    plain = type(fn) is types.FunctionType and code is not None
    if not plain or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        params = list(inspect.signature(fn).parameters.values())[first:]
        return any(_checks_annotation(p.annotation) for p in params)
    n = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[: code.co_argcount])  # the signature's order
    if code.co_flags & inspect.CO_VARARGS:
        names.append(code.co_varnames[n])
    names += code.co_varnames[code.co_argcount : n]
    ann = fn.__annotations__
    return any(_checks_annotation(ann.get(p)) for p in names[first:])


def _trampoline(*args, **kwargs):
    """The body of a public form until its first call, which compiles the real one."""
    return _gc_build()(*args, **kwargs)  # noqa: F821 - the form's own globals define it


def _checked(
    name: str, fn: Callable, first: int, offset: int, inside=None, region=None
) -> Callable:
    """fn as a public form: it checks first that fn's parameters annotated ``Tensor`` (or
    ``Tensor | None``: a Tensor or None; from index ``first`` on: 1 for a method, whose self is a
    Tensor) got Tensors, and puts the public name in front of the message of an error from
    inside (``_NAMED``) that does not name it. ``offset`` turns an index into PyTorch's position
    (1 for a function, 0 for a method). A method with nothing to check besides self is fn itself.

    The form's body is generated with fn's own parameter list (as dataclasses generate
    ``__init__``): the checks are inline (a generic loop over ``*args`` cost gc.matmul 0.75 µs a
    call; this form costs about 0.05 µs). It is compiled on the form's first call (the
    trampoline swaps its code object for the real one, in place, so the function object and its
    identity stay): compiling the ~1000 forms up front was a third of ``import gpucore``.
    """
    if first and not _has_checks(fn, first):
        return fn  # a method with no Tensor to check besides self
    ns = {"_gc_fn": fn, "_gc_T": Tensor, "_gc_bad": not_tensor, "_gc_named": _NAMED}
    ns.update(_gc_relabel=_relabel, _gc_names=(name, fn.__name__))
    ident = name.replace(".", "_")
    code = _trampoline.__code__.replace(co_name=ident, co_qualname=ident)
    stub = types.FunctionType(code, ns, ident)
    ns["_gc_build"] = lambda: _build_form(stub, name, fn, first, offset, inside, region)
    return functools.update_wrapper(stub, fn)


def _build_form(
    stub: Callable, name: str, fn: Callable, first: int, offset: int, inside, region
) -> Callable:
    """Compile the body of ``stub``, the public form of fn (``_checked``), with fn's parameter
    list, and make it stub's: its code object and defaults are swapped in place."""
    ns = stub.__globals__
    params, call, checks, star, slash = [], [], [], False, 0
    for i, p in enumerate(inspect.signature(fn).parameters.values()):
        default = ""
        if p.default is not p.empty:
            ns[f"_gc_d{i}"] = p.default
            default = f"=_gc_d{i}"
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            call.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            call.append(f"**{p.name}")
        elif p.kind is p.KEYWORD_ONLY:
            params += ([] if star else ["*"]) + [p.name + default]
            call.append(f"{p.name}={p.name}")
            star = True
        else:
            params.append(p.name + default)
            call.append(p.name)
            if p.kind is p.POSITIONAL_ONLY:
                slash = len(params)
        optional = p.annotation in _OPTIONAL_TENSOR
        if i < first or not _checks_annotation(p.annotation):
            continue
        pos = "None" if p.kind is p.KEYWORD_ONLY else str(i + offset)
        if optional:  # Tensor | None: a bias, a weight
            checks.append(
                f"    if {p.name} is not None and not isinstance({p.name}, _gc_T):\n"
                f"        raise _gc_bad({name!r}, {p.name!r}, {pos}, {p.name})\n"
            )
        elif p.kind is p.VAR_POSITIONAL:
            checks.append(
                f"    for _gc_j, _gc_v in enumerate({p.name}):\n"
                f"        if not isinstance(_gc_v, _gc_T):\n"
                f"            raise _gc_bad({name!r}, {p.name!r}, {pos} + _gc_j, _gc_v)\n"
            )
        else:
            checks.append(
                f"    if not isinstance({p.name}, _gc_T):\n"
                f"        raise _gc_bad({name!r}, {p.name!r}, {pos}, {p.name})\n"
            )
    if slash:
        params.insert(slash, "/")
    ident = name.replace(".", "_")  # linalg.inv's form is the function linalg_inv
    callee = "_gc_fn" if inside is None else "(_gc_inside if _gc_region[0] else _gc_fn)"
    ns.update(_gc_inside=inside, _gc_region=region)
    src = (
        f"def {ident}({', '.join(params)}):\n{''.join(checks)}    try:\n"
        f"        return {callee}({', '.join(call)})\n"
        "    except _gc_named as _gc_e:\n"
        "        _gc_relabel(_gc_e, _gc_names[0], _gc_names)\n"
        "        raise\n"
    )
    exec(compile(src, f"<public form {name}>", "exec"), ns)  # noqa: S102 - our own source
    form = ns.pop(ident)
    # The defaults first: a thread that calls stub meanwhile still runs the trampoline.
    stub.__defaults__, stub.__kwdefaults__ = form.__defaults__, form.__kwdefaults__
    stub.__code__ = form.__code__
    return stub


def public(
    *names: str,
    function: bool = True,
    method: bool = True,
    inplace: bool = False,
    saves_self: bool = True,
    check_args: bool = True,
):
    """Declare the decorated function public under ``names`` (PyTorch's names; the first is the
    primary one, the rest aliases such as ``clip`` for ``clamp``).

    function: export it as ``gpucore.<name>`` for each plain name. method: attach it to Tensor
    as ``<name>`` (its first argument becomes self); dunder names (``__neg__``) are always
    Tensor-only. inplace: also give Tensor the in-place forms ``<name>_`` (``x.exp_()``);
    ``saves_self=False`` when the op never saves its input (``add``), which spares a copy.

    The public forms check that the parameters annotated ``Tensor`` got Tensors (see the module
    docstring) and name the function in the message of an error raised inside it;
    ``check_args=False`` for a function that hands its inputs straight to ``registry.apply``,
    which does both itself. Operators (dunders) are not checked: they
    return NotImplemented or fail in the operand normalisation. The decorator returns ``fn``
    unchanged, so calls inside gpucore skip the check.
    """

    def deco(fn):
        for n in names:
            dunder = n.startswith("__")
            if method or dunder:
                # methods only check arguments (no wrapper unless one is a Tensor besides self)
                tensor_member(n, _checked(n, fn, 1, 0) if check_args and not dunder else fn)
            if function and not dunder:
                export(n, _checked(n, fn, 0, 1) if check_args else fn)
            if inplace and not dunder:
                if n + "_" in INPLACE:
                    raise ValueError(f"Tensor.{n}_ is declared twice")
                INPLACE[n + "_"] = (n, saves_self)
        return fn

    return deco
