"""The interpreter of an ONNX graph: ``Program.forward`` walks the nodes in order and calls one
handler per op type (``gpucore/onnx/ops``), with a ``Context`` that reads attributes (defaults
from the op's schema at the model's opset) and converts values.

A value is either a gpucore Tensor (traced: it depends on the model's inputs) or a numpy array
known at load time (a *static* value: an initializer, a Constant, a Shape, and whatever is
computed from those alone). Handlers compute static values in numpy, so that the shape, axes
and index operands of Reshape / Expand / Slice / ... arrive as Python ints, which the runtime's
multi-size tracing turns into symbolic sizes. A static value a tensor op needs becomes a
constant; initializers keep their names (``Program.named_parameters`` gives them to the tracer).
"""

from __future__ import annotations

import functools

import numpy as np

from ..dtypes import from_numpy_dtype
from ..errors import DTypeError, SerializationError
from ..tensor import Tensor
from .errors import UnsupportedOperator
from .proto import DEFAULT_DOMAINS, ModelInfo, NodeInfo, bad, elements, require_onnx

INTERNAL_DOMAIN = "gpucore"  # nodes the importer's own rewrites create (rewrite.py)
MS_DOMAIN = "com.microsoft"  # ONNX Runtime's contrib ops: those in MS_HANDLERS (ops/contrib.py)
# ops that move or compare 8-bit values without reading them as numbers: they run on a
# Shifted int8 tensor's uint8 bit pattern as they are (max and order survive the +128)
SHIFT_TRANSPARENT = frozenset(
    ("Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "MaxPool")
)
_REQUIRED = object()
_MISSING = object()


@functools.lru_cache(maxsize=1024)
def _schema(op_type: str, opset: int):
    """The default domain's OpSchema of ``op_type`` at ``opset``, or None."""
    onnx = require_onnx()
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except Exception:  # noqa: BLE001 - SchemaError: no such operator at this opset
        return None


@functools.lru_cache(maxsize=1024)
def schema_defaults(op_type: str, opset: int):
    """{attribute: default value} of ``op_type`` at ``opset``, or None when the opset has no
    such operator."""
    onnx = require_onnx()
    schema = _schema(op_type, opset)
    if schema is None:
        return None
    out = {}
    for name, a in schema.attributes.items():
        if a.default_value.type:
            out[name] = onnx.helper.get_attribute_value(a.default_value)
            if isinstance(out[name], bytes):
                out[name] = out[name].decode("utf-8", "replace")
    return out


class Shifted:
    """An int8 activation held as its uint8 bit pattern ``q + 128`` (what QuantizeLinear to int8
    gives on the int8 path, ops/quantize.py): int8 with zero point z and uint8 with z + 128 are
    the same affine values, so the uint8 kernels run ONNX Runtime's int8 models unchanged.
    ``Context.tensor`` turns it into the int8 tensor for ops that read the numbers."""

    __slots__ = ("u8", "_i8")

    def __init__(self, u8: Tensor):
        self.u8 = u8
        self._i8 = None

    @property
    def shape(self):
        return self.u8.shape

    def int8(self) -> Tensor:
        if self._i8 is None:
            from ..dtypes import int8, int32  # noqa: PLC0415

            self._i8 = (self.u8.to(int32) - 128).to(int8)
        return self._i8


def _same(a, b) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:  # noqa: BLE001 - incomparable: different
        return False


class Context:
    """What a handler sees of the node it runs and of the model (see the module docstring)."""

    def __init__(self, info: ModelInfo, weights: dict, dynamic: bool = False, int8: bool = True):
        self.source = info.source
        self.dynamic = dynamic  # the model has dynamic axes
        # quantize / dequantize as the runtime's int8 nodes (ops/quantize.py) when importing
        # for the CPU, or for Vulkan on a device with shaderFloat64 (the int8 shaders,
        # runtime/executors/vulkan_quant.py); else float compositions (importer.int8_nodes)
        self.int8 = int8
        self._sized: dict = {}  # id -> static value computed from tensor sizes (kept alive)
        self.opset = info.opset
        self.node: NodeInfo | None = None
        self._weights = weights  # id(initializer array) -> its Tensor
        self._read: set = set()
        self._defaults: dict = {}

    # ---------------------------------------------------------------------- running nodes
    def run(self, handlers: dict, node: NodeInfo, inputs: list) -> list:
        """The node's output values (a list, one per output name)."""
        self.node = node
        self._read = set()
        internal = node.domain == INTERNAL_DOMAIN
        if node.domain == MS_DOMAIN:
            from .ops.contrib import MS_HANDLERS  # noqa: PLC0415 - ops import this module

            handler, defaults, arity, required = MS_HANDLERS.get(node.op_type, (None, {}, None, ()))
            if handler is None:
                raise self.unsupported(
                    f"operators of domain {node.domain!r} are not supported but "
                    f"{', '.join(sorted(MS_HANDLERS))}"
                )
        elif not internal and node.domain not in DEFAULT_DOMAINS:
            raise self.unsupported(
                f"operators of domain {node.domain!r} are not supported (gpucore.onnx reads the "
                f"default ONNX domain and a few {MS_DOMAIN} ops; export the op as standard ONNX "
                "ops)"
            )
        else:
            handler = handlers.get(node.op_type)
            defaults = {} if internal else schema_defaults(node.op_type, self.opset)
        if defaults is None:
            raise self.unsupported(_not_in_opset(node.op_type, self.opset, handler is not None))
        if handler is None:
            raise self.unsupported(
                f"operator {node.op_type} is not supported by gpucore.onnx "
                "(gpucore.onnx.supported_ops() lists those it reads)"
            )
        if node.domain == MS_DOMAIN:
            self._check_counts(node, *arity, 1, 1)
            for i in required:
                if i < len(node.inputs) and not node.inputs[i]:
                    raise self.invalid(
                        f"input {i} of {MS_DOMAIN} {node.op_type} is required but empty"
                    )
        elif not internal:
            self._check_arity(node)
        self._defaults = defaults
        shifted = node.op_type in SHIFT_TRANSPARENT and inputs and isinstance(inputs[0], Shifted)
        if shifted:
            inputs = [inputs[0].u8, *inputs[1:]]
        outs = handler(self, node, inputs)
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        if shifted:
            u8 = inputs[0].dtype
            outs = [Shifted(v) if isinstance(v, Tensor) and v.dtype is u8 else v for v in outs]
        for name, value in node.attrs.items():
            # an attribute no handler read must hold its default: any other value would be
            # silently ignored
            if name not in self._read and not _same(value, defaults.get(name, _MISSING)):
                raise self.unsupported(
                    f"attribute {name}={_show(value)} is not supported", attribute=name
                )
        for i, name in enumerate(node.outputs):
            if name and (i >= len(outs) or outs[i] is None):
                raise self.unsupported(f"output {i} ({name!r}) is not supported")
        outs = [_value(v) for v in outs]
        if self.dynamic and (
            node.op_type in ("Shape", "Size") or any(self.size_dependent(v) for v in inputs)
        ):
            for v in outs:  # (an input passed through keeps what it was)
                if isinstance(v, np.ndarray) and not any(v is i for i in inputs):
                    self._sized[id(v)] = v
        return outs

    def _check_arity(self, node: NodeInfo) -> None:
        """SerializationError, naming the node, for inputs or outputs its op's schema does not
        take at this opset: too few or too many, or a required input left empty."""
        schema = _schema(node.op_type, self.opset)
        where = f"{node.op_type} at opset {self.opset}"
        self._check_counts(
            node, schema.min_input, schema.max_input, schema.min_output, schema.max_output, where
        )
        n_in = len(node.inputs)
        single = require_onnx().defs.OpSchema.FormalParameterOption.Single
        for i, formal in enumerate(schema.inputs):
            if formal.option == single and i < n_in and not node.inputs[i]:
                raise self.invalid(f"input {i} ({formal.name!r}) of {where} is required but empty")

    def _check_counts(
        self, node: NodeInfo, min_in: int, max_in: int, min_out: int, max_out: int, where=None
    ) -> None:
        """SerializationError, naming the node, for an input or output count out of range."""
        where = where or f"{node.domain} {node.op_type}"
        n_in, n_out = len(node.inputs), len(node.outputs)
        if not min_in <= n_in <= max_in:
            raise self.invalid(
                f"{_count(n_in, 'input')} given; {where} takes {_range(min_in, max_in)}"
            )
        if not min_out <= n_out <= max_out:
            raise self.invalid(
                f"{_count(n_out, 'output')} given; {where} has {_range(min_out, max_out)}"
            )

    def unsupported(self, message: str, attribute: str | None = None) -> UnsupportedOperator:
        """An UnsupportedOperator naming the current node, its op and the opset."""
        node = self.node
        label = node.label() if node is not None else "?"
        op = node.op_type if node is not None else None
        return UnsupportedOperator(
            f"{self.source}: node {label} ({op}, opset {self.opset}): {message}",
            node=label,
            op=op,
            opset=self.opset,
            attribute=attribute,
        )

    def invalid(self, message: str) -> SerializationError:
        """A SerializationError naming the file, the node and its op."""
        return bad(self.source, f"node {self.node.label()} ({self.node.op_type}): {message}")

    # ---------------------------------------------------------------------- attributes
    def attr(self, name: str, default=_REQUIRED):
        """The node's attribute ``name``, else the schema's default at this opset, else
        ``default`` (SerializationError when a required attribute is missing)."""
        self._read.add(name)
        node = self.node
        if name in node.attrs:
            return node.attrs[name]
        if name in self._defaults:
            return self._defaults[name]
        if default is _REQUIRED:
            raise self.invalid(f"the required attribute {name!r} is missing")
        return default

    # ---------------------------------------------------------------------- values
    @staticmethod
    def is_static(v) -> bool:
        """Whether ``v`` is known at load time (a numpy value)."""
        return isinstance(v, np.ndarray)

    def tensor(self, v) -> Tensor:
        """``v`` as a gpucore Tensor (an initializer's own, so that it keeps its name; a Shifted
        int8 value as its int8 tensor)."""
        if isinstance(v, Tensor):
            return v
        if isinstance(v, Shifted):
            return v.int8()
        t = self._weights.get(id(v))
        if t is not None:
            return t
        arr = np.require(v, requirements="C")
        try:
            dt = from_numpy_dtype(arr.dtype)
        except DTypeError:
            raise self.unsupported(
                f"a tensor of dtype {arr.dtype} (gpucore has no such dtype)"
            ) from None
        return Tensor._wrap(arr, dt)

    def size_dependent(self, v) -> bool:
        """Whether static ``v`` was computed from tensor sizes (Shape, Size) in a model with
        dynamic axes: it may differ between the traces at different sizes."""
        return isinstance(v, np.ndarray) and id(v) in self._sized

    def materialize(self, data, *params):
        """``data`` as a Tensor when it is a fixed static value that size-dependent ``params``
        select from or shape (a causal mask sliced to the sequence length): the op then becomes
        a graph node whose attributes follow the sizes, instead of a constant that changes with
        them, which one graph cannot hold. 1-D integer data (a table of sizes, whose result
        may be needed as a shape) stays static."""
        if (
            isinstance(data, np.ndarray)
            and (data.ndim >= 2 or data.dtype.kind in "fb")
            and not self.size_dependent(data)
            and any(self.size_dependent(p) for p in params)
        ):
            return self.tensor(data)
        return data

    def static(self, v, what: str) -> np.ndarray:
        """``v``, which must be known at load time (input ``what`` of the node)."""
        if isinstance(v, np.ndarray):
            return v
        raise self.unsupported(
            f"input {what!r} must be computable at load time (from initializers, constants and "
            "shapes); here it depends on the model's input values"
        )

    def ints(self, v, what: str) -> list:
        """A static integer input as a list of Python ints."""
        arr = self.static(v, what)
        if arr.dtype.kind not in "iub":
            raise self.invalid(f"input {what!r} must hold integers, got {arr.dtype}")
        return [int(x) for x in arr.reshape(-1)]

    def check_size(self, shape) -> tuple:
        """``shape`` as ints, refused (SerializationError) when it claims too many elements."""
        shape = tuple(int(s) for s in shape)
        elements(shape, self.source, f"node {self.node.label()} ({self.node.op_type}) output")
        return shape

    def broadcast(self, *shapes) -> tuple:
        """The broadcast of ``shapes`` (numpy rules, which ONNX follows), size-checked."""
        try:
            out = np.broadcast_shapes(*[tuple(s) for s in shapes])
        except ValueError:
            raise self.invalid(f"shapes {[tuple(s) for s in shapes]} do not broadcast") from None
        return self.check_size(out)

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        """``axis`` in [-rank, rank) made non-negative."""
        if not -rank <= axis < rank:
            raise self.invalid(f"{what} {axis} is out of range for rank {rank}")
        return axis % rank


def _count(n: int, what: str) -> str:
    """``n`` and ``what``, plural unless ``n`` is 1."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _range(lo: int, hi: int) -> str:
    """``lo`` to ``hi`` (variadic: ``hi`` is 2**31 - 1) in words."""
    if lo == hi:
        return str(lo)
    return f"at least {lo}" if hi >= 2**31 - 1 else f"{lo} to {hi}"


def _not_in_opset(op_type: str, opset: int, handled: bool) -> str:
    """Why ``op_type`` has no schema at ``opset``, and what to do: an op of a later opset
    (``handled``: gpucore reads it there), a ``com.microsoft`` op written in the default domain,
    or none of ONNX's (a custom or misspelled one)."""
    from .ops.contrib import MS_HANDLERS  # noqa: PLC0415 - ops import this module

    onnx = require_onnx()
    msg = f"{op_type} is not an operator of opset {opset}"
    newest = onnx.defs.onnx_opset_version()
    since = next((v for v in range(opset + 1, newest + 1) if _schema(op_type, v)), None)
    if since is not None and handled:
        return (
            f"{msg} (it is one since opset {since}: re-export the model with opset {since} or "
            "later, or with the op decomposed)"
        )
    if since is not None:
        return (
            f"{msg} (it is one since opset {since}, but gpucore.onnx does not implement it: "
            "export it as other standard ONNX ops; gpucore.onnx.supported_ops() lists those)"
        )
    if op_type in MS_HANDLERS:
        return (
            f"{msg}: it is ONNX Runtime's {MS_DOMAIN} contrib op, which gpucore reads; set the "
            f"node's domain to {MS_DOMAIN!r}"
        )
    return (
        f"{msg}, nor of any ONNX opset up to {newest}: a custom or misspelled op type (export "
        "it as standard ONNX ops; gpucore.onnx.supported_ops() lists those gpucore reads)"
    )


def _value(v):
    if isinstance(v, (Tensor, np.ndarray, Shifted)):
        return v
    if v is None:
        return None
    return np.asarray(v)


def _show(value) -> str:
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 60 else text[:57] + "..."


class Program:
    """The ONNX graph as a gpucore module: ``forward(*inputs)`` interprets the nodes.

    ``named_parameters`` lists the initializers as Tensors, so the runtime's tracer names the
    constants they become after them; ``training`` is False (the tracer evaluates modules).
    """

    training = False

    def __init__(self, info: ModelInfo, handlers: dict, dynamic: bool = False, int8: bool = True):
        self.info = info
        self.dynamic = dynamic
        self.int8 = int8
        self.handlers = handlers
        self._params = {}
        self._weights = {}
        for name, arr in info.initializers.items():
            try:
                t = Tensor._wrap(arr, from_numpy_dtype(arr.dtype))
            except DTypeError:
                continue  # a dtype only static computations may use (int16, uint32, ...)
            self._params[name] = t
            self._weights[id(arr)] = t

    def named_parameters(self):
        return iter(self._params.items())

    def named_buffers(self):
        return iter(())

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def __call__(self, *inputs):
        return self.forward(*inputs)

    def forward(self, *inputs):
        """The graph outputs (Tensors) for the graph inputs, node by node."""
        info = self.info
        env = dict(info.initializers)
        for vi, x in zip(info.inputs, inputs):
            env[vi.name] = x
        ctx = Context(info, self._weights, self.dynamic, self.int8)
        for node in info.nodes:
            args = [env[n] if n else None for n in node.inputs]
            try:
                outs = ctx.run(self.handlers, node, args)
            except (UnsupportedOperator, SerializationError):
                raise
            except Exception as e:  # noqa: BLE001 - a bad model makes handlers fail anyhow
                raise ctx.invalid(f"{type(e).__name__}: {e}") from e
            for name, v in zip(node.outputs, outs):
                if name and v is not None:
                    ctx.check_size(v.shape)
                    env[name] = v
        return tuple(ctx.tensor(env[o.name]) for o in info.outputs)
