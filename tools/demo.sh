#!/usr/bin/env bash
# Run the main demo (sets everything up first; safe to run again).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# examples: scikit-learn (the digits), tqdm, matplotlib; vulkan: lets 'auto' use a GPU when present.
GPUCORE_EXTRAS="${GPUCORE_EXTRAS:-examples,vulkan}" source "$ROOT/tools/setup_env.sh"
cd "$ROOT"
# Options pass through: tools/demo.sh --model mlp --device cpu --epochs 4 (see --help).
exec "$VENV/bin/python" -m gpucore.examples.digits "$@"
