#!/usr/bin/env bash
# tests/device/prepare.sh [KIT]: gather what tests/device/gpu-check.sh carries to a bare GPU
# machine with no network, into KIT (default tests/device/kit, ignored by git):
#   KIT/debs/         Debian's apptainer 1.4.5 and what it runs with (squashfs-tools, squashfuse,
#                     fuse-overlayfs, libfuse3, libseccomp, libsqlite3, compression libraries),
#                     and git (the tool checks the code's pinned commit with it)
#   KIT/python-debs/  Debian 13's python3.13, used only where the machine has no python3 >= 3.11
#   KIT/wheels/       dotlab-hpc's wheel, the dependencies `run --local` imports (for CPython
#                     3.11, 3.12 and 3.13) and pip's own wheel, which installs them offline
#   KIT/image.sif     a small image (libc and busybox): the GPU claim's analysis is a shell script
#   KIT/KIT.txt       what is in it: versions, sizes, sha256
# The packages come from the Debian 13 root of the rooted cluster, with that root's own apt
# configuration (the host, Debian 12, has no apptainer), and the image is built there by the real
# `apptainer build` as the unprivileged test user. That root must be up:
#   DOTLAB_SLURM_ROOT=debian13 DOTLAB_SLURM_DIR=/tmp/dotlab-slurm-debian13 slurm/local-cluster up
# This script neither starts nor stops it. Needs root (it enters the root). PYTHON: the
# interpreter whose pip builds the wheel and downloads the others (default .venv/bin/python).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kit=${1:-$here/kit}
root_dir=${DOTLAB_SLURM_DIR:-/tmp/dotlab-slurm-debian13}
py=${PYTHON:-$repo/.venv/bin/python}
export PIP_DISABLE_PIP_VERSION_CHECK=1

die() {
  echo "prepare: $*" >&2
  exit 2
}
log() { echo "prepare: $*" >&2; }

# apptainer and what it runs with; git for the pinned checkout (libpcre2 and zlib: git's own needs)
DEBS=(apptainer squashfs-tools squashfuse libsquashfuse0 libfuse3-4 fuse3 fuse-overlayfs libseccomp2
  libsqlite3-0 liblzo2-2 liblz4-1 libzstd1 liblzma5 zlib1g git libpcre2-8-0)
PYTHON_DEBS=(python3.13-minimal libpython3.13-minimal libpython3.13-stdlib libmpdec4 libffi8 libexpat1)
IMAGE_DEBS=(libc6 busybox-static)
# what `dotlab-hpc run --local` imports (the rest of its dependencies serve other verbs)
WHEELS=(pydantic pydantic-core annotated-types typing-extensions typing-inspection jinja2 markupsafe
  pyyaml)
PY_VERSIONS=(3.11 3.12 3.13)
LIMIT_MIB=56 # the device tool carries 64 MiB with the checkout (about 7 MiB)

[ $# -le 1 ] || die "usage: tests/device/prepare.sh [KIT]"
[ "$(id -u)" = 0 ] || die "must run as root: it enters the Debian 13 root to download and build"
[ -x "$py" ] || py=python3
"$py" -m pip --version >/dev/null 2>&1 || die "$py has no pip (PYTHON names another interpreter)"

work=$(mktemp -d /tmp/dotlab-gpu-kit.XXXXXX) # under /tmp: the root sees the host's /tmp
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
rooted() { # rooted [--user NAME] -- CMD...: CMD inside the Debian 13 root, in $work
  (cd "$work" && DOTLAB_SLURM_ROOT=debian13 DOTLAB_SLURM_DIR=$root_dir timeout 600 \
    "$repo/slurm/local-cluster" exec "$@")
}
rooted -- true 2>/dev/null ||
  die "no Debian 13 root runs from $root_dir: DOTLAB_SLURM_ROOT=debian13 DOTLAB_SLURM_DIR=$root_dir slurm/local-cluster up"

download() { # download DIR PKG...: apt-get download inside the root, apt-get update once if that fails
  local dir=$1
  shift
  mkdir -p "$work/$dir"
  chmod 777 "$work/$dir"
  rooted -- sh -c 'cd "$1" && shift && { apt-get download -q "$@" >/dev/null 2>&1 ||
    { apt-get -q update >/dev/null && apt-get download -q "$@" >/dev/null; }; }' sh "$work/$dir" "$@" ||
    die "apt-get download failed inside the root: $*"
}

t0=$SECONDS
log "Debian packages (inside the Debian 13 root)"
download debs "${DEBS[@]}"
download python-debs "${PYTHON_DEBS[@]}"
download image-debs "${IMAGE_DEBS[@]}"

log "wheels: dotlab-hpc, then ${WHEELS[*]} for CPython ${PY_VERSIONS[*]}"
mkdir -p "$work/wheels"
"$py" -m pip wheel -q --no-deps -w "$work/wheels" "$repo" >/dev/null
mapfile -t pins < <("$py" - "${WHEELS[@]}" pip <<'EOF'
import importlib.metadata as m
import sys

for name in sys.argv[1:]:
    print(f"{name}=={m.version(name)}")
EOF
)
for v in "${PY_VERSIONS[@]}"; do
  "$py" -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version "$v" \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_34_x86_64 -d "$work/wheels" "${pins[@]}" >/dev/null ||
    die "pip download failed for CPython $v: ${pins[*]}"
done

log "image: libc6 + busybox-static, built by apptainer inside the root"
rootfs=$work/rootfs
mkdir -p "$rootfs"
for deb in "$work"/image-debs/*.deb; do dpkg -x "$deb" "$rootfs"; done
rm -rf "${rootfs:?}"/usr/share "${rootfs:?}"/usr/lib/x86_64-linux-gnu/gconv "${rootfs:?}"/etc/ld.so.conf.d
for d in bin sbin lib lib64; do [ -e "$rootfs/usr/$d" ] && ln -sfn "usr/$d" "$rootfs/$d"; done
for applet in $("$rootfs/usr/bin/busybox" --list); do
  [ -e "$rootfs/usr/bin/$applet" ] || ln -s busybox "$rootfs/usr/bin/$applet"
done
mkdir -p "$rootfs"/{etc,tmp,var/tmp,home,work,proc,sys,dev,root}
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
: >"$rootfs/etc/hosts"
chmod -R a+rX "$rootfs"
chmod 777 "$work"
rooted --user dotlab -- env APPTAINER_TMPDIR="$work" apptainer build "$work/image.sif" "$rootfs" \
  >"$work/build.log" 2>&1 || {
  tail -5 "$work/build.log" >&2
  die "apptainer build failed inside the root"
}

log "kit: $kit"
rm -rf "$kit.tmp"
mkdir -p "$kit.tmp"
mv "$work/debs" "$work/python-debs" "$work/wheels" "$work/image.sif" "$kit.tmp/"
{
  echo "# made by tests/device/prepare.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# apptainer $(rooted -- apptainer --version | awk '{print $3}'); image built from ${IMAGE_DEBS[*]}"
  (cd "$kit.tmp" && find . -type f | LC_ALL=C sort | while read -r f; do
    printf '%s  %9d  %s\n' "$(sha256sum "$f" | cut -c1-64)" "$(stat -c %s "$f")" "${f#./}"
  done)
} >"$kit.tmp/KIT.txt"
chmod -R a+rX "$kit.tmp"
rm -rf "$kit"
mv "$kit.tmp" "$kit"
mib=$(($(du -sb "$kit" | cut -f1) / 1048576))
[ "$mib" -le "$LIMIT_MIB" ] || die "the kit is $mib MiB, over $LIMIT_MIB MiB: it would not travel"
log "done in $((SECONDS - t0)) s: $mib MiB ($(find "$kit" -type f | wc -l) files)"
