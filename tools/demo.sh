#!/usr/bin/env bash
# Run the main demo (sets everything up first; safe to run again).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPUCORE_EXTRAS="${GPUCORE_EXTRAS:-test}" source "$ROOT/tools/setup_env.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m gpucore.examples.demo "$@"
