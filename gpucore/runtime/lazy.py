"""``gpucore.compile(model)`` without example inputs: PyTorch's ``torch.compile`` form.

Scripts written for PyTorch call ``model = torch.compile(model)`` and then train and evaluate
the result as if it were the model. gpucore's compiler is an inference compiler, so the wrapper
decides per call:

- a call that autograd needs (gradients enabled and a parameter or an input requiring grad), a
  Module in training mode, keyword or non-tensor arguments, or tensors on a Vulkan device run
  the model eagerly, exactly as without ``compile``;
- a call without gradients (eval mode for a Module) runs a ``CompiledModel`` (one C call for the
  whole graph) for the inputs' shapes and dtypes. It is built the second time a signature is
  seen with the same weights, so a one-off call never pays for a compile, and rebuilt after a
  weight changes: every tensor the compiled graph holds as a constant is checked against its
  version counter (an optimizer step, ``load_state_dict``, an in-place write) and its data
  (``.data =``, ``Module.to``), and any assignment of a parameter, buffer or submodule to any
  module (``nn.module.STRUCTURE_VERSION``) rebuilds too.

Outputs are Tensors or (possibly nested) tuples, lists and dicts with str keys of them (a
quantized LSTM's ``(output, (h_n, c_n))``): the compiled model returns the same structure
(ir/output_tree.py). A model that cannot be captured (random ops in eval mode, control flow on
tensor values such as ``if x.sum() > 0``, other outputs: None, numbers, namedtuples) runs
eagerly for that signature; the reason is kept in ``stats()["fallbacks"]``. ``fullgraph=True``
raises the capture error instead, as PyTorch does for graph breaks (an unexpected error while
compiling also falls back to eager, recorded the same way, or raises under ``fullgraph=True``).
Compiled outputs equal eager ones up to float rounding (fused kernels sum in other orders).

Threads: a wrapper may be called from many threads at once. One thread builds a signature's
compiled model; calls of that signature arriving while it builds run eagerly (once each, nothing
recorded against the signature) and later calls run compiled, so it is built exactly once.
Captures in several threads at once (two models, two signatures) each record only their own
thread's ops (capture/trace.py). Inside an enclosing capture on the same thread (a compiled
submodule of a model being captured) the wrapper runs eagerly, so the enclosing graph holds its
ops.

What a call's signature does not hold is not checked again between calls: as with any Python
branching on a plain attribute (``if self.flag:``), a model whose output structure depends on
such an attribute keeps the structure of the call it was compiled from (the compiled model
returns the first structure after the attribute changes). Assigning a parameter, buffer or
submodule rebuilds; other attributes do not.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

from ..autograd.grad_mode import is_grad_enabled
from ..errors import GpucoreError
from ..nn.module import STRUCTURE_VERSION, Module
from ..tensor import Tensor
from .capture.dynamic import capture
from .capture.trace import CaptureError, active_tracer, flatten_outputs

CACHE_SIZE = 8  # compiled signatures kept per wrapper (least recently used dropped)


class _Entry:
    """What the wrapper knows about one input signature."""

    __slots__ = ("seen", "model", "sources", "structure", "failed", "building")

    def __init__(self):
        self.seen = 0  # calls with the current weights
        self.model = None  # the CompiledModel, once built
        self.sources: list = []  # (tensor, its version box, version) of the graph's constants
        self.structure = -1  # nn.module.STRUCTURE_VERSION when built
        self.failed: str | None = None  # why this signature runs eagerly
        self.building = False  # a thread is capturing and compiling it now


class _Compiled:
    """The per-call policy shared by compiled Modules and compiled functions."""

    def _init_policy(self, fn, module: Module | None, fullgraph: bool) -> None:
        # object.__setattr__: on a Module, assigning the wrapped module would register it again
        for name, value in (
            ("_fn", fn),
            ("_module", module),
            ("_fullgraph", fullgraph),
            ("_entries", OrderedDict()),
            ("_lock", threading.Lock()),
            ("_counts", {"eager": 0, "compiled": 0, "compiles": 0}),
            ("_params", (-1, ())),  # (STRUCTURE_VERSION, the module's parameters) cache
        ):
            object.__setattr__(self, name, value)

    def stats(self) -> dict:
        """Calls run eagerly and compiled, compiles done, and the signatures that run eagerly
        with the reason (capture error) for each."""
        with self._lock:
            fallbacks = {k: e.failed for k, e in self._entries.items() if e.failed}
            return dict(self._counts, fallbacks=fallbacks)

    def _run(self, args, kwargs):
        key = self._signature(args, kwargs)
        if key is None:
            return self._eager(args, kwargs)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
                while len(self._entries) > CACHE_SIZE:
                    self._entries.popitem(last=False)
            self._entries.move_to_end(key)
            if entry.model is not None and not self._still_valid(entry):
                entry.model, entry.seen = None, 0
            entry.seen += 1
            model = entry.model
            # one thread builds; others arriving meanwhile run eagerly this once, and run the
            # compiled model once it is there (no wait: a first call costs no more than eager)
            failed = entry.failed
            build = not failed and model is None and entry.seen >= 2 and not entry.building
            if build:
                entry.building = True
        if failed:
            if self._fullgraph:  # (an output structure refused below, on every call)
                raise CaptureError(failed)
            return self._eager(args, kwargs)
        if model is None and not build:
            out = self._eager(args, kwargs)
            try:  # a structure the compiled model rebuilds exactly (CompiledModel.__call__)
                flatten_outputs(out, exact=True)
            except CaptureError as e:
                entry.failed = str(e)
                if self._fullgraph:
                    raise
            return out
        if model is None:
            try:
                model = self._build(entry, args)
            finally:
                with self._lock:
                    entry.building = False
            if model is None:
                return self._eager(args, kwargs)
        with self._lock:
            self._counts["compiled"] += 1
        return model(*args)  # the eager structure: the graph's output tree

    def _eager(self, args, kwargs):
        with self._lock:
            self._counts["eager"] += 1
        return self._fn(*args, **kwargs)

    def _signature(self, args, kwargs):
        """The cache key of a call that may run compiled, or None for an eager call."""
        if kwargs or not args:
            return None
        module = self._module
        if module is not None and module.training:
            return None
        grad = is_grad_enabled()
        if active_tracer() is not None:
            return None  # inside an enclosing capture on this thread: its ops are the graph's
        key = []
        for x in args:
            if not isinstance(x, Tensor) or x._dev is not None or (grad and x._requires_grad):
                return None
            key.append((tuple(x.shape), x.dtype))
        if module is not None:
            for t in self._module_parameters():
                if t._dev is not None or (grad and t._requires_grad):
                    return None
        return tuple(key)

    def _module_parameters(self) -> tuple:
        """The module's parameters, walked again only after a module changed structure."""
        version, params = self._params
        if version != STRUCTURE_VERSION[0]:
            version, params = STRUCTURE_VERSION[0], tuple(self._module.parameters())
            object.__setattr__(self, "_params", (version, params))
        return params

    def _still_valid(self, entry: _Entry) -> bool:
        """The graph's constants are what the model reads now: no tensor written since (its
        version), none given new data (``.data =``, ``to()``: its version box), no parameter,
        buffer or submodule assigned anywhere (STRUCTURE_VERSION)."""
        if entry.structure != STRUCTURE_VERSION[0]:
            return False
        return all(t._vbox is box and box[0] == v for t, box, v in entry.sources)

    def _build(self, entry: _Entry, args):
        from .model import compile_graph  # lazy: model imports this package's executors

        found: list = []
        structure = STRUCTURE_VERSION[0]
        try:
            graph = capture(self._fn, list(args), strict=True, sources=found)
            model = compile_graph(graph, list(args), device="cpu")
        except (CaptureError, GpucoreError, NotImplementedError) as e:
            if self._fullgraph:
                raise
            entry.failed = f"{type(e).__name__}: {e}"
            return None
        except Exception as e:  # a bug in the capture or compiler: this signature runs eagerly
            if self._fullgraph:
                raise
            entry.failed = f"unexpected {type(e).__name__} while compiling: {e}"
            return None
        sources = [(t, t._vbox, v) for t, v in found]
        with self._lock:
            entry.model, entry.sources, entry.structure = model, sources, structure
            self._counts["compiles"] += 1
        return model


class OptimizedModule(_Compiled, Module):
    """What ``gpucore.compile(module)`` returns: the module, run eagerly or compiled per call
    (see the module docstring). Its state_dict keys carry PyTorch's ``_orig_mod.`` prefix, and
    attributes it does not have are the original module's."""

    def __init__(self, mod: Module, *, fullgraph: bool = False):
        Module.__init__(self)
        self._orig_mod = mod
        object.__setattr__(self, "training", mod.training)
        self._init_policy(mod, mod, fullgraph)

    def forward(self, *args, **kwargs):
        return self._run(args, kwargs)

    def __getattr__(self, name: str):
        try:
            return Module.__getattr__(self, name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)

    def __getstate__(self):  # compiled models and the lock stay behind: rebuilt on use
        state = dict(self.__dict__)
        for k in ("_fn", "_module", "_entries", "_lock", "_counts", "_params"):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        mod = self._modules["_orig_mod"]
        self._init_policy(mod, mod, state.get("_fullgraph", False))


class CompiledFunction(_Compiled):
    """What ``gpucore.compile(function)`` returns: the function, run eagerly or compiled per
    call (see the module docstring)."""

    def __init__(self, fn, *, fullgraph: bool = False):
        self._init_policy(fn, None, fullgraph)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self._run(args, kwargs)


def compile_lazily(model, *, fullgraph: bool = False, backend="inductor"):
    """``torch.compile(model)``'s behaviour on gpucore (see the module docstring)."""
    if callable(backend) and not isinstance(backend, str):
        raise NotImplementedError(
            "compile(): custom backends (a callable given as backend=) receive torch.fx graphs "
            "in PyTorch; gpucore has its own compiler: leave backend at its default"
        )
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph=fullgraph)
    if callable(model):
        return CompiledFunction(model, fullgraph=fullgraph)
    raise TypeError(f"compile(): expected a Module or a function, got {type(model).__name__}")
