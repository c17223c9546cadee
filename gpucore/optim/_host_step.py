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


def _no_device_update() -> bool:
    """Whether no parameter update could be moved to a device (dispatch.place_update's test)."""
    if dispatch.get_device_policy() != "auto":
        return True
    vb = dispatch._vulkan_cache.get("auto")
    return vb is None or vb is dispatch._UNSET


def host_adam_group(opt, group: dict, params: list) -> bool:
    """Run Adam's update of ``params`` (the group's parameters that have a gradient) in one
    ``adam_step_multi`` call and return True; or return False, having changed nothing, where the
    general path must run (see the module docstring)."""
    if dispatch.profiling[0] or dispatch._trace.records is not None or not _no_device_update():
        return False
    amsgrad = bool(group["amsgrad"])
    state_of = opt.state
    ps, gs, ms, vs, xs, steps, states, written = [], [], [], [], [], [], [], []
    for p in params:
        st = state_of[p]
        m = st.get("exp_avg")
        v = st.get("exp_avg_sq")
        step = st.get("step")
        if m is None or v is None or type(step) is not int:
            return False  # (the first step creates the state: the general path)
        g = p._grad
        dt = p._dtype
        pa, ga, ma, va = p._data, g._data, m._data, v._data
        shape = pa.shape
        if (
            (dt is not _F32 and dt is not _F64)
            or p._dev is not None
            or g._dev is not None
            or m._dev is not None
            or v._dev is not None
            or g._dtype is not dt
            or m._dtype is not dt
            or v._dtype is not dt
            or ga.shape != shape
            or ma.shape != shape
            or va.shape != shape
        ):
            return False
        if amsgrad:
            x = st.get("max_exp_avg_sq")
            if x is None or x._dev is not None or x._dtype is not dt or x._data.shape != shape:
                return False
            xs.append(x._data)
            written.append(x)
        if not ga.flags.c_contiguous:
            ga = ga.copy()
        ps.append(pa)
        gs.append(ga)
        ms.append(ma)
        vs.append(va)
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
    for t in written:
        t._vbox[0] += 1
    for st, step in zip(states, steps):
        st["step"] = step
    return True


def host_sgd_group(opt, group: dict, params: list) -> bool:
    """SGD's update of ``params`` in one ``sgd_step_multi`` call (True), or False, having changed
    nothing, where the general path must run (the module docstring; a momentum buffer made by
    this step, ``first``, is the general path's too)."""
    if dispatch.profiling[0] or dispatch._trace.records is not None or not _no_device_update():
        return False
    momentum = float(group["momentum"])
    state_of = opt.state
    ps, gs, bs, written = [], [], [], []
    for p in params:
        g = p._grad
        dt = p._dtype
        pa, ga = p._data, g._data
        shape = pa.shape
        if (
            (dt is not _F32 and dt is not _F64)
            or p._dev is not None
            or g._dev is not None
            or g._dtype is not dt
            or ga.shape != shape
        ):
            return False
        if momentum != 0:
            b = state_of[p].get("momentum_buffer")
            if b is None or b._dev is not None or b._dtype is not dt or b._data.shape != shape:
                return False
            bs.append(b._data)
            written.append(b)
        if not ga.flags.c_contiguous:
            ga = ga.copy()
        ps.append(pa)
        gs.append(ga)
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
    for t in written:
        t._vbox[0] += 1
    return True
