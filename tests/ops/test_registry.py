"""The op registry is the single source of truth: every op has what each backend needs."""

from gpucore.backends.cpu.kernels import KERNELS as CPU_KERNELS
from gpucore.backends.vulkan.kernels import KERNELS as VULKAN_KERNELS
from gpucore.ops.registry import REGISTRY


def _computed_ops():
    return {name for name, op in REGISTRY.items() if op.view is None and op.infer is not None}


def test_every_op_has_a_cpu_kernel():
    missing = sorted(_computed_ops() - set(CPU_KERNELS))
    assert not missing, f"ops without a CPU kernel: {missing}"


def test_every_kernel_belongs_to_a_registered_op():
    for table, name in ((CPU_KERNELS, "CPU"), (VULKAN_KERNELS, "Vulkan")):
        stray = sorted(set(table) - set(REGISTRY))
        assert not stray, f"{name} kernels for ops that are not registered: {stray}"


def test_differentiable_ops_declare_what_they_save_consistently():
    for name, op in REGISTRY.items():
        if op.save_for is not None:
            assert set(op.save_for) <= set(op.save_inputs), name
