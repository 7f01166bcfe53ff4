# dotlab-hpc wrapper: runs INSIDE the container as
# `/bin/sh -c WRAPPER dotlab-wrapper LIMIT GPU MAX_PROCESSES ENTRYPOINT`.
# It marks the start (so an Apptainer failure is told apart from the analysis failing: both can exit
# 255), probes the GPU for GPU claims, runs the entrypoint with `sh -c` under the time limit, and
# marks the end. Markers go to stderr, which the job script keeps outside the container.
limit=$1
gpu=$2
max_processes=$3
entry=$4
HOME=/tmp
export HOME
# RLIMIT_NPROC, soft and hard (no capability here can raise it again): bash and busybox call it
# -u, dash -p. Inside the container's user namespace it bounds this container's processes only.
ulimit -u "$max_processes" 2>/dev/null || ulimit -p "$max_processes" 2>/dev/null || true
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
echo "@@dotlab start $(now)" >&2
if [ "$gpu" = 1 ]; then
  probe=$(nvidia-smi -L 2>&1)
  prc=$?
  printf "%s\n" "$probe" | while IFS= read -r line; do printf "@@dotlab gpu %s\n" "$line" >&2; done
  if [ "$prc" -ne 0 ]; then
    echo "@@dotlab probe-failed $(now) rc=$prc" >&2
    exit 3
  fi
fi
t0=$(date +%s)
if command -v timeout >/dev/null 2>&1; then
  timeout -k 10 "$limit" sh -c "$entry" </dev/null
  rc=$?
else
  sh -c "$entry" </dev/null &
  pid=$!
  ( sleep "$limit"; kill -TERM "$pid" 2>/dev/null; sleep 10; kill -KILL "$pid" 2>/dev/null ) &
  watch=$!
  wait "$pid"
  rc=$?
  kill "$watch" 2>/dev/null
fi
t1=$(date +%s)
late=0
if [ $((t1 - t0)) -ge "$limit" ] && [ "$rc" -ne 0 ]; then late=1; fi
echo "@@dotlab end $(now) rc=$rc timed_out=$late" >&2
exit "$rc"
