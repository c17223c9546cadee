"""``gpucore.compile``: capture once, optimise, plan, and run the whole graph per call.

A ``CompiledModel`` holds the captured graph (with symbolic sizes when there are dynamic axes).
For each set of sizes it meets, it specialises the graph, runs the passes, plans memory and
builds an executor, once; later calls with those sizes go straight to the executor.
"""

from __future__ import annotations

import threading

import numpy as np

from .. import dispatch
from ..dispatch import vulkan_backend
from ..errors import GpucoreError
from ..tensor import Tensor
from .capture.dynamic import capture, specialize
from .executors.cpu import CompiledExecutor, InterpretedExecutor
from .format import save_model
from .ir.graph import Graph
from .ir.output_tree import unflatten
from .ir.shapes import check_shapes
from .ir.symbolic import SymInt
from .passes import optimize as run_passes
from .passes import vulkan_pipeline
from .planner.plan import plan as make_plan


class InputError(GpucoreError, ValueError):
    """An input of a compiled model or session is missing, unknown, or of the wrong shape or
    dtype (the message names it and says what was expected)."""


DEVICES = ("auto", "cpu", "vulkan")
EXECUTORS = ("compiled", "interpreted")


def _pick_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"compile(): device must be one of {DEVICES}, got {device!r}")
    if device == "auto":
        # The eager 'auto' policy's device (dispatch.auto_vulkan_backend): a CPU-type Vulkan
        # device (lavapipe) is not used unless GPUCORE_VULKAN_ALLOW_CPU says so (the C path is
        # 20-30x faster there, DESIGN.md), and no probe runs where no GPU device node exists.
        return "vulkan" if dispatch.auto_vulkan_backend() is not None else "cpu"
    return device


class CompiledModel:
    """A captured, optimised model; call it like the model (see ``gpucore.compile``)."""

    def __init__(
        self,
        graph: Graph,
        *,
        device: str = "cpu",
        optimize: bool = True,
        executor: str = "compiled",
        check_nan: bool = False,
    ):
        if executor not in EXECUTORS:
            raise ValueError(f"compile(): executor must be one of {EXECUTORS}, got {executor!r}")
        self.symbolic = graph
        self.device = device
        self.optimize = optimize
        self.executor_kind = executor
        self._check_nan = check_nan
        self.input_names = list(graph.inputs)
        self.output_names = list(graph.outputs)
        # how the flat outputs nest (ir/output_tree.py; None: one Tensor or a flat tuple)
        self.output_tree = graph.output_tree
        self._executors: dict = {}
        self._lock = threading.Lock()
        self.symbols = sorted(
            {
                s
                for n in graph.inputs
                for d in graph.tensors[n].shape
                if isinstance(d, SymInt)
                for s in d.symbols()
            }
        )
        self._example_sizes = None
        self._fast_specs = None
        self.check_nan = check_nan

    @property
    def check_nan(self) -> bool:
        """Whether inputs holding NaN are refused (InputError)."""
        return self._check_nan

    @check_nan.setter
    def check_nan(self, value: bool) -> None:
        self._check_nan = bool(value)
        graph = self.symbolic
        self._fast_specs = None
        if not self.symbols and not self._check_nan:
            self._fast_specs = [
                (graph.tensors[n].dtype.np, tuple(graph.tensors[n].shape)) for n in graph.inputs
            ]

    # ----------------------------------------------------------------------- inspection
    @property
    def graph(self) -> Graph:
        """The optimised graph for the sizes of the first call (or of the examples)."""
        return self._executor(self._sizes_default()).graph

    def input_spec(self, name: str) -> tuple:
        """(shape with symbolic entries as str, dtype) of input ``name``."""
        info = self.symbolic.tensors[name]
        return tuple(str(d) if isinstance(d, SymInt) else d for d in info.shape), info.dtype

    def output_spec(self, name: str) -> tuple:
        """(shape with symbolic entries as str, dtype) of output ``name``."""
        info = self.symbolic.tensors[name]
        return tuple(str(d) if isinstance(d, SymInt) else d for d in info.shape), info.dtype

    def plan_summary(self) -> str:
        """The memory plan of ``graph`` in one line (steps, arena bytes, in-place nodes)."""
        return self._executor(self._sizes_default()).plan.summary()

    # ----------------------------------------------------------------------------- runs
    def __call__(self, *inputs):
        """Run on tensors or numpy arrays (positional, in the captured order); returns Tensors
        in the structure the model returned at capture (``output_tree``: an LSTM's ``(output,
        (h_n, c_n))``, a ``((t,),)``, a dict); a graph without a tree (an ONNX import, a model
        saved before trees were kept) returns one output as a Tensor, several as a tuple."""
        outs = self.run_arrays(list(inputs))
        ts = [Tensor._wrap(o, _dtype_of(self.symbolic, n)) for o, n in zip(outs, self.output_names)]
        return unflatten(self.output_tree, ts)

    def run_arrays(self, inputs: list) -> list:
        """Outputs as numpy arrays for inputs in the captured order (checked first): the
        graph's flat outputs (``output_names``, depth first, as ONNX's and InferenceSession's),
        whatever structure ``__call__`` rebuilds from them."""
        if len(inputs) != len(self.input_names):
            raise InputError(
                f"the compiled model takes {len(self.input_names)} inputs "
                f"{self.input_names}, got {len(inputs)}"
            )
        arrays, sizes = self._check(inputs)
        return self._executor(sizes).run(arrays)

    def _check(self, inputs: list) -> tuple[list, dict]:
        """The inputs as C-contiguous arrays, and the dynamic sizes they give (InputError
        naming the input for anything unexpected)."""
        fast = self._fast_specs
        if fast is not None:  # no dynamic axes, no NaN check: one comparison per input
            arrays = []
            for x, (npdt, shape) in zip(inputs, fast):
                if type(x) is not np.ndarray or x.dtype != npdt or x.shape != shape:
                    break
                arrays.append(x if x.flags.c_contiguous else np.ascontiguousarray(x))
            else:
                return arrays, {}
        return self._check_slow(inputs)

    def _check_slow(self, inputs: list) -> tuple[list, dict]:
        arrays = []
        sizes: dict = {}
        for name, x in zip(self.input_names, inputs):
            info = self.symbolic.tensors[name]
            arr = _to_array(name, x)
            if arr.dtype != info.dtype.np:
                raise InputError(
                    f"input {name!r}: expected dtype {info.dtype.name}, got {arr.dtype} (convert "
                    f"it with .astype / .to first)"
                )
            if arr.ndim != len(info.shape):
                raise InputError(
                    f"input {name!r}: expected {len(info.shape)} dims (shape "
                    f"{self.input_spec(name)[0]}), got shape {arr.shape}"
                )
            for d, (want, got) in enumerate(zip(info.shape, arr.shape)):
                if isinstance(want, SymInt) and want.single() is not None:
                    sym = want.single()
                    value = got - want.const
                    if sizes.setdefault(sym, value) != value or value < 1:
                        raise InputError(
                            f"input {name!r}: dim {d} is {got}, which does not match dynamic "
                            f"axis {sym!r} = {sizes[sym]} from another input"
                        )
                elif isinstance(want, SymInt):
                    continue  # checked once every symbol is known
                elif want != got:
                    raise InputError(
                        f"input {name!r}: expected shape {self.input_spec(name)[0]}, got "
                        f"{arr.shape} (dim {d} is fixed at {want}; only dynamic_axes vary)"
                    )
            if self.check_nan and arr.dtype.kind == "f" and np.isnan(arr).any():
                raise InputError(f"input {name!r} contains NaN (check_nan=True)")
            arrays.append(np.require(arr, requirements="C"))
        for name, arr in zip(self.input_names, arrays):
            for d, want in enumerate(self.symbolic.tensors[name].shape):
                if isinstance(want, SymInt) and want.eval(sizes) != arr.shape[d]:
                    raise InputError(
                        f"input {name!r}: dim {d} is {arr.shape[d]}, expected {want} = "
                        f"{want.eval(sizes)}"
                    )
        return arrays, sizes

    def _sizes_default(self) -> dict:
        if self._example_sizes is None:
            return {}
        return self._example_sizes

    def _executor(self, sizes: dict):
        key = tuple(sorted(sizes.items()))
        ex = self._executors.get(key)
        if ex is not None:
            return ex
        with self._lock:
            ex = self._executors.get(key)
            if ex is None:
                ex = self._build(sizes)
                self._executors[key] = ex
        return ex

    def _build(self, sizes: dict):
        graph = specialize(self.symbolic, sizes) if self.symbols else self.symbolic.copy()
        check_shapes(graph)  # before anything is sized from the declared shapes
        if self.device == "vulkan":
            from .executors.vulkan import VulkanExecutor  # lazy: imports the Vulkan backend

            if self.optimize:
                # the device's features pick the passes
                be = vulkan_backend(required=True, allow_cpu=True)
                run_passes(graph, vulkan_pipeline(be.ctx.float64))
            return VulkanExecutor(make_plan(graph, inplace=False))
        if self.optimize:
            run_passes(graph)
        if self.executor_kind == "compiled":
            return CompiledExecutor.build(graph)  # its plan keeps the inputs it reads in place
        return InterpretedExecutor(make_plan(graph))

    def executors(self) -> list:
        """The executors built so far (one per set of dynamic sizes)."""
        return list(self._executors.values())

    def save(self, path) -> None:
        """Save graph and weights to ``path`` (``gpucore.runtime.load`` reads it back)."""
        save_model(self, path)


def _to_array(name: str, x) -> np.ndarray:
    if isinstance(x, Tensor):
        if x._dev is not None:
            # a copy: the device's host view is an uncached mapping that device work may write
            # meanwhile, and the compiled CPU executor reads its inputs during the whole run
            return np.array(x._host())
        return np.asarray(x._host())
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    raise InputError(
        f"input {name!r}: expected a gpucore Tensor or a numpy array, got {type(x).__name__}"
    )


def _dtype_of(graph: Graph, name: str):
    return graph.tensors[name].dtype


def compile(  # noqa: A001 - PyTorch's name (torch.compile)
    model,
    example_inputs,
    *,
    device: str = "auto",
    dynamic_axes=None,
    optimize: bool = True,
    executor: str = "compiled",
    input_names=None,
    check_nan: bool = False,
) -> CompiledModel:
    """Capture ``model`` (an ``nn.Module`` or a function of tensors) on ``example_inputs`` and
    compile it for inference.

    device: "cpu", "vulkan" (every dispatch recorded once into a command buffer that each run
    replays), or "auto" (a real Vulkan GPU when there is one, else the CPU). dynamic_axes: as
    ``torch.onnx.export``'s, e.g. ``{"x": {0: "batch"}}``: one compiled model then serves every
    size of those axes. optimize=False skips the passes (the primitive graph runs as captured).
    executor: "compiled" (one C call per run on the CPU) or "interpreted" (a Python loop over
    the kernels, for debugging). check_nan: reject inputs holding NaN.
    """
    examples = (
        list(example_inputs) if isinstance(example_inputs, (tuple, list)) else [example_inputs]
    )
    graph = capture(model, examples, dynamic_axes, input_names)
    return compile_graph(
        graph, examples, device=device, optimize=optimize, executor=executor, check_nan=check_nan
    )


def compile_graph(
    graph: Graph,
    examples: list,
    *,
    device: str = "auto",
    optimize: bool = True,
    executor: str = "compiled",
    check_nan: bool = False,
) -> CompiledModel:
    """The CompiledModel of a captured ``graph`` (``examples``: the inputs it was captured on),
    built now so that errors surface here, not at the first call."""
    cm = CompiledModel(
        graph,
        device=_pick_device(device),
        optimize=optimize,
        executor=executor,
        check_nan=check_nan,
    )
    if cm.symbols:
        arrays = [_to_array(n, x) for n, x in zip(cm.input_names, examples)]
        cm._example_sizes = cm._check(arrays)[1]
    cm._executor(cm._sizes_default())  # compile now: errors surface here, not at first call
    return cm
