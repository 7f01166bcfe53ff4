# dotlab-hpc probe: runs INSIDE the analysis's own container, started by the wrapper
# (templates/wrapper.sh) before the analysis, as `/bin/sh -c PROBE dotlab-probe GPU WRITABLE
# MIN_TMP_MIB GPU_TYPE SCRATCH`, followed by what the job script measured outside it: PID_NS IPC_NS
# UID GID RUNTIME CUDA_VISIBLE UTS_NS LOGIN, then the host's paths the container must not learn
# (the image, the run directory, the bind sources: code, data, output, scratch).
# Nothing of the analysis runs yet, and this output goes to the container's stdout, which the job
# script keeps outside, in the run directory, up to the wrapper's start marker: the analysis can
# neither see nor alter it. It measures each property of docs/contract.md §4 from inside (the one
# measuring code: the record's `isolation` and `dotlab-hpc doctor` both read it) and
# judges it; lines are `@@iso fact NAME VALUE`, `@@iso check PROPERTY held|not_held|unknown
# WHAT-WAS-MEASURED`, `@@iso exposed NAME WHAT` (what the analysis can read of the host that the
# flags do not hide: recorded, never a reason to stop) and `@@gpu LINE` (nvidia-smi -L). Exit 4: a
# property did not hold (the analysis must not run); exit 3: a GPU claim found no usable GPU. Only
# sh builtins, /proc and the most common tools (df, readlink, rm; sed, grep and cut for a GPU); a
# tool missing from the image gives `unknown`.
gpu=$1 writable=$2 min_tmp_mib=$3 gpu_type=$4 scratch=$5
out_pid_ns=$6 out_ipc_ns=$7 out_uid=$8 out_gid=$9
shift 9
runtime=$1 out_cuda=${2-} out_uts_ns=${3-} login=${4-}
shift $(($# < 4 ? $# : 4))
failed=0
gpu_failed=0

fact() { printf '@@iso fact %s %s\n' "$1" "$2"; }
expose() { printf '@@iso exposed %s %s\n' "$1" "$2"; }
check() {
  printf '@@iso check %s %s %s\n' "$1" "$2" "$3"
  if [ "$2" = not_held ]; then
    case "$1" in
      gpus) gpu_failed=1 ;;
      gpu_type) ;; # recorded: the record says whether the GPUs are of the model named
      *) failed=1 ;;
    esac
  fi
}
# try_write DIR: whether a new file can be made in DIR, in $wrote: accepted or refused (the files
# made, listed in $made, are removed together by one rm once all were tried). No subshell: `true`
# is no special builtin, so a redirection it cannot make fails the command and never ends this
# shell.
made=
try_write() {
  _f="$1/.dotlab-probe-$$"
  if { true >"$_f"; } 2>/dev/null; then
    made="$made $_f"
    wrote=accepted
  else
    wrote=refused
  fi
}
# size_kib DIR: the size of the file system holding DIR, in KiB (df -P's second field)
size_kib() {
  df -Pk -- "$1" 2>/dev/null | while read -r _fs _size _rest; do
    case "$_size" in '' | *[!0-9]*) ;; *) echo "$_size" ;; esac
  done
}

# the environment is measured as the wrapper leaves it for the analysis: it ran clear_host_env
# (templates/hostenv.sh) first, and kept Apptainer's HOME as container_home for the mounts
# (--workdir makes it a folder of the claim's scratch)
container_home=${container_home-}

# what runs the container: the stand-in says so in its version (tests/bin/apptainer)
case "$runtime" in
  *dotlab-standin*) sandbox=stand-in ;;
  *) sandbox=apptainer ;;
esac
fact sandbox "$sandbox"
fact runtime "$runtime"

# network: the interfaces of this network namespace (/proc/net/dev; /sys may be the host's)
ifaces=
n=0
while IFS=': ' read -r name _rest; do
  n=$((n + 1))
  [ "$n" -gt 2 ] && ifaces="$ifaces${ifaces:+,}$name"
done </proc/net/dev
fact interfaces "${ifaces:-none}"
case "$ifaces" in
  lo | '') check network held "interfaces: ${ifaces:-none}" ;;
  *) check network not_held "interfaces: $ifaces" ;;
esac

# read-only binds, the only writable one, and the image's root: by trying
try_write /work/code
code_w=$wrote
try_write /work/data
data_w=$wrote
try_write /work/out
out_w=$wrote
try_write /
root_w=$wrote
# shellcheck disable=SC2086  # the probe's own paths, no space in them: one word each
[ -n "$made" ] && rm -f -- $made 2>/dev/null
fact code_write "$code_w"
fact data_write "$data_w"
fact out_write "$out_w"
fact root_write "$root_w"
[ "$code_w" = refused ] && check code_read_only held "write to /work/code: refused" ||
  check code_read_only not_held "write to /work/code: accepted"
[ "$data_w" = refused ] && check data_read_only held "write to /work/data: refused" ||
  check data_read_only not_held "write to /work/data: accepted"
[ "$out_w" = accepted ] && check out_writable held "write to /work/out: accepted" ||
  check out_writable not_held "write to /work/out: refused"
if [ "$writable" = 1 ]; then
  [ "$root_w" = accepted ] && check writable_tmpfs held "write to /: accepted (discarded at exit)" ||
    check writable_tmpfs not_held "write to /: refused although --writable-tmpfs was given"
else
  [ "$root_w" = refused ] && check image_read_only held "write to /: refused" ||
    check image_read_only not_held "write to /: accepted"
fi

# who the analysis is: uid, gid, effective capabilities, no_new_privs
uid='' gid='' cap_eff='' nnp=''
while read -r key v1 v2 _rest; do
  case "$key" in
    Uid:) uid=$v2 ;;
    Gid:) gid=$v2 ;;
    CapEff:) cap_eff=$v1 ;;
    NoNewPrivs:) nnp=$v1 ;;
  esac
done </proc/self/status
fact uid "$uid"
fact gid "$gid"
fact cap_eff "$cap_eff"
fact no_new_privs "${nnp:-unknown}"
if [ "$uid" = "$out_uid" ] && [ "$gid" = "$out_gid" ]; then
  check user held "uid $uid gid $gid, as outside"
else
  check user not_held "uid $uid gid $gid inside, $out_uid $out_gid outside"
fi
case "$cap_eff" in
  *[!0]* | '') check capabilities not_held "CapEff $cap_eff, NoNewPrivs ${nnp:-?}" ;;
  *)
    if [ "$nnp" = 1 ]; then
      check capabilities held "CapEff $cap_eff, NoNewPrivs 1"
    else
      check capabilities not_held "CapEff $cap_eff, NoNewPrivs ${nnp:-?}"
    fi
    ;;
esac

# PID and IPC namespaces: their own, not the job's (the job script read its own outside); one
# readlink for the PID, IPC and UTS links, each link told by its own text (`pid:[4026531836]`),
# and a link it did not give (busybox's readlink takes one file) asked alone
ns_pid=
ns_ipc=
ns_uts=
while IFS= read -r link; do
  case "$link" in pid:*) ns_pid=$link ;; ipc:*) ns_ipc=$link ;; uts:*) ns_uts=$link ;; esac
done <<EOF
$(readlink /proc/self/ns/pid /proc/self/ns/ipc /proc/self/ns/uts 2>/dev/null)
EOF
[ -n "$ns_pid" ] || ns_pid=$(readlink /proc/self/ns/pid 2>/dev/null)
[ -n "$ns_ipc" ] || ns_ipc=$(readlink /proc/self/ns/ipc 2>/dev/null)
[ -n "$ns_uts" ] || ns_uts=$(readlink /proc/self/ns/uts 2>/dev/null)
pid1=
read -r pid1 </proc/1/comm 2>/dev/null
fact pid1 "${pid1:-unknown}"
for ns in pid ipc; do
  if [ "$ns" = pid ]; then inside=$ns_pid outside=$out_pid_ns; else inside=$ns_ipc outside=$out_ipc_ns; fi
  fact ${ns}_ns "${inside:-unknown}"
  if [ -z "$inside" ] || [ -z "$outside" ]; then
    check ${ns}_namespace unknown "namespace inside ${inside:-?}, outside ${outside:-?}"
  elif [ "$inside" != "$outside" ]; then
    check ${ns}_namespace held "$inside inside, $outside outside (PID 1: ${pid1:-?})"
  else
    check ${ns}_namespace not_held "the job's own $inside (PID 1: ${pid1:-?})"
  fi
done

# the environment: names only, never values; nothing of the job's (Slurm's) may be there, no
# value may hold a host path given, nor an APPTAINER_*/SINGULARITY_* one name a path outside
# /.singularity.d (Apptainer's own): what Apptainer sets from the host must be cleared
# (`export -p` lists them sorted, as `export NAME...` or bash's `declare -x NAME...`: the name is
# the longest run of name characters after it, each kept once, in the order listed)
names=
words=
while IFS= read -r line; do
  case "$line" in
    "export "*) name=${line#export } ;;
    "declare -x "*) name=${line#declare -x } ;;
    *) continue ;;
  esac
  name=${name%%[!A-Za-z0-9_]*}
  case "$name" in '' | [0-9]*) continue ;; esac
  case ",$names," in *",$name,"*) continue ;; esac
  names="$names${names:+,}$name"
  words="$words $name"
done <<EOF
$(export -p 2>/dev/null)
EOF
fact env_names "${names:-unknown}"
leaked=
hostpaths=
for name in $words; do
  case "$name" in SLURM_* | SLURMD_*) leaked="$leaked${leaked:+,}$name" ;; esac
  value=
  eval "value=\${$name-}" # a name as export -p printed it: letters, digits and _ only
  host=
  for path in "$@"; do
    case "$path" in '' | / | /work/code | /work/data | /work/out) continue ;; esac
    case "$value" in *"$path"*) host=1 ;; esac
  done
  case "$name" in APPTAINER_* | SINGULARITY_*)
    case "$value" in /.singularity.d/*) ;; */*) host=1 ;; esac
    ;;
  esac
  [ -n "$host" ] && hostpaths="$hostpaths${hostpaths:+,}$name"
done
if [ -z "$names" ]; then
  check clean_environment unknown "the environment's names could not be read"
elif [ -n "$leaked" ] || [ -n "$hostpaths" ]; then
  what="${leaked:+from the job: $leaked}${leaked:+${hostpaths:+; }}"
  check clean_environment not_held "$what${hostpaths:+naming a host path: $hostpaths}"
else
  check clean_environment held "no variable of the job's, none naming a host path"
fi

# mounts: the host's file systems reach the container only as /work/code, /work/data, /work/out
# (and the few files Apptainer provides); tmpfs mounts are Apptainer's own, empty or generated
mounts=
unexpected=
while read -r _id _parent _dev _root mp rest; do
  fstype=${rest#* - }
  fstype=${fstype%% *}
  mounts="$mounts${mounts:+,}$mp"
  case "$mp" in
    / | /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /tmp | /var/tmp) continue ;;
    /work/code | /work/code/* | /work/data | /work/data/* | /work/out | /work/out/*) continue ;;
    /etc/hosts | /etc/localtime | /etc/resolv.conf | /etc/passwd | /etc/group | /etc/hostname) continue ;;
    /.singularity.d | /.singularity.d/*) continue ;;
  esac
  [ "$fstype" = tmpfs ] && continue
  # with sandbox.scratch (--workdir), Apptainer makes $HOME in the claim's own scratch folder
  [ "$scratch" = 1 ] && [ "$mp" = "$container_home" ] && continue
  if [ "$gpu" = 1 ]; then
    case "$mp" in
      /usr/bin/nvidia-* | /usr/bin/nv-* | /run/nvidia-persistenced/* | /var/run/nvidia-persistenced/*) continue ;;
      /lib/firmware/nvidia/* | /usr/lib/firmware/nvidia/*) continue ;; # --nv's GSP firmware files
    esac
  fi
  if [ "$sandbox" = stand-in ]; then
    # the stand-in's image root is the host's read-only /usr, /etc, /bin, /sbin, /lib*, /opt
    case "$mp" in
      /usr | /usr/* | /etc | /etc/* | /bin | /sbin | /lib | /lib32 | /lib64 | /libx32 | /opt) continue ;;
    esac
  fi
  unexpected="$unexpected${unexpected:+,}$mp"
done </proc/self/mountinfo
fact mounts "${mounts:-none}"
if [ -z "$mounts" ]; then
  check host_mounts unknown "/proc/self/mountinfo could not be read"
elif [ -n "$unexpected" ]; then
  check host_mounts not_held "host file systems at $unexpected"
else
  check host_mounts held "only /work/code, /work/data and /work/out from the host"
fi

# exposures (docs/escapes.md): never a value of the host's, only where it can be read
uts=$ns_uts
fact uts_ns "${uts:-unknown}"
if [ -n "$uts" ] && [ "$uts" = "$out_uts_ns" ]; then
  expose host_name "the host's name: no UTS namespace of its own (\`allow uts ns = no\` in apptainer.conf)"
fi
where=
if [ -n "$login" ] && [ "$login" != user ]; then
  for file in /etc/passwd /etc/group; do
    while IFS=: read -r name _rest; do
      [ "$name" = "$login" ] && where="$where${where:+, }$file"
    done 2>/dev/null <"$file"
  done
  [ -e "/home/$login" ] && where="$where${where:+, }a folder /home/LOGIN"
fi
[ -n "$where" ] && expose login_name "the host's login name, in $where"
unknown_ifaces=0
for dev in /sys/class/net/*; do
  [ -e "$dev" ] || continue
  case ",$ifaces," in *",${dev##*/},"*) ;; *) unknown_ifaces=$((unknown_ifaces + 1)) ;; esac
done
[ "$unknown_ifaces" -gt 0 ] &&
  expose sysfs "the host's /sys, read-only: its devices and $unknown_ifaces network interface(s) of the host (\`mount sys = no\` in apptainer.conf hides it)"
shown=
while read -r _id _parent _dev root mp _rest; do
  case "$mp" in /work/code | /work/data | /work/out) [ "$root" != / ] && shown="$shown${shown:+, }$mp" ;; esac
done </proc/self/mountinfo
[ -n "$shown" ] &&
  expose bind_sources "the host paths of $shown, in /proc/self/mountinfo (the kernel shows each bind's source)"
max_userns=
read -r max_userns 2>/dev/null </proc/sys/user/max_user_namespaces
case "$max_userns" in '' | 0 | *[!0-9]*) ;; *)
  expose user_namespaces "user namespaces of its own (user.max_user_namespaces $max_userns): no host access, more of the kernel to reach"
  ;;
esac

# sizes: /tmp, and the writable overlay (Apptainer's session tmpfs, `sessiondir max size`): one df
# for both (a line each, in order, after its header); where it did not give both, each alone
tmp_kib=
overlay_kib=
n=0
while read -r _fs _size _rest; do
  n=$((n + 1))
  case "$_size" in '' | *[!0-9]*) continue ;; esac
  case "$n" in 2) tmp_kib=$_size ;; 3) overlay_kib=$_size ;; esac
done <<EOF
$(df -Pk -- /tmp / 2>/dev/null)
EOF
if [ "$n" -ne 3 ]; then
  tmp_kib=$(size_kib /tmp)
  overlay_kib=$(size_kib /)
fi
fact tmp_kib "${tmp_kib:-unknown}"
if [ -z "$tmp_kib" ]; then
  check tmp_size unknown "df could not measure /tmp"
elif [ "$tmp_kib" -ge $((min_tmp_mib * 1024)) ]; then
  check tmp_size held "/tmp $((tmp_kib / 1024)) MiB"
else
  check tmp_size not_held "/tmp $((tmp_kib / 1024)) MiB, less than $min_tmp_mib MiB"
fi
if [ "$writable" = 1 ]; then
  fact overlay_kib "${overlay_kib:-unknown}"
  if [ -z "$overlay_kib" ]; then
    check overlay_size unknown "df could not measure /"
  elif [ "$overlay_kib" -ge $((min_tmp_mib * 1024)) ]; then
    check overlay_size held "writable overlay $((overlay_kib / 1024)) MiB"
  else
    check overlay_size not_held "writable overlay $((overlay_kib / 1024)) MiB, less than $min_tmp_mib MiB"
  fi
fi

# GPU claims: what Slurm gave (outside), what is visible inside, and each GPU's model
if [ "$gpu" = 1 ]; then
  fact cuda_visible_devices_outside "${out_cuda:-unset}"
  fact cuda_visible_devices "${CUDA_VISIBLE_DEVICES-unset}"
  nvml=no
  for dir in $(echo "${LD_LIBRARY_PATH-}" | sed 's/:/ /g') /.singularity.d/libs /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    for lib in "$dir"/libnvidia-ml.so*; do
      [ -e "$lib" ] && nvml=yes
    done
  done
  fact libnvidia_ml "$nvml"
  listed=$(nvidia-smi -L 2>&1)
  rc=$?
  echo "$listed" | while IFS= read -r line; do
    [ -n "$line" ] && printf '@@gpu %s\n' "$line"
  done
  if [ "$rc" -ne 0 ]; then
    check gpus not_held "nvidia-smi -L exited with status $rc; libnvidia-ml visible: $nvml"
  else
    check gpus held "nvidia-smi -L listed $(echo "$listed" | grep -c '^GPU ') GPU(s)"
    query=$(nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader 2>/dev/null)
    qrc=$?
    if [ "$qrc" -ne 0 ] || [ -z "$query" ]; then
      fact gpu_query "failed (status $qrc)"
    else
      echo "$query" | while IFS= read -r line; do
        [ -n "$line" ] && fact gpu "$line"
      done
    fi
    if [ -n "$gpu_type" ]; then
      if [ "$qrc" -ne 0 ] || [ -z "$query" ]; then
        check gpu_type unknown "nvidia-smi --query-gpu failed (status $qrc)"
      elif echo "$query" | cut -d, -f2 | grep -qivF -- "$gpu_type"; then
        check gpu_type not_held "not every GPU is of type $gpu_type"
      else
        check gpu_type held "every GPU is of type $gpu_type"
      fi
    fi
  fi
fi

[ "$failed" = 1 ] && exit 4
[ "$gpu_failed" = 1 ] && exit 3
exit 0
