"""The Vulkan backend: runs registry ops with the shaders of ``kernels.KERNELS``.

Tensors on the device keep a numpy ``_data`` view over their block's host mapping (see
memory.py), so view ops work unchanged; ``operand()`` turns such a view into what a shader needs:
the block, a bound byte range and the element offset and strides inside it. Host access goes
through ``host_view`` (waits for pending work; downloads on devices without host-visible memory).

float16 / bfloat16: kernels that read and write 16-bit storage themselves (``half = True``:
binary.comp's family, copies, unary.comp, reductions, GEMM) accept them; every other float32
kernel runs on them *widened*, as the CPU backend does: the half inputs cast to float32 on the
device, the kernel in float32, the half outputs rounded back (``_Widened``,
``kernels.elementwise.cast_array``). Same answer as the CPU bit for bit wherever the float32
kernels agree.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...errors import DeviceError
from . import residency
from .kernels import KERNELS, copy_array, copy_ok, word_copy_ok
from .kernels.elementwise import cast_array
from .refusals import host_sync_error

_ELEM = 4  # shaders work on 32-bit words
_HALF = (D.float16, D.bfloat16)
_HALF_NP = {np.dtype(np.float16): D.float16, np.dtype(np.uint16): D.bfloat16}  # bfloat16: uint16


class _Widened:
    """A float16 / bfloat16 tensor as a float32 kernel's ``accepts`` sees it once widened."""

    __slots__ = ("_t",)
    _dtype = D.float32

    def __init__(self, t):
        self._t = t

    def __getattr__(self, name):
        return getattr(self._t, name)


def _has_half(inputs, specs) -> bool:
    for t in inputs:
        if t._dtype in _HALF:
            return True
    for _, dt in specs:
        if dt in _HALF:
            return True
    return False


def _has_float64(inputs, specs) -> bool:
    return any(t._dtype is D.float64 for t in inputs) or any(dt is D.float64 for _, dt in specs)


def _widened(inputs, specs) -> tuple:
    ins = [_Widened(t) if t._dtype in _HALF else t for t in inputs]
    outs = [(shape, D.float32 if dt in _HALF else dt) for shape, dt in specs]
    return ins, outs


def _device_copy_ok(arr: np.ndarray) -> bool:
    """copy.comp copies arr: words, pairs of words, or 16-bit items (float16 / bfloat16)."""
    return word_copy_ok(arr) or (arr.itemsize == 2 and copy_ok(arr))


class Operand:
    """A tensor as a shader sees it: binding (block, byte offset, byte size) + element layout."""

    __slots__ = ("block", "bind_off", "bind_size", "offset", "shape", "strides", "arr")

    def binding(self, writes: bool = False):
        return (self.block, self.bind_off, self.bind_size, writes)


class VulkanBackend:
    """Runs ops with the shaders of ``kernels.KERNELS`` on device arrays (the ``Backend``
    interface of backends/base.py)."""

    name = "vulkan"

    def __init__(self, ctx):
        self.ctx = ctx
        self.owner = self  # results live in this device's memory
        self.kernels = KERNELS
        self.align = max(16, ctx.limits["minStorageBufferOffsetAlignment"])
        self.max_range = ctx.limits["maxStorageBufferRange"]
        # Device memory short: cached copies of host tensors go before pending work is waited for
        ctx.memory.reclaim = self._reclaim

    def _reclaim(self) -> bool:
        dropped = residency.drop_all()
        return self.ctx.stream.reclaim() or bool(dropped)

    # ----------------------------------------------------------------------------- memory
    def empty_array(self, shape: tuple, npdtype) -> np.ndarray:
        npdtype = np.dtype(npdtype)
        n = 1
        for s in shape:
            n *= s
        owner = self.ctx.memory.alloc(max(n * npdtype.itemsize, 4))
        return owner[: n * npdtype.itemsize].view(npdtype).reshape(shape)

    def operand(self, arr: np.ndarray) -> Operand:
        """Binding and element layout of a device array (any strides, incl. 0 and negative)."""
        mem = self.ctx.memory
        if mem.poisoned:
            mem.check(arr)
        blk, byte_off = mem.locate(arr)
        item = arr.itemsize
        lo = hi = 0
        if arr.flags.c_contiguous:
            hi = arr.nbytes - item if arr.size else 0
        else:
            for s, st in zip(arr.shape, arr.strides):
                if s == 0:
                    lo = hi = 0
                    break
                if st < 0:
                    lo += (s - 1) * st
                else:
                    hi += (s - 1) * st
        start = byte_off + lo
        end = byte_off + hi + item
        bind_off = (start // self.align) * self.align
        size = max(end - bind_off, 4)
        size = -(-size // 4) * 4
        if size > self.max_range:
            raise DeviceError(
                f"a tensor of {arr.nbytes / 2**20:.0f} MiB exceeds this device's largest "
                f"storage binding ({self.ctx.limits['maxStorageBufferRange'] / 2**20:.0f} MiB); "
                "the op has no chunked variant yet — run it on the CPU "
                "(gpucore.device_policy('cpu'))"
            )
        op = Operand()
        op.block = blk
        op.bind_off = bind_off
        op.bind_size = min(size, blk.size - bind_off)
        op.offset = (byte_off - bind_off) // item
        op.shape = arr.shape
        op.strides = tuple([st // item for st in arr.strides])
        op.arr = arr
        return op

    # ----------------------------------------------------------------------------- transfers
    def upload(self, arr: np.ndarray, dtype) -> np.ndarray:
        """A device copy of a host array (contiguous). Inside a capture for replay the copy is
        a recorded command from a constant the capture keeps: every replay starts the tensor
        from these values again, even when the graph later writes it in place."""
        if self.ctx.stream.capture is not None and arr.size:
            return self._captured_upload(arr, dtype)
        out = self.empty_array(arr.shape, _tagged(arr, dtype))
        # No wait before writing: a fresh range is never used by a pending command (frames keep
        # the arrays their commands use alive, so their ranges are not reused until done).
        np.copyto(out, arr)
        if out.size:
            self._push_staging(out)
        self.ctx.bytes_uploaded += arr.nbytes
        return out

    def _captured_upload(self, arr: np.ndarray, dtype) -> np.ndarray:
        const = self.upload_constant(arr, dtype)
        out = self.empty_array(arr.shape, const.dtype)
        cb, coff = self.ctx.memory.locate(const)
        ob, ooff = self.ctx.memory.locate(out)
        self.ctx.stream.copy(cb.buffer, coff, ob.buffer, ooff, arr.nbytes, ob, keep=(const, out))
        return out

    def upload_constant(self, arr: np.ndarray, dtype=None) -> np.ndarray:
        """A device copy of ``arr`` written by the host now (outside any command stream);
        ``dtype``: its gpucore dtype, when it may be uint16 (whose device arrays are tagged)."""
        const = self.empty_array(arr.shape, _tagged(arr, dtype))
        np.copyto(const, arr)
        self._push_staging(const)
        self.ctx.bytes_uploaded += arr.nbytes
        return const

    def _push_staging(self, arr: np.ndarray):
        blk, off = self.ctx.memory.locate(arr)
        if blk.staging is not None:
            self.ctx.stream.copy(
                blk.staging.buffer, off, blk.buffer, off, arr.nbytes, blk, keep=(arr,)
            )

    def host_view(self, arr: np.ndarray) -> np.ndarray:
        """arr, readable by the host: pending work finished (and downloaded when staged).
        Raises DeviceError once the context refuses device work (device lost, forked child)."""
        ctx = self.ctx
        if ctx.fault is not None:
            ctx.fault.refuse()
        if ctx.stream.capture is not None:
            raise host_sync_error()
        if ctx.memory.poisoned:
            ctx.memory.check(arr)
        blk, off = ctx.memory.locate(arr)
        if blk.staging is not None and arr.size:
            op = self.operand(arr)
            ctx.stream.copy(
                blk.buffer, op.bind_off, blk.staging.buffer, op.bind_off, op.bind_size, blk.staging
            )
        if ctx.stream.pending():
            ctx.stream.synchronize()
        ctx.bytes_downloaded += arr.nbytes
        return arr

    def before_host_write(self, arr: np.ndarray):
        """Call before the host writes into device memory (in-place ops run on the host)."""
        if self.ctx.fault is not None:
            self.ctx.fault.refuse()
        if self.ctx.stream.capture is not None:
            raise host_sync_error()
        if self.ctx.memory.poisoned:
            self.ctx.memory.check(arr)
        if self.ctx.stream.pending():
            self.ctx.stream.synchronize()

    def after_host_write(self, arr: np.ndarray):
        blk, _ = self.ctx.memory.locate(arr)
        if blk.staging is not None:
            op = self.operand(arr)
            self.ctx.stream.copy(
                blk.staging.buffer, op.bind_off, blk.buffer, op.bind_off, op.bind_size, blk
            )

    # ----------------------------------------------------------------------------- ops
    def supports(self, op, inputs, specs, direct: bool = False) -> bool:
        """True when a shader exists for this op and these dtypes (float32 data, bool/int64
        where the kernel documents it), and every tensor fits one storage binding unless the
        kernel runs in bands of rows. What the device cannot run goes to the C extension.
        ``direct``: the kernel itself takes these dtypes, without ``run``'s widening of float16 /
        bfloat16 (for callers of ``KERNELS`` that bypass ``run``: the runtime's executor)."""
        k = self.kernels.get(op.name)
        if k is None:
            return False
        if (
            not getattr(k, "chunk_rows", False)
            and not getattr(k, "any_size", False)  # the kernel splits its own dispatches
            and not self._fits_binding(inputs, specs)
        ):
            return False
        speclist = specs if isinstance(specs, list) else [specs]
        if getattr(k, "float64_math", False) and not self.ctx.float64:
            if _has_float64(inputs, speclist):  # no shaderFloat64 / shaderInt64 on this device
                return False
        if _accepts(k, inputs, specs):
            return True
        # float16 / bfloat16 through the float32 kernel (see the module docstring)
        if direct or not _widens(k) or not _has_half(inputs, speclist):
            return False
        ins, outs = _widened(inputs, speclist)
        return _accepts(k, ins, outs if isinstance(specs, list) else outs[0])

    def run(self, op, specs, inputs, attrs):
        fn = self.kernels[op.name]
        multi = isinstance(specs, list)
        if not multi:
            specs = [specs]
        ins = [self.to_device(t) for t in inputs]
        half_out = None
        if _widens(fn) and _has_half(inputs, specs):
            # widen: the kernel computes in float32 between casts, as the CPU backend does
            half_out = [dt for _, dt in specs]
            ins = [self._widen(a, t._dtype) for a, t in zip(ins, inputs)]
            specs = _widened((), specs)[1]
        outs = [self.empty_array(shape, dt.np) for shape, dt in specs]
        self.ctx.stream.label = op.name
        if not multi and getattr(fn, "chunk_rows", False) and self._too_big(outs[0], ins):
            self._run_in_bands(fn, outs[0], ins, attrs)
        else:
            fn(self, outs if multi else outs[0], *ins, **attrs)
        if half_out is not None:
            outs = [self._narrow(o, dt) for o, dt in zip(outs, half_out)]
        return tuple(outs)

    def run_widened(self, fn, out, arrays: list, attrs: dict) -> list:
        """Record float32 kernel ``fn`` on device arrays that include float16 / bfloat16 ones
        (an untagged uint16 array is bfloat16, dtypes.is_uint16): half inputs widened, half
        outputs (``out``: an array or a list) written through float32 temporaries rounded back.
        For callers of ``KERNELS`` that bypass ``run`` (the runtime's executor) where
        ``supports`` says True but ``supports(direct=True)`` False. Returns the temporaries (a
        captured replay keeps them)."""
        ins = [self._widen(a, _half_of(a)) for a in arrays]
        outs = out if isinstance(out, list) else [out]
        wide = [self.empty_array(o.shape, np.float32) if _half_of(o) else o for o in outs]
        fn(self, wide if isinstance(out, list) else wide[0], *ins, **attrs)
        for o, w in zip(outs, wide):
            if w is not o:
                cast_array(self, o, w)
        return ins + wide

    def _widen(self, arr: np.ndarray, dtype) -> np.ndarray:
        """A float32 device copy of a float16 / bfloat16 device array (others as they are)."""
        if dtype not in _HALF:
            return arr
        out = self.empty_array(arr.shape, np.float32)
        cast_array(self, out, arr)
        return out

    def _narrow(self, arr: np.ndarray, dtype) -> np.ndarray:
        """A float32 result rounded to ``dtype`` when that is float16 / bfloat16."""
        if dtype not in _HALF:
            return arr
        out = self.empty_array(arr.shape, dtype.np)
        cast_array(self, out, arr)
        return out

    def run_inplace(self, op, arrays: list, attrs: dict) -> None:
        """Record in-place op ``op`` (an optimizer update) on device arrays it writes into."""
        self.ctx.stream.label = op.name
        self.kernels[op.name](self, None, *arrays, **attrs)

    def _fits_binding(self, inputs, specs) -> bool:
        # float16 / bfloat16 may run widened to float32: size them as such
        lim = self.max_range - self.align
        for t in inputs:
            if t._data.nbytes * (2 if t._dtype in _HALF else 1) > lim:
                return False
        for shape, dt in specs if isinstance(specs, list) else [specs]:
            n = 4 if dt in _HALF else dt.itemsize
            for d in shape:
                n *= d
            if n > lim:
                return False
        return True

    def _too_big(self, out, ins) -> bool:
        lim = self.max_range - self.align
        return out.nbytes > lim or any(a.nbytes > lim for a in ins)

    def _run_in_bands(self, fn, out, ins, attrs):
        """Run a row-wise kernel on bands of rows that each fit one storage binding.

        Band starts are 256-byte aligned in every full-size operand, so kernels that write
        whole 32-bit words (packed bools) never touch a neighbouring band."""
        import math

        if out.ndim == 0:
            fn(self, out, *ins, **attrs)
            return
        rows = out.shape[0]
        full = [a for a in ins if a.ndim == out.ndim and a.shape[0] == rows and rows > 1]
        row_bytes = max(
            [out.nbytes // max(rows, 1)]
            + [abs(a.strides[0]) if a.flags.c_contiguous else a.nbytes // rows for a in full]
        )
        if row_bytes == 0:
            fn(self, out, *ins, **attrs)
            return
        band = (self.max_range - 2 * self.align) // row_bytes
        step = 256 // math.gcd(256, max(1, out.nbytes // rows))
        band = (band // step) * step
        if band < 1:
            raise DeviceError(
                f"one row of {row_bytes} bytes exceeds this device's largest storage binding "
                f"({self.max_range} bytes); run this op on the CPU (gpucore.device_policy('cpu'))"
            )
        for i in range(0, rows, band):
            j = min(rows, i + band)
            sub = [
                a[i:j] if (a.ndim == out.ndim and a.shape[0] == rows and rows > 1) else a
                for a in ins
            ]
            fn(self, out[i:j], *sub, **attrs)

    def to_device(self, t) -> np.ndarray:
        """``t``'s data as an array of this device, to be read (never written) by a kernel: its
        own for a device tensor, else a copy (reused while a host storage is unchanged, see
        residency.py)."""
        if t._dev is self:
            return t._data
        cap = self.ctx.stream.capture
        if cap is not None and t._dev is None:
            # a constant of the graph: replays check that the host has not written it since
            cap.host_inputs.append((t._vbox, t._vbox[0], tuple(t.shape)))
        if t._dev is None and residency.enabled:
            arr = residency.device_copy(self, t)
            if arr is not None:
                return arr
        data = t._data if t._dev is None else t._dev.host_view(t._data)
        # np.require, not np.ascontiguousarray: the latter turns a 0-d array into shape (1,)
        return self.upload(np.require(data, requirements="C"), t._dtype)

    def clone_array(self, arr: np.ndarray) -> np.ndarray:
        """A contiguous device copy of a device array."""
        out = self.empty_array(arr.shape, arr.dtype)
        if _device_copy_ok(arr):
            copy_array(self, out, arr)
        else:
            self.host_copy(out, self.host_view(arr).copy())
        return out

    def copy_into(self, dst: np.ndarray, src_tensor) -> None:
        """dst (a device array, any strides) = the values of ``src_tensor`` (same shape)."""
        if not dst.flags.writeable:
            raise ValueError("assignment destination is read-only")
        if dst.size and 0 in dst.strides and dst.ndim:
            raise ValueError("the destination has overlapping elements")
        self.ctx.memory.cure(dst)  # overwritten whole: whatever undefined values it held go
        src = self.to_device(src_tensor)
        if src.dtype == dst.dtype and _device_copy_ok(dst) and _device_copy_ok(src):
            copy_array(self, dst, src)
        else:
            self.host_copy(dst, self.host_view(src))

    def poison(self, arr: np.ndarray, reason: str) -> None:
        """Refuse every later use of ``arr``'s memory with DeviceError(reason) (see memory.py)."""
        self.ctx.memory.poison(arr, reason)

    def host_copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        """dst (device) = src (host array), written by the host after pending work is done."""
        self.before_host_write(dst)
        np.copyto(dst, src)
        self.after_host_write(dst)

    def stats(self) -> dict:
        ctx = self.ctx
        s = dict(ctx.stream.stats)
        s.update(
            bytes_uploaded=ctx.bytes_uploaded,
            bytes_downloaded=ctx.bytes_downloaded,
            bytes_reused=ctx.bytes_reused,
            tensors_migrated=ctx.tensors_migrated,
            live_bytes=ctx.memory.live_bytes,
            peak_bytes=ctx.memory.peak_bytes,
            block_bytes=ctx.memory.block_bytes,
            reclaims=ctx.memory.reclaims,
            timeouts=ctx.stream.timeouts,
            pipelines_created=ctx.pipelines.created,
            pipeline_seconds=ctx.pipelines.create_seconds,
            pipeline_cache_bytes=ctx.pipelines.loaded_bytes,
            pipelines_prewarmed=ctx.pipelines.prewarmed,
        )
        return s


def _widens(k) -> bool:
    """Whether the backend runs float16 / bfloat16 through kernel ``k`` widened to float32: not
    for kernels that read and write 16-bit storage themselves (``half``) nor for the in-place
    optimizer updates (``widen = False``)."""
    return getattr(k, "widen", True) and not getattr(k, "half", False)


def _tagged(arr: np.ndarray, dtype):
    """The numpy dtype of the device copy of host array ``arr`` of gpucore dtype ``dtype``:
    uint16's tagged one (a host array may have lost the tag; an untagged uint16 array on the
    device is bfloat16 to the kernels, see gpucore.dtypes), else arr's."""
    return D.uint16.np if dtype is D.uint16 else arr.dtype


def _half_of(arr: np.ndarray):
    """float16 / bfloat16 for such a device array (a tagged uint16 one is uint16), else None."""
    return None if D.is_uint16(arr) else _HALF_NP.get(arr.dtype)


def _accepts(k, inputs, specs) -> bool:
    """The kernel's own rule (``accepts``), else the default: float32 inputs and outputs."""
    check = getattr(k, "accepts", None)
    if check is not None:
        return check(inputs, specs)
    for t in inputs:
        if t._dtype is not D.float32:
            return False
    for _, dt in specs if isinstance(specs, list) else [specs]:
        if dt is not D.float32:
            return False
    return True
