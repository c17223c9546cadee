"""gpucore._cpu against float64 numpy references (cpu/README.md): the contract every
entry shares: distinct op constants, argument checks (formats, sizes, read-only and
non-contiguous buffers, scalars, alignment, overlap), buffers released on error paths,
kernels running concurrently."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from cpu_ext import C, randn


# --------------------------------------------------------------------------------- constants
def test_op_constants_are_distinct_ints():
    # The counts come from OPCODES (cpu/opcodes.def), so adding an op needs no edit here.
    x, out = np.ones(3), np.empty(3)
    for prefix, family, fn in (
        ("UNARY_", "unary", lambda op: C.unary(op, x, out)),
        ("BINARY_", "binary", lambda op: C.binary(op, x, x, np.empty(3, np.float64))),
        ("REDUCE_", "reduce", lambda op: C.reduce(op, x, np.empty(1), 1, 3, 1)),
    ):
        table = C.OPCODES[family]
        consts = {n[len(prefix) :].lower(): getattr(C, n) for n in dir(C) if n.startswith(prefix)}
        assert consts == table, family  # same names, same codes, none missing on either side
        assert all(type(code) is int for code in consts.values())
        count = len(table)
        assert count > 0 and sorted(consts.values()) == list(range(count)), family
        for bad in (-1, count):  # the extension's range check follows the table
            with pytest.raises(
                ValueError, match=rf"unknown op {bad}; .*{prefix}\* .*0\.\.{count - 1}"
            ):
                fn(bad)
    assert C.MAX_DIMS == 8


# ----------------------------------------------------------------------------- bad arguments
def test_wrong_format_raises_type_error():
    with pytest.raises(TypeError, match=r"unary: 'x' must be float32 .* got format 'i'"):
        C.unary(C.UNARY_EXP, np.ones(3, np.int32), np.empty(3, np.float32))
    with pytest.raises(TypeError, match=r"gemm: 'b' must be float32"):
        C.gemm(
            np.ones(4, np.float32),
            np.ones(4),
            np.empty(4, np.float32),
            1,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            0,
        )
    with pytest.raises(TypeError, match=r"binary: 'out' must be bool"):
        C.binary(C.BINARY_LT, np.ones(3), np.ones(3), np.empty(3))
    with pytest.raises(TypeError, match=r"reduce: 'out' must be int64"):
        C.reduce(C.REDUCE_ARGMAX, np.ones(3), np.empty(1, np.int32), 1, 3, 1)
    with pytest.raises(TypeError, match=r"'target' must be int64"):
        C.cross_entropy_forward(
            np.ones((2, 3)), np.zeros(2, np.int32), np.empty(2), np.empty(2), 2, 3, -1
        )
    with pytest.raises(TypeError, match="buffer protocol"):
        C.unary(C.UNARY_EXP, [1.0, 2.0], np.empty(2))
    with pytest.raises(TypeError, match="non-native|got format"):
        C.unary(C.UNARY_EXP, np.ones(3, ">f8"), np.empty(3))


def test_too_small_buffer_raises_value_error():
    a = np.ones(6, np.float32)
    with pytest.raises(ValueError, match=r"gemm: 'a' holds 6 elements but 8 are needed .*m=2.*k=4"):
        C.gemm(
            a, np.ones(8, np.float32), np.empty(4, np.float32), 1, 2, 2, 4, 0, 0, 1.0, 0.0, 0, 0, 0
        )
    with pytest.raises(ValueError, match=r"'c' holds 4 elements but 12 are needed"):
        C.gemm(
            np.ones(8, np.float32),
            np.ones(8, np.float32),
            np.empty(4, np.float32),
            3,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            4,
        )
    with pytest.raises(ValueError, match=r"'b' holds 8 elements but 9 are needed"):
        C.gemm(np.ones(4), np.ones(8), np.empty(4), 2, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 5, 4)
    with pytest.raises(ValueError, match=r"reduce: 'x' holds 10 elements but 12 are needed"):
        C.reduce(C.REDUCE_SUM, np.ones(10), np.empty(4), 2, 3, 2)
    with pytest.raises(ValueError, match=r"softmax: 'out' holds"):
        C.softmax(np.ones(12), np.empty(11), 2, 3, 2, 0)
    with pytest.raises(ValueError, match="x has 3 elements but out has 4"):
        C.unary(C.UNARY_EXP, np.ones(3), np.empty(4))
    with pytest.raises(ValueError, match="cannot broadcast 'b' of shape \\(3,\\)"):
        C.binary(C.BINARY_ADD, np.ones((2, 4)), np.ones(3), np.empty((2, 4)))
    with pytest.raises(ValueError, match="more dims than out"):
        C.binary(C.BINARY_ADD, np.ones((1, 4)), np.ones(4), np.empty(4))


def test_read_only_output_raises_value_error():
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="unary: output 'out' is read-only"):
        C.unary(C.UNARY_EXP, np.ones(4), ro)
    with pytest.raises(ValueError, match="gemm: output 'c' is read-only"):
        C.gemm(np.ones(4), np.ones(4), ro, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="read-only"):
        C.unary(C.UNARY_EXP, np.ones(1), bytes(8))


def test_non_contiguous_raises_value_error():
    x = np.ones(8)
    with pytest.raises(ValueError, match=r"unary: 'x' \(shape \(4,\)\) must be C-contiguous"):
        C.unary(C.UNARY_EXP, x[::2], np.empty(4))
    with pytest.raises(ValueError, match="'a' .* must be C-contiguous"):
        C.gemm(np.ones((4, 4)).T, np.ones(16), np.empty(16), 1, 4, 4, 4, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="'out' .* must be C-contiguous"):
        C.binary(C.BINARY_ADD, x, x, np.empty(16)[::2])
    with pytest.raises(ValueError, match="must be C-contiguous"):
        C.reduce(C.REDUCE_SUM, np.ones((3, 4))[:, :2], np.empty(3), 3, 2, 1)


def test_bad_scalars():
    x = np.ones(4)
    with pytest.raises(ValueError, match="unknown op 99"):
        C.unary(99, x, np.empty(4))
    with pytest.raises(ValueError, match="unknown op -1"):
        C.binary(-1, x, x, np.empty(4))
    with pytest.raises(ValueError, match="'m' must be >= 0, got -1"):
        C.gemm(x, x, np.empty(4), 1, -1, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="'trans_a' must be 0 or 1"):
        C.gemm(x, x, np.empty(4), 1, 2, 2, 1, 2, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="'n' must be an int, got float"):
        C.reduce(C.REDUCE_SUM, x, np.empty(1), 1, 4.0, 1)
    with pytest.raises(TypeError, match="'alpha' must be a real number"):
        C.gemm(x, x, np.empty(4), 1, 2, 2, 1, 0, 0, "1", 0.0, 0, 0, 0)
    with pytest.raises(TypeError, match="takes exactly 3 positional arguments"):
        C.unary(C.UNARY_EXP, x)
    with pytest.raises(ValueError, match="overflow"):
        C.gemm(x, x, np.empty(4), 1, 2**62, 2**62, 1, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="overflow"):
        C.gemm(x, x, np.empty(4), 2**40, 2, 2, 1, 0, 0, 1.0, 0.0, 2**40, 0, 0)
    with pytest.raises(ValueError, match="overflow"):
        C.reduce(C.REDUCE_SUM, x, np.empty(1), 2**40, 2**40, 2**40)
    # numpy integers are accepted as ints
    C.reduce(np.int64(C.REDUCE_SUM), x, np.empty(1), np.int64(1), np.int32(4), 1)


def test_unaligned_buffer_rejected():
    raw = bytearray(8 * 5)
    x = np.frombuffer(raw, np.float64, count=4, offset=1)
    with pytest.raises(ValueError, match="aligned"):
        C.unary(C.UNARY_EXP, x, np.empty(4))


def test_overlap_rejected():
    buf = np.zeros(40)
    with pytest.raises(ValueError, match="'c' overlaps 'a'"):
        C.gemm(buf[:16], np.ones(16), buf[8:24], 1, 4, 4, 4, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match="overlaps"):
        C.unary(C.UNARY_EXP, buf[:10], buf[1:11])
    with pytest.raises(ValueError, match="overlaps"):
        C.reduce(C.REDUCE_SUM, buf[:12], buf[:3], 3, 4, 1)
    with pytest.raises(ValueError, match="overlaps"):
        C.im2col(buf[:9], buf[:9], 1, 1, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1)


def test_buffers_released_on_error_paths():
    ba = bytearray(8 * 4)
    mv = memoryview(ba).cast("d")
    with pytest.raises(ValueError):
        C.unary(C.UNARY_EXP, mv, np.empty(5))
    with pytest.raises(TypeError):
        C.unary(C.UNARY_EXP, np.ones(4, np.float32), mv)
    with pytest.raises(ValueError):
        C.gemm(np.ones(4), mv, np.empty(1), 1, 3, 3, 3, 0, 0, 1.0, 0.0, 0, 0, 0)
    with pytest.raises(IndexError):
        C.cross_entropy_forward(np.ones((4, 2)), np.full(4, 9, np.int64), mv, np.empty(4), 4, 2, -1)
    C.unary(C.UNARY_NEG, mv, mv)
    mv.release()  # BufferError if an export leaked
    ba.extend(b"\0")


def test_kernels_run_concurrently_in_threads():
    a = randn((64, 64), np.float64)
    b = randn((64, 64), np.float64, 1)
    ref = a @ b
    errors = []

    def work():
        try:
            for _ in range(20):
                c = np.empty((64, 64))
                C.gemm(a, b, c, 1, 64, 64, 64, 0, 0, 1.0, 0.0, 0, 0, 0)
                np.testing.assert_allclose(c, ref, rtol=1e-12, atol=1e-12)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
