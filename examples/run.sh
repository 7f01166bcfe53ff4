#!/usr/bin/env bash
# The main job, end to end, on a fresh Debian 12 machine (run as root):
#   1. install and start the local one-node Slurm cluster (slurm/local-cluster up),
#   2. install dotlab-hpc into .venv,
#   3. make the example's analysis repository (a pinned commit),
#   4. reproduce the example claim on the cluster: `dotlab-hpc run` prints `reproduced`,
#   5. run the second example, a claim that does not hold: it prints `not_reproduced`.
# The cluster stays up afterwards; `bash slurm/local-cluster down` stops it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=${DOTLAB_EXAMPLE_DIR:-/tmp/dotlab-example}

bash slurm/local-cluster up
# shellcheck disable=SC1091
source "${DOTLAB_SLURM_DIR:-/tmp/dotlab-slurm}/env.sh"
bash scripts/install-venv .venv >/dev/null
export PATH="$root/.venv/bin:$PATH"

apptainer=${DOTLAB_APPTAINER:-$(command -v apptainer || command -v singularity || true)}
if [ -z "$apptainer" ]; then
  apptainer="$root/tests/bin/apptainer"
  echo "note: Apptainer is not installed here; the job runs the stand-in $apptainer"
  echo "      (bubblewrap isolation with the host's /usr in place of the image; see README)."
fi

rm -rf "$work"
mkdir -p "$work"
commit=$(bash examples/claim/make-repo.sh "$work/code")
echo "example analysis repository: $work/code at $commit"

run_claim() { # run_claim MANIFEST NAME
  dotlab-hpc run "$1" --code-dir "$work/code" --data-dir examples/claim/data \
    --image examples/claim/image.sif --out-dir "$work/out-$2" --runs-root "$work/runs" \
    --apptainer "$apptainer" --record "$work/record-$2.json" --log-file "$work/log-$2.jsonl"
}

echo
echo "== the example claim (expected: reproduced)"
set +e
run_claim examples/claim/claim.yaml good
good=$?
echo
echo "== a claim that does not hold (expected: not_reproduced)"
run_claim examples/claim/claim-wrong.yaml wrong
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
