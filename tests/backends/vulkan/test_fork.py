"""Fork safety: a child forked from a process that used the Vulkan device gets a clear
DeviceError at once for device work (never a hang), runs new tensors on the CPU under 'auto', and
exits cleanly; the parent's device keeps working. Each program runs in a subprocess with a
timeout, and each child is waited for with a deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import textwrap

import pytest
from device_helpers import run_code

import gpucore

CHILD_CHECKS = """
    import os, sys, time, threading, numpy as np, gpucore as gc

    def child_checks(x):
        # x: a device tensor inherited from the parent
        out = []
        def err(fn):
            t0 = time.monotonic()
            try:
                fn()
                return 'no error'
            except gc.DeviceError as e:
                msg = str(e)
                fast = time.monotonic() - t0 < 2.0
                ok = 'initialised in the parent process' in msg and "'spawn'" in msg
                took = time.monotonic() - t0
                return 'clear' if ok and fast else f'slow or unclear ({took:.1f} s): {msg}'
        out.append(err(lambda: gc.ones(4096).to('vulkan')))
        out.append(err(lambda: x.numpy()))
        out.append(err(lambda: x + 1))
        with gc.device_policy('auto'):
            z = gc.full((128, 128), 3.0) * 2 + 1  # a new tensor: the CPU
        out.append(f'auto {z.device} {float(z.numpy()[5, 5])}')
        out.append(f'available {gc.vulkan.is_available()}')
        return ', '.join(out)

    def fork_and_check(x, exit_normally=False):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                msg = child_checks(x)
            except BaseException as e:
                msg = f'child raised {type(e).__name__}: {e}'
            os.write(w, msg.encode())
            os.close(w)
            if exit_normally:
                sys.exit(0)  # through atexit: the inherited context's shutdown must do nothing
            os._exit(0)
        os.close(w)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return 'child hung (killed after 20 s)'
        msg = os.read(r, 65536).decode()
        os.close(r)
        return f'{msg}; status {status}'

    EXPECT = 'clear, clear, clear, auto cpu 7.0, available False; status 0'
"""


def _check(code: str) -> str:
    res = run_code(textwrap.dedent(CHILD_CHECKS) + textwrap.dedent(code), timeout=90)
    assert res.returncode == 0, f"exit status {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr
    assert "child hung" not in res.stdout, res.stdout
    return res.stdout


def test_a_child_forked_after_device_use_fails_fast_and_clearly(vulkan):
    out = _check("""
        x = gc.tensor(np.arange(5000, dtype=np.float32)).to('vulkan')
        print('parent before', float((x * 2).numpy()[3]))
        got = fork_and_check(x)
        print('child:', got)
        print('as expected', got == EXPECT)
        print('parent after', float((x * 2).numpy()[3]))
        got = fork_and_check(x, exit_normally=True)
        print('normal exit as expected', got == EXPECT)
    """)
    assert "as expected True" in out, out
    assert "normal exit as expected True" in out, out
    assert "parent before 6.0" in out and "parent after 6.0" in out, out


def test_a_child_forked_while_another_thread_uses_the_device_does_not_hang(vulkan):
    # The old child hung on its first device op: a parent thread held the stream's lock (or
    # was waiting for a fence the child's driver, without the parent's threads, never signals).
    out = _check("""
        x = gc.randn(256, 256).to('vulkan')
        stop = False
        def busy():
            while not stop:
                (x @ x).sum().item()
                y = x * 2 + 1
        ts = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
        for t in ts: t.start()
        time.sleep(0.3)
        results = [fork_and_check(x) for _ in range(4)]  # forks at different moments
        stop = True
        for t in ts: t.join(30)
        print('children', results)
        print('all as expected', all(r == EXPECT for r in results))
        print('parent after', bool(((x * 2).numpy() == 2 * x.numpy()).all()))
    """)
    assert "all as expected True" in out, out
    assert "parent after True" in out, out


def test_multiprocessing_fork_workers_run_on_the_cpu_and_refuse_the_device(vulkan):
    out = _check("""
        import multiprocessing as mp

        def work(i):
            with gc.device_policy('auto'):
                v = float((gc.full((64, 64), float(i)) * 2 + 1).numpy()[0, 0])
            try:
                gc.ones(4096).to('vulkan')
                dev = 'no error'
            except gc.DeviceError as e:
                dev = 'clear' if "'spawn'" in str(e) else str(e)
            return v, dev

        if __name__ == '__main__':
            x = gc.ones(8192).to('vulkan')
            float((x * 2).sum().item())
            with mp.get_context('fork').Pool(2) as pool:
                got = pool.map_async(work, range(4)).get(timeout=30)
            print('workers', got)
            print('workers ok', got == [(2.0 * i + 1, 'clear') for i in range(4)])
    """)
    assert "workers ok True" in out, out


def test_the_vulkan_policy_is_refused_in_a_forked_child(vulkan):
    out = _check("""
        x = gc.ones(8192).to('vulkan')
        x.sum().item()
        pid = os.fork()
        if pid == 0:
            try:
                with gc.device_policy('vulkan'):
                    pass
                os._exit(3)
            except gc.DeviceError as e:
                os._exit(0 if 'forked child' in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print('child status', status)
    """)
    assert "child status 0" in out, out


def test_this_process_is_not_marked_forked(vulkan):
    # the at-fork hooks act only in children
    assert gpucore.dispatch.unusable_reason() == ""
    assert vulkan.ctx.fault is None
    assert float((gpucore.ones(4096) * 2).sum().item()) == pytest.approx(8192.0)
