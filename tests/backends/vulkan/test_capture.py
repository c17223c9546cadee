"""gpucore.backends.vulkan.capture: commands recorded once, replayed many times."""

import numpy as np
import pytest

from gpucore.backends.vulkan.capture import record
from gpucore.backends.vulkan.kernels import KERNELS
from gpucore.errors import DeviceError


def test_record_once_replay_many(vulkan):
    be = vulkan
    x = be.empty_array((1000,), np.float32)
    y = be.empty_array((1000,), np.float32)

    def body():
        KERNELS["exp"](be, y, x)
        KERNELS["add"](be, y, y, x)

    cap = record(be.ctx, body)
    assert cap.count >= 1
    for value in (0.0, 1.0, -2.0):
        x[...] = value
        cap.replay()
        np.testing.assert_allclose(y, np.exp(value) + value, rtol=1e-6)
    assert cap.replays == 3
    cap.destroy()


def test_reading_back_mid_capture_is_refused_and_the_stream_recovers(vulkan):
    be = vulkan
    x = be.empty_array((16,), np.float32)
    x[...] = 2.0

    def body():
        KERNELS["exp"](be, x, x)
        be.ctx.stream.synchronize()

    with pytest.raises(DeviceError, match="captured for replay"):
        record(be.ctx, body)
    assert be.ctx.stream.capture is None
    y = be.empty_array((16,), np.float32)
    KERNELS["neg"](be, y, x)
    be.ctx.stream.synchronize()
    np.testing.assert_array_equal(y, np.full(16, -2.0, np.float32))  # the capture never ran
