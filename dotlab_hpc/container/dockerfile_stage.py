"""One Dockerfile instruction inside a stage → the lines spython maps faithfully.

Build arguments and ENV values are expanded here, where Docker expands them (dockerfile_expand),
so %environment holds literal values; RUN lines still expand them in the shell, from the exports
written into %post at the ARG and ENV lines' own positions. Docker's platform arguments declared
without a default (``ARG TARGETARCH``) are computed there from ``uname -m``, as Docker sets them
for a native build; TARGETOS and BUILDOS are ``linux``. A RUN after a non-root USER is refused:
%post runs as root, so it would install into root's home instead.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import TYPE_CHECKING

from ..errors import UsageError, one_line
from .deffile import TOOL_LABEL_PREFIX
from .dockerfile_copy import bind_mounts, copy, failing
from .dockerfile_expand import (
    PLATFORM_ARGS,
    Ref,
    Scope,
    Value,
    expand,
    fixed,
    literal,
    shell,
)
from .dockerfile_lex import (
    _CONTINUED_RE,
    Instruction,
    env_items,
    exec_or_shell,
    heredoc_markers,
    is_name,
    json_list,
    label_items,
    raw_words,
)
from .spython_def import SCRATCH, Stage, checked_text

if TYPE_CHECKING:
    from .base_config import BaseConfig

_BUILD_ARG_RE = re.compile(r"{{\s*\w+\s*}}")  # Apptainer's build-argument syntax
_DROPPED = {
    "EXPOSE": "ports are not part of an Apptainer image",
    "VOLUME": "Apptainer binds folders at run time (--bind)",
    "STOPSIGNAL": "Apptainer has no stop signal setting",
    "HEALTHCHECK": "Apptainer has no health checks",
    "ONBUILD": "Apptainer has no ONBUILD triggers",
}
# `uname -m` in %post → Docker's architecture and variant (containerd's platforms.Normalize).
_MACHINES = (
    ("x86_64", "amd64", ""),
    ("aarch64|arm64", "arm64", ""),
    ("armv5*", "arm", "v5"),
    ("armv6*", "arm", "v6"),
    ("armv8*", "arm", "v8"),
    ("arm*", "arm", "v7"),
    ("i?86", "386", ""),
    ("loongarch64", "loong64", ""),
)
_ROOT = ("root", "0")


def global_arg(ins: Instruction, scope: Scope, where: str, warnings: list[str]) -> None:
    """An ARG before the first FROM: a default a stage's ``ARG NAME`` takes up."""
    for name, value in _arg_items(ins, scope, where, warnings):
        if value is not None:
            scope.values[name] = value
            scope.platform.pop(name, None)
        elif name in scope.platform and name not in scope.values:
            scope.platform[name] = ins.line


def global_scope() -> Scope:
    """The scope of the ARGs before the first FROM, where Docker predefines the platform ones."""
    os_values: dict[str, Value] = {n: ("linux",) for n in PLATFORM_ARGS if n.endswith("OS")}
    return Scope(os_values, {}, set(), {n: 0 for n in PLATFORM_ARGS if n not in os_values})


def instruction(
    ins: Instruction, stages: list[Stage], glob: Scope, where: str, warnings: list[str]
) -> None:
    """Convert one instruction into the current stage (the last of ``stages``)."""
    stage = stages[-1]
    kw = ins.keyword
    if any(_BUILD_ARG_RE.search(x) for x in ins.lines + ins.heredoc):
        warnings.append(
            f"{where}: `{{{{ name }}}}` in {kw} will be read by Apptainer as a build argument"
        )
    if kw == "RUN":
        _run_step(ins, stages, where, warnings)
    elif kw in ("COPY", "ADD"):
        copy(ins, stages, where, warnings)
    elif kw == "WORKDIR":
        _workdir(ins, stage, where, warnings)
    elif kw == "ENV":
        _env(ins, stage, where, warnings)
    elif kw == "ARG":
        _arg(ins, stage, glob, where, warnings)
    elif kw == "LABEL":
        for key, value in label_items(ins, where):
            lkey = literal(expand(key, stage.scope, where, warnings), where, kw)
            lvalue = literal(expand(value, stage.scope, where, warnings), where, kw)
            stage.labels.append(_label(lkey, lvalue, where))
    elif kw == "MAINTAINER":
        stage.labels.append(_label("maintainer", ins.joined, where))
    elif kw in ("CMD", "ENTRYPOINT"):
        _command(ins, stage, where)
    elif kw == "SHELL":
        _shell(ins, stage, where)
    elif kw == "USER":
        _user(ins, stage, where, warnings)
    elif kw in _DROPPED:
        warnings.append(f"{where}: {kw} left out: {_DROPPED[kw]}")
    else:
        raise UsageError(f"{where}: unknown instruction {kw}")


def _run_step(ins: Instruction, stages: list[Stage], where: str, warnings: list[str]) -> None:
    """A RUN as a %post step; after a USER that is not root, run as that user (``as_user``);
    refused in a FROM scratch stage, which has no shell (Docker's build fails there too)."""
    stage = stages[-1]
    if stage.image.lower() == SCRATCH:
        raise UsageError(
            f"{where}: RUN in a FROM scratch stage: the image has no shell to run it",
            hint="run it in a stage built FROM a pinned base image, then COPY --from= its result",
        )
    command, mounts, shell_form = _run(ins, where, warnings)
    wrapped = shell_form and stage.shell is not None
    if wrapped:  # Docker runs a shell-form RUN as SHELL + [its text]
        command = shlex.join([*(stage.shell or ()), command])
    if stage.user is not None:  # su's shell ends with the command: its status is su's
        command = as_user(command, stage.user, where)
    elif not mounts and not wrapped:  # (bind_mounts: a subshell, ending in '|| exit 1')
        command = failing(command)
    if mounts:
        command = bind_mounts(stages, command, mounts, where, warnings)
    stage.spython_lines.append("RUN " + checked_text(command, where, ins.keyword))
    stage.runs += 1


def inherit(stage: Stage, base: BaseConfig, where: str) -> None:
    """A stage from a base image starts from what that image sets, as in Docker: its ENV
    (for ``$NAME`` and, exported in %post, for the RUN lines; Apptainer keeps it in the image
    itself), its WORKDIR, its ENTRYPOINT and CMD, and its USER for the RUN lines."""
    for name, value in base.env:
        stage.scope.values[name] = (value,)
        stage.scope.env.add(name)
    if base.env:
        pairs = [checked_text(f"{k}={shell((v,))}", where, "FROM") for k, v in base.env]
        stage.spython_lines.append("RUN export " + " ".join(pairs))
    if base.workdir:
        path = "/" + posixpath.normpath(base.workdir).lstrip("/")
        stage.workdir = path
        q = checked_text(shlex.quote(path), where, "FROM")
        stage.spython_lines += [f"RUN mkdir -p {q}", f"RUN cd {q}"]  # Docker makes it, too
    stage.entrypoint = list(base.entrypoint) if base.entrypoint else None
    stage.cmd = list(base.cmd) if base.cmd else None
    stage.shell = _shell_in_force(list(base.shell or ()))
    if base.user and base.user.split(":", 1)[0] not in _ROOT:
        stage.user = (0, one_line(base.user))  # line 0: the base image's


def as_user(command: str, user: tuple[int, str], where: str) -> str:
    """``command`` run as the USER in force, as Docker runs a RUN after it: ``su`` to that
    user (its home in HOME, the rest of the environment kept, the working folder too); a
    user id is taken by its name in the image's /etc/passwd, which ``su`` needs (and Docker,
    for a name). %post runs as root: without this, ``pip install --user`` would fill /root."""
    line, spec = user
    name, _, group = spec.partition(":")
    if group:
        given = f"line {line}" if line else "the base image's"
        raise UsageError(
            f"{where}: RUN after USER {spec} ({given}): a .def can run a step as a user"
            f" (su), not with a group chosen apart from that user's own",
            hint=f"give the user alone, USER {name}, with {group} as its group in /etc/passwd",
        )
    who = shlex.quote(name)
    if name.isdigit():  # su takes a name: the one the image gives the id, found when building
        who = f'"$(getent passwd {name} | cut -d: -f1)"'
    return f"su -s /bin/sh -c {shlex.quote(command)} {who}"


def _env(ins: Instruction, stage: Stage, where: str, warnings: list[str]) -> None:
    """An ENV: each value expanded before any is set, exported in %post and %environment."""
    kw = ins.keyword
    new = [
        (k, fixed(expand(v, stage.scope, where, warnings), where, kw))
        for k, v in env_items(ins, where)
    ]
    pairs = [checked_text(f"{k}={shell(v)}", where, kw) for k, v in new]
    for k, v in new:  # every value was read before any is set, as Docker does
        stage.scope.values[k] = v
        stage.scope.env.add(k)
    stage.environ += pairs
    stage.spython_lines.append("RUN export " + " ".join(pairs))


def _shell_in_force(argv: list[str]) -> list[str] | None:
    """The SHELL a stage keeps: None for Docker's default, ``/bin/sh -c`` (what %post runs)."""
    return None if argv in ([], ["/bin/sh", "-c"]) else argv


def _shell(ins: Instruction, stage: Stage, where: str) -> None:
    """``SHELL ["executable", "parameters"]``: the shell the shell-form RUN, CMD and ENTRYPOINT
    after it run with (JSON form only, and not expanded, as in Docker)."""
    argv = json_list(ins.joined)
    if not argv:
        raise UsageError(
            f"{where}: SHELL {ins.joined.strip()}: Docker takes only a JSON list of strings here",
            hint='write it as SHELL ["/bin/bash", "-c"]',
        )
    checked_text(shlex.join(argv), where, ins.keyword)
    stage.shell = _shell_in_force(argv)


def _command(ins: Instruction, stage: Stage, where: str) -> None:
    """A CMD or ENTRYPOINT, as the argv it gives (an ENTRYPOINT resets CMD, as in Docker); a
    shell form runs with the SHELL in force."""
    argv = exec_or_shell(ins.joined)
    if json_list(ins.joined) is None and stage.shell is not None:
        argv = [*stage.shell, ins.joined]
    checked_text(shlex.join(argv), where, ins.keyword)
    stage.command_set = True
    if ins.keyword == "CMD":
        stage.cmd = argv
    else:
        stage.entrypoint, stage.cmd = argv, None  # Docker: ENTRYPOINT resets CMD
        stage.shell_entrypoint = json_list(ins.joined) is None


def _user(ins: Instruction, stage: Stage, where: str, warnings: list[str]) -> None:
    """A USER is left out of the image (the container runs as whoever starts it); a RUN after
    it runs as that user when Apptainer builds (``as_user``)."""
    user = literal(expand(ins.joined, stage.scope, where, warnings), where, ins.keyword)
    stage.user = None if user.split(":", 1)[0] in _ROOT else (ins.line, one_line(user))
    warnings.append(
        f"{where}: USER left out: an Apptainer container runs as the user who starts it"
    )


def _arg(ins: Instruction, stage: Stage, glob: Scope, where: str, warnings: list[str]) -> None:
    scope = stage.scope
    for name, value in _arg_items(ins, scope, where, warnings):
        if value is None and name in glob.values:
            value = fixed(glob.values[name], where, f"ARG {name}")  # the stage cannot see it
        if value is None and name in PLATFORM_ARGS:
            if name not in scope.env:
                scope.values.pop(name, None)
                scope.empty.pop(name, None)
                scope.platform[name] = ins.line
                stage.spython_lines.append("RUN " + platform_script(name))
            continue
        if value is None:
            scope.empty[name] = ins.line
            warnings.append(f"{where}: ARG {name} has no default and is left out of the .def")
            continue
        if name in scope.env:
            continue  # Docker: an ENV of the same name wins over the ARG
        if _refers_to(value, name):
            raise UsageError(
                f"{where}: ARG {name}'s default refers to ${name} itself, before anything in the"
                " Dockerfile sets it: Docker takes it from the base image's environment when it"
                " builds, which the conversion cannot see",
                hint=f"write the value out (ARG {name}=…), or leave the default off",
            )
        scope.values[name] = value
        scope.empty.pop(name, None)
        scope.platform.pop(name, None)
        pair = checked_text(f"{name}={shell(value)}", where, "ARG")
        stage.spython_lines.append(f"RUN export {pair}")


def _refers_to(value: Value, name: str) -> bool:
    """Whether ``value`` keeps a live reference to ``name`` (also inside a ``${X:-word}``)."""
    return any(isinstance(p, Ref) and (p.name == name or _refers_to(p.word, name)) for p in value)


def platform_script(name: str) -> str:
    """The %post line that sets a platform argument for the build host, as Docker would for a
    native build: ``TARGETARCH`` amd64, arm64, arm…; ``TARGETVARIANT`` v7 or empty;
    ``TARGETPLATFORM`` linux/arm64, linux/arm/v7…; any other machine is taken as it is."""
    kind = name.removeprefix("TARGET").removeprefix("BUILD")
    cases = []
    for machine, arch, variant in _MACHINES:
        value = {"ARCH": arch, "VARIANT": variant}.get(kind, f"linux/{arch}/{variant}".rstrip("/"))
        cases.append(f"{machine}) {name}={value} ;;")
    other = {"ARCH": '"$(uname -m)"', "VARIANT": ""}.get(kind, '"linux/$(uname -m)"')
    return f'case "$(uname -m)" in {" ".join(cases)} *) {name}={other} ;; esac; export {name}'


def _arg_items(
    ins: Instruction, scope: Scope, where: str, warnings: list[str]
) -> list[tuple[str, Value | None]]:
    out: list[tuple[str, Value | None]] = []
    for word in raw_words(ins.joined, where):
        name, eq, raw = word.partition("=")
        if not is_name(name):
            raise UsageError(f"{where}: cannot read {word!r} as ARG NAME[=default]")
        out.append((name, expand(raw, scope, where, warnings) if eq else None))
    return out


def _workdir(ins: Instruction, stage: Stage, where: str, warnings: list[str]) -> None:
    path = literal(expand(ins.joined, stage.scope, where, warnings), where, "WORKDIR")
    if not path:
        raise UsageError(f"{where}: WORKDIR without a path")
    path = "/" + posixpath.normpath(posixpath.join(stage.workdir or "/", path)).lstrip("/")
    stage.workdir = path
    if stage.image.lower() == SCRATCH:
        warnings.append(
            f"{where}: WORKDIR {path} in a FROM scratch stage: no shell makes the folder, so it"
            " is in the image only where a COPY puts something in it"
        )
    q = checked_text(shlex.quote(path), where, "WORKDIR")
    stage.spython_lines += [f"RUN mkdir -p {q}", f"RUN cd {q}"]


def _label(key: str, value: str, where: str) -> list[str]:
    if key.lower().startswith(TOOL_LABEL_PREFIX):
        raise UsageError(
            f"{where}: LABEL {one_line(key)}: {TOOL_LABEL_PREFIX}* labels are dotlab-hpc's own"
        )
    if not key or any(c.isspace() for c in key):
        raise UsageError(f"{where}: LABEL key {one_line(key)!r} is empty or has spaces")
    checked_text(f"{key} {value}", where, "LABEL")
    return [key, value]


def _mount(flag: str, where: str) -> dict[str, str] | None:
    """What a ``RUN --mount`` asks for: the options of one that gives the command files (a bind
    of the context or of a stage, or a cache seeded from a stage), which the RUN gets
    (``dockerfile_copy.bind_mounts``); None for one that only speeds a build up (a cache or
    tmpfs of its own: left out). A secret or an ssh agent is refused: a .def cannot hold one."""
    opts = dict(o.partition("=")[::2] for o in flag.removeprefix("--mount=").split(","))
    kind = opts.get("type", "bind")
    if kind in ("cache", "tmpfs") and "from" not in opts:
        return None
    if kind in ("bind", "cache"):
        return opts
    raise UsageError(
        f"{where}: RUN {flag}: the command reads a {kind} through a BuildKit mount, which %post"
        " does not have, and a .def cannot hold one",
        hint="build without it, or give the command what it needs another way",
    )


def _run(
    ins: Instruction, where: str, warnings: list[str]
) -> tuple[str, list[dict[str, str]], bool]:
    """The RUN's command, the mounts that give it files, and whether it is shell text."""
    body = "\n".join(ins.lines)
    mounts = []
    while m := re.match(r"\s*(--[^\s\\]+)(?:\s|\\[ \t]*\n)*", body):
        flag = m.group(1)
        given = _mount(flag, where) if flag.startswith("--mount=") else None
        if given is not None:
            mounts.append(given)
        else:
            warnings.append(f"{where}: RUN {flag} left out: %post has no BuildKit RUN options")
        body = body[m.end() :]
    body = _CONTINUED_RE.sub("", body.rstrip()).rstrip()
    if ins.heredoc:
        return _heredoc(ins, body, where), mounts, True
    argv = json_list(body)
    if argv is not None:
        return shlex.join(argv), mounts, False
    if not body:
        raise UsageError(f"{where}: RUN without a command")
    return body, mounts, True


def _heredoc(ins: Instruction, body: str, where: str) -> str:
    """``RUN <<EOF`` runs the heredoc as a script; ``RUN cmd <<EOF`` is shell text as it is."""
    markers = heredoc_markers(ins)
    if not re.match(r"\s*\d*<<", body):
        return body + "\n" + "\n".join(ins.heredoc)  # /bin/sh reads the heredoc itself
    script = ins.heredoc[:-1]
    if markers[0].group(1) == "-":
        script = [x.lstrip("\t") for x in script]
    if len(markers) > 1 or body.strip() != markers[0].group(0):
        raise UsageError(
            f"{where}: RUN {body.strip()}: only one heredoc can be run as the script",
            hint="give the command first (RUN sh <<EOF), or split it into several RUN lines",
        )
    if script and script[0].startswith("#!"):
        raise UsageError(
            f"{where}: RUN <<{markers[0].group(3)} with {script[0]}: %post runs scripts under "
            "/bin/sh",
            hint=f"name the interpreter on the RUN line: RUN {script[0][2:].strip()} "
            f"<<{markers[0].group(3)}",
        )
    return "(\n" + "\n".join(script) + "\n)"  # a subshell, as Docker runs it in its own
