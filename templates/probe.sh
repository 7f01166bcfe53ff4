# dotlab-hpc probe: runs INSIDE a container started with the analysis's own flags, before the
# analysis's container, as `/bin/sh -c PROBE dotlab-probe GPU`. Nothing of the analysis runs yet,
# so its output (kept outside, in the run directory) is evidence the analysis cannot alter.
# GPU claims: `nvidia-smi -L` must list the GPUs; a failure is an operator problem.
if [ "$1" = 1 ]; then
  nvidia-smi -L 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "nvidia-smi -L exited with status $rc"
    exit 3
  fi
fi
exit 0
