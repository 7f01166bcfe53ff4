#!/usr/bin/env bash
# tests/device/gpu-check.sh [KIT]: the GPU check on a bare x86-64 machine with an NVIDIA GPU and no
# network (docs/gpu-check.md). It installs what KIT carries (tests/device/prepare.sh made it;
# default tests/device/kit) into a private folder, never into /, then runs one GPU claim
# (resources.gpus: 1) with `dotlab-hpc run --local`: Apptainer's --nv, the `nvidia-smi -L` probe
# inside, the record's GPU facts. It prints ONE summary on stdout (progress goes to stderr) and
# leaves at most 8 files in $OUT (default ./gpu-check-out): summary.txt, steps.tsv, machine.txt,
# nvidia-smi.txt (what nvidia-smi says OUTSIDE the container, recorded whatever else fails),
# container.log, run.log, record.json, rundir.tar.gz. A step that fails is named with its reason
# on one line. Every command is bounded; the whole check ends within DOTLAB_GPU_CHECK_BUDGET_S
# (default 450) seconds.
#
# Exit: 0 the claim was reproduced; 1 a step failed or the claim was not reproduced; 2 bad input
# (usage, no kit). Run as root (a lent machine's user), the claim runs as uid DOTLAB_GPU_CHECK_UID
# (default 65534, nobody), as a claim run as root fails the contract's capability check.
# DOTLAB_GPU_CHECK_PYTHON=carried uses the kit's python3.13 even where the
# machine has a python3 >= 3.11 (the path taken where it has none).
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -le 1 ] || {
  echo "usage: tests/device/gpu-check.sh [KIT]" >&2
  exit 2
}
kit=${1:-$here/kit}
[ -f "$kit/image.sif" ] && [ -d "$kit/debs" ] && [ -d "$kit/wheels" ] || {
  echo "gpu-check: $kit is not a kit (no image.sif, debs/ or wheels/): run tests/device/prepare.sh first" >&2
  exit 2
}
kit=$(cd "$kit" && pwd)
out=${OUT:-$PWD/gpu-check-out}
budget=${DOTLAB_GPU_CHECK_BUDGET_S:-450}
case $budget in '' | *[!0-9]*) echo "gpu-check: DOTLAB_GPU_CHECK_BUDGET_S must be a number of seconds" >&2 && exit 2 ;; esac
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
rm -f "$out"/{summary.txt,steps.tsv,machine.txt,nvidia-smi.txt,container.log,run.log,record.json,rundir.tar.gz}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/bin"
# shellcheck source=tests/device/lib.sh
. "$here/lib.sh"

# shellcheck disable=SC2034  # start_s, deadline: read by lib.sh
start_s=$(now)
# shellcheck disable=SC2034
deadline=$(($(date +%s) + budget))

run_step "machine" step_machine || finish
run_step "nvidia-smi outside" step_nvidia_smi_outside
run_step "unpack" step_unpack || finish
run_step "apptainer" step_apptainer || finish
run_step "python + dotlab-hpc" step_python || finish
run_step "user" step_user || finish
run_step "claim" step_claim || finish
run_step "container start" step_container
run_step "run --local" step_run_local
finish
