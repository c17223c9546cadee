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
import sys
import threading
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
        fn.__code__ = _named(code, fn.__name__)


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


def _params(fn: Callable) -> list[tuple[str, object, object, object]]:
    """fn's parameters as (name, kind, default, annotation), ``inspect.Parameter``'s kinds and
    ``_EMPTY`` for no default / annotation. Read from the code object for a plain function:
    inspect.signature cost the import ~30 ms over the ~1000 public forms."""
    code = getattr(fn, "__code__", None)
    plain = type(fn) is types.FunctionType and code is not None
    if not plain or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return [
            (p.name, p.kind, p.default, p.annotation)
            for p in inspect.signature(fn).parameters.values()
        ]
    P, ann, names = inspect.Parameter, fn.__annotations__, code.co_varnames
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    defaults, kwdefaults = fn.__defaults__ or (), fn.__kwdefaults__ or {}
    out = []
    for i, name in enumerate(names[:n_pos]):
        kind = P.POSITIONAL_ONLY if i < code.co_posonlyargcount else P.POSITIONAL_OR_KEYWORD
        j = i - (n_pos - len(defaults))
        out.append((name, kind, defaults[j] if j >= 0 else _EMPTY, ann.get(name, _EMPTY)))
    k = n_pos + n_kw
    if code.co_flags & inspect.CO_VARARGS:
        out.append((names[k], P.VAR_POSITIONAL, _EMPTY, ann.get(names[k], _EMPTY)))
        k += 1
    for name in names[n_pos : n_pos + n_kw]:
        out.append((name, P.KEYWORD_ONLY, kwdefaults.get(name, _EMPTY), ann.get(name, _EMPTY)))
    if code.co_flags & inspect.CO_VARKEYWORDS:
        out.append((names[k], P.VAR_KEYWORD, _EMPTY, ann.get(names[k], _EMPTY)))
    return out


_EMPTY = inspect.Parameter.empty


def _has_checks(fn: Callable, first: int) -> bool:
    """Whether fn has a parameter from index ``first`` on whose annotation asks for a check."""
    return any(_checks_annotation(p[3]) for p in _params(fn)[first:])


def _trampoline(*args, **kwargs):
    """The body of a public form until its first call compiles the real one (``_checked``).
    That call runs here, but with the real form's frames: the form's checks (a function
    compiled with the form, ``_gc_check``, which returns the arguments to pass on), then fn,
    called from this frame, as the form calls it. So a warning fn raises with a
    ``stacklevel`` names the caller's line on the first call as on the others."""
    args, kwargs = _gc_build()(*args, **kwargs)  # noqa: F821 - the form's globals define these
    fn = _gc_inside if _gc_inside is not None and _gc_region[0] else _gc_fn  # noqa: F821
    try:
        return fn(*args, **kwargs)
    except _gc_named as _gc_e:  # noqa: F821
        _gc_relabel(_gc_e, _gc_names[0], _gc_names)  # noqa: F821
        raise


# Held while a form is compiled: two threads making its first call at once compile it once.
_LOCK = threading.RLock()


def _named(code: types.CodeType, ident: str) -> types.CodeType:
    """code, named ``ident`` in tracebacks (co_qualname exists from Python 3.11)."""
    if sys.version_info >= (3, 11):
        return code.replace(co_name=ident, co_qualname=ident)
    return code.replace(co_name=ident)


def _pack(*args, **kwargs) -> tuple[tuple, dict]:
    """A form's arguments to fn, as ``_gc_check`` returns them."""
    return args, kwargs


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
    identity stay): compiling the ~1000 forms up front was a third of ``import gpucore``, and
    one ``compile`` of all their source together costs about as much.
    """
    if first and not _has_checks(fn, first):
        return fn  # a method with no Tensor to check besides self
    ns = {"_gc_fn": fn, "_gc_T": Tensor, "_gc_bad": not_tensor, "_gc_named": _NAMED}
    ns.update(_gc_relabel=_relabel, _gc_names=(name, fn.__name__), _gc_pack=_pack)
    ns.update(_gc_inside=inside, _gc_region=region)
    ident = name.replace(".", "_")  # linalg.inv's form is the function linalg_inv
    stub = types.FunctionType(_named(_trampoline.__code__, ident), ns, ident)
    ns["_gc_build"] = lambda: _build_form(stub, name, fn, first, offset)
    return functools.update_wrapper(stub, fn)


def _build_form(stub: Callable, name: str, fn: Callable, first: int, offset: int) -> Callable:
    """Compile the body of ``stub``, the public form of fn (``_checked``), and make it stub's:
    its code object and defaults are swapped in place. Returns the form's checks as a function
    of their own (stub's parameter list; it returns the arguments to pass to fn) for the
    trampoline. Compiled once: a thread that comes second gets the first one's."""
    ns = stub.__globals__
    with _LOCK:
        check = ns.get("_gc_check")
        if check is not None:
            return check
        head, call, defaults, kwdefaults = _form_source(name, fn, first, offset)
        callee = (
            "_gc_fn" if ns["_gc_inside"] is None else "(_gc_inside if _gc_region[0] else _gc_fn)"
        )
        src = (
            f"def _gc_form{head}    try:\n"
            f"        return {callee}({call})\n"
            "    except _gc_named as _gc_e:\n"
            "        _gc_relabel(_gc_e, _gc_names[0], _gc_names)\n"
            "        raise\n"
            f"def _gc_check{head}    return _gc_pack({call})\n"
        )
        made: dict = {}  # the defs land here; their globals are the form's namespace, ns
        exec(compile(src, f"<public form {name}>", "exec"), ns, made)  # noqa: S102 - our source
        form, check = made["_gc_form"], made["_gc_check"]
        # Errors about the arguments (a missing one) name the form: the function's qualname.
        check.__name__, check.__qualname__ = stub.__name__, stub.__qualname__
        check.__defaults__, check.__kwdefaults__ = defaults, kwdefaults
        ns["_gc_check"] = check
        # The defaults first: a thread that calls stub meanwhile still runs the trampoline.
        stub.__defaults__, stub.__kwdefaults__ = defaults, kwdefaults
        stub.__code__ = _named(form.__code__, name.replace(".", "_"))
        return check


def _form_source(name: str, fn: Callable, first: int, offset: int) -> tuple:
    """The parts of fn's public form (``_checked``): (its parameter list and checks, the source
    after the def's name; the arguments of its call to fn; its defaults; its keyword-only
    defaults). The defaults are set on the function, not evaluated: the source has ``=None``."""
    P = inspect.Parameter
    params, call, checks, star, slash = [], [], [], False, 0
    defaults, kwdefaults = [], {}
    for i, (pname, kind, default, annotation) in enumerate(_params(fn)):
        if kind is P.VAR_POSITIONAL:
            params.append(f"*{pname}")
            call.append(f"*{pname}")
            star = True
        elif kind is P.VAR_KEYWORD:
            params.append(f"**{pname}")
            call.append(f"**{pname}")
        elif kind is P.KEYWORD_ONLY:
            params += ([] if star else ["*"]) + [pname + ("" if default is _EMPTY else "=None")]
            call.append(f"{pname}={pname}")
            star = True
            if default is not _EMPTY:
                kwdefaults[pname] = default
        else:
            params.append(pname + ("" if default is _EMPTY else "=None"))
            call.append(pname)
            if default is not _EMPTY:
                defaults.append(default)
            if kind is P.POSITIONAL_ONLY:
                slash = len(params)
        if i < first or not _checks_annotation(annotation):
            continue
        pos = "None" if kind is P.KEYWORD_ONLY else str(i + offset)
        if annotation in _OPTIONAL_TENSOR:  # Tensor | None: a bias, a weight
            checks.append(
                f"    if {pname} is not None and not isinstance({pname}, _gc_T):\n"
                f"        raise _gc_bad(_gc_names[0], {pname!r}, {pos}, {pname})\n"
            )
        elif kind is P.VAR_POSITIONAL:
            checks.append(
                f"    for _gc_j, _gc_v in enumerate({pname}):\n"
                f"        if not isinstance(_gc_v, _gc_T):\n"
                f"            raise _gc_bad(_gc_names[0], {pname!r}, {pos} + _gc_j, _gc_v)\n"
            )
        else:
            checks.append(
                f"    if not isinstance({pname}, _gc_T):\n"
                f"        raise _gc_bad(_gc_names[0], {pname!r}, {pos}, {pname})\n"
            )
    if slash:
        params.insert(slash, "/")
    head = f"({', '.join(params)}):\n{''.join(checks)}"
    return head, ", ".join(call), tuple(defaults) or None, kwdefaults or None


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
