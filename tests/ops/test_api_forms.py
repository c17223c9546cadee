"""The public forms' first call (gpucore/ops/api.py ``_checked``): a form is compiled when it is
first called, through a trampoline; that call must behave as the later ones: the same checks and
errors, the warnings located at the caller's line, and several threads calling it at once."""

from __future__ import annotations

import builtins
import sys
import threading
import warnings

import pytest

import gpucore
from gpucore.ops import api
from gpucore.tensor import Tensor


def _warns(input: Tensor, *, alpha: float = 1.0):
    # stacklevel 3: this function, its public form, the caller (as the ops warn)
    warnings.warn("deprecated", UserWarning, stacklevel=3)
    return alpha


def test_the_first_calls_warning_names_the_callers_line():
    form = api.checked("warns", _warns)  # a fresh form: its first call is below
    x = gpucore.ones(3)
    seen = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            line = sys._getframe().f_lineno + 1
            assert form(x, alpha=2.0) == 2.0
        seen.append([(r.filename, r.lineno) for r in w])
    assert seen == [[(__file__, line)]] * 2


def test_an_op_warns_at_the_callers_line_on_its_first_call():
    # gpucore.cross without dim on 3 x 3 inputs: PyTorch's deprecation warning (first call in
    # this process unless another test made it: the check above covers a fresh form)
    a = gpucore.ones(3, 3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        gpucore.cross(a, a)
    assert [(r.filename, r.lineno) for r in w] == [(__file__, line)]


def _plain(input: Tensor, *, alpha: float = 1.0):
    return alpha


def _defaults(input: Tensor, other: Tensor | None = None, /, *rest, scale=2, **kw):
    return other, rest, scale, kw


def test_the_first_call_checks_and_binds_as_the_compiled_form():
    x = gpucore.ones(2)
    for first in (True, False):  # each case once through the trampoline, then compiled
        forms = [api.checked("defaults", _defaults) for _ in range(4)]
        if not first:
            for f in forms:
                f(x)
        assert forms[0](x, None, 1, 2, scale=3, k=4) == (None, (1, 2), 3, {"k": 4})
        with pytest.raises(gpucore.ArgumentTypeError, match=r"^defaults\(\): argument 'other'"):
            forms[1](x, "y")
        with pytest.raises(TypeError, match=r"^_defaults\(\) missing 1 required positional"):
            forms[2]()
        assert forms[3](x) == (None, (), 2, {})


def test_threads_making_a_forms_first_call_at_once_compile_it_once(monkeypatch):
    # exec instrumented: each build waits (up to 1 s) for a second one to exec too, which the
    # form's compile-once lock never lets happen; sharing the form's namespace unlocked made the
    # two builds' results collide there (a KeyError in one thread)
    execs = []
    both = threading.Barrier(2, timeout=1.0)

    def slow_exec(*args):
        builtins.exec(*args)
        execs.append(1)
        try:
            both.wait()
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(api, "exec", slow_exec, raising=False)
    form, x = api.checked("twice", _plain), gpucore.ones(1)
    start, got = threading.Barrier(2), []

    def call():
        start.wait()
        try:
            got.append(form(x, alpha=5.0))
        except Exception as e:  # noqa: BLE001 - reported by the assert below
            got.append(repr(e))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [5.0, 5.0] and len(execs) == 1


def test_many_threads_on_many_fresh_forms():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        x, n, bad = gpucore.ones(1), 8, []
        for _ in range(100):
            form, start = api.checked("many", _plain), threading.Barrier(n)

            def call(form=form, start=start):
                start.wait()
                try:
                    if form(x) != 1.0:
                        bad.append("wrong result")
                except Exception as e:  # noqa: BLE001 - reported by the assert below
                    bad.append(repr(e))

            threads = [threading.Thread(target=call) for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(old)
    assert bad == []
