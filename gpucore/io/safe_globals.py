"""The allow-list of classes ``gpucore.load(weights_only=True)`` may rebuild (PyTorch's
``torch.serialization.add_safe_globals``), and how an object of such a class is taken apart and
put back together.

The safe format holds only data: containers, plain values and tensors. An object of a listed
class (an ``argparse.Namespace`` of hyper-parameters, a dataclass of settings, an Enum member) is
stored in it as its class's name plus what ``__reduce_ex__`` gives for it, when that is data too:

- the default reduction (``cls.__new__(cls, *args)``, then its state: ``__dict__`` or
  ``__getstate__()``, restored by ``__setstate__`` or as attributes, as pickle does), or
- a call of the class itself, ``cls(*args)`` (Enum members: ``Color(2)``).

Loading with ``weights_only=True`` rebuilds such an object only when its class is listed at load
time (the name is looked up in the list: nothing is imported, nothing else is called); otherwise
it raises an error naming the class and ``add_safe_globals``. ``weights_only=False`` imports the
named class of a trusted file. Objects of unlisted classes, and of listed ones whose reduction is
anything else (a custom ``__reduce__`` calling another function, list or dict items), are saved
in the pickle format instead (``gpucore.io.pickle_format``), which only ``weights_only=False``
loads. Entries that are not classes (functions, PyTorch's numpy reconstructors) are kept in the
list, so scripts written for PyTorch run, but have no effect: the safe format never calls them.
"""

from __future__ import annotations

import contextlib
import copyreg
import importlib
import threading

_lock = threading.Lock()
_listed: list = []  # as given: classes, or (class, name) pairs


def _entry_name(entry) -> tuple:
    """(object, name) of an allow-list entry: ``cls`` or ``(cls, "module.Name")``."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError(
                f"a safe global must be an object or an (object, 'module.name') pair, got {entry!r}"
            )
        return entry
    return entry, class_name(entry) if isinstance(entry, type) else None


def _check(safe_globals) -> list:
    if not isinstance(safe_globals, (list, tuple, set)):
        raise TypeError(
            "expected a list of classes (or (class, name) pairs), got "
            f"{type(safe_globals).__name__}"
        )
    entries = list(safe_globals)
    for e in entries:
        _entry_name(e)
    return entries


def add_safe_globals(safe_globals) -> None:
    """Allow ``gpucore.load(weights_only=True)`` to rebuild objects of these classes (see the
    module docstring for what that means in gpucore)."""
    entries = _check(safe_globals)
    with _lock:
        _listed.extend(e for e in entries if e not in _listed)


def get_safe_globals() -> list:
    """The entries added with ``add_safe_globals`` (or an active ``safe_globals`` block)."""
    with _lock:
        return list(_listed)


def clear_safe_globals() -> None:
    """Empty the allow-list."""
    with _lock:
        _listed.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """``with safe_globals([cls, ...]):`` the classes are allowed inside the block only."""
    entries = _check(safe_globals)
    with _lock:
        before = list(_listed)
        _listed.extend(e for e in entries if e not in _listed)
    try:
        yield
    finally:
        with _lock:
            _listed[:] = before


def allowed() -> dict:
    """name -> class of the listed classes."""
    out = {}
    with _lock:
        for e in _listed:
            obj, name = _entry_name(e)
            if isinstance(obj, type) and name is not None:
                out[name] = obj
    return out


def class_name(cls: type) -> str:
    """The name a class is stored under: ``module.QualName``, as PyTorch's messages spell it."""
    return f"{cls.__module__}.{cls.__qualname__}"


def import_class(name: str):
    """The class named ``name`` (``module.QualName``), imported: for trusted files only."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        if isinstance(obj, type):
            return obj
    return None


def reduce_parts(obj):
    """(kind, args, state) when ``obj``'s reduction is one the safe format can hold: kind 'new'
    (``cls.__new__(cls, *args)``) or 'call' (``cls(*args)``); None otherwise."""
    cls = type(obj)
    try:
        rv = obj.__reduce_ex__(2)
    except Exception:  # an object that refuses to be pickled: the pickle format says why
        return None
    if not isinstance(rv, tuple) or not 2 <= len(rv) <= 6:
        return None
    rv = rv + (None,) * (6 - len(rv))
    func, args, state, items, dict_items, setter = rv
    if items is not None or dict_items is not None or setter is not None:
        return None
    if not isinstance(args, tuple):
        return None
    if func is copyreg.__newobj__ and args and args[0] is cls:
        return "new", list(args[1:]), state
    if func is cls:
        return "call", list(args), state
    return None


def rebuild(cls: type, kind: str, args: list, state):
    """The inverse of ``reduce_parts`` (pickle's NEWOBJ or REDUCE, then BUILD)."""
    obj = cls.__new__(cls, *args) if kind == "new" else cls(*args)
    if state is None:
        return obj
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return obj
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise TypeError(f"the state of a {cls.__name__} must be a dict with str keys")
        obj.__dict__.update(state)
    if slots:
        if not isinstance(slots, dict) or not all(isinstance(k, str) for k in slots):
            raise TypeError(f"the slot state of a {cls.__name__} must be a dict with str keys")
        for k, v in slots.items():
            setattr(obj, k, v)
    return obj
