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
# one worker per CPU (GPUCORE_TEST_WORKERS=0: one process), each test module on one worker so
# its module-scoped fixtures (compiled C programs, loaded models) are built once.  A worker that
# dies (a crash, or pytest-timeout ending a hung test) ends the run: xdist 3.8's loadscope
# scheduler can deadlock at the end of a run after replacing a crashed worker (its issue #1378).
exec "$VENV/bin/python" -m pytest -q -n "${GPUCORE_TEST_WORKERS:-auto}" --dist loadscope \
    --max-worker-restart=0 tests "$@"
