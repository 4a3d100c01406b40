#!/usr/bin/env bash
# GPU check: halluflow's synthesize / answer / detect stages (and the vLLM backend, where installed) against raw
# FluxPipeline / generate / detector loops on this machine's GPU, with peak GPU memory; prints a table of ratios.
#
#   bash bench/gpu_check.sh [--dry] [--out FILE.json] [--flux DIR] [--detector DIR] [--vlm DIR] [--stages ...]
#
# Without --flux/--detector/--vlm it builds tiny random stand-ins offline (`halluflow standin build`) in a temporary
# folder: the numbers then measure halluflow's overhead around a model, not the speed of real FLUX or a real VLM.
# Give real weight folders (e.g. a models cache filled by `halluflow models fetch`) to measure those. Without a CUDA
# GPU, or with --dry, the same code runs on the CPU at the smallest sizes (well under a minute) to prove the check
# works; it then says that its numbers are not GPU numbers. The measuring is in bench/gpu_check.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
if [[ -z "${VIRTUAL_ENV:-}" && -f "$repo/.venv/bin/activate" ]]; then
    # shellcheck disable=SC1091
    source "$repo/.venv/bin/activate"
fi
flux="" detector="" vlm=""
pass=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --flux) flux="$2"; shift 2 ;;
        --detector) detector="$2"; shift 2 ;;
        --vlm) vlm="$2"; shift 2 ;;
        *) pass+=("$1"); shift ;;
    esac
done
work="$(mktemp -d "${TMPDIR:-/tmp}/halluflow-gpu-check.XXXXXX")"
trap 'rm -rf "$work"' EXIT
build() {  # kind folder [--arg k=v ...]: a stand-in, built offline, its build log kept out of the table
    local kind="$1" out="$2"
    shift 2
    halluflow standin build "$kind" "$out" "$@" >"$work/build-$kind.log" 2>&1 || {
        cat "$work/build-$kind.log" >&2
        exit 1
    }
}
if [[ -z "$flux" ]]; then flux="$work/tiny-flux"; build flux "$flux"; fi
if [[ -z "$detector" ]]; then detector="$work/tiny-owlv2"; build owlv2 "$detector"; fi
if [[ -z "$vlm" ]]; then vlm="$work/tiny-smolvlm"; build smolvlm "$vlm" --arg hidden_size=32 --arg image_size=64; fi
cd "$repo"
exec_args=(--flux "$flux" --detector "$detector" --vlm "$vlm")
python "$here/gpu_check.py" "${exec_args[@]}" ${pass[@]+"${pass[@]}"}
