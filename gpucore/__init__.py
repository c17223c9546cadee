"""gpucore: PyTorch-style tensors, autograd and training on any Vulkan GPU, or the CPU.

Ops on tensors of at least GPUCORE_GPU_THRESHOLD elements run as SPIR-V compute shaders on a
Vulkan device when one is usable; everything else runs in the C extension ``gpucore._cpu``.
"""

# _cpu first: fail early and clearly if the extension is missing. ops fills the op registry and
# attaches the Tensor methods.
import builtins

from . import _cpu, autograd, dispatch, nn, optim, vulkan
from . import ops as _ops
from .autograd import enable_grad, no_grad, set_grad_enabled
from .autograd.grad_mode import is_grad_enabled
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from .dispatch import device_policy, get_device_policy, set_device_policy
from .dtypes import bfloat16, dtype, float16, float32, float64, int8, int32, int64, uint8
from .dtypes import bool_ as bool  # noqa: A001  (PyTorch's name: gpucore.bool)
from .errors import (
    AutogradError,
    DeviceError,
    DTypeError,
    GpucoreError,
    GpucoreIndexError,
    SerializationError,
    ShapeError,
)
from .io import load, save
from .ops.elementwise import (
    abs,
    add,
    clamp,
    clone,
    cos,
    div,
    eq,
    exp,
    ge,
    gelu,
    gt,
    isfinite,
    isinf,
    isnan,
    le,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    pow,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    sub,
    tanh,
    where,
)
from .ops.indexing import (
    cat,
    chunk,
    concat,
    gather,
    index_select,
    masked_fill,
    narrow,
    scatter_add,
    split,
    stack,
    unbind,
)
from .ops.linalg import addmm, bmm, matmul, mm
from .ops.nnops import log_softmax, logsumexp, softmax
from .ops.reduce import all, amax, amin, any, argmax, argmin, max, mean, min, norm, std, sum, var
from .ops.shape import (
    broadcast_tensors,
    broadcast_to,
    expand,
    flatten,
    movedim,
    permute,
    reshape,
    squeeze,
    t,
    transpose,
    unsqueeze,
)
from .profiler import profiler
from .random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .tensor import Size, Tensor, device

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001

clip = clamp

__version__ = "0.1.0"


def is_tensor(obj) -> bool:
    """True for gpucore tensors."""
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    """The number of elements of ``input``."""
    return input.numel()


def backend_info() -> dict:
    """What runs the ops on this machine.

    ``cpu``: the C extension's ISA in use and those available, its thread count, the cache sizes
    and GEMM blocking it chose, and the caching host allocator's counters. ``vulkan``: the device
    the 'auto' policy would use (its name and type), or None with ``vulkan_unavailable`` saying
    why."""
    cpu = dict(_cpu.info())
    cpu["host_cache"] = _cpu.host_cache_info()
    info: dict = {"cpu": cpu, "vulkan": None}
    be = dispatch.vulkan_backend() if vulkan.is_available() else None
    if be is not None:
        info["vulkan"] = f"{be.ctx.info.name} ({be.ctx.info.type})"
    else:
        info["vulkan_unavailable"] = vulkan.unavailable_reason()
    return info


def set_num_threads(n: int) -> None:
    """Threads the C extension's pool uses for large kernels (default: GPUCORE_NUM_THREADS or
    every CPU this process may use). Results do not depend on it."""
    if isinstance(n, builtins.bool) or not isinstance(n, builtins.int) or n < 1:
        raise ValueError(f"set_num_threads: n must be an integer >= 1, got {n!r}")
    _cpu.set_num_threads(n)


def get_num_threads() -> int:
    """Threads the C extension's pool uses for large kernels."""
    return _cpu.info()["threads"]


def empty_cache() -> int:
    """Give the host memory that the caching allocator keeps for reuse (blocks of freed CPU
    tensors) back to the OS, as ``torch.cuda.empty_cache()`` does for device memory; returns the
    bytes freed. GPUCORE_HOST_CACHE_MB caps what is kept (default 1024, 0 disables the cache)."""
    return _cpu.host_cache_clear()
