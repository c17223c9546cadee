"""Vulkan kernels, keyed by registry op name: ``fn(backend, out, *inputs, **attrs)``.

common.py holds the table (``KERNELS``) and the launch helpers; each family module registers its
kernels with ``@kernel``, named after the module of gpucore/ops it serves: unary.py, elementwise.py,
indexing.py (gather), joining.py (cat), reduce.py, nn.py, pool.py, random.py, optim.py,
optim_capturable.py and
attention.py (the registry op's forward on the runtime's attention shader, fused.py's); gemm.py
serves ops/linalg.py (named for its kernel, shaders/gemm.comp), and pool.py also holds ops/nn.py's
im2col/col2im (shaders/im2col.comp, the lowering of conv2d and average pooling). fused.py holds the
kernels of the runtime's fused ops (layer_norm, attention: called by its Vulkan executor, not
registry ops); qgemm.py the int8 GEMM (shaders/qgemm.comp) that gpucore.quantization calls.
Ops without a kernel here (sorting, scans, scatter, ...) run on the CPU.

Inputs and outputs are numpy views over device memory (see memory.py); ``backend.operand(arr)``
gives the binding and element offset/strides a shader needs. A kernel records dispatches on the
stream and returns at once: nothing waits for the device here.

float16 / bfloat16 arrays (bfloat16 as uint16) are 16-bit values two to a 32-bit word in the
shaders (shaders/half.glsl: conversions with integer instructions, bit-exact with the CPU). Kernels
that take them themselves set ``fn.half = True`` (binary.comp's family, copies, unary.comp,
reductions, GEMM); the backend runs every other kernel on them widened to float32 (backend.py).
A uint16 tensor's arrays are uint16 too: they carry its dtype's tag (gpucore.dtypes.is_uint16),
which is what tells them from bfloat16 here (elementwise.py's ``_code``); int16 / uint16 are
16-bit items two to a word like the half types, uint32 words, uint64 pairs of words.

float64 runs in native doubles (binaryf64.comp, reduce64.py's reduce64.comp, gemm64.py's
gemm64.comp, scan.comp's scan64) only where the device has shaderFloat64 and shaderInt64
(``Context.float64``, enabled by context.py): kernels that may compute in doubles set
``fn.float64_math = True`` and ``VulkanBackend.supports`` keeps their float64 calls on the host
elsewhere (a compiled model refuses them by node). Moving float64 bits (copies, where, gather)
needs no feature.

Push-constant layouts are declared once in each shader and mirrored once here, next to the
function that fills them (``_push`` packs ints as uint32 and floats as float32 bits).
"""

from .common import (  # noqa: F401  (the table and the helpers other modules use)
    KERNELS,
    MAX_GROUPS_X,
    contiguous,
    copy_array,
    copy_ok,
    flat_local_size,
    groups_1d,
    kernel,
    launch,
    local_size,
    try_fuse,
    word_copy_ok,
)

# Family modules register on import; keep this list in step with the files.
from . import attention, elementwise, fused, gemm, indexing, joining, nn  # noqa: E402,F401  isort: skip
from . import optim, optim_capturable, pool, random, reduce  # noqa: E402,F401  isort: skip
from . import scan, scatter, sorting, unary  # noqa: E402,F401  isort: skip
from . import norm  # noqa: E402,F401  isort: skip
