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


# ----------------------------------------------------------------------------- the fast lane
def _elementwise_ops():
    return [op for op in REGISTRY.values() if op.elementwise]


def test_elementwise_ops_keep_shape_and_dtype_as_the_fast_lane_assumes():
    import gpucore

    assert len(_elementwise_ops()) >= 20
    for op in _elementwise_ops():
        n_in = (
            2
            if op.name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
            or (op.name.endswith("_backward"))
            else 1
        )
        attrs = {"approximate": "none"} if op.name.startswith("gelu") else {}
        for dt in (gpucore.float32, gpucore.float64):
            xs = [gpucore.rand(3, 5, dtype=dt) + 0.5 for _ in range(n_in)]
            assert op.infer(*xs, **attrs) == ((3, 5), dt), op.name


def _both_lanes(fn):
    """fn() through the fast lane and through the general path (a trace turns the lane off)."""
    import gpucore

    fast = fn()
    with gpucore.dispatch.trace_ops():
        slow = fn()
    return fast, slow


def test_the_fast_lane_gives_the_general_paths_results_and_gradients():
    import numpy as np

    import gpucore

    a = gpucore.tensor(np.linspace(-2, 2, 35).reshape(5, 7), requires_grad=True)
    b = gpucore.tensor(np.linspace(1, 3, 35).reshape(5, 7))

    def run():
        a.grad = None
        y = ((a * b + a).relu() / b - a.exp()).tanh() ** 2
        y.sum().backward()
        return y.detach().numpy().copy(), a.grad.numpy().copy(), type(y.grad_fn).__name__

    (y1, g1, n1), (y2, g2, n2) = _both_lanes(run)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(g1, g2)
    assert n1 == n2


def test_the_fast_lane_leaves_device_policies_and_broadcasting_to_the_general_path(vulkan):
    import gpucore

    before = gpucore.vulkan.stats()["dispatches"]
    x = gpucore.ones(4) + gpucore.ones(4)  # policy 'vulkan' (the fixture): on the device
    assert x.device.type == "vulkan"
    gpucore.vulkan.synchronize()  # records the pending fused program
    assert gpucore.vulkan.stats()["dispatches"] > before
    with gpucore.device_policy("cpu"):
        y = gpucore.ones(2, 3) * gpucore.ones(3)  # broadcast: the general path
        assert y.device.type == "cpu" and y.shape == (2, 3)
