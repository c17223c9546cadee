#!/usr/bin/env bash
# Run the whole test suite (sets everything up first; safe to run again).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GPUCORE_APT_EXTRA="${GPUCORE_APT_EXTRA:-graphviz}"  # the DOT export test renders with dot
source "$ROOT/tools/setup_env.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest -q tests "$@"
