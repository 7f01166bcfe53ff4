#!/bin/sh
# The GPU check's analysis (tests/device/gpu-check.sh): a plain shell analysis, run by the
# image's busybox sh. It asks nvidia-smi (bound into the container by Apptainer's --nv) how many
# GPUs this container sees and writes that as the claim's one number: the claim is reproduced
# when at least one GPU is seen inside. No python: the image is busybox and libc only.
set -u
out=${DOTLAB_OUT_DIR:-/work/out}
listed=$(nvidia-smi -L 2>"$out/nvidia-smi.err") || {
  echo "nvidia-smi -L failed inside the container: $(head -n 1 "$out/nvidia-smi.err")" >&2
  exit 3
}
printf '%s\n' "$listed" >"$out/nvidia-smi-L.txt"
n=$(printf '%s\n' "$listed" | grep -c '^GPU [0-9]')
seen=0
[ "$n" -ge 1 ] && seen=1
printf '{"gpu_seen": %d, "gpus_listed": %d}\n' "$seen" "$n" >"$out/results.json"
echo "gpus listed inside: $n"
