#!/usr/bin/env bash
# Idempotent set-up shared by tools/demo.sh and tools/test.sh: system packages for the Vulkan
# path (when root on Debian/Ubuntu), a virtualenv in .venv, and gpucore installed into it in
# editable mode (rebuilt only when the C sources or the build files change).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GPUCORE_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    missing=()
    # GPUCORE_APT_EXTRA: more packages a caller needs (tools/test.sh: graphviz for the DOT test)
    for pkg in mesa-vulkan-drivers libvulkan1 glslang-tools spirv-tools vulkan-tools \
               ${GPUCORE_APT_EXTRA:-}; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
        missing+=(python3-venv)
    fi
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "setup: installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating virtualenv $VENV" >&2
    "$PY" -m venv "$VENV"
fi

# Reinstall only when what the build depends on changed, or for extras not installed yet
# (GPUCORE_EXTRAS: tools/test.sh uses "test", tools/demo.sh "examples,vulkan"). One stamp per set
# of extras, so running the demo and the tests in turn does not reinstall every time.
EXTRAS="${GPUCORE_EXTRAS:-test}"
stamp="$VENV/.gpucore-build-stamp-$(printf '%s' "$EXTRAS" | tr -c 'A-Za-z0-9_.-' '_')"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT"/cpu/*.[ch] "$ROOT"/cpu/*.def "$ROOT"/cpu/python/*.[ch] "$ROOT"/cpu/isa/*.[ch] "$ROOT"/cpu/capi/*.[ch] "$ROOT"/cpu/capi/*.py "$ROOT"/gpucore/include/*.h 2>/dev/null \
        | sha256sum | cut -d' ' -f1)-$EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] \
   || ! "$VENV/bin/python" -c "import gpucore._cpu" >/dev/null 2>&1; then
    echo "setup: installing gpucore[$EXTRAS] (editable) into $VENV" >&2
    "$VENV/bin/python" -m pip install -q -e "$ROOT[$EXTRAS]"
    echo "$want" > "$stamp"
fi

if [ "${GPUCORE_WITH_TORCH:-0}" = 1 ] && ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    # Pinned: this version is a CPU build on the project's machines; an unpinned torch would
    # download a multi-GB CUDA build.
    echo "setup: installing torch==2.13.0 (optional reference for tests)" >&2
    "$VENV/bin/python" -m pip install -q torch==2.13.0 || echo "setup: torch not installed; torch comparisons will be skipped" >&2
fi
