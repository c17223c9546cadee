"""The multi-tensor optimizer entries of gpucore._cpu (sgd_step_multi, adam_step_multi,
rmsprop_step_multi): bitwise the same as one single-tensor call per parameter for every option
combination, in float32 and float64, on sizes around the vector width and above the threading
grain, for any thread count; every check made before any memory is written, with messages that
name the list and the index."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpucore import _cpu as C

FLOATS = [np.float32, np.float64]
SIZES = [1, 7, 65, 100003]  # scalar tails, one vector + tail, above one thread's grain in total
STEPS = 3


def arrays(sizes, dtype, nstate, seed=0):
    """Parameters, STEPS gradients each, and nstate state buffers per parameter (random, and
    non-negative where they are running averages of squares)."""
    rng = np.random.default_rng(seed)
    ps = [rng.standard_normal(n).astype(dtype) for n in sizes]
    gs = [[rng.standard_normal(n).astype(dtype) for n in sizes] for _ in range(STEPS)]
    st = [[np.abs(rng.standard_normal(n)).astype(dtype) for n in sizes] for _ in range(nstate)]
    return ps, gs, st


def case_id(kw):
    return "-".join(f"{k}{v}" for k, v in kw.items())


def copies(lists):
    return [[a.copy() for a in lst] for lst in lists]


def assert_bitwise(got, want):
    for g_list, w_list in zip(got, want):
        for g, w in zip(g_list, w_list):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


# ----------------------------------------------------------------------------- SGD
SGD_CASES = [
    dict(momentum=m, dampening=d, weight_decay=wd, nesterov=ne, maximize=mx)
    for m, d, wd, ne, mx in itertools.product((0.0, 0.9), (0.0, 0.25), (0.0, 0.1), (0, 1), (0, 1))
    if not (ne and (m == 0.0 or d != 0.0))  # Nesterov needs momentum and no dampening
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", SGD_CASES, ids=lambda kw: case_id(kw))
def test_sgd_multi_equals_single_calls(dtype, kw):
    ps, gs, (bufs,) = arrays(SIZES, dtype, 1)
    args = (
        0.05,
        kw["momentum"],
        kw["dampening"],
        kw["weight_decay"],
        kw["nesterov"],
        kw["maximize"],
    )
    single, multi = copies([ps, bufs]), copies([ps, bufs])
    for t in range(STEPS):
        # per-parameter first flags: a buffer created at a later step than the others
        first = [int(t == 0), int(t == 1), int(t == 0), 0]
        for j in range(len(SIZES)):
            buf = single[1][j] if kw["momentum"] else None
            C.sgd_step(single[0][j], gs[t][j], buf, *args, first[j])
        C.sgd_step_multi(multi[0], gs[t], multi[1] if kw["momentum"] else None, *args, first)
        assert_bitwise(multi, single)
    # one flag for all parameters, and a tuple for a list
    C.sgd_step_multi(tuple(multi[0]), tuple(gs[0]), multi[1], *args, 0)
    for j in range(len(SIZES)):
        C.sgd_step(single[0][j], gs[0][j], single[1][j], *args, 0)
    assert_bitwise(multi, single)


# ----------------------------------------------------------------------------- Adam
ADAM_CASES = [
    dict(betas=b, weight_decay=wd, decoupled=dec, amsgrad=ams, maximize=mx)
    for b, wd, dec, ams, mx in itertools.product(
        ((0.9, 0.999), (0.3, 0.8)), (0.0, 0.1), (0, 1), (False, True), (0, 1)
    )
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", ADAM_CASES, ids=lambda kw: case_id(kw))
def test_adam_multi_equals_single_calls(dtype, kw):
    ps, gs, (m, v, vmax) = arrays(SIZES, dtype, 3)
    b1, b2 = kw["betas"]
    hp = (0.01, b1, b2, 1e-6, kw["weight_decay"], kw["decoupled"], kw["maximize"])
    single, multi = copies([ps, m, v, vmax]), copies([ps, m, v, vmax])
    for t in range(STEPS):
        steps = [t + 1, t + 5, t + 1, 2 * t + 3]  # PyTorch keeps one count per parameter
        for j in range(len(SIZES)):
            C.adam_step(
                single[0][j],
                gs[t][j],
                single[1][j],
                single[2][j],
                single[3][j] if kw["amsgrad"] else None,
                steps[j],
                *hp,
            )
        C.adam_step_multi(
            multi[0], gs[t], multi[1], multi[2], multi[3] if kw["amsgrad"] else None, steps, *hp
        )
        assert_bitwise(multi, single)


# ----------------------------------------------------------------------------- RMSprop
RMS_CASES = [
    dict(alpha=a, weight_decay=wd, centered=c, momentum=mo, maximize=mx)
    for a, wd, c, mo, mx in itertools.product(
        (0.99, 0.3), (0.0, 0.1), (False, True), (0.0, 0.9), (0, 1)
    )
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", RMS_CASES, ids=lambda kw: case_id(kw))
def test_rmsprop_multi_equals_single_calls(dtype, kw):
    ps, gs, (sq, gavg, buf) = arrays(SIZES, dtype, 3)
    gavg = [g * 0.1 for g in gavg]  # keep square_avg - grad_avg**2 positive
    hp = (0.01, kw["alpha"], 1e-6, kw["weight_decay"], kw["momentum"], kw["maximize"])
    single, multi = copies([ps, sq, gavg, buf]), copies([ps, sq, gavg, buf])
    for t in range(STEPS):
        for j in range(len(SIZES)):
            C.rmsprop_step(
                single[0][j],
                gs[t][j],
                single[1][j],
                single[2][j] if kw["centered"] else None,
                single[3][j] if kw["momentum"] else None,
                *hp,
            )
        C.rmsprop_step_multi(
            multi[0],
            gs[t],
            multi[1],
            multi[2] if kw["centered"] else None,
            multi[3] if kw["momentum"] else None,
            *hp,
        )
        assert_bitwise(multi, single)


# ----------------------------------------------------------------------------- calls
def test_optional_entries_may_be_none_one_by_one():
    # as the single entry: each parameter's optional buffer is its own choice
    ps, gs, (sq, gavg) = arrays([5, 9, 3], np.float64, 2)
    gavg = [g * 0.1 for g in gavg]
    hp = (0.01, 0.9, 1e-8, 0.0, 0.0, 0)
    mixed = [gavg[0].copy(), None, gavg[2].copy()]
    single, multi = copies([ps, sq]), copies([ps, sq])
    sg = [gavg[0].copy(), None, gavg[2].copy()]
    for j in range(3):
        C.rmsprop_step(single[0][j], gs[0][j], single[1][j], sg[j], None, *hp)
    C.rmsprop_step_multi(multi[0], gs[0], multi[1], mixed, None, *hp)
    assert_bitwise(multi + [[mixed[0], mixed[2]]], single + [[sg[0], sg[2]]])


def test_gradients_may_be_shared_between_parameters():
    ps, gs, (m, v) = arrays([6, 6], np.float32, 2)
    g = gs[0][0]
    single, multi = copies([ps, m, v]), copies([ps, m, v])
    for j in range(2):
        C.adam_step(
            single[0][j], g, single[1][j], single[2][j], None, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0
        )
    C.adam_step_multi(
        multi[0], [g, g], multi[1], multi[2], None, [1, 1], 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0
    )
    assert_bitwise(multi, single)


def test_momentum_zero_ignores_the_buffers():
    ps, gs, (bufs,) = arrays([4, 4], np.float32, 1)
    before = [b.copy() for b in bufs]
    C.sgd_step_multi(ps, gs[0], bufs, 0.1, 0.0, 0.0, 0.0, 0, 0, 1)
    assert_bitwise([bufs], [before])
    C.rmsprop_step_multi(
        ps, gs[0], [b.copy() for b in bufs], None, [None, None], 0.1, 0.9, 1e-8, 0.0, 0.0, 0
    )


def test_empty_lists_and_empty_parameters():
    C.sgd_step_multi([], [], None, 0.1, 0.0, 0.0, 0.0, 0, 0, 1)
    C.adam_step_multi([], [], [], [], None, [], 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0)
    C.rmsprop_step_multi((), (), (), None, None, 0.1, 0.9, 1e-8, 0.0, 0.0, 0)
    e = [np.zeros(0, np.float32) for _ in range(4)]
    p = np.ones(3, np.float32)
    C.adam_step_multi(
        [e[0], p],
        [e[1], np.ones(3, np.float32)],
        [e[2], np.zeros(3, np.float32)],
        [e[3], np.zeros(3, np.float32)],
        None,
        [1, 1],
        0.1,
        0.9,
        0.999,
        1e-8,
        0.0,
        0,
        0,
    )
    assert (p < 1).all()


def test_multidimensional_parameters():
    ps, gs, (m, v) = arrays([24, 10], np.float64, 2)
    shaped = [ps[0].reshape(2, 3, 4).copy(), ps[1].reshape(5, 2).copy()]
    grads = [gs[0][0].reshape(2, 3, 4), gs[0][1].reshape(5, 2)]
    C.adam_step_multi(
        shaped,
        grads,
        [m[0].reshape(2, 3, 4).copy(), m[1].reshape(5, 2).copy()],
        [v[0].reshape(2, 3, 4).copy(), v[1].reshape(5, 2).copy()],
        None,
        [1, 2],
        0.1,
        0.9,
        0.999,
        1e-8,
        0.0,
        0,
        0,
    )
    for j in range(2):
        C.adam_step(ps[j], gs[0][j], m[j], v[j], None, j + 1, 0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0)
        np.testing.assert_array_equal(shaped[j].reshape(-1), ps[j])


def test_results_do_not_depend_on_the_thread_count():
    sizes = [100003, 7, 300001, 65, 1]  # pieces of one parameter on several threads
    threads = C.info()["threads"]
    results = []
    for nt in (1, max(threads, 3)):
        C.set_num_threads(nt)
        try:
            ps, gs, (m, v, vmax, sq, gavg, buf, sbuf) = arrays(sizes, np.float32, 7)
            q, r = copies([ps, ps])
            for t in range(2):
                C.adam_step_multi(
                    ps, gs[t], m, v, vmax, [t + 1] * 5, 0.01, 0.9, 0.999, 1e-8, 0.1, 1, 0
                )
                C.rmsprop_step_multi(q, gs[t], sq, gavg, buf, 0.01, 0.99, 1e-8, 0.0, 0.9, 0)
                C.sgd_step_multi(r, gs[t], sbuf, 0.1, 0.9, 0.0, 0.0, 1, 0, int(t == 0))
            results.append((ps, m, v, vmax, q, sq, gavg, buf, r, sbuf))
        finally:
            C.set_num_threads(threads)
    assert_bitwise(*results)


# ----------------------------------------------------------------------------- checks
def _adam_lists(k=4, n=6, dtype=np.float32):
    rng = np.random.default_rng(1)
    return [[rng.standard_normal(n).astype(dtype) for _ in range(k)] for _ in range(4)]


HP = (0.1, 0.9, 0.999, 1e-8, 0.0, 0, 0)


def _adam(p, g, m, v, vmax=None, steps=None):
    C.adam_step_multi(p, g, m, v, vmax, [1] * len(p) if steps is None else steps, *HP)


def test_nothing_is_written_when_a_later_parameter_is_bad():
    p, g, m, v = _adam_lists()
    before = copies([p, m, v])
    v[3] = np.zeros(5, np.float32)
    with pytest.raises(ValueError):
        _adam(p, g, m, v)
    assert_bitwise([p, m, v[:3]], [before[0], before[1], before[2][:3]])


def test_list_checks():
    p, g, m, v = _adam_lists()
    with pytest.raises(TypeError, match=r"adam_step_multi: 'param' must be a list or tuple"):
        _adam(p[0], g, m, v, steps=[1] * 4)
    with pytest.raises(
        ValueError,
        match=r"adam_step_multi: 'grad' has 3 entries but 'param' "
        r"has 4",
    ):
        _adam(p, g[:3], m, v)
    with pytest.raises(ValueError, match=r"'max_exp_avg_sq' has 2 entries but 'param' has 4"):
        _adam(p, g, m, v, vmax=m[:2])
    with pytest.raises(ValueError, match=r"'step' has 3 entries but 'param' has 4"):
        _adam(p, g, m, v, steps=[1, 2, 3])
    with pytest.raises(TypeError, match=r"'step' must be a list or tuple of ints"):
        C.adam_step_multi(p, g, m, v, None, 1, *HP)
    with pytest.raises(ValueError, match=r"adam_step_multi: 'step\[2\]' must be >= 1, got 0"):
        _adam(p, g, m, v, steps=[1, 1, 0, 1])
    with pytest.raises(TypeError, match=r"'step\[1\]' must be an int"):
        _adam(p, g, m, v, steps=[1, 1.5, 1, 1])
    with pytest.raises(TypeError, match=r"'exp_avg' must be a list or tuple of arrays"):
        _adam(p, g, None, v)
    with pytest.raises(TypeError, match=r"takes exactly 13"):
        C.adam_step_multi(p, g, m, v, None, [1] * 4)
    sgd = (0.1, 0.9, 0.0, 0.0, 0, 0)
    with pytest.raises(TypeError, match=r"sgd_step_multi: 'momentum_buffer' must be a list"):
        C.sgd_step_multi(p, g, None, *sgd, 1)
    with pytest.raises(ValueError, match=r"'first' has 2 entries but 'param' has 4"):
        C.sgd_step_multi(p, g, m, *sgd, [1, 1])
    with pytest.raises(ValueError, match=r"'first\[3\]' must be 0 or 1, got 2"):
        C.sgd_step_multi(p, g, m, *sgd, [1, 1, 1, 2])
    with pytest.raises(ValueError, match=r"'first' must be 0 or 1, got 2"):
        C.sgd_step_multi(p, g, m, *sgd, 2)


def test_buffer_checks_name_the_list_and_the_index():
    p, g, m, v = _adam_lists()
    bad = list(m)
    bad[3] = np.zeros(10, np.float32)
    with pytest.raises(
        ValueError,
        match=r"adam_step_multi: 'exp_avg\[3\]' holds 10 elements but "
        r"'param\[3\]' holds 6",
    ):
        _adam(p, g, bad, v)
    # each parameter's buffers agree, but not with the other parameters'
    mixed = [list(lst) for lst in (p, g, m, v)]
    for lst in mixed:
        lst[1] = lst[1].astype(np.float64)
    with pytest.raises(TypeError, match=r"'param\[1\]' is float64 .* but 'param\[0\]' is float32"):
        _adam(*mixed)
    badg = list(g)
    badg[2] = g[2].astype(np.float64)
    with pytest.raises(TypeError, match=r"'grad\[2\]' must be float32"):
        _adam(p, badg, m, v)
    ints = list(p)
    ints[0] = p[0].astype(np.int32)
    with pytest.raises(TypeError, match=r"'param\[0\]' must be float32 .* or float64"):
        _adam(ints, g, m, v)
    strided = list(v)
    strided[2] = np.zeros(12, np.float32)[::2]
    with pytest.raises(
        ValueError,
        match=r"'exp_avg_sq\[2\]' \(shape \(6,\)\) must be "
        r"C-contiguous",
    ):
        _adam(p, g, m, strided)
    ro = list(m)
    ro[1] = m[1].copy()
    ro[1].flags.writeable = False
    with pytest.raises(ValueError, match=r"output 'exp_avg\[1\]' is read-only"):
        _adam(p, g, ro, v)
    rog = [a.copy() for a in g]
    for a in rog:
        a.flags.writeable = False
    _adam(p, rog, m, v)  # gradients are only read
    holes = list(m)
    holes[2] = None
    with pytest.raises(TypeError, match=r"'exp_avg\[2\]' must be a float buffer, got None"):
        _adam(p, g, holes, v)
    with pytest.raises(TypeError, match=r"'param\[1\]' must support the buffer protocol"):
        _adam([p[0], "x", p[2], p[3]], g, m, v)


def test_memory_shared_within_and_between_parameters():
    p, g, m, v = _adam_lists()
    with pytest.raises(ValueError, match=r"'param\[2\]' and 'exp_avg\[2\]' share memory"):
        _adam(p, g, [m[0], m[1], p[2], m[3]], v)
    with pytest.raises(ValueError, match=r"'grad\[1\]' and 'exp_avg_sq\[1\]' share memory"):
        _adam(p, g, m, [v[0], g[1], v[2], v[3]])
    # between parameters: a parameter twice, a state buffer of one the parameter of another,
    # a gradient that is another parameter's state, overlapping views of one array
    with pytest.raises(ValueError, match=r"'param\[\d\]' and 'param\[\d\]' share memory"):
        _adam([p[0], p[1], p[0], p[3]], g, m, v)
    with pytest.raises(ValueError, match=r"share memory"):
        _adam(p, g, [m[0], m[1], m[2], p[0]], v)
    with pytest.raises(ValueError, match=r"share memory"):
        _adam(p, [g[0], m[3], g[2], g[3]], m, v)
    base = np.zeros(9, np.float32)
    with pytest.raises(ValueError, match=r"share memory"):
        _adam([base[0:6], base[3:9]], g[:2], m[:2], v[:2])
    _adam(
        [base[0:3], base[3:6]], [g[0][:3], g[1][:3]], [m[0][:3], m[1][:3]], [v[0][:3], v[1][:3]]
    )  # adjacent, not overlapping


def test_hyper_parameters_are_checked_as_in_the_single_entries():
    p, g, m, v = _adam_lists()
    with pytest.raises(ValueError, match=r"adam_step_multi: 'lr' must be a finite number"):
        C.adam_step_multi(p, g, m, v, None, [1] * 4, float("nan"), 0.9, 0.999, 1e-8, 0.0, 0, 0)
    with pytest.raises(ValueError, match=r"adam_step_multi: betas must be in \[0, 1\)"):
        C.adam_step_multi(p, g, m, v, None, [1] * 4, 0.1, 1.0, 0.999, 1e-8, 0.0, 0, 0)
    with pytest.raises(ValueError, match=r"'eps' must be a finite number"):
        C.adam_step_multi(p, g, m, v, None, [1] * 4, 0.1, 0.9, 0.999, float("inf"), 0.0, 0, 0)
    with pytest.raises(ValueError, match=r"sgd_step_multi: 'lr' must be a finite number"):
        C.sgd_step_multi(p, g, None, -0.1, 0.0, 0.0, 0.0, 0, 0, 0)
    with pytest.raises(ValueError, match=r"sgd_step_multi: 'maximize' must be 0 or 1"):
        C.sgd_step_multi(p, g, None, 0.1, 0.0, 0.0, 0.0, 0, 2, 0)
    with pytest.raises(ValueError, match=r"rmsprop_step_multi: 'alpha' must be a finite number"):
        C.rmsprop_step_multi(p, g, m, None, None, 0.1, -1.0, 1e-8, 0.0, 0.0, 0)
    with pytest.raises(
        TypeError,
        match=r"rmsprop_step_multi: 'momentum_buffer\[0\]' must be a "
        r"float buffer, got None",
    ):
        C.rmsprop_step_multi(p, g, m, None, [None] * 4, 0.1, 0.9, 1e-8, 0.0, 0.9, 0)
