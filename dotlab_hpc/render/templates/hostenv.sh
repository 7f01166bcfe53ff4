# clear_host_env: what Apptainer sets inside from the host goes before any analysis runs. Under
# --containall, Apptainer 1.4.5 still exports APPTAINER_CONTAINER (the image's host path), the
# bind list (APPTAINER_BIND), APPTAINER_NO_EVAL and the SINGULARITY_* twin of each (userdocs
# environment_and_metadata.rst, "--cleanenv"); HOME is the host user's home folder's name. Kept:
# only the names whose values are Apptainer's own (exec, the image's file name, a script in
# /.singularity.d). Then hide_login. The wrapper runs it before the analysis, the probe before
# it measures.
clear_host_env() {
  for _v in $(export -p | sed -n -e 's/^declare -x /export /' \
    -e 's/^export \(APPTAINER_[A-Za-z0-9_]*\)=.*/\1/p' \
    -e 's/^export \(SINGULARITY_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case "${_v#*_}" in COMMAND | NAME | APPNAME | ENVIRONMENT) ;; *) unset "$_v" ;; esac
  done
  HOME=/tmp
  export HOME
  hide_login
}
# hide_login: Apptainer appends the caller's own entry to the container's /etc/passwd and
# /etc/group (`config passwd`, `config group`): the host's login name and home folder. Where
# those files are the container's to write (Apptainer's generated copies), the entries of this
# uid and gid stay, named `user`, with /tmp as home: programs still find who they run as.
hide_login() {
  _uid='' _gid='' _login=''
  while read -r _k _v _rest; do
    case "$_k" in Uid:) _uid=$_v ;; Gid:) _gid=$_v ;; esac
  done </proc/self/status
  case "$_uid$_gid" in '' | *[!0-9]*) return 0 ;; esac
  [ -w /etc/passwd ] && _login=$(sed -n "s/^\([^:]*\):[^:]*:$_uid:.*/\1/p" /etc/passwd | tail -n 1)
  case "$_login" in '' | user | *[!A-Za-z0-9._-]*) return 0 ;; esac
  _t=$(sed -e "s/^[^:]*:\([^:]*\):$_uid:\([^:]*\):[^:]*:[^:]*:/user:\1:$_uid:\2::\/tmp:/" /etc/passwd) &&
    printf '%s\n' "$_t" >/etc/passwd
  [ -w /etc/group ] || return 0
  _t=$(sed -e "s/^[^:]*:\([^:]*\):$_gid:/user:\1:$_gid:/" -e "s/\([:,]\)$_login,/\1user,/" \
    -e "s/\([:,]\)$_login\$/\1user/" /etc/group) && printf '%s\n' "$_t" >/etc/group
  return 0
}
