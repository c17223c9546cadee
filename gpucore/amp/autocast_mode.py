"""``autocast``: PyTorch's automatic mixed precision regions (``torch.autocast``).

Inside ``with gpucore.autocast("cpu", dtype=gpucore.bfloat16):`` the ops that gain most from
lower precision and lose least (matrix products, convolutions, attention: ``LOWER_PRECISION``)
cast their float32 inputs to the region's dtype, and the ops that need the range of float32
cast lower-precision inputs up (``FP32[device_type]``: PyTorch's CPU list, the losses, for
"cpu"; PyTorch's CUDA list for "vulkan": also softmax, log_softmax, the norms, sum, cumsum,
cumprod, exp, log, pow and their kin); every other op runs in the dtype of its inputs with the
usual promotion (so ``bf16 + f32`` gives float32). Casts are ordinary differentiable
ops: parameters keep float32 gradients. float64 tensors are never cast. A region applies to
tensors of its device type ("cpu": host tensors; "vulkan": device tensors), to the thread that
entered it, and nests (``autocast(enabled=False)`` inside turns it off). As PyTorch's lists,
these are per op, not per layer: gpucore's names are the registry ops of those layers (and the
nn.functional functions that compose them). On "vulkan" the half ops run in the shaders' float16 /
bfloat16 variants (float32 arithmetic inside, GEMM accumulating in float32).

"cuda" regions have no CUDA behind them: they warn and do nothing, as PyTorch does on a machine
without CUDA, so scripts that open one unconditionally run unchanged in float32.
"""

from __future__ import annotations

import functools
import threading

from .. import _caller_warnings as caller_warnings
from .. import dtypes as D
from ..autograd.engine import _TASKS
from ..tensor import Tensor

# Registry op names (gpucore/ops) autocast runs in the region's dtype; names of ops that other
# families add later are harmless when absent.
LOWER_PRECISION = frozenset(
    {
        "matmul",
        "linear",
        "conv2d",
        "scaled_dot_product_attention",
        "rnn_sequence",
        "prelu",
        # nn.functional compositions PyTorch lists by name
        "conv1d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    }
)
# Registry ops and nn.functional functions autocast runs in float32 on the CPU (PyTorch's CPU
# list: losses).
_FP32_CPU = frozenset(
    {
        "cross_entropy",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "kl_div",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "poisson_nll_loss",
        "cosine_embedding_loss",
        "hinge_embedding_loss",
        "margin_ranking_loss",
        "soft_margin_loss",
        "triplet_margin_loss",
        "multilabel_soft_margin_loss",
        "multi_margin_loss",
        "multilabel_margin_loss",
        "ctc_loss",
    }
)
# ... and on Vulkan: PyTorch's CUDA list (torch/csrc/autograd/autocast_mode.cpp's fp32 and
# fp32_set_opt_dtype ops) as gpucore names it: ops whose range or accumulation float16 loses.
_FP32_VULKAN = _FP32_CPU | frozenset(
    {
        "exp",
        "expm1",
        "log",
        "log10",
        "log2",
        "log1p",
        "reciprocal",
        "rsqrt",
        "erfinv",
        "pow",
        "softplus",
        "softmax",
        "log_softmax",
        "layer_norm",
        "native_layer_norm",
        "group_norm",
        "native_group_norm",
        "cosine_similarity",
        "nll_loss",
        "sum",
        "cumsum",
        "cumprod",
        "prod",
        "logsumexp",
        "dist",
        "norm",
    }
)
FP32 = {"cpu": _FP32_CPU, "vulkan": _FP32_VULKAN}
_LISTED = LOWER_PRECISION | _FP32_VULKAN  # names autocast looks at, on any device
DEFAULT_DTYPE = {"cpu": D.bfloat16, "vulkan": D.float16}
LOW = (D.float16, D.bfloat16)

# The per-thread state says which device types are in a region and with which dtype.
_local = threading.local()
_count_lock = threading.Lock()
_active_regions = [0]


def _state() -> dict:
    s = getattr(_local, "state", None)
    if s is None:
        s = _local.state = {"cpu": None, "vulkan": None}  # device type -> dtype or None
        _local.depth = 0
        _local.cache = {}
    return s


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether an autocast region for ``device_type`` is active in this thread."""
    if device_type == "cuda":
        return False
    return _state().get(_check_device(device_type)) is not None


def get_autocast_dtype(device_type: str):
    """The dtype autocast uses for ``device_type`` (its default outside a region)."""
    if device_type == "cuda":
        return D.float16
    dt = _state().get(_check_device(device_type))
    return dt if dt is not None else DEFAULT_DTYPE[device_type]


def _check_device(device_type) -> str:
    if device_type not in DEFAULT_DTYPE:
        raise RuntimeError(
            f"User specified an unsupported autocast device_type {device_type!r}; gpucore "
            "supports 'cpu' and 'vulkan' ('cuda' regions are disabled: there is no CUDA)"
        )
    return device_type


class autocast:  # noqa: N801 - PyTorch's name
    """A mixed-precision region (context manager or decorator), as ``torch.autocast``.

    device_type: "cpu" or "vulkan" ("cuda": disabled with a warning). dtype: float16 or
    bfloat16 (default: bfloat16 on the CPU, float16 on Vulkan). enabled=False turns autocast
    off inside. cache_enabled: accepted (casts of a weight are reused within the region).
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(
                f"Expected `device_type` of type `str`, got: `{type(device_type).__name__}`"
            )
        if device_type == "cuda":
            if enabled:
                caller_warnings.warn(
                    "User provided device_type of 'cuda', but CUDA is not available (gpucore "
                    "runs on Vulkan and the CPU). Disabling; use device_type='vulkan' or 'cpu'.",
                )
            self.device = None
        else:
            self.device = _check_device(device_type)
        if dtype is None and self.device is not None:
            dtype = DEFAULT_DTYPE[self.device]
        if self.device is not None and enabled and dtype not in LOW:
            raise RuntimeError(
                f"autocast: in {device_type} autocast, dtype must be gpucore.bfloat16 or "
                f"gpucore.float16, got {dtype}"
            )
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._saved = []

    def __enter__(self):
        if self.device is None:
            return self
        s = _state()
        prev = s[self.device]
        s[self.device] = self.fast_dtype if self._enabled else None
        counted = s[self.device] is not None
        self._saved.append((prev, counted))
        _local.depth += 1
        if counted:
            _count(+1)
        return self

    def __exit__(self, *exc):
        if self.device is None:
            return False
        s = _state()
        prev, counted = self._saved.pop()
        s[self.device] = prev
        _local.depth -= 1
        if _local.depth == 0:
            _local.cache = {}  # casts of weights live as long as the outermost region
        if counted:
            _count(-1)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper


def _count(delta: int) -> None:
    """Count the enabled regions of every thread; the registry consults autocast (one list
    check per op) only while there is one."""
    from ..ops import registry  # lazy: gpucore.amp is imported before the op registry

    with _count_lock:
        _active_regions[0] += delta
        registry.AUTOCAST[0] = cast_inputs if _active_regions[0] > 0 else None


def _device_type(t: Tensor) -> str:
    return "cpu" if t._dev is None else "vulkan"


def cast_inputs(name: str, inputs: tuple) -> tuple:
    """``inputs`` of op ``name`` cast as the thread's autocast regions say (unchanged outside
    one, or for ops on neither list)."""
    if name not in _LISTED or _TASKS.callbacks:
        return inputs  # backward formulas run in their forward's dtypes, as PyTorch's
    lower = name in LOWER_PRECISION
    s = _state()
    out = []
    for t in inputs:
        if isinstance(t, Tensor):
            dev = _device_type(t)
            dt = s.get(dev)
            if dt is not None:
                if lower:
                    t = _cast(t, dt)
                elif name in FP32[dev]:
                    t = _up(t)
        out.append(t)
    return tuple(out)


def listed(name: str) -> bool:
    """Whether autocast casts the inputs of op / nn.functional function ``name`` on some
    device (nn.functional wraps those with ``listed_function``)."""
    return name in _LISTED


def _cast(t: Tensor, dtype) -> Tensor:
    if t._dtype is not D.float32:
        return t  # float64, integers and tensors already in low precision stay as they are
    if t._requires_grad and t.grad_fn is None:  # a weight: cast once per region
        cache = _local.cache
        hit = cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == (t._vbox[0], dtype):
            return hit[2]
        c = t.to(dtype)
        cache[id(t)] = (t, (t._vbox[0], dtype), c)
        return c
    return t.to(dtype)


def _up(t: Tensor) -> Tensor:
    return t.float() if t._dtype in LOW else t


def listed_function(name: str, fn):
    """``fn`` (an nn.functional function on an FP32 or the LOWER_PRECISION list: a composition,
    not one registry op) with its tensor arguments cast as that list says inside autocast
    regions."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _active_regions[0]:
            args = cast_inputs(name, args)
            kwargs = dict(zip(kwargs, cast_inputs(name, tuple(kwargs.values()))))
        return fn(*args, **kwargs)

    return wrapper
