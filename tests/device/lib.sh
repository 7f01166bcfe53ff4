# tests/device/lib.sh: the steps of tests/device/gpu-check.sh (sourced by it, bash). Each step_*
# returns 0 or sets WHY (one line: what failed and why) and returns 1; run_step times it and
# writes one line of steps.tsv. The script's variables: here kit out work deadline start_s.
# shellcheck shell=bash disable=SC2154  # here kit out work deadline start_s: set by gpu-check.sh

WHY=""
DETAIL=""
FAILED=""
APPTAINER_VERSION=""
DOTLAB_VERSION=""
PY=""        # the python that runs dotlab-hpc (and reads the record for the summary)
DLH=""       # the dotlab-hpc program
OUTCOME=""   # the claim's outcome, or the operator error
RUNTIME=""   # firecracker / gVisor / a plain kernel, as far as uname tells
FUSE="no"    # /dev/fuse opens read-write: squashfuse and fuse-overlayfs are offered to apptainer
SMI_DIR=""   # where nvidia-smi is outside: first on the PATH that apptainer's --nv searches
LD_OUTSIDE=${LD_LIBRARY_PATH:-} # the caller's, kept after the kit's libraries (driver libraries)
declare -a STEP_LINES=()
AS=()        # how the claim's commands run: as root, dropped to DOTLAB_GPU_CHECK_UID (see as_user)

now() { date +%s.%N; }
secs() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
say() { echo "gpu-check: $*" >&2; }
one_line() { tr '\n\t' '  ' | sed 's/  */ /g; s/^ //; s/ $//' | cut -c1-300; }

# bounded CAP CMD...: CMD under timeout, CAP seconds or what is left of the budget if less
bounded() {
  local cap=$1 left
  shift
  left=$((deadline - $(date +%s)))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 5 ]; then
    echo "the check's budget is spent" >&2
    return 124
  fi
  timeout -k 5 "$cap" "$@"
}

run_step() { # run_step NAME FUNCTION
  local name=$1 fn=$2 t rc status
  WHY=""
  DETAIL=""
  say "$name ..."
  t=$(now)
  "$fn"
  rc=$?
  status=ok
  if [ $rc -ne 0 ]; then
    status=FAILED
    [ -n "$WHY" ] || WHY="exit $rc"
    [ -n "$FAILED" ] || FAILED="$name: $WHY"
    DETAIL=$WHY
  fi
  STEP_LINES+=("$(printf '%-20s %-6s %6ss  %s' "$name" "$status" "$(secs "$t")" "$DETAIL")")
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$(secs "$t")" "$DETAIL" >>"$out/steps.tsv"
  say "$name: $status${DETAIL:+ ($DETAIL)}"
  return $rc
}

step_machine() {
  local arch kernel os glibc userns t
  arch=$(uname -m)
  kernel=$(uname -r)
  os=$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}")
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  case $kernel in
  4.4.0) RUNTIME="gVisor (kernel 4.4.0)" ;;
  *-fc-* | *firecracker*) RUNTIME="Firecracker ($kernel)" ;;
  *) RUNTIME="Linux $kernel" ;;
  esac
  if (: <>/dev/fuse) 2>/dev/null; then FUSE=yes; fi
  userns=$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo '?')
  {
    echo "arch: $arch"
    echo "kernel: $kernel ($RUNTIME)"
    echo "os: ${os:-?}"
    echo "glibc: ${glibc:-?}"
    echo "user: $(id -u):$(id -g) ($(id -un 2>/dev/null || echo '?'))"
    echo "cpus: $(nproc 2>/dev/null || echo '?')"
    echo "dev_fuse_usable: $FUSE"
    echo "max_user_namespaces: $userns"
    echo "unprivileged_userns_clone: $(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo 'n/a')"
    echo "filesystems: $(grep -wE 'squashfs|overlay|fuse|tmpfs' /proc/filesystems 2>/dev/null | awk '{print $NF}' | tr '\n' ' ')"
    echo "ldconfig_libnvidia_ml: $( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | grep -c 'libnvidia-ml')"
    echo "ld_library_path: ${LD_LIBRARY_PATH:-}"
    echo "loop_devices: $(find /dev -maxdepth 1 -name 'loop[0-9]*' 2>/dev/null | wc -l)"
    for t in dpkg python3 git bash timeout tar; do echo "has_$t: $(command -v "$t" || echo no)"; done
  } >"$out/machine.txt"
  DETAIL="$arch, $RUNTIME, glibc ${glibc:-?}, uid $(id -u), /dev/fuse usable: $FUSE, user namespaces: $userns"
  [ "$arch" = x86_64 ] || {
    WHY="this machine is $arch: the kit carries x86-64 programs only"
    return 1
  }
}

step_nvidia_smi_outside() {
  local listed n
  command -v nvidia-smi >/dev/null || {
    echo "nvidia-smi: not on PATH ($PATH)" >"$out/nvidia-smi.txt"
    WHY="nvidia-smi is not on PATH outside the container"
    return 1
  }
  SMI_DIR=$(dirname "$(command -v nvidia-smi)")
  listed=$(bounded 60 nvidia-smi -L 2>&1)
  local rc=$?
  {
    echo "# nvidia-smi -L (outside the container, $(command -v nvidia-smi)), exit $rc"
    echo "$listed"
    echo "# nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader"
    bounded 60 nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader 2>&1
  } >"$out/nvidia-smi.txt"
  [ $rc -eq 0 ] || {
    WHY="nvidia-smi -L exited $rc: $(echo "$listed" | head -n 2 | one_line)"
    return 1
  }
  n=$(echo "$listed" | grep -c '^GPU [0-9]')
  DETAIL="$n GPU(s): $(echo "$listed" | head -n 1 | one_line)"
}

unpack_deb() { # unpack_deb DEB DIR: dpkg -x, or ar + tar where dpkg is missing
  if command -v dpkg >/dev/null; then
    dpkg -x "$1" "$2"
  elif command -v ar >/dev/null; then
    (cd "$work" && rm -f data.tar.* && ar x "$1" && tar -xf data.tar.* -C "$2" && rm -f data.tar.* control.tar.* debian-binary)
  else
    echo "neither dpkg nor ar is here to unpack $1" >&2
    return 1
  fi
}

write_wrapper() { # write_wrapper PATH LINES...: an executable sh script
  local path=$1
  shift
  printf '#!/bin/sh\n' >"$path"
  printf '%s\n' "$@" >>"$path"
  chmod 755 "$path"
}

step_unpack() {
  local p=$work/prefix deb err t
  mkdir -p "$p" "$work/tools"
  for deb in "$kit"/debs/*.deb; do
    err=$(bounded 120 bash -c "$(declare -f unpack_deb); work=$work; unpack_deb \"\$1\" \"\$2\"" x "$deb" "$p" 2>&1) || {
      WHY="could not unpack $(basename "$deb"): $(echo "$err" | one_line)"
      return 1
    }
  done
  # Debian builds apptainer for /usr with its configuration in /etc; moved (not setuid) it finds its
  # files relative to itself: the CLI reads PREFIX/usr/etc/apptainer, the starter reads
  # PREFIX/usr/lib/etc/apptainer and PREFIX/usr/lib/var/lib/apptainer (Apptainer 1.4.5, measured)
  mkdir -p "$p/usr/etc"
  cp -a "$p/etc/apptainer" "$p/usr/etc/"
  ln -sfn ../etc "$p/usr/lib/etc"
  ln -sfn ../../var "$p/usr/lib/var"
  # the tools apptainer looks for on PATH: squashfs-tools always (a SIF becomes a temporary sandbox
  # where nothing can mount it); squashfuse and fuse-overlayfs only where /dev/fuse opens, as
  # apptainer stops (FATAL) when squashfuse is there but cannot open /dev/fuse
  for t in unsquashfs mksquashfs; do ln -s "$p/usr/bin/$t" "$work/tools/$t"; done
  if [ "$FUSE" = yes ]; then
    for t in squashfuse squashfuse_ll fuse-overlayfs fusermount3; do
      [ -e "$p/usr/bin/$t" ] && ln -s "$p/usr/bin/$t" "$work/tools/$t"
    done
  fi
  # the job script runs apptainer with a PATH of its own: nvidia-smi's folder goes in here, as
  # --nv binds the nvidia-smi it finds on PATH (Apptainer 1.4.5, measured)
  write_wrapper "$work/bin/apptainer" \
    "PATH='$work/tools'${SMI_DIR:+:'$SMI_DIR'}:\$PATH" \
    "LD_LIBRARY_PATH='$p/usr/lib/x86_64-linux-gnu'${LD_OUTSIDE:+:'$LD_OUTSIDE'}" \
    "export PATH LD_LIBRARY_PATH" "exec '$p/usr/bin/apptainer' \"\$@\""
  if ! command -v git >/dev/null; then # the machine's own git where it has one
    write_wrapper "$work/bin/git" \
      "LD_LIBRARY_PATH='$p/usr/lib/x86_64-linux-gnu' GIT_EXEC_PATH='$p/usr/lib/git-core' GIT_TEMPLATE_DIR='$p/usr/share/git-core/templates' exec '$p/usr/bin/git' \"\$@\""
  fi
  export PATH="$work/bin:$PATH"
  t=$(git --version 2>&1) || {
    WHY="git does not run: $(echo "$t" | one_line)"
    return 1
  }
  DETAIL="$(find "$kit/debs/" -name '*.deb' | wc -l) packages into $p; $t ($(command -v git))"
}

step_apptainer() {
  local v
  v=$(bounded 60 "$work/bin/apptainer" --version 2>&1) || {
    WHY="the unpacked apptainer does not run: $(echo "$v" | tail -n 2 | one_line)"
    return 1
  }
  APPTAINER_VERSION=${v##* }
  DETAIL="$v; squashfuse/fuse-overlayfs offered: $FUSE"
}

# as_user CMD...: CMD as this user, or, for root, as the unprivileged DOTLAB_GPU_CHECK_UID (default
# 65534): a claim run as root fails the contract's capability check (CapEff full, measured), so a
# lent machine's root runs it as a user, which Apptainer (not setuid) serves in a user namespace
as_user() { "${AS[@]}" "$@"; }

step_user() {
  local uid=${DOTLAB_GPU_CHECK_UID:-65534} err
  if [ "$(id -u)" != 0 ]; then
    DETAIL="uid $(id -u), as called"
    return 0
  fi
  command -v setpriv >/dev/null || {
    WHY="running as root, and setpriv (util-linux) is missing to run the claim as uid $uid"
    return 1
  }
  AS=(setpriv "--reuid=$uid" "--regid=$uid" --clear-groups env "HOME=$work/home")
  mkdir -p "$work/home"
  chown "$uid:$uid" "$work" "$work/home"
  err=$(as_user true 2>&1) || {
    WHY="cannot become uid $uid: $(echo "$err" | one_line)"
    return 1
  }
  DETAIL="root here: the claim runs as uid $uid (setpriv)"
}

py_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

# the machine's python3 >= 3.11: a venv, pip (from the kit's own wheel) installing the kit's wheels
install_with_venv() {
  local sys_py=$1 names pip_whl err
  pip_whl=$(find "$kit/wheels/" -name 'pip-*.whl' | head -n 1)
  names=$(find "$kit/wheels/" -name '*.whl' ! -name 'pip-*' -printf '%f\n' | sed 's/-.*//' | sort -u | tr '\n' ' ')
  err=$(bounded 60 "$sys_py" -m venv --without-pip "$work/venv" 2>&1) || {
    WHY="$sys_py -m venv failed: $(echo "$err" | tail -n 1 | one_line)"
    return 1
  }
  # shellcheck disable=SC2086  # names: one word each
  err=$(bounded 180 "$work/venv/bin/python" "$pip_whl/pip" install -q --no-index --no-deps \
    --no-cache-dir --disable-pip-version-check --find-links "$kit/wheels" $names 2>&1) || {
    WHY="pip install --no-index failed: $(echo "$err" | tail -n 2 | one_line)"
    return 1
  }
  PY=$work/venv/bin/python
  DLH=$work/venv/bin/dotlab-hpc
}

# no python3 >= 3.11 here: the kit's Debian python3.13, the wheels for cp313 unzipped beside it
install_carried_python() {
  local p=$work/py deb whl err lib
  mkdir -p "$p" "$work/site"
  for deb in "$kit"/python-debs/*.deb; do
    err=$(bounded 60 dpkg -x "$deb" "$p" 2>&1) || {
      WHY="could not unpack $(basename "$deb"): $(echo "$err" | one_line)"
      return 1
    }
  done
  lib=$p/usr/lib/x86_64-linux-gnu
  write_wrapper "$work/bin/python3.13" "LD_LIBRARY_PATH='$lib' PYTHONPATH='$work/site' exec '$p/usr/bin/python3.13' \"\$@\""
  PY=$work/bin/python3.13
  py_ok "$PY" || {
    WHY="the kit's python3.13 does not run: $("$PY" -c pass 2>&1 | tail -n 1 | one_line)"
    return 1
  }
  for whl in "$kit"/wheels/*-py3-none-any.whl "$kit"/wheels/*-cp313-*.whl; do
    case $whl in */pip-*) continue ;; esac
    err=$(bounded 60 "$PY" -m zipfile -e "$whl" "$work/site" 2>&1) || {
      WHY="could not unzip $(basename "$whl"): $(echo "$err" | one_line)"
      return 1
    }
  done
  write_wrapper "$work/bin/dotlab-hpc" "exec '$PY' -m dotlab_hpc \"\$@\""
  DLH=$work/bin/dotlab-hpc
}

step_python() {
  local sys_py="" v
  if [ "${DOTLAB_GPU_CHECK_PYTHON:-}" != carried ]; then
    for c in python3 python3.13 python3.12 python3.11; do
      command -v "$c" >/dev/null && py_ok "$c" && sys_py=$(command -v "$c") && break
    done
  fi
  if [ -n "$sys_py" ]; then
    install_with_venv "$sys_py" || return 1
    DETAIL="the machine's $("$PY" --version 2>&1) ($sys_py), a venv with the kit's wheels"
  else
    install_carried_python || return 1
    DETAIL="the kit's $("$PY" --version 2>&1) (no python3 >= 3.11 here, or DOTLAB_GPU_CHECK_PYTHON=carried)"
  fi
  v=$(bounded 60 "$DLH" --version 2>&1) || {
    WHY="dotlab-hpc does not start: $(echo "$v" | tail -n 1 | one_line)"
    return 1
  }
  DOTLAB_VERSION=${v##* }
  DETAIL="$v; $DETAIL"
}

step_claim() {
  local code=$work/code commit digest err
  as_user mkdir -p "$code" "$work/data"
  as_user cp "$here/claim/run.sh" "$code/run.sh"
  err=$(cd "$code" && {
    export GIT_AUTHOR_NAME=gpu-check GIT_AUTHOR_EMAIL=gpu-check@example.invalid GIT_COMMITTER_NAME=gpu-check \
      GIT_COMMITTER_EMAIL=gpu-check@example.invalid GIT_AUTHOR_DATE=2026-01-01T00:00:00Z \
      GIT_COMMITTER_DATE=2026-01-01T00:00:00Z GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
    bounded 60 "${AS[@]}" git init -q . && bounded 60 "${AS[@]}" git add run.sh &&
      bounded 60 "${AS[@]}" git commit -q -m "the GPU check's analysis"
  } 2>&1) || {
    WHY="git could not make the code's checkout: $(echo "$err" | tail -n 1 | one_line)"
    return 1
  }
  commit=$(as_user git -C "$code" rev-parse HEAD)
  digest=$(sha256sum "$kit/image.sif" | cut -c1-64)
  sed -e "s/@COMMIT@/$commit/" -e "s/@DIGEST@/$digest/" "$here/claim/manifest.yaml.in" >"$work/claim.yaml"
  chmod 644 "$work/claim.yaml"
  err=$(bounded 60 "${AS[@]}" "$DLH" validate "$work/claim.yaml" 2>&1) || {
    WHY="the manifest does not validate: $(echo "$err" | one_line)"
    return 1
  }
  DETAIL="commit ${commit:0:12}, image sha256:${digest:0:12}, resources.gpus 1"
}

step_container() {
  # the container alone, before the tool: apptainer's own words when it cannot start here
  local rc
  bounded 180 "${AS[@]}" "$work/bin/apptainer" exec --containall --nv --net --network none "$kit/image.sif" \
    nvidia-smi -L >"$out/container.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || {
    WHY="apptainer exec --containall --nv --net --network none exited $rc: $(grep -E 'FATAL|ERROR|rror' "$out/container.log" | tail -n 1 | one_line)"
    [ $rc -eq 124 ] && WHY="apptainer exec did not end within its bound (timed out)"
    return 1
  }
  DETAIL="inside: $(grep '^GPU [0-9]' "$out/container.log" | head -n 1 | one_line)"
}

step_run_local() {
  local rc
  bounded 300 "${AS[@]}" "$DLH" run --local --apptainer "$work/bin/apptainer" --code-dir "$work/code" \
    --data-dir "$work/data" --image "$kit/image.sif" --out-dir "$work/out" --runs-root "$work/runs" \
    --record "$work/record.json" "$work/claim.yaml" >"$out/run.log" 2>&1
  rc=$?
  [ -f "$work/record.json" ] && cp "$work/record.json" "$out/record.json"
  [ -d "$work/runs" ] && tar -czf "$out/rundir.tar.gz" -C "$work" runs out 2>/dev/null
  case $rc in
  0) OUTCOME="reproduced" ;;
  1) OUTCOME="$(record_field outcome)" ;;
  124) OUTCOME="timed out" ;;
  *) OUTCOME="operator error" ;;
  esac
  [ $rc -eq 0 ] || {
    WHY="dotlab-hpc run --local exited $rc ($OUTCOME): $(grep -v '^ ' "$out/run.log" | grep -iE 'error|fail|dotlab-hpc:' | tail -n 1 | one_line)"
    return 1
  }
  DETAIL="outcome reproduced: $(record_field reason)"
}

record_field() { # record_field KEY: a top-level text of record.json
  [ -s "$out/record.json" ] && [ -n "$PY" ] || return 0
  "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$out/record.json" "$1" 2>/dev/null
}

record_gpus() { # the record's GPU facts, one line each: uuid, model, driver
  [ -s "$out/record.json" ] && [ -n "$PY" ] || return 0
  "$PY" - "$out/record.json" <<'EOF' 2>/dev/null
import json, sys

rec = json.load(open(sys.argv[1]))
for g in (rec.get("isolation") or {}).get("gpus") or []:
    print(f"uuid {g.get('uuid')}, model {g.get('name')}, driver {g.get('driver_version')}")
for line in (rec.get("evidence") or {}).get("gpus") or []:
    print(f"probe (nvidia-smi -L inside): {line}")
EOF
}

finish() {
  local verdict rc=0
  if [ -z "$FAILED" ]; then
    verdict="PASSED: the GPU claim was reproduced with dotlab-hpc run --local"
  else
    verdict="FAILED at ${FAILED}"
    rc=1
  fi
  {
    echo "== dotlab-hpc GPU check (tests/device/gpu-check.sh) =="
    echo "what ran: claim gpu-check (resources.gpus: 1), dotlab-hpc ${DOTLAB_VERSION:-?} run --local, apptainer ${APPTAINER_VERSION:-?} --nv; ${RUNTIME:-?}, uid $(id -u)"
    echo "outcome: $verdict"
    echo "GPU outside (nvidia-smi -L):"
    grep '^GPU [0-9]' "$out/nvidia-smi.txt" 2>/dev/null | sed 's/^/  /' || true
    grep -q '^GPU [0-9]' "$out/nvidia-smi.txt" 2>/dev/null || echo "  (none: $(grep -v '^#' "$out/nvidia-smi.txt" 2>/dev/null | head -n 1 | one_line))"
    echo "GPU facts in the record:"
    record_gpus | sed 's/^/  /'
    [ -n "$(record_gpus)" ] || echo "  (no record)"
    echo "steps:"
    printf '  %s\n' "${STEP_LINES[@]}"
    echo "total: $(secs "$start_s") s (budget $budget s); files in $out: $(cd "$out" && ls | tr '\n' ' ')"
  } | tee "$out/summary.txt"
  exit $rc
}
