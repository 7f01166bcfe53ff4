# dotlab-hpc wrapper: runs INSIDE the container as
# `/bin/sh -c WRAPPER dotlab-wrapper LIMIT MAX_PROCESSES ENTRYPOINT`.
# Its first line on stdout is the start marker: the job script reads stdout through a pipe the
# analysis cannot rewind or truncate, and no analysis runs before this line, so the first marker
# there is the wrapper's (it tells an Apptainer failure from the analysis failing: both can exit
# 255). Everything after it is the analysis's own output; the exit status, the end time and
# whether the limit was reached are taken outside the container, by the job script.
limit=$1
max_processes=$2
entry=$3
# @@hostenv: templates/hostenv.sh goes here
clear_host_env
# RLIMIT_NPROC, soft and hard (no capability here can raise it again): bash and busybox call it
# -u, dash -p. Inside the container's user namespace it bounds this container's processes only.
# shellcheck disable=SC3045  # not POSIX: both spellings are tried, whichever this sh knows
ulimit -u "$max_processes" 2>/dev/null || ulimit -p "$max_processes" 2>/dev/null || true
echo "@@dotlab start $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v timeout >/dev/null 2>&1; then
  exec timeout -k 10 "$limit" sh -c "$entry" </dev/null
fi
sh -c "$entry" </dev/null &
pid=$!
( sleep "$limit"; kill -TERM "$pid" 2>/dev/null; sleep 10; kill -KILL "$pid" 2>/dev/null ) &
watch=$!
wait "$pid"
rc=$?
kill "$watch" 2>/dev/null
exit "$rc"
