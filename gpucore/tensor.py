"""The Tensor: an n-dimensional array with a dtype, a device and an autograd history.

The Tensor class holds data and autograd bookkeeping only. Every computation is a registry op
(``gpucore/ops``); the op modules attach the PyTorch-named methods and operators to this class, so
each op is defined in exactly one place.

On the CPU, ``_data`` is a numpy array (possibly a strided view) over 64-byte-aligned storage.
Views share ``_vbox``, the storage's version counter, which autograd uses to detect saved tensors
modified in place.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from . import storage as _storage
from ._cpu import fast_tensor as _fast_tensor
from ._cpu import fast_view as _fast_view
from ._tensor_types import Size, device
from .backends.cpu import empty_array
from .errors import (
    ArgumentTypeError,
    AutogradError,
    DeviceError,
    DTypeError,
    GpucoreIndexError,
    GradDTypeError,
    ShapeError,
)
from .memory_formats import is_contiguous_as

# Set by the runtime's capture while it traces a model: called with every tensor whose values
# are read on the host (item(), numpy(), bool(x), data-dependent sizes all go through _host), so
# that a trace can tell a model whose control flow depends on its inputs' values.
HOST_READ_HOOK: list = [None]

MAX_DIMS = 8


_CPU = device("cpu")
_VULKAN = device("vulkan")


class Tensor:
    """An n-dimensional array (up to 8 dims) with autograd, PyTorch's semantics."""

    __slots__ = (
        "_data",
        "_dtype",
        "_vbox",
        # the flag behind the requires_grad property (which checks assignments): gpucore's own
        # code and the C fast lane (cpu/python/fastpath.c, by this name) use the slot directly
        "_requires_grad",
        "_grad",
        "_grad_fn",
        "_acc",
        "_base",
        "_view_ops",
        "_retain",
        "_dev",
        "__weakref__",
    )

    # Tensors win over numpy arrays in mixed operators (ndarray + Tensor -> Tensor.__radd__).
    __array_priority__ = 1000
    # PyTorch's flag; gpucore.quantization.QuantizedTensor (not a Tensor) has it True
    is_quantized = False

    def __init__(self, *args, dtype=None, requires_grad: bool = False):
        """PyTorch's ``torch.Tensor(...)`` constructor: ``Tensor(2, 3)`` or ``Tensor(Size)`` is
        uninitialised, ``Tensor([1, 2])`` copies the data, both in the default floating dtype
        (``get_default_dtype()``) unless ``dtype`` is given; ``Tensor(t)`` copies tensor t with its
        dtype. Most code wants ``gpucore.tensor(data)``, which infers the dtype from the data."""
        # creation imports this module (for Tensor): a module-level import would be a cycle
        from . import creation

        dt = D.as_dtype(dtype) if dtype is not None else None
        sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args
        if all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in sizes):
            t = creation.empty(*(sizes or (0,)), dtype=dt)  # Tensor() has shape (0,), as PyTorch
        elif len(args) == 1:
            (data,) = args
            if dt is None and not isinstance(data, Tensor):
                dt = D.default_float()
            t = creation.tensor(data, dtype=dt)
        else:
            raise TypeError(
                "Tensor() takes sizes (ints or a gpucore.Size) or one data argument, got "
                f"({', '.join(type(a).__name__ for a in args)})"
            )
        self._init(t._data, t._dtype, [0])
        self._dev = t._dev  # on the default device (set_default_device) when one is set
        leaf_requires_grad(self, requires_grad, "Tensor()")

    def _init(self, data: np.ndarray, dtype, vbox):
        self._data = data
        self._dtype = dtype
        self._vbox = vbox
        self._requires_grad = False
        self._grad = None
        self._grad_fn = None
        self._acc = None
        self._base = None
        self._view_ops = None
        self._retain = False
        self._dev = None  # None: host memory; else the backend whose device memory holds _data

    @classmethod
    def _wrap(cls, data: np.ndarray, dtype, vbox=None, dev=None) -> Tensor:
        """A tensor over ``data`` (no copy), which has the storage layout of ``dtype``.
        ``dev`` is the device backend when ``data`` views device memory."""
        if data.ndim > MAX_DIMS:
            raise ShapeError(f"tensors have at most {MAX_DIMS} dims; got shape {data.shape}")
        t = cls.__new__(cls)
        t._init(data, dtype, vbox if vbox is not None else [0])
        t._dev = dev
        return t

    @classmethod
    def _from_kernel(cls, data: np.ndarray, dtype) -> Tensor:
        """A fresh host tensor over a kernel's output (shape already validated by the op), in one
        C call (cpu/python/fastpath_view.c; before the registry's fast_setup, _wrap)."""
        t = _fast_tensor(data, dtype)
        return t if t is not None else cls._wrap(data, dtype)

    @classmethod
    def _make_view(cls, src: Tensor, arr: np.ndarray, op, attrs) -> Tensor:
        """The view of ``src`` over ``arr`` (a numpy view of its data that ``op`` made with
        ``attrs``): src's dtype, version counter and device, base, and view chain plus
        ``(op, attrs)`` (replayed on the base after an in-place write); no grad. In one C call
        (cpu/python/fastpath_view.c: ~0.1 µs, ~0.5 µs in Python), which declines only odd
        cases (a Tensor without data, more than MAX_DIMS dims): then the lines below."""
        t = _fast_view(src, arr, op, attrs)
        if t is not None:
            return t
        t = cls._wrap(arr, src._dtype, src._vbox, src._dev)  # (which checks the dim count)
        t._base = src if src._base is None else src._base
        t._view_ops = (src._view_ops or ()) + ((op, attrs),)
        return t

    # ----------------------------------------------------------------- metadata
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self) -> device:
        return _CPU if self._dev is None else _VULKAN

    @property
    def is_vulkan(self) -> bool:
        return self._dev is not None

    @property
    def is_cpu(self) -> bool:
        return self._dev is None

    @property
    def is_cuda(self) -> bool:
        """False: gpucore has no CUDA tensors (``is_vulkan`` says whether it is on the GPU)."""
        return False

    @property
    def is_mps(self) -> bool:
        """False: gpucore has no MPS tensors."""
        return False

    def cuda(self, device=None, non_blocking: bool = False, **kwargs) -> Tensor:
        """Raises DeviceError naming the fix: gpucore has no CUDA device (``to('vulkan')``)."""
        raise DeviceError(
            "Tensor.cuda(): gpucore runs on Vulkan GPUs and the CPU without CUDA; use "
            ".to('vulkan') (gpucore.accelerator.current_accelerator()) or .to('cpu'), or let "
            "the 'auto' policy place ops (gpucore.set_device_policy('auto'), the default)"
        )

    def _host(self) -> np.ndarray:
        """The data as a host-readable numpy array (waits for pending device work)."""
        hook = HOST_READ_HOOK[0]  # (read once: another thread's capture may end meanwhile)
        if hook is not None:
            hook(self)
        return self._data if self._dev is None else self._dev.host_view(self._data)

    def _readable(self) -> np.ndarray:
        """The values for gpucore's own reads (bfloat16 as float32): not exported to a user."""
        if self._dtype is D.bfloat16:
            return D.bf16_to_f32(self._host()).reshape(self._data.shape)
        return self._host()

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[self._dim_of_shape(dim, "size")]

    def stride(self, dim: int | None = None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[self._dim_of_shape(dim, "stride")]

    def _dim_of_shape(self, dim, op: str) -> int:
        """A dim that must name an existing axis (a 0-d tensor has none), as PyTorch's size()."""
        is_int = isinstance(dim, (int, np.integer)) and not isinstance(dim, bool)
        if self._data.ndim == 0 and is_int:
            raise GpucoreIndexError(
                f"{op}(): dim {dim} given, but the tensor is 0-d (shape ()) and has no dims"
            )
        return self._wrap_dim(dim)

    def element_size(self) -> int:
        return self._dtype.itemsize

    def dequantize(self) -> Tensor:
        """Itself: a float tensor is not quantized (``gpucore.quantization.QuantizedTensor``'s
        dequantize gives its float values), as PyTorch."""
        if not self._dtype.is_floating_point:
            raise DTypeError(
                f"dequantize(): expected a quantized or float tensor, got {self._dtype}"
            )
        return self

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements are dense in row-major order, or in ``memory_format``'s
        (``gpucore.channels_last``: a 4-D tensor stored as [N, H, W, C])."""
        if memory_format is None:
            return self._data.flags.c_contiguous
        return is_contiguous_as(self._data, memory_format)

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def _wrap_dim(self, dim: int, ndim: int | None = None) -> int:
        n = self._data.ndim if ndim is None else ndim
        lim = max(n, 1)
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        if dim < -lim or dim >= lim:
            raise GpucoreIndexError(
                f"dim {dim} is out of range for a tensor of {n} dims (shape "
                f"{tuple(self._data.shape)}); expected a value in [{-lim}, {lim - 1}]"
            )
        return dim + lim if dim < 0 else dim

    # ----------------------------------------------------------------- autograd
    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value)}")
            if value.shape != self.shape:
                raise ShapeError(
                    f"assigned grad has shape {tuple(value.shape)} but the tensor has shape "
                    f"{tuple(self.shape)}"
                )
        self._grad = value

    @property
    def grad_fn(self):
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def requires_grad(self) -> bool:
        """Whether autograd records the ops that read this tensor. Assigning it checks what
        ``requires_grad_`` checks, as PyTorch: a bool, on a leaf, True only for a float dtype."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._requires_grad = _checked_requires_grad(self, value, method=False)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set requires_grad in place and return self: True on a leaf of a float dtype (on a
        non-leaf, which requires grad already, it changes nothing), False on a leaf."""
        self._requires_grad = _checked_requires_grad(self, requires_grad, method=True)
        return self

    def detach(self) -> Tensor:
        """A tensor sharing this one's storage, cut from the graph."""
        return Tensor._wrap(self._data, self._dtype, self._vbox, self._dev)

    def detach_(self) -> Tensor:
        self._grad_fn = None
        self._requires_grad = False
        self._base = None
        self._view_ops = None
        return self

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor):
        if self._requires_grad and not value._dtype.is_floating_point:
            raise GradDTypeError(
                "data set to a tensor that requires gradients must be of a floating point dtype: "
                f"this tensor of shape {tuple(self._data.shape)} requires grad, the new data is "
                f"{value._dtype}; convert it first (value.float()) or set requires_grad=False"
            )
        self._data = value._data
        self._dtype = value._dtype
        self._vbox = value._vbox
        self._dev = value._dev

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self._grad_fn is None:
            if not self._requires_grad:
                raise AutogradError("retain_grad() on a tensor that does not require grad")
            return
        if self._retain:
            return
        self._retain = True
        import weakref

        ref = weakref.ref(self)

        def hook(g):
            t = ref()
            if t is not None:
                g = g.detach()
                t._grad = g.clone() if t._grad is None else t._grad + g

        self._grad_fn.add_pre_hook(hook, last=True)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a return value replaces
        the gradient. Returns a handle with ``remove()``."""
        if not self._requires_grad:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        # gpucore.autograd imports this module (for Tensor): a module-level import is a cycle
        from .autograd.graph import accumulate_node

        node = self._grad_fn if self._grad_fn is not None else accumulate_node(self)
        return node.add_pre_hook(hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` after a gradient has been accumulated into this leaf's ``.grad``.
        Returns a handle with ``remove()``."""
        if not self._requires_grad or self._grad_fn is not None:
            raise AutogradError(
                "post accumulate grad hooks can only be registered on leaf tensors that require "
                "grad"
            )
        # gpucore.autograd imports this module (for Tensor): a module-level import is a cycle
        from .autograd.graph import accumulate_node

        return accumulate_node(self).add_post_hook(hook)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see gpucore.autograd)."""
        # gpucore.autograd imports this module (for Tensor): a module-level import is a cycle
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs)

    # ----------------------------------------------------------------- conversion
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A numpy array sharing this tensor's memory (copied for bfloat16 only with force).
        Writes through it change the tensor; caches of its values (device copies) are not
        used while it or a view of it is alive (gpucore/storage.py)."""
        if self._requires_grad and not force:
            raise AutogradError(
                "can't call numpy() on a tensor that requires grad; use tensor.detach().numpy()"
            )
        if self._dtype is D.bfloat16:
            if not force:
                raise DTypeError(
                    "numpy has no bfloat16; use tensor.float().numpy() (or numpy(force=True))"
                )
            return D.bf16_to_f32(self._host()).reshape(self._data.shape)
        hook = HOST_READ_HOOK[0]
        if hook is not None and self._dev is None:  # a capture watches host reads
            hook(self)  # (_host tells it for device tensors)
        return self._host() if self._dev is not None else _storage.export(self)

    def __array__(self, dtype=None, copy=None):
        """numpy's protocol: shares memory when it can; ``copy=False`` raises when it cannot."""
        needs_copy = self._dtype is D.bfloat16 or (
            dtype is not None and np.dtype(dtype) != self._data.dtype
        )
        if copy is False and needs_copy:
            raise ValueError(
                f"np.array(tensor, copy=False): a {self._dtype} tensor cannot be viewed as numpy "
                f"dtype {np.dtype(dtype) if dtype is not None else 'float32'} without a copy"
            )
        if needs_copy or copy:  # the caller gets a copy: nothing to watch
            a = self._readable()
            return a.astype(a.dtype if dtype is None else dtype, copy=True)
        return self.detach().numpy(force=True)

    def tolist(self):
        return self._readable().tolist()

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise ShapeError(
                f"item(): only one-element tensors can be converted to Python scalars; this one "
                f"has shape {tuple(self.shape)} ({self._data.size} elements)"
            )
        return self._readable().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or self._dtype is D.bool_:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise ShapeError(
                f"the truth value of a tensor with {self._data.size} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its Python number (``f"{loss:.4f}"``), as in PyTorch."""
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        arr = self._readable()
        # PyTorch's style: whole numbers print as "1.", others with 4 fixed decimals ("1.0000"),
        # bools as wide as the widest value ("tensor([True])", not numpy's "[ True]")
        fixed = False
        if arr.dtype.kind == "f" and arr.size:
            finite = arr[np.isfinite(arr)]
            fixed = bool(finite.size) and not np.array_equal(finite, np.round(finite))
        opts = _print_options()
        sci = opts["sci_mode"]
        body = np.array2string(
            arr,
            separator=", ",
            precision=opts["precision"],
            prefix="tensor(",
            floatmode="fixed" if fixed else "maxprec",
            threshold=opts["threshold"],
            edgeitems=opts["edgeitems"],
            max_line_width=opts["linewidth"],
            suppress_small=sci is False,
            formatter={"bool": f"{{!s:>{4 if arr.dtype == np.bool_ and arr.all() else 5}}}".format}
            | ({"float_kind": f"{{:.{opts['precision']}e}}".format} if sci else {}),
        )
        # as PyTorch: an empty tensor shows its shape unless 1-D, its dtype unless default float
        extra = f", size={tuple(arr.shape)}" if arr.size == 0 and arr.ndim != 1 else ""
        shown = (D.default_float(), D.int64, D.bool_)[: 1 if arr.size == 0 else 3]
        if self._dtype not in shown:
            extra += f", dtype={self._dtype}"
        if self._dev is not None:
            extra += ", device='vulkan'"
        if self._grad_fn is not None:
            extra += f", grad_fn=<{self._grad_fn.name()}>"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise AutogradError(
                "only leaf tensors support deepcopy; detach() or clone() the tensor first"
            )
        t = Tensor._wrap(self._host().copy(), self._dtype)
        if self._dev is not None:
            t = t.to(self.device)
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = self._grad.detach().clone()
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        """Pickling (``pickle``, ``copy``, ``multiprocessing``): the values, dtype, device and
        requires_grad, rebuilt as a fresh leaf in its own storage, as PyTorch. A view pickles as
        its own data; ``.grad``, hooks and the autograd graph are not pickled."""
        state = getattr(self, "__dict__", None) or None  # a subclass's own attributes
        data = self._host()
        if not data.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            data = data.copy(order="C")
        args = (type(self), data, self._dtype, self.device.type, self._requires_grad)
        return (_rebuild_tensor, args, state)


def _checked_requires_grad(t: Tensor, flag, method: bool) -> bool:
    """``flag`` when ``t.requires_grad_(flag)`` (method) or ``t.requires_grad = flag`` may set it,
    as PyTorch: a bool (not a truthy value); only on a leaf, but for ``requires_grad_(True)`` on a
    non-leaf (already True); True only for a float dtype. Otherwise the error saying why."""
    if flag is not True and flag is not False:
        got = type(flag).__name__
        if method:
            raise ArgumentTypeError(
                f"requires_grad_(): argument 'requires_grad' (position 1) must be bool, not {got}"
            )
        # (a RuntimeError, as PyTorch's for the assignment; the method's is its TypeError)
        raise AutogradError(
            f"requires_grad must be a bool, got {got}; assign True or False (bool(value) converts)"
        )
    if t._grad_fn is not None and not (method and flag):
        fix = (
            "to use its values where no gradient should flow, use var_no_grad = var.detach() "
            "(a new leaf sharing its storage)"
            if not flag
            else "it already requires grad as the output of an op that requires grad"
        )
        raise AutogradError(
            "you can only change requires_grad flags of leaf variables: a tensor of shape "
            f"{tuple(t._data.shape)} and dtype {t._dtype} computed by {t._grad_fn.name()} is not "
            f"a leaf; {fix}"
        )
    if flag and not t._dtype.is_floating_point:
        raise GradDTypeError(
            "only Tensors of floating point dtype can require gradients: a tensor of shape "
            f"{tuple(t._data.shape)} and dtype {t._dtype} cannot; convert it first (t.float(), "
            "or t.to(gpucore.float64))"
        )
    return flag


def leaf_requires_grad(t: Tensor, flag, op: str) -> Tensor:
    """``t`` (a fresh leaf) made to require grad when ``flag``, the ``requires_grad=`` argument
    of factory ``op``: a bool, as PyTorch's factories take (1 or numpy.True_ raise)."""
    if flag is not True and flag is not False:
        raise ArgumentTypeError(
            f"{op}: argument 'requires_grad' must be bool, not {type(flag).__name__}; "
            "pass True or False"
        )
    if flag:
        t.requires_grad_(True)
    return t


def as_leaf(cls, t: Tensor, requires_grad: bool) -> Tensor:
    """``t``'s storage as a fresh leaf of class ``cls`` (Tensor, Parameter, a user's subclass)."""
    if type(t) is not cls:
        out = Tensor.__new__(cls)
        out._init(t._data, t._dtype, t._vbox)
        out._dev = t._dev
        t = out
    return leaf_requires_grad(t, requires_grad, f"{cls.__name__}()")


def _rebuild_tensor(cls, data: np.ndarray, dtype, device: str, requires_grad: bool) -> Tensor:
    """The inverse of ``Tensor.__reduce_ex__``: a copy of ``data`` in fresh aligned storage."""
    if not isinstance(data, np.ndarray) or data.dtype != dtype.np or data.ndim > MAX_DIMS:
        raise TypeError(f"cannot unpickle a {cls.__name__} from {type(data).__name__} data")
    arr = empty_array(data.shape, data.dtype)
    arr[...] = data
    t = Tensor._wrap(arr, dtype)
    if device != "cpu":
        t = t.to(device)
    return as_leaf(cls, t, requires_grad)


def _print_options() -> dict:
    """gpucore.set_printoptions' settings (gpucore/typeinfo.py; imported late: it imports us)."""
    from .typeinfo import PRINT_OPTIONS  # noqa: PLC0415

    return PRINT_OPTIONS
