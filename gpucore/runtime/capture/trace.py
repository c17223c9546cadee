"""Trace a gpucore Module or function into the runtime's graph IR.

The model runs once, eagerly, on the example inputs while ``registry.apply`` hands the tracing
thread's op applications to a ``Tracer`` (``registry.capturing``): each registry op becomes a
node (so every op gpucore has is capturable with no extra work), tensors that no recorded op
produced become constants (the model's parameters and buffers keep their names), and in-place
writes rebind the written tensor to the node that computed its new value. Python control flow
on sizes is baked in as it ran. Other threads' ops run eagerly as with no capture.
A host read of a value computed from the graph's inputs (``item()``, ``bool()``, ``float()``,
``int()``, ``numpy()``, ``tolist()``, ``np.asarray``, a data-dependent size) raises CaptureError
at the read, as ``torch.export`` does: the trace would otherwise fix the value the example inputs
gave, and the captured model would silently answer every input with it. Reads of constants
(weights, tensors the model makes itself) fold as before. ``bake_values=True`` asks for
``torch.jit.trace``'s semantics instead (the values baked in, on purpose).

``shapes_only=True`` records without computing: an op that reads a value depending on the
graph's inputs gets its output's shape and dtype from the registry op's ``infer`` and an
uninitialized array, with no kernel run, while ops on constants alone still run (so constant
subgraphs, a Shape's arithmetic, a weight's transpose, keep their values). A model that reads an
input-dependent value on the host (``item()``, ``numpy()``, a data-dependent size) cannot be
traced so: the trace stops with ``ValuesNeeded``, and ``capture`` traces it again executing.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading

import numpy as np

from ...autograd.grad_mode import no_grad
from ...dtypes import from_numpy_dtype
from ...nn.module import Module
from ...ops import registry
from ...ops.common import host_quiet
from ...tensor import Tensor
from ..ir.graph import Graph
from ..ir.output_tree import MAX_DEPTH as MAX_TREE_DEPTH
from ..ir.output_tree import TENSOR, container_too_deep, leaf_count, max_entries
from ..ir.packing import is_constant
from .errors import CaptureError, ValuesNeeded
from .router import _ROUTER, active_tracer

_CONTAINERS = {"tuple": tuple, "list": list, "dict": dict}

# Ops a deployed graph must not replay: they draw random numbers (their stream position would
# be baked into the graph) or update state.
_REFUSED = {
    "uniform": "random sampling",
    "normal": "random sampling",
    "dropout_mask": "dropout in training mode",
    "rand_bits": "random sampling",
    "randint": "random sampling",
}


class Tracer:
    """One capture: records each op the tracing thread applies into ``graph`` (``_Router``,
    the CAPTURE hook, gives it to that thread's calls only: ``registry.capturing``)."""

    def __init__(
        self,
        graph: Graph,
        constant_names: dict,
        sources: list | None = None,
        shapes_only: bool = False,
        bake_values: bool = False,
    ):
        self.graph = graph
        self.bake_values = bake_values  # jit.trace semantics: host reads of values baked in
        self.shapes_only = shapes_only  # input-dependent ops: infer only, no kernel
        self.names: dict[int, str] = {}  # id(tensor) -> tensor name in the graph
        # id(data array) -> name: detach() and .data give new Tensors over the same array
        self.data_names: dict[int, str] = {}
        self.keep: list = []  # every tensor seen stays alive, so that ids are never reused
        self.constant_names = constant_names  # id(parameter or buffer) -> its qualified name
        self.thread = threading.get_ident()
        self.sources = sources  # (tensor, version) of every tensor that became a constant
        self.value_reads: list[str] = []  # graph values the model read on the host
        self.dynamic: set[str] = set()  # names whose values depend on the graph's inputs
        self.in_op = 0  # > 0 while a recorded op's kernel runs

    def __call__(self, op, inputs: tuple, attrs: dict, backend=None):
        if op.name in _REFUSED:
            raise CaptureError(
                f"capture: the model calls {op.name} ({_REFUSED[op.name]}); a deployed graph "
                "must be deterministic: call model.eval() (compile does) and move random "
                "sampling out of forward()"
            )
        names = [self.name_of(t) for t in inputs]
        dynamic = not self.dynamic.isdisjoint(names)
        # the kernel's own reads of its inputs (a device tensor run on the CPU) are the
        # recorded node's, not host reads of the model's
        self.in_op += 1
        try:
            if dynamic and self.shapes_only and op.view is None:
                result = _infer_only(op, inputs, attrs)
            elif backend is None:
                result = registry.apply_general(op, inputs, attrs)
            else:
                result = registry.apply_on_general(backend, op, inputs, attrs)
        finally:
            self.in_op -= 1
        outs = result if isinstance(result, tuple) else (result,)
        for i, t in enumerate(outs):
            a = dict(attrs)
            if len(outs) > 1:
                a["output_index"] = i
            node = self.graph.add_node(op.name, names, tuple(t.shape), t.dtype, a)
            self._bind(t, node.output)
            if dynamic:
                self.dynamic.add(node.output)
        return result

    def record(self, op: str, inputs: list, attrs: dict, result: Tensor) -> None:
        """``result`` = runtime op ``op`` (ir/fused.py, ir/quantized.py) of ``inputs``: one node
        (``apply_runtime_op``)."""
        names = [self.name_of(t) for t in inputs]
        node = self.graph.add_node(op, names, tuple(result.shape), result.dtype, dict(attrs))
        self._bind(result, node.output)
        if not self.dynamic.isdisjoint(names):
            self.dynamic.add(node.output)

    def depends_on_inputs(self, tensors) -> bool:
        """Whether any of ``tensors`` is computed from the graph's inputs (looked up by tensor,
        then by array: detach() / .data of a traced tensor hold the same values)."""
        return any(self._known(t) in self.dynamic for t in tensors)

    def _known(self, t: Tensor) -> str | None:
        """``t``'s graph name if the tracer has seen it or its array, else None."""
        return self.names.get(id(t)) or self.data_names.get(id(t._data))

    def refuse_if_dynamic(self, what: str, t: Tensor, instead: str) -> None:
        """Raise CaptureError when ``t`` is computed from the graph's inputs: ``what`` works on
        its raw storage outside the op registry, so the graph would keep the example's values."""
        if self.depends_on_inputs((t,)):
            raise CaptureError(
                f"capture: the model calls {what} on a tensor computed from its inputs (shape "
                f"{tuple(t.shape)}, {t.dtype}); it has no graph op, so the graph would keep the "
                f"example's values; {instead}"
            )

    def _bind(self, t: Tensor, name: str) -> None:
        self.names[id(t)] = name
        self.data_names[id(t._data)] = name
        self.keep.append(t)  # the tensor and its array: neither id may be reused by another
        self.keep.append(t._data)

    def host_read(self, t: Tensor, quiet: bool = False) -> None:
        """HOST_READ_HOOK: the model read ``t``'s values on the host; a value computed in the
        graph would be baked into the trace (a branch taken, a size, a Python number)."""
        if self.in_op:
            return
        name = self._known(t)
        if name not in self.dynamic:
            return  # a constant's values: folded
        if quiet:  # gpucore's own plumbing (ops.common.host_quiet): it needs computed values
            if self.shapes_only:
                raise ValuesNeeded(name)
            return
        site, printing = _read_site()
        if printing:
            return  # print(x) / repr(x) while tracing: shown, not baked into the graph
        if self.shapes_only:
            raise ValuesNeeded(name)
        self.value_reads.append(name)
        if not self.bake_values:
            raise CaptureError(self.value_read_message(name, t, site))

    def value_read_message(self, name: str, t: Tensor, site: str) -> str:
        """What a refused host read of ``name`` says: which value, made by which op, read
        where, and what to do instead."""
        node = self.graph.producer.get(name)
        made = f"the output of {node.op}" if node is not None else "a graph input"
        return (
            f"capture: the model reads the values of {name!r} ({made}, shape "
            f"{tuple(t.shape)}, {t.dtype}) on the host{site}: data-dependent control flow or "
            "a host read of a traced tensor (item(), bool(), float(), int(), numpy(), "
            "tolist(), np.asarray(), a data-dependent size) cannot be captured, since the "
            "graph would keep the value the example inputs gave for every input; compute it "
            "with tensor ops (where() for a branch, amin/amax/clamp/round for a scale), move "
            "the read out of forward(), or pass bake_values=True to trace/capture to fix the "
            "value on purpose (torch.jit.trace's semantics)"
        )

    def rebind(self, x: Tensor, value: Tensor) -> None:
        """``x`` now holds ``value``'s data (an in-place write, a device move)."""
        if x._base is not None and self.names.get(id(x._base)) is not None:
            raise CaptureError(
                "capture: the model writes in place into a view of a tensor it computed "
                f"(shape {tuple(x.shape)}); write the result with an out-of-place op (cat, "
                "where, masked_fill) instead"
            )
        self._bind(x, self.name_of(value))

    def rebind_view(self, x: Tensor, view: Tensor) -> None:
        """``x`` became ``view`` (an in-place view op: t_, transpose_, squeeze_, ...): later ops
        read x as the view's node. No value is written, so views of x need no check."""
        self._bind(x, self.name_of(view))

    def refuse_inplace(self, op: str, x: Tensor) -> None:
        """``op`` replaces x's storage with one no recorded op computed (resize_, set_()): a
        tensor the graph already holds (or a view of one) could not follow it, so it is refused;
        a tensor the graph has not seen becomes a constant when an op first reads it."""
        if any(
            t is not None and (id(t) in self.names or id(t._data) in self.data_names)
            for t in (x, x._base)
        ):
            raise CaptureError(
                f"capture: the model calls {op} on a tensor of shape {tuple(x.shape)}; it "
                "replaces the tensor's storage outside the graph, so it cannot be captured; use "
                "the out-of-place reshape / view / new_empty instead"
            )

    def check_constant_key(self, what: str, key) -> None:
        """Refuse an index key holding a tensor computed from the graph's inputs: its values
        would be baked into the graph as an attribute (CaptureError says what to use)."""
        parts = key if isinstance(key, tuple) else (key,)
        for part in parts:
            if not isinstance(part, Tensor):
                continue
            # input-derived only: a key computed from constants folds, as a read of them does;
            # by array too, so a detach() / .data of an input-derived key is refused as well
            if self._known(part) in self.dynamic:
                raise CaptureError(
                    f"capture: {what} with an index tensor computed from the model's inputs "
                    "cannot be captured (its values would be fixed at capture time); use "
                    "torch-style gather / index_select / masked_fill / where instead"
                )

    def name_of(self, t: Tensor) -> str:
        """The graph name of ``t``; a tensor no recorded op produced becomes a constant."""
        name = self.names.get(id(t))
        if name is not None:
            return name
        name = self.data_names.get(id(t._data))
        if name is not None:  # detach() / .data of a traced tensor: the same values
            self._bind(t, name)
            return name
        data = t._host()
        if not is_constant(data):  # the model may change it later; an immutable one is kept
            data = np.array(data, copy=True)
        hint = self.constant_names.get(id(t))
        if hint is not None and hint in self.graph.tensors:
            hint = None
        name = self.graph.add_constant(data, name=hint, dtype=t.dtype)
        self._bind(t, name)
        if self.sources is not None:
            self.sources.append((t, t._vbox[0]))
        return name


_HERE = os.path.dirname(os.path.abspath(__file__))
_TENSOR_FILE = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "tensor.py")


def _read_site() -> tuple:
    """(" at file:line in function (Module Name)" of the code that read a traced tensor's
    values, whether the read is a tensor's repr / str): the innermost frame outside tensor.py
    and this file, and the innermost nn.Module whose method is on the stack."""
    frame = sys._getframe(2)
    site, module = "", None
    while frame is not None:
        code = frame.f_code
        path = os.path.abspath(code.co_filename)
        if path == _TENSOR_FILE and code.co_name in ("__repr__", "__str__"):
            return "", True
        if not site and path != _TENSOR_FILE and not path.startswith(_HERE):
            site = f" at {code.co_filename}:{frame.f_lineno} in {code.co_name}()"
        owner = frame.f_locals.get("self") if "self" in code.co_varnames[:1] else None
        if site and module is None and isinstance(owner, Module):
            module = f"{type(owner).__module__}.{type(owner).__qualname__}"
        if site and module is not None:
            break
        frame = frame.f_back
    return site + (f" (module {module})" if module else ""), False


def _infer_only(op, inputs: tuple, attrs: dict):
    """``op``'s output Tensors as ``infer`` declares them, uninitialized (shapes-only tracing;
    the checks ``apply_general`` makes first are made here too)."""
    for t in inputs:
        if not isinstance(t, Tensor):
            raise registry._not_tensor(op, inputs)
    specs = op.infer(*inputs, **attrs)
    if type(specs) is tuple:
        return Tensor._from_kernel(np.empty(specs[0], specs[1].np), specs[1])
    return tuple(Tensor._from_kernel(np.empty(shape, dt.np), dt) for shape, dt in specs)


def apply_runtime_op(op: str, inputs: list, attrs: dict) -> Tensor:
    """Op ``op`` of the runtime's own table (a fused or quantized op, which has no registry
    entry) applied to the Tensors ``inputs``: computed by its reference evaluator and, under a
    capture on this thread, recorded as one node. How a frontend that already knows the
    runtime's form (the ONNX importer's QuantizeLinear -> ``quantize_linear``) emits it."""
    from ..ir.ops import op_info  # noqa: PLC0415 - the op table fills on first use
    from ..ir.shapes import FUSED_DTYPES, FUSED_SHAPES  # noqa: PLC0415

    tracer = active_tracer()
    dtypes = [t.dtype for t in inputs]
    shape = FUSED_SHAPES[op]([tuple(t.shape) for t in inputs], attrs)
    typed = FUSED_DTYPES.get(op)
    dtype = typed(dtypes, attrs) if typed else dtypes[0]
    if tracer is not None and tracer.shapes_only and tracer.depends_on_inputs(inputs):
        value = np.empty(shape, dtype.np)
    else:
        # the values the node computes from, not a host read of the model's (no HOST_READ_HOOK)
        arrays = [np.ascontiguousarray(host_quiet(t)) for t in inputs]
        value = np.asarray(op_info(op).evaluate(arrays, attrs, dtypes), dtype=dtype.np)
    result = Tensor._wrap(np.require(value.reshape(shape), requirements="C"), dtype)
    if tracer is not None:
        tracer.record(op, inputs, attrs, result)
    return result


def trace(
    fn,
    example_inputs: tuple,
    input_names: list | None = None,
    *,
    strict: bool = False,
    sources: list | None = None,
    shapes_only: bool = False,
    bake_values: bool = False,
) -> Graph:
    """The graph of ``fn(*example_inputs)`` (see the module docstring).

    ``fn``: a gpucore ``nn.Module`` (traced in eval mode, its mode restored afterwards) or a
    function of tensors. ``example_inputs``: tensors (or numpy arrays), one per graph input.
    Returns a validated Graph whose outputs are the tensors ``fn`` returns (a Tensor, or
    possibly nested tuples / lists / dicts with str keys of them), flattened depth first (as
    torch.onnx.export) and named ``output`` (one) or ``output_<i>``; ``graph.output_tree``
    records the nesting (ir/output_tree.py), which ``CompiledModel.__call__`` rebuilds. A
    model that reads a value it computed from its inputs on the host (``if x.sum() > 0``,
    ``x.item()``, ``x.numpy()``, data-dependent sizes) raises CaptureError at the read, naming
    the tensor, the op that made it and the line that read it; bake_values=True bakes such
    values in instead (as ``torch.jit.trace``; the graph then holds them for every input).
    strict: refuse those reads even with bake_values (``gpucore.compile(model)``'s lazy
    capture). sources: a list that receives ``(tensor, version)`` for every tensor that became
    a constant. shapes_only: compute only what constants give (see the module docstring;
    raises ValuesNeeded where that is not enough).
    """
    module = fn if hasattr(fn, "named_parameters") and hasattr(fn, "training") else None
    inputs = [_as_tensor(x, i) for i, x in enumerate(example_inputs)]
    names = input_names or default_input_names(fn, len(inputs))
    graph = Graph()
    constant_names = {}
    if module is not None:
        for qual, p in module.named_parameters():
            constant_names[id(p)] = qual
        for qual, b in module.named_buffers():
            constant_names[id(b)] = qual
    tracer = Tracer(graph, constant_names, sources, shapes_only, bake_values and not strict)
    for name, t in zip(names, inputs):
        if name in graph.tensors:
            raise CaptureError(f"capture: input name {name!r} is given twice")
        graph.add_input(name, tuple(t.shape), t.dtype)
        tracer._bind(t, name)
        tracer.dynamic.add(name)
    _ROUTER.enter(tracer)  # CaptureError when this thread is already tracing
    try:
        if module is not None:
            _ROUTER.eval_module(module)
        try:
            with no_grad():
                result = fn(*inputs)
        finally:
            if module is not None:
                _ROUTER.restore_module(module)
    finally:
        _ROUTER.leave(tracer)
    if tracer.value_reads and not tracer.bake_values:  # the model caught the error itself
        raise CaptureError(
            f"capture: the model reads the values of {sorted(set(tracer.value_reads))} on the "
            "host (item(), bool(), numpy() or a data-dependent size) and caught the error "
            "raised there; a trace would fix them (compute them with tensor ops instead)"
        )
    outs, graph.output_tree = flatten_outputs(result)
    _name_outputs(graph, tracer, outs)
    graph.validate()
    return graph


def default_input_names(fn, n: int) -> list:
    """The parameter names of ``fn`` (or of a Module's forward), else input_<i>."""
    target = getattr(fn, "forward", fn)
    try:
        params = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if len(params) >= n and len(set(params[:n])) == n:
        return params[:n]
    return [f"input_{i}" for i in range(n)]


def _as_tensor(x, i: int) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor._wrap(np.require(x, requirements="C"), from_numpy_dtype(x.dtype))
    raise CaptureError(
        f"capture: example input {i} is a {type(x).__name__}; give tensors or numpy arrays "
        "(other arguments: wrap the model in a function that fixes them)"
    )


def flatten_outputs(result, exact: bool = False) -> tuple[list, object]:
    """The Tensors ``result`` holds, depth first, and the tree of its structure
    (ir/output_tree.py): a Tensor, or (possibly nested) tuples, lists and dicts with str keys of
    them, as an LSTM's ``(output, (h_n, c_n))`` (flattened in order, as torch.onnx.export
    flattens nested outputs). CaptureError names the path of the first element that is none of
    these (``output[1]['h'] is an int``). ``exact``: refuse subclasses (namedtuples,
    OrderedDict), which a rebuilt structure would not reproduce."""
    leaves: list = []
    tree = _flatten(result, "output", leaves, exact, 0)
    if not leaves:
        raise CaptureError(
            f"capture: the model returned a {type(result).__name__} holding no Tensor; a "
            "captured model returns at least one Tensor"
        )
    try:  # the size bound a saved tree is held to (many empty containers)
        leaf_count(tree, len(leaves))
    except ValueError:
        raise CaptureError(
            f"capture: the model's output structure holds more than "
            f"{max_entries(len(leaves))} tuples, lists, dicts and Tensors for its "
            f"{len(leaves)} Tensors; return fewer empty containers"
        ) from None
    return leaves, tree


def _flatten(x, path: str, leaves: list, exact: bool, depth: int):
    if isinstance(x, Tensor):
        leaves.append(x)
        return TENSOR
    kind = next((k for k in ("tuple", "list", "dict") if isinstance(x, _CONTAINERS[k])), None)
    why = None
    if kind is None:
        name = type(x).__name__
        why = f"is {'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"
    elif exact and type(x) is not _CONTAINERS[kind]:
        why = f"is a {type(x).__name__} (a {kind} subclass, which a compiled run does not rebuild)"
    elif container_too_deep(depth):  # (the loader's rule: ir/output_tree.py)
        why = f"is nested more than {MAX_TREE_DEPTH} deep"
    if why is not None:
        raise CaptureError(
            f"capture: {path} {why}; a captured model returns a Tensor or (possibly nested) "
            "tuples, lists and dicts with str keys of Tensors"
        )
    if kind == "dict":
        items = []
        for k, v in x.items():
            if not isinstance(k, str):
                raise CaptureError(
                    f"capture: {path} is a dict with the key {k!r}; a captured model's dicts "
                    "have str keys"
                )
            items.append([k, _flatten(v, f"{path}[{k!r}]", leaves, exact, depth + 1)])
        return {"dict": items}
    return {kind: [_flatten(v, f"{path}[{i}]", leaves, exact, depth + 1) for i, v in enumerate(x)]}


def _name_outputs(graph: Graph, tracer: Tracer, outs: list) -> None:
    """Graph outputs named output / output_<i>: each one a node's output of its own (an input or
    constant returned as it is, or one tensor returned twice, gets a clone node)."""
    wanted = ["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]
    renamed: dict[str, str] = {}  # the tracer's name -> its output name, once renamed
    for want, t in zip(wanted, outs):
        name = tracer.name_of(t)
        name = renamed.get(name, name)
        node = graph.producer.get(name)
        if node is None or name in graph.outputs or want in graph.tensors:
            info = graph.tensors[name]
            node = graph.add_node("clone", [name], info.shape, info.dtype, {}, output=want)
        else:
            graph.rename(name, want)
            renamed[name] = want
        graph.outputs.append(want)
