#!/usr/bin/env bash
# Issue 32's one-shot check on an NVIDIA GPU: `prepare` (here), `run [--dry-run]` (there, or a
# rehearsal here), `fixture DIR` (here). The check is the Python package bench/gpu_check/ (its
# docstring says what each step does); this finds its python and hands over. The GPU machine's
# python3 has no venv: the package is standard library until `run` installs the carried wheels.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${GPU_CHECK_PYTHON:-python3}"
command -v "$PY" > /dev/null || {
    printf 'gpu_check: no %s on PATH (set GPU_CHECK_PYTHON).\n' "$PY" >&2
    exit 2
}
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m bench.gpu_check "$@"
