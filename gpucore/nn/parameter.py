"""Parameter (a leaf tensor that a Module registers as trainable), Buffer (one it registers as
state) and the uninitialised parameters and buffers of the Lazy modules."""

from __future__ import annotations

from .. import _cpu
from ..creation import empty, tensor
from ..tensor import Tensor, leaf_requires_grad


class Parameter(Tensor):
    """A Tensor that requires grad by default and is picked up by ``Module.parameters()``.

    ``Parameter(t)`` shares ``t``'s storage (no copy), as in PyTorch.
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            data = tensor(data)
        p = Tensor.__new__(cls)
        p._init(data._data, data._dtype, data._vbox)
        p._dev = data._dev
        return leaf_requires_grad(p, requires_grad, f"{cls.__name__}()")

    def __init__(self, data=None, requires_grad: bool = True):
        pass  # everything happens in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self.detach())

    def __deepcopy__(self, memo):
        t = Tensor.__deepcopy__(self.detach(), memo)
        p = Parameter(t, requires_grad=self._requires_grad)
        if self._grad is not None:
            p._grad = self._grad.detach().clone()
        memo[id(self)] = p
        return p


# The matmul and linear fast lanes (cpu/python/fastpath.c) read Parameters as operands: a layer's
# weight reaches their one-call paths as it is (results are plain Tensors).
_cpu.fast_accept(Parameter)


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned as an attribute
    (``self.stats = nn.Buffer(t)``, torch.nn.Buffer): state that is not trained, saved in the
    state_dict unless ``persistent=False``. Shares ``data``'s storage."""

    __slots__ = ("persistent",)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            data = tensor(data)
        b = Tensor.__new__(cls)
        b._init(data._data, data._dtype, data._vbox)
        b._dev = data._dev
        b.persistent = bool(persistent)
        if data._requires_grad:
            b.requires_grad_(True)
        return b

    def __init__(self, data=None, *, persistent: bool = True):
        pass  # everything happens in __new__


class _Uninitialized:
    """What UninitializedParameter and UninitializedBuffer share: no data until
    ``materialize``; reading values or sizes raises."""

    __slots__ = ()
    cls_to_become: type = Tensor

    def _refuse(self, what: str):
        raise ValueError(
            f"Attempted to use an uninitialized parameter in {what}(). This error happens when "
            "you are using a Lazy module or explicitly manipulating an uninitialized parameter: "
            "run a forward pass (or call materialize) first"
        )

    def numel(self) -> int:
        self._refuse("numel")

    def size(self, dim=None):
        self._refuse("size")

    def numpy(self, *, force: bool = False):
        self._refuse("numpy")

    def item(self):
        self._refuse("item")

    def tolist(self):
        self._refuse("tolist")

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give it storage of ``shape`` (uninitialised values) and turn it into a
        ``cls_to_become`` (Parameter / Tensor) in place: the same object, as PyTorch."""
        data = empty(*tuple(shape), dtype=dtype or self.dtype, device=device or self.device)
        self._become(data)

    def _become(self, data: Tensor) -> None:
        grad = self._requires_grad
        self._init(data._data, data._dtype, data._vbox)
        self._dev = data._dev
        self.__class__ = self.cls_to_become
        if grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __deepcopy__(self, memo):
        new = type(self)(requires_grad=self._requires_grad, dtype=self.dtype)
        memo[id(self)] = new
        return new


class UninitializedParameter(_Uninitialized, Parameter):
    """A Parameter without data yet (torch.nn.UninitializedParameter), the weights of the Lazy*
    modules until their first forward pass; ``materialize(shape)`` makes it a Parameter."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        p = Parameter.__new__(cls, empty(0, dtype=dtype, device=device), requires_grad)
        return p

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer without data yet (torch.nn.UninitializedBuffer: the running statistics of the
    LazyBatchNorm modules); ``materialize(shape)`` makes it a Tensor."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        data = empty(0, dtype=dtype, device=device)
        b = Tensor.__new__(cls)
        b._init(data._data, data._dtype, data._vbox)
        b._dev = data._dev
        return leaf_requires_grad(b, requires_grad, f"{cls.__name__}()")

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        pass
