# dotlab-hpc wrapper: runs INSIDE the container, as its first process (`apptainer exec --no-init`:
# PID 1), as `/bin/sh -c WRAPPER dotlab-wrapper LIMIT MAX_PROCESSES ENTRYPOINT [PROBE ARGS...]`.
# One container per run: the probe measures this very container, then the analysis runs in it.
# 0. What Apptainer set from the host goes (templates/hostenv.sh), before the probe measures the
#    environment the analysis will have; Apptainer's HOME stays known to it as container_home.
# 1. The probe (templates/probe.sh, with what the job script measured outside as ARGS; in a
#    subshell of this sh, with its traps reset and its own variables and functions), before
#    anything of the analysis exists. Its lines go to stdout, which the job script reads through
#    a pipe and keeps, up to the start marker, as probe.out: the analysis, which starts after the
#    marker, can neither write before it nor rewind what was read. A property not held, or no
#    usable GPU: the probe's status is this container's, and the entrypoint never runs.
# 2. The start marker: the first line on stdout after the probe's, and the first of container.out
#    (it tells an Apptainer failure from the analysis failing: both can exit 255).
# 3. exec: a new sh, with the cleared environment and only LIMIT and the entrypoint as arguments,
#    supervises the analysis; nothing of this process's first arguments or environment (the
#    host's paths) stays readable in /proc/1. Being PID 1, it forwards TERM itself (PID 1 gets
#    no signal it does not handle), and reaps what the analysis leaves behind.
# The exit status, the end time and whether the limit was reached are taken outside the
# container, by the job script.
limit=$1
max_processes=$2
entry=$3
trap 'exit 143' TERM INT
# @@hostenv: templates/hostenv.sh goes here
# shellcheck disable=SC2034  # the probe's: it runs in a subshell of this sh
container_home=${HOME-}
clear_host_env
if [ $# -gt 3 ]; then
  probe=$4
  shift 4
  (eval "$probe") 2>&1 </dev/null &
  wait $!
  rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
fi
# RLIMIT_NPROC, soft and hard (no capability here can raise it again): bash and busybox call it
# -u, dash -p. Inside the container's user namespace it bounds this container's processes only.
# shellcheck disable=SC3045  # not POSIX: both spellings are tried, whichever this sh knows
ulimit -u "$max_processes" 2>/dev/null || ulimit -p "$max_processes" 2>/dev/null || true
echo "@@dotlab start $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# shellcheck disable=SC2016  # the supervisor's own variables, expanded when it runs
exec /bin/sh -c '
pid=
stop() { [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; }
trap stop TERM INT
if command -v timeout >/dev/null 2>&1; then
  timeout -k 10 "$1" sh -c "$2" </dev/null &
  pid=$!
  watch=
else
  sh -c "$2" </dev/null &
  pid=$!
  (sleep "$1"; kill -TERM "$pid" 2>/dev/null; sleep 10; kill -KILL "$pid" 2>/dev/null) &
  watch=$!
fi
wait "$pid"
rc=$?
while kill -0 "$pid" 2>/dev/null; do
  wait "$pid"
  rc=$?
done
[ -n "$watch" ] && kill "$watch" 2>/dev/null
exit "$rc"
' dotlab-analysis "$limit" "$entry"
