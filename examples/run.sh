#!/usr/bin/env bash
# The main job, end to end, on a fresh Debian 12 machine (run as root):
#   1. bring up a local Slurm cluster. Where this host has an Apptainer, on the host
#      (slurm/local-cluster up); where it has none (Debian 12 has no package), inside the cached
#      Debian 13 root with Slurm 24.11 and Debian's Apptainer 1.4 (DOTLAB_SLURM_ROOT=debian13);
#   2. install dotlab-hpc (into .venv, or the root's venv);
#   3. make the example's analysis repository (a pinned commit) and, on the rooted cluster, a real
#      Debian 13 image with python3 (`apptainer build`), whose digest the manifests then pin;
#   4. reproduce the example claim as the unprivileged user dotlab: `dotlab-hpc run` prints
#      `reproduced`;
#   5. run the second example, a claim that does not hold: it prints `not_reproduced`.
# The cluster stays up afterwards; `bash slurm/local-cluster down` (with the same
# DOTLAB_SLURM_ROOT) stops it. DOTLAB_EXAMPLE_STANDIN=1 runs the stand-in on the host instead.
#
# `bash examples/run.sh over-runs` runs the claims over many runs instead (examples/over-runs):
# accuracy over five seeds (one job array), then a paired overhead measurement (30 + 30 samples
# alternating in one job on one node); both print `reproduced`.
set -euo pipefail
which=${1:-claim}
case "$which" in claim | over-runs) ;; *) echo "usage: $0 [claim|over-runs]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=${DOTLAB_EXAMPLE_DIR:-/tmp/dotlab-example}

apptainer=${DOTLAB_APPTAINER:-$(command -v apptainer || command -v singularity || true)}
if [ -n "$apptainer" ] || [ "${DOTLAB_EXAMPLE_STANDIN:-0}" = 1 ]; then
  export DOTLAB_SLURM_ROOT=
  image_of() { cp examples/claim/image.sif "$1"; }
  if [ -z "$apptainer" ]; then
    apptainer="$root/tests/bin/apptainer"
    echo "note: the job runs the stand-in $apptainer (bubblewrap isolation with the host's /usr"
    echo "      in place of the image; see tests/bin/README.md)."
  fi
else
  export DOTLAB_SLURM_ROOT=debian13
  apptainer=/usr/bin/apptainer
  image_of() { bash slurm/local-cluster image "$1"; }
  echo "note: this host has no Apptainer: the cluster runs in the Debian 13 root, with Debian's"
  echo "      Apptainer and Slurm 24.11 (built once, cached in /var/cache/dotlab-hpc)."
fi
cluster() { bash "$root/slurm/local-cluster" "$@"; }

cluster up
rm -rf "$work"
mkdir -p "$work"
if [ "$which" = over-runs ]; then
  example=examples/over-runs
  manifests="seeds paired"
else
  example=examples/claim
  manifests="claim claim-wrong"
fi
commit=$(bash "$example/make-repo.sh" "$work/code")
echo "example analysis repository: $work/code at $commit"
image_of "$work/image.sif"
digest=sha256:$(sha256sum "$work/image.sif" | cut -d' ' -f1)
# the manifests pin the image they run: the example's file, or the image just built here
for m in $manifests; do
  sed "s|^  digest: sha256:[0-9a-f]*|  digest: $digest|" "$example/$m.yaml" >"$work/$m.yaml"
done
if [ -d "$example/data" ]; then cp -r "$example/data" "$work/data"; else mkdir "$work/data"; fi
chown -R 10001:10001 "$work" # the test user submits, as on a real cluster

run_claim() { # run_claim MANIFEST NAME
  (cd "$work" && cluster exec --user dotlab -- dotlab-hpc run "$1" --code-dir "$work/code" \
    --data-dir "$work/data" --image "$work/image.sif" --out-dir "$work/out-$2" \
    --runs-root "$work/runs" --apptainer "$apptainer" --record "$work/record-$2.json" \
    --log-file "$work/log-$2.jsonl")
}

if [ "$which" = over-runs ]; then
  set +e
  echo
  echo "== accuracy over five seeds, one job array (expected: reproduced), with $apptainer"
  run_claim "$work/seeds.yaml" seeds
  seeds=$?
  echo
  echo "== the proxy's overhead, 30 + 30 samples alternating in one job (expected: reproduced)"
  run_claim "$work/paired.yaml" paired
  paired=$?
  set -e
  echo
  echo "records: $work/record-seeds.json $work/record-paired.json"
  if [ "$seeds" = 0 ] && [ "$paired" = 0 ]; then
    echo "example: OK (both reproduced)"
    exit 0
  fi
  echo "example: FAILED (exit codes $seeds and $paired; expected 0 and 0)" >&2
  exit 1
fi
echo
echo "== the example claim (expected: reproduced), with $apptainer"
set +e
run_claim "$work/claim.yaml" good
good=$?
echo
echo "== a claim that does not hold (expected: not_reproduced)"
run_claim "$work/claim-wrong.yaml" wrong
wrong=$?
set -e
echo
echo "records: $work/record-good.json $work/record-wrong.json"
if [ "$good" = 0 ] && [ "$wrong" = 1 ]; then
  echo "example: OK (reproduced, then not_reproduced)"
else
  echo "example: FAILED (exit codes $good and $wrong; expected 0 and 1)" >&2
  exit 1
fi
