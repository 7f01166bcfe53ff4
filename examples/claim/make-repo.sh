#!/usr/bin/env bash
# make-repo.sh DEST: turn examples/claim/analysis into a git repository at DEST whose commit id is
# always the same (fixed author, committer and dates), so the example manifests can pin it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$1
rm -rf "$dest"
mkdir -p "$dest"
cp "$here/analysis/run.py" "$dest/run.py"
export GIT_AUTHOR_NAME="dotlab example" GIT_AUTHOR_EMAIL="example@dotlab.invalid"
export GIT_COMMITTER_NAME="dotlab example" GIT_COMMITTER_EMAIL="example@dotlab.invalid"
export GIT_AUTHOR_DATE="2026-11-29T00:00:00Z" GIT_COMMITTER_DATE="2026-11-29T00:00:00Z"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git -C "$dest" init -q -b main
git -C "$dest" add run.py
git -C "$dest" commit -q -m "nearest-centroid analysis for the example claim"
git -C "$dest" rev-parse HEAD
