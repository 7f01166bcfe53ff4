# clear_host_env: what Apptainer sets inside from the host goes before any analysis runs. Under
# --containall, Apptainer 1.4.5 still exports APPTAINER_CONTAINER (the image's host path), the
# bind list (APPTAINER_BIND), APPTAINER_NO_EVAL and the SINGULARITY_* twin of each (userdocs
# environment_and_metadata.rst, "--cleanenv"); HOME is the host user's home folder's name. Kept:
# only the names whose values are Apptainer's own (exec, the image's file name, a script in
# /.singularity.d). The wrapper runs it before the analysis, the probe before it measures.
clear_host_env() {
  for _v in $(export -p | sed -n -e 's/^declare -x /export /' \
    -e 's/^export \(APPTAINER_[A-Za-z0-9_]*\)=.*/\1/p' \
    -e 's/^export \(SINGULARITY_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case "${_v#*_}" in COMMAND | NAME | APPNAME | ENVIRONMENT) ;; *) unset "$_v" ;; esac
  done
  HOME=/tmp
  export HOME
}
