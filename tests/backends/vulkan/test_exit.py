"""Interpreter exit while other threads still run Vulkan ops: the shutdown must not free what
they use. Each program runs several times in a subprocess (the crash was a race: SIGSEGV in 4-7 of
10 runs) and must exit with status 0, no signal and no traceback.
"""

from __future__ import annotations

from device_helpers import run_code

RUNS = 5


def exits_cleanly(code: str, runs: int = RUNS, expect: str = "") -> None:
    for i in range(runs):
        res = run_code(code)
        assert res.returncode == 0, (
            f"run {i + 1} of {runs}: exit status {res.returncode} (negative: killed by a "
            f"signal)\n{res.stdout}\n{res.stderr}"
        )
        assert "Traceback" not in res.stderr and "Fatal" not in res.stderr, res.stderr
        assert expect in res.stdout, res.stdout


def test_exit_while_a_daemon_thread_runs_matmuls(vulkan):
    # the reproducer: the 'auto' policy with the CPU-type device allowed
    exits_cleanly(
        """
        import threading, time, gpucore as gc
        x = gc.randn(512, 512)
        threading.Thread(
            target=lambda: [(x @ x).sum().item() for _ in iter(int, 1)], daemon=True
        ).start()
        time.sleep(0.5)
        print('exiting', (x @ x).device)
    """,
        expect="exiting vulkan",
    )


def test_exit_while_daemon_threads_allocate_record_and_read(vulkan):
    # several threads: fresh device memory, long batches, host reads and in-place host writes
    exits_cleanly(
        """
        import threading, time, numpy as np, gpucore as gc
        def churn(seed):
            rng = np.random.default_rng(seed)
            while True:
                a = gc.tensor(rng.standard_normal(20000).astype(np.float32)).to('vulkan')
                for _ in range(40):
                    a = (a * 0.5 + 1).tanh()
                a.numpy()
                b = gc.zeros(70000).to('vulkan')  # dedicated-size churn too
                b.add_(1)
        for s in range(3):
            threading.Thread(target=churn, args=(s,), daemon=True).start()
        time.sleep(0.5)
        with gc.device_policy('vulkan'):
            y = gc.ones(5000).to('vulkan') * 3  # pending, never read: left for the shutdown
        print('exiting')
    """,
        runs=3,
        expect="exiting",
    )


def test_device_calls_after_the_shutdown_get_a_clear_error(vulkan):
    # An atexit handler registered before gpucore's runs after its shutdown: reading a device
    # tensor there raises DeviceError instead of touching freed memory.
    exits_cleanly(
        """
        import atexit
        state = {}
        def late():
            try:
                print('late read', state['x'].numpy()[0])
            except gc.DeviceError as e:
                print('late error', 'shut down at interpreter exit' in str(e))
        atexit.register(late)
        import gpucore as gc
        state['x'] = gc.ones(5000).to('vulkan') * 2
        print('sum', state['x'].sum().item())
    """,
        runs=1,
        expect="late error True",
    )
