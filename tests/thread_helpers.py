"""Running test code on several threads at once (import thread_helpers): ``run_threads`` starts
each callable in its own thread and re-raises in the main thread what any of them raised;
``TIMEOUT`` is how long a test's barriers wait before it fails (a thread that never came)."""

from __future__ import annotations

import threading

TIMEOUT = 30  # seconds


def run_threads(*targets) -> None:
    """Run each callable in its own (daemon) thread; fail if one is still running after
    2 * TIMEOUT, re-raise the first exception any of them raised."""
    errors = []

    def wrap(fn):
        def go():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported in the main thread
                errors.append(e)

        return go

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
