#!/usr/bin/env bash
# make-repo.sh DEST: turn examples/over-runs/analysis into a git repository at DEST whose commit
# id is always the same (fixed author, committer and dates), so that the manifests can pin it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$1
rm -rf "$dest"
mkdir -p "$dest"
cp "$here/analysis/train.py" "$here/analysis/serve.py" "$dest/"
export GIT_AUTHOR_NAME="dotlab example" GIT_AUTHOR_EMAIL="example@dotlab.invalid"
export GIT_COMMITTER_NAME="dotlab example" GIT_COMMITTER_EMAIL="example@dotlab.invalid"
export GIT_AUTHOR_DATE="2026-12-03T00:00:00Z" GIT_COMMITTER_DATE="2026-12-03T00:00:00Z"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git -C "$dest" init -q -b main
git -C "$dest" add train.py serve.py
git -C "$dest" commit -q -m "a seeded training run and a paired latency measurement"
git -C "$dest" rev-parse HEAD
