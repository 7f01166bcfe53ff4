# clear_host_env: what Apptainer sets inside from the host goes before any analysis runs. Under
# --containall, Apptainer 1.4.5 still exports APPTAINER_CONTAINER (the image's host path), the
# bind list (APPTAINER_BIND), APPTAINER_NO_EVAL and the SINGULARITY_* twin of each (userdocs
# environment_and_metadata.rst, "--cleanenv"); HOME is the host user's home folder's name. Kept:
# only the names whose values are Apptainer's own (exec, the image's file name, a script in
# /.singularity.d). Then hide_login. The wrapper runs it once, before the probe (a subshell of
# the wrapper) measures and before the analysis. Only sh builtins, here and in hide_login: no
# process is started.
clear_host_env() {
  while IFS= read -r _line; do
    case "$_line" in
      "export APPTAINER_"* | "export SINGULARITY_"*) _v=${_line#export } ;;
      "declare -x APPTAINER_"* | "declare -x SINGULARITY_"*) _v=${_line#declare -x } ;;
      *) continue ;;
    esac
    case "$_v" in *=*) _v=${_v%%=*} ;; *) continue ;; esac
    case "$_v" in *[!A-Za-z0-9_]*) continue ;; esac
    case "${_v#*_}" in COMMAND | NAME | APPNAME | ENVIRONMENT) ;; *) unset "$_v" ;; esac
  done <<EOF
$(export -p)
EOF
  HOME=/tmp
  export HOME
  hide_login
}
# hide_login: Apptainer appends the caller's own entry to the container's /etc/passwd and
# /etc/group (`config passwd`, `config group`): the host's login name and home folder. Where
# those files are the container's to write (Apptainer's generated copies), the entries of this
# uid and gid stay, named `user`, with /tmp as home: programs still find who they run as.
# Fields are cut by the shell; a name is compared whole, never made into a pattern.
hide_login() {
  _uid='' _gid='' _login=''
  while read -r _k _v _rest; do
    case "$_k" in Uid:) _uid=$_v ;; Gid:) _gid=$_v ;; esac
  done </proc/self/status
  case "$_uid$_gid" in '' | *[!0-9]*) return 0 ;; esac
  [ -w /etc/passwd ] || return 0
  # the login: the last entry NAME:PASSWORD:UID:... of this uid
  while IFS= read -r _line || [ -n "$_line" ]; do
    _r=${_line#*:}
    case "${_r#*:}" in "$_uid":*) _login=${_line%%:*} ;; esac
  done </etc/passwd
  case "$_login" in '' | user | *[!A-Za-z0-9._-]*) return 0 ;; esac
  # each entry of this uid (seven fields): NAME and HOME become user and /tmp, GECOS empty
  _t=
  while IFS= read -r _line || [ -n "$_line" ]; do
    case "$_line" in *:*:*:*:*:*:*)
      _r=${_line#*:}
      _p=${_r%%:*}
      _r=${_r#*:}
      _u=${_r%%:*}
      _r=${_r#*:}
      _g=${_r%%:*}
      _r=${_r#*:}
      _r=${_r#*:}
      [ "$_u" = "$_uid" ] && _line="user:$_p:$_uid:$_g::/tmp:${_r#*:}"
      ;;
    esac
    _t="$_t$_line
"
  done </etc/passwd
  printf '%s' "$_t" >/etc/passwd
  [ -w /etc/group ] || return 0
  # the group of this gid is named user; the login, among any group's members, too
  _t=
  while IFS= read -r _line || [ -n "$_line" ]; do
    case "$_line" in *:*:*:*)
      _n=${_line%%:*}
      _r=${_line#*:}
      _p=${_r%%:*}
      _r=${_r#*:}
      _g=${_r%%:*}
      _r=${_r#*:}
      [ "$_g" = "$_gid" ] && _n=user
      _m=
      while :; do
        _one=${_r%%,*}
        [ "$_one" = "$_login" ] && _one=user
        _m="$_m$_one"
        [ "$_r" = "${_r#*,}" ] && break
        _r=${_r#*,}
        _m="$_m,"
      done
      _line="$_n:$_p:$_g:$_m"
      ;;
    esac
    _t="$_t$_line
"
  done </etc/group
  printf '%s' "$_t" >/etc/group
  return 0
}
