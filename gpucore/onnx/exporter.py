"""gpucore models out to ONNX: ``gpucore.onnx.export(model, args, "model.onnx")``.

The model is captured by the inference runtime's tracer (the same graph ``gpucore.compile``
starts from), cleaned by the runtime's constant folding, common-subexpression and dead-code
passes, and each node is written by its emitter (``export_ops.EMITTERS``) as ONNX primitives,
opset 17. Parameters and buffers become initializers under their state_dict names. Shapes are
the example inputs' (static); a node without an emitter raises UnsupportedOperator naming it.
"""

from __future__ import annotations

import os

import numpy as np

from .. import dtypes as D
from .errors import UnsupportedOperator
from .export_ops import EMITTERS, ONNX_DTYPE, OPSET


class Emit:
    """What an emitter writes into: ONNX nodes, initializers, fresh names."""

    def __init__(self, graph, helper, numpy_helper):
        self.graph = graph
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list = []
        self.initializers: dict = {}
        self._count = 0
        self._transposed: dict = {}
        self._symbols: dict = {}
        self.current = None

    def shape(self, name: str) -> tuple:
        return tuple(self.graph.tensors[name].shape)

    def np_dtype(self, name: str):
        dt = self.graph.tensors[name].dtype
        return np.float32 if dt is D.bfloat16 else dt.np

    def shape_tensor(self, shape) -> str:
        """A 1-D int64 tensor holding ``shape``: an initializer when every entry is an int,
        else computed from the graph inputs' sizes (Shape, Gather, Mul, Add, Concat) for the
        entries that are polynomials in the dynamic axes' symbols (SymInt)."""
        if all(isinstance(d, (int, np.integer)) for d in shape):
            return self.const(np.array(shape, dtype=np.int64), "shape")
        parts = [self._dim(d) for d in shape]
        return self.node("Concat", parts, self.tmp(), axis=0)

    def _dim(self, d) -> str:
        if isinstance(d, (int, np.integer)):
            return self.const(np.array([d], dtype=np.int64), "dim")
        total = self.const(np.array([d.const], dtype=np.int64), "c") if d.const else None
        for mono, coef in d.coefs:
            term = self._symbol(mono[0])
            for name in mono[1:]:
                term = self.node("Mul", [term, self._symbol(name)], self.tmp())
            if coef != 1:
                k = self.const(np.array([coef], dtype=np.int64), "k")
                term = self.node("Mul", [term, k], self.tmp())
            total = term if total is None else self.node("Add", [total, term], self.tmp())
        return total

    def _symbol(self, name: str) -> str:
        """A 1-element int64 tensor: the size of the input axis that symbol ``name`` names."""
        if name not in self._symbols:
            for inp in self.graph.inputs:
                for axis, d in enumerate(self.graph.tensors[inp].shape):
                    if not isinstance(d, (int, np.integer)) and d.single() == name and not d.const:
                        shape = self._symbols.get(("shape", inp))
                        if shape is None:  # one Shape node per input
                            shape = self.node("Shape", [inp], f"{inp}__shape")
                            self._symbols[("shape", inp)] = shape
                        idx = self.const(np.array([axis], dtype=np.int64), "axis")
                        self._symbols[name] = self.node("Gather", [shape, idx], f"{name}__size")
                        break
                if name in self._symbols:
                    break
            else:
                raise UnsupportedOperator(f"gpucore.onnx.export: no input axis is {name!r}")
        return self._symbols[name]

    def tmp(self) -> str:
        self._count += 1
        return f"{self.current.output}__{self._count}"

    def const(self, arr: np.ndarray, hint: str) -> str:
        self._count += 1
        name = f"{self.current.output}__{hint}{self._count}"
        self.initializers[name] = np.asarray(arr)
        return name

    def node(self, op: str, inputs: list, output: str, **attrs) -> str:
        self.nodes.append(
            self.helper.make_node(op, list(inputs), [output], name=f"{output}/{op}", **attrs)
        )
        return output

    def transposed_constant(self, name: str) -> str:
        """``name`` transposed (a Linear weight for MatMul): a new initializer for a constant,
        a Transpose node otherwise."""
        info = self.graph.tensors[name]
        if info.data is None:
            return self.node("Transpose", [name], self.tmp())
        if name not in self._transposed:
            t = f"{name}.T"
            self.initializers[t] = np.ascontiguousarray(np.asarray(info.data).T)
            self._transposed[name] = t
        return self._transposed[name]

    def unsupported(self, node, what: str):
        raise UnsupportedOperator(
            f"gpucore.onnx.export: node {node.output!r} ({node.op}) uses {what}, which the "
            "exporter does not write",
            node=node.output,
            op=node.op,
            opset=OPSET,
        )


def _value_info(helper, name: str, info):
    dims = [d if isinstance(d, (int, np.integer)) else repr(d).replace(" ", "") for d in info.shape]
    return helper.make_tensor_value_info(name, ONNX_DTYPE[info.dtype], dims)


def export(
    model,
    args,
    f=None,
    *,
    input_names: list | None = None,
    output_names: list | None = None,
    opset_version: int | None = None,
    dynamic_axes: dict | None = None,
    doc_string: str = "",
):
    """Write ``model`` (an nn.Module or a function of tensors) run on ``args`` (a tensor or a
    tuple of them) as an ONNX model; returns the ``onnx.ModelProto`` and saves it to ``f`` (a
    path or a binary file object) when given, as ``torch.onnx.export``. ``opset_version`` may
    be 17 (the opset written) or None. ``dynamic_axes`` (``{input name: {axis: "batch"}}`` or
    ``{input name: [axis, ...]}``, as torch's) makes those input axes symbolic (ONNX
    ``dim_param``): the model is captured at several sizes by the runtime
    (``capture/dynamic.py``) and shapes that depend on them are computed in the graph. ONNX
    outputs are flat: nested outputs (an LSTM's ``(output, (h_n, c_n))``, dicts) are written
    depth first as ``output_0``, ``output_1``... (as torch.onnx.export; the nesting is not
    kept in the file)."""
    import onnx  # noqa: PLC0415 - onnx is an optional dependency
    from onnx import helper, numpy_helper  # noqa: PLC0415

    # the runtime's tracer and passes: only needed here (gpucore.onnx imports without them)
    from ..runtime.capture.dynamic import capture  # noqa: PLC0415
    from ..runtime.passes import cleanup, optimize  # noqa: PLC0415
    from ..runtime.passes.dynamic_linear import fuse_traced_dynamic_linear  # noqa: PLC0415

    if opset_version not in (None, OPSET):
        raise ValueError(f"gpucore.onnx.export: opset_version must be {OPSET} (or None)")
    if not isinstance(args, (tuple, list)):
        args = (args,)
    graph = capture(model, tuple(args), dynamic_axes, input_names)
    # a quantize_dynamic Linear's traced activation quantization: one node, written as ONNX
    # Runtime's dynamic quantization (export_ops: qlinear_dynamic)
    passes = (fuse_traced_dynamic_linear, cleanup.constant_fold)
    passes += (cleanup.eliminate_common_subexpressions,)
    optimize(graph, passes + (cleanup.eliminate_dead_code,))
    if output_names:
        if len(output_names) != len(graph.outputs):
            raise ValueError(
                f"gpucore.onnx.export: {len(output_names)} output_names for "
                f"{len(graph.outputs)} outputs"
            )
        for old, new in zip(list(graph.outputs), output_names):
            if old != new:
                graph.rename(old, new)
    e = Emit(graph, helper, numpy_helper)
    used = set()
    for node in graph.order():
        fn = EMITTERS.get(node.op)
        if fn is None:
            raise UnsupportedOperator(
                f"gpucore.onnx.export: node {node.output!r} is a {node.op!r} op, which has no "
                f"ONNX emitter yet (supported: {', '.join(sorted(EMITTERS))})",
                node=node.output,
                op=node.op,
                opset=OPSET,
            )
        e.current = node
        fn(e, node)
    for n in e.nodes:
        used.update(n.input)
    inits = []
    for name, info in graph.tensors.items():
        if info.data is not None and (name in used or name in graph.outputs):
            inits.append(numpy_helper.from_array(_host(info), name))
    inits += [numpy_helper.from_array(a, n) for n, a in e.initializers.items()]
    g = helper.make_graph(
        e.nodes,
        getattr(model, "__class__", type(model)).__name__,
        [_value_info(helper, n, graph.tensors[n]) for n in graph.inputs],
        [_value_info(helper, n, graph.tensors[n]) for n in graph.outputs],
        inits,
    )
    proto = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="gpucore",
        doc_string=doc_string,
    )
    proto.ir_version = 8  # what opset 17 needs; readable by ONNX Runtime 1.14 and newer
    onnx.checker.check_model(proto)
    if f is not None:
        data = proto.SerializeToString()
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as fh:
                fh.write(data)
        else:
            f.write(data)
    return proto


def _host(info) -> np.ndarray:
    data = np.asarray(info.data)
    if info.dtype is D.bfloat16:
        raise UnsupportedOperator(
            f"gpucore.onnx.export: constant {info.name!r} is bfloat16; convert the model to "
            "float32 first (model.float())"
        )
    return np.ascontiguousarray(data)
