#!/usr/bin/env bash
# Run the whole test suite (sets everything up first; safe to run again).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# graphviz: the DOT export test renders with dot; the arm64 cross compiler, its libc and qemu-user:
# tests/backends/cpu/test_neon.py builds the NEON kernels and runs their checks under emulation;
# valgrind and pkg-config: tests/capi runs the C API programs under valgrind and builds with pkg-config
export GPUCORE_APT_EXTRA="${GPUCORE_APT_EXTRA:-graphviz gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user valgrind pkg-config}"
source "$ROOT/tools/setup_env.sh"
cd "$ROOT"
# GPUCORE_TEST_WORKERS=split (what .ci/run sets): two plain pytest processes side by side, no
# xdist scheduler: the suites that mostly wait on compilers, qemu, valgrind and mpirun
# (tests/capi, tests/backends/cpu, tests/distributed) with the ONNX suites and the ported
# PyTorch scripts (tests/examples: 13% of the rest's test time when measured), and everything
# else (measured at stop 29: 7.9 and 10.9 minutes without tests/examples in the first group);
# the run fails if either fails.  Their logs are printed when both have finished.
if [ "${GPUCORE_TEST_WORKERS:-auto}" = "split" ]; then
    LOGS="$(mktemp -d)"
    HEAVY=(tests/capi tests/backends/cpu tests/distributed tests/onnx tests/examples)
    "$VENV/bin/python" -m pytest -q "${HEAVY[@]}" "$@" > "$LOGS/heavy.log" 2>&1 &
    HEAVY_PID=$!
    "$VENV/bin/python" -m pytest -q tests "${HEAVY[@]/#/--ignore=}" "$@" > "$LOGS/rest.log" 2>&1 &
    REST_PID=$!
    status=0
    wait "$HEAVY_PID" || status=$?
    wait "$REST_PID" || status=$?
    echo "=== ${HEAVY[*]}"; cat "$LOGS/heavy.log"
    echo "=== the rest of tests/"; cat "$LOGS/rest.log"
    rm -rf "$LOGS"
    exit "$status"
fi
# one worker per CPU (GPUCORE_TEST_WORKERS=0: one process), each test module on one worker so
# its module-scoped fixtures (compiled C programs, loaded models) are built once.  A worker that
# dies (a crash, or pytest-timeout ending a hung test) ends the run: xdist 3.8's loadscope
# scheduler can deadlock at the end of a run after replacing a crashed worker (its issue #1378).
exec "$VENV/bin/python" -m pytest -q -n "${GPUCORE_TEST_WORKERS:-auto}" --dist loadscope \
    --max-worker-restart=0 tests "$@"
