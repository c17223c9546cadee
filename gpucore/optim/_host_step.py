"""Adam's, AdamW's and SGD's step for a group of host parameters in one loop and one C call.

The general path (Optimizer._step_counted_group -> Adam._tensors -> Optimizer._buffer ->
ops.optim.foreach_update -> foreach_arrays, place_update; SGD's likewise) makes four or five
Python calls per parameter to build what ``adam_step_multi`` / ``sgd_step_multi`` take; a
training step of a small model spends more time there than in the update. ``host_adam_group``
and ``host_sgd_group`` do the same work in one pass over the parameters for the case every step
after the first meets, and hand anything else to the general path before they have written
anything:

- every parameter a host float32 / float64 tensor, its gradient of the same dtype and shape
  (copied when not contiguous, as foreach_arrays does), its state buffers (Adam's ``exp_avg`` /
  ``exp_avg_sq``, and ``max_exp_avg_sq`` with amsgrad; SGD's ``momentum_buffer`` when momentum
  is not 0) host tensors of its dtype and shape, Adam's ``step`` an int;
- no parameter listed twice, no optimizer subclass overriding how the tensors are gathered, no
  Vulkan device the 'auto' policy could move a parameter to (dispatch.place_update), no profiler
  or trace_ops watching (their events are the general path's);
- the C entry accepts the arrays (it checks everything again, contiguity of the buffers and
  memory shared between parameters included, and refuses before writing anything).

Then they bump the version counters of every parameter and buffer (and Adam stores the step
counts), as foreach_update and _step_counted_group do: the same bits and the same visible state.
"""

from __future__ import annotations

from .. import _cpu, dispatch
from .. import dtypes as D

_F32, _F64 = D.float32, D.float64


def _host_update_ok() -> bool:
    """No profiler or trace_ops watching (their events are the general path's), and no Vulkan
    device the 'auto' policy could move a parameter update to (dispatch.place_update's test)."""
    if dispatch.profiling[0] or dispatch._trace.records is not None:
        return False
    if dispatch.get_device_policy() != "auto":
        return True
    vb = dispatch._vulkan_cache.get("auto")
    return vb is None or vb is dispatch._UNSET


def _param_arrays(p):
    """(p's array, its gradient's C-contiguous array) for a host float32 / float64 parameter
    whose gradient has its dtype and shape, else None (the gradient copied when strided, as
    foreach_arrays does)."""
    g = p._grad
    dt = p._dtype
    if (dt is not _F32 and dt is not _F64) or p._dev is not None or g._dev is not None:
        return None
    ga = g._data
    if g._dtype is not dt or ga.shape != p._data.shape:
        return None
    return p._data, ga if ga.flags.c_contiguous else ga.copy()


def _state_buffer(st: dict, key: str, p):
    """st[key] when it is a host tensor of p's dtype and shape, else None."""
    b = st.get(key)
    if b is None or b._dev is not None or b._dtype is not p._dtype:
        return None
    return b if b._data.shape == p._data.shape else None


def _finish(written: list) -> None:
    # the version counters foreach_update moves
    for t in written:
        t._vbox[0] += 1


def host_adam_group(opt, group: dict, params: list) -> bool:
    """Run Adam's update of ``params`` (the group's parameters that have a gradient) in one
    ``adam_step_multi`` call and return True; or return False, having changed nothing, where the
    general path must run (see the module docstring)."""
    if not _host_update_ok():
        return False
    amsgrad = bool(group["amsgrad"])
    state_of = opt.state
    ps, gs, ms, vs, xs, steps, states, written = [], [], [], [], [], [], [], []
    for p in params:
        st = state_of[p]
        step = st.get("step")
        if type(step) is not int:
            return False  # (the first step creates the state: the general path)
        arrays = _param_arrays(p)
        m = _state_buffer(st, "exp_avg", p)
        v = _state_buffer(st, "exp_avg_sq", p)
        if arrays is None or m is None or v is None:
            return False
        if amsgrad:
            x = _state_buffer(st, "max_exp_avg_sq", p)
            if x is None:
                return False
            xs.append(x._data)
            written.append(x)
        ps.append(arrays[0])
        gs.append(arrays[1])
        ms.append(m._data)
        vs.append(v._data)
        steps.append(step + 1)
        states.append(st)
        written.append(p)
        written.append(m)
        written.append(v)
    if len({id(p) for p in params}) != len(params):
        return False  # a parameter listed twice is updated twice, one after the other
    beta1, beta2 = group["betas"]
    try:
        _cpu.adam_step_multi(  # (read from the module at each call: tests count its calls)
            ps,
            gs,
            ms,
            vs,
            xs if amsgrad else None,
            steps,
            float(group["lr"]),
            float(beta1),
            float(beta2),
            float(group["eps"]),
            float(group["weight_decay"]),
            int(bool(group["decoupled_weight_decay"])),
            int(bool(group["maximize"])),
        )
    except ValueError:  # refused before writing anything (shared memory, a strided buffer)
        return False
    _finish(written)
    for st, step in zip(states, steps):
        st["step"] = step
    return True


def host_sgd_group(opt, group: dict, params: list) -> bool:
    """SGD's update of ``params`` in one ``sgd_step_multi`` call (True), or False, having changed
    nothing, where the general path must run (the module docstring; a momentum buffer made by
    this step, ``first``, is the general path's too)."""
    if not _host_update_ok():
        return False
    momentum = float(group["momentum"])
    state_of = opt.state
    ps, gs, bs, written = [], [], [], []
    for p in params:
        arrays = _param_arrays(p)
        if arrays is None:
            return False
        if momentum != 0:
            b = _state_buffer(state_of[p], "momentum_buffer", p)
            if b is None:
                return False
            bs.append(b._data)
            written.append(b)
        ps.append(arrays[0])
        gs.append(arrays[1])
        written.append(p)
    if len({id(p) for p in params}) != len(params):
        return False
    try:
        _cpu.sgd_step_multi(  # (read from the module at each call: tests count its calls)
            ps,
            gs,
            bs if momentum != 0 else None,
            float(group["lr"]),
            momentum,
            float(group["dampening"]),
            float(group["weight_decay"]),
            int(bool(group["nesterov"])),
            int(bool(group["maximize"])),
            0,
        )
    except ValueError:
        return False
    _finish(written)
    return True
