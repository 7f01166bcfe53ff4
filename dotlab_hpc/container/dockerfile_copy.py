"""COPY and ADD, kept in their place among the RUN lines.

Apptainer runs every %files line before any of %post, so a COPY that follows a RUN would move
ahead of it. Such a COPY (and any whose outcome depends on what is already in the image: several
sources, a wildcard, a folder destination) therefore goes through %files into a staging folder,
``/.dotlab-files/<n>/<i>``, and is put in place by a ``cp -a`` step in %post at its own position,
following Docker's rules (https://docs.docker.com/reference/dockerfile/#copy): a source folder's
contents are copied, a destination ending in ``/`` is a folder, a relative destination is relative
to the WORKDIR. The staging folder is removed at the end of %post. A single-source COPY before the
first RUN goes straight into %files, which then does what Docker does (Apptainer's %files is
``cp -fLr`` after creating the parent folders, internal/pkg/build/files/copy.go).

ADD of a local tar archive (uncompressed, gzip, bzip2 or xz, named so) unpacks it into the
destination folder (https://docs.docker.com/reference/dockerfile/#adding-local-tar-archives): it
is staged like a COPY and unpacked by ``tar`` in %post at its own position, with the flag its
name calls for (busybox tar does not detect the compression itself). ``--unpack=false`` copies
it as it is. A zstd archive is refused: Docker's documentation does not say it unpacks one.
"""

from __future__ import annotations

import posixpath
import re
import shlex

from ..errors import UsageError
from .deffile import LOCALIMAGE_PREFIX, pinned_ref_problem
from .dockerfile_expand import expand, literal
from .dockerfile_lex import Instruction, json_list, raw_words
from .spython_def import SCRATCH, Stage, checked_text

STAGING = "/.dotlab-files"
# Apptainer expands each %files source with /bin/sh on the build host (files.go expandPath):
# only characters that are plain there, and Docker's wildcards.
_SOURCE_RE = re.compile(r"[A-Za-z0-9_./@+,:=*?\[\]-]+")
_GLOB = "*?["
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|git@")
_TAR_RE = re.compile(r"\.(tar|tgz|tbz2?|txz|tzst|tar\.(gz|bz2|xz|zst))$", re.I)
_TAR_FLAG = {"tgz": "z", "gz": "z", "tbz": "j", "tbz2": "j", "bz2": "j", "txz": "J", "xz": "J"}
_DROPPED_COPY_FLAGS = ("--chown", "--chmod", "--link")
_CHECKSUM_RE = re.compile(r"sha256:([0-9a-f]{64})")


def copy(ins: Instruction, stages: list[Stage], where: str, warnings: list[str]) -> None:
    """Add a COPY/ADD to the current stage: %files lines, and %post steps when staged."""
    stage, kw = stages[-1], ins.keyword
    paths, layer, unpack, checksum = _copy_words(ins, stages, where, warnings)
    if len(paths) < 2:
        raise UsageError(f"{where}: {kw} needs a source and a destination")
    sources, dest = paths[:-1], paths[-1]
    if checksum is not None:
        _download(stage, sources, dest, checksum, where, warnings)
        return
    for p in sources:
        _check_source(p, kw, where, ins.keyword == "ADD" and layer is None)
    archives = [unpack and layer is None and _archive(p, where) for p in sources]
    folder, target = _destination(stage, sources, dest, where, kw, warnings)
    prefix = f"COPY --from={layer} " if layer else "COPY "
    if not any(archives) and _direct(stage, sources, folder, target):
        stage.copied_to.add(target)
        stage.spython_lines.append(prefix + checked_text(f"{sources[0]} {target}", where, kw))
        return
    _staged(stage, sources, archives, prefix, target, folder, where, kw)


def _copy_words(
    ins: Instruction, stages: list[Stage], where: str, warnings: list[str]
) -> tuple[list[str], str | None, bool, str | None]:
    """A COPY/ADD's paths (expanded, literal), the stage it copies from (``--from``), whether
    an archive is unpacked (ADD's ``--unpack``) and the sha256 ADD's ``--checksum`` pins; a
    flag %files cannot keep, warned of."""
    stage, kw = stages[-1], ins.keyword
    if ins.heredoc:
        raise UsageError(
            f"{where}: {kw} with a heredoc is not supported",
            hint="put the text in a file next to the Dockerfile and COPY that file",
        )
    argv = json_list(ins.joined)
    words = argv if argv is not None else raw_words(ins.joined, where)
    flags = [w for w in words if w.startswith("--")]
    scope = stage.scope
    paths = [literal(expand(w, scope, where, warnings), where, kw) for w in words if w not in flags]
    layer, unpack, checksum = None, kw == "ADD", None
    for flag in flags:
        if kw == "ADD" and flag in ("--unpack", "--unpack=true", "--unpack=false"):
            unpack = flag != "--unpack=false"
        elif kw == "ADD" and flag.startswith("--checksum="):
            m = _CHECKSUM_RE.fullmatch(flag.split("=", 1)[1])
            if m is None:
                raise UsageError(
                    f"{where}: ADD {flag}: only --checksum=sha256:<64 hex digits> is supported"
                )
            checksum = m.group(1)
        elif flag.startswith("--from="):
            value = literal(expand(flag.split("=", 1)[1], scope, where, warnings), where, kw)
            layer = _copy_source(value, stages, where)
            stages[-1].needs.add(layer)
        elif flag.startswith(_DROPPED_COPY_FLAGS):
            warnings.append(f"{where}: {kw} {flag} left out: %files copies as root")
        else:
            raise UsageError(f"{where}: {kw} {flag} is not supported")
    return paths, layer, unpack, checksum


def _download(
    stage: Stage, sources: list[str], dest: str, sha: str, where: str, warnings: list[str]
) -> None:
    """``ADD --checksum=sha256:HEX URL DEST``: a %post step at its place that downloads the URL
    (with the image's curl, else wget, else python3) and fails the build unless its sha256 is
    the pinned one; Docker's mode 600. A DEST ending in / gets the URL's last path part."""
    if len(sources) != 1 or not _URL_RE.match(sources[0]) or sources[0].startswith("git@"):
        raise UsageError(
            f"{where}: ADD --checksum pins one URL (http or https); it is not for {sources[0]}"
        )
    if stage.image.lower() == SCRATCH:
        raise UsageError(f"{where}: ADD of a URL into a FROM scratch stage needs a shell")
    url = sources[0]
    folder, target = _destination(stage, sources, dest, where, "ADD", warnings)
    if folder:
        from urllib.parse import urlsplit

        name = posixpath.basename(urlsplit(url).path)
        if not name or name in (".", ".."):
            raise UsageError(f"{where}: ADD {url} {dest}: the URL names no file; give DEST a name")
        target = posixpath.join(target, name)
    fetch = (
        'if command -v curl >/dev/null 2>&1; then curl -fsSL -o "$_d" "$_u"; '
        'elif command -v wget >/dev/null 2>&1; then wget -q -O "$_d" "$_u"; '
        "elif command -v python3 >/dev/null 2>&1; then python3 -c 'import sys, urllib.request;"
        ' urllib.request.urlretrieve(sys.argv[1], sys.argv[2])\' "$_u" "$_d"; '
        'else echo "ADD $_u: the image has no curl, wget or python3 to download it" >&2; false; fi'
    )
    step = (
        f'_u={shlex.quote(url)} _d={shlex.quote(target)} && mkdir -p "$(dirname "$_d")" && '
        f'{{ {fetch}; }} && echo "{sha}  $_d" | sha256sum -c - >/dev/null && chmod 600 "$_d"'
        " || exit 1"  # %post's sh -e ignores a failure inside an && list; not this one
    )
    stage.spython_lines.append("RUN " + checked_text(step, where, "ADD"))
    stage.runs += 1  # a COPY after it must land after it too (staged)


def failing(command: str) -> str:
    """``command`` as a step of %post that stops the build when it fails, as a RUN stops
    Docker's. %post runs under ``sh -e``, which ignores a failure inside an ``&&`` or ``||``
    list that does not end the script (measured on Apptainer 1.4.5: ``false && true`` then the
    next line runs): such a list gets ``|| exit $?`` after a brace group (a newline first, so
    that a comment at its end stays a comment). A plain command, a subshell or a pipeline
    already stops ``sh -e`` when it fails, and stays as it is."""
    if "&&" not in command and "||" not in command:
        return command
    return "{ " + command + "\n} || exit $?"


def bind_mounts(
    stages: list[Stage], command: str, mounts: list[dict[str, str]], where: str, warnings: list[str]
) -> str:
    """``RUN --mount=type=bind`` (or a cache seeded ``from=`` a stage): each source staged
    through %files like a COPY, copied to its target for this RUN alone (what was there is put
    aside, and back after it), the command run in between. Writes to it are dropped, as
    Docker drops them; a read-only mount is not enforced."""
    stage = stages[-1]
    n = stage.copies
    stage.copies += 1
    setup, cleanup = [], []
    for i, opts in enumerate(mounts):
        frm = opts.get("from")
        layer = (
            _copy_source(
                literal(expand(frm, stage.scope, where, warnings), where, "RUN"), stages, where
            )
            if frm
            else None
        )
        if layer is not None:
            stage.needs.add(layer)
        value = opts.get("source") or opts.get("src") or "."
        src = literal(expand(value, stage.scope, where, warnings), where, "RUN --mount")
        raw_target = opts.get("target") or opts.get("dst") or opts.get("destination")
        if not raw_target:
            raise UsageError(f"{where}: RUN --mount of {src} without a target")
        dest = literal(expand(raw_target, stage.scope, where, warnings), where, "RUN --mount")
        target = _absolute(posixpath.join(stage.workdir or "/", dest))
        if layer is None:
            _check_source(src, "RUN --mount", where, False)
        staged = f"{STAGING}/{n}/{i}"
        prefix = f"COPY --from={layer} " if layer else "COPY "
        stage.spython_lines.append(prefix + checked_text(f"{src} {staged}", where, "RUN"))
        t, aside = shlex.quote(target), shlex.quote(target + ".dotlab-aside")
        setup.append(
            f"if [ -e {t} ] || [ -L {t} ]; then mv {t} {aside}; fi && mkdir -p"
            f" {shlex.quote(posixpath.dirname(target))} && cp -a {staged} {t}"
        )
        cleanup.append(
            f"rm -rf {t} && if [ -e {aside} ] || [ -L {aside} ]; then mv {aside} {t}; fi"
        )
    # %post runs under sh -e, which ignores a failure inside an && list: '|| exit 1' keeps it
    return "{ " + " && ".join([*setup, f"( {command} )", *reversed(cleanup)]) + "; } || exit 1"


def _destination(
    stage: Stage, sources: list[str], dest: str, where: str, kw: str, warnings: list[str]
) -> tuple[bool, str]:
    """Whether the destination is a folder, and its absolute path (relative to the WORKDIR)."""
    if not dest:
        raise UsageError(f"{where}: {kw} with an empty destination")
    folder = dest.endswith("/") or posixpath.basename(dest) in (".", "..")
    if not dest.startswith("/") and stage.workdir is None:
        warnings.append(
            f"{where}: {kw} destination {dest} taken relative to / (no WORKDIR in this stage; "
            "Docker would use the base image's WORKDIR if it sets one)"
        )
    target = _absolute(posixpath.join(stage.workdir or "/", dest))
    many = len(sources) > 1 or any(c in _GLOB for c in "".join(sources))
    if many and not folder:
        raise UsageError(
            f"{where}: {kw} of several files (or a wildcard) into {dest}, which does not end in /",
            hint=f"end the destination with / ({dest}/), as Docker requires",
        )
    return folder, target


def _staged(
    stage: Stage,
    sources: list[str],
    archives: list[bool],
    prefix: str,
    target: str,
    folder: bool,
    where: str,
    kw: str,
) -> None:
    """Each source through %files into its staging folder, then put in place (or unpacked) by a
    %post step at the COPY's own position (which a FROM scratch stage has no shell for)."""
    if stage.image.lower() == SCRATCH:
        raise UsageError(
            f"{where}: this {kw} into a FROM scratch stage needs a shell to put it in place"
            " (several sources, a wildcard, an archive, a folder destination or a later copy"
            " over it), and the image has none",
            hint=f"{kw} one file or folder to its full path, or build the tree in an earlier"
            " stage and COPY --from= it whole",
        )
    n = stage.copies
    stage.copies += 1
    for i, src in enumerate(sources):
        glob = any(c in _GLOB for c in src)
        staged = f"{STAGING}/{n}/{i}"
        into = staged + "/" if glob else staged  # a wildcard's matches keep their names
        stage.spython_lines.append(prefix + checked_text(f"{src} {into}", where, kw))
        if archives[i]:
            step = _unpack(staged, src, target)
        elif glob:
            step = _place_glob(staged, target)
        else:
            step = _place(staged, src, target, folder)
        stage.spython_lines.append("RUN " + checked_text(failing(step), where, kw))


def _direct(stage: Stage, sources: list[str], folder: bool, target: str) -> bool:
    """%files alone does what Docker does: no RUN and no staged COPY before (its ``cp -a`` in
    %post would come after this one), one plain file-or-folder source."""
    if (
        stage.runs
        or stage.copies
        or len(sources) != 1
        or folder
        or any(c.isspace() for c in target)
    ):
        return False
    if any(c in _GLOB for c in sources[0]):
        return False
    # %files would copy a folder INTO an existing folder (Docker merges): not ours to create.
    return not any(t == target or t.startswith(target + "/") for t in stage.copied_to)


def _archive(src: str, where: str) -> bool:
    """Whether ADD unpacks this local source: a tar archive by its name, one file."""
    m = _TAR_RE.search(src)
    if m is None:
        return False
    if "zst" in m.group().lower():
        raise UsageError(
            f"{where}: ADD {src}: Docker documents unpacking tar, gzip, bzip2 and xz archives, "
            "not zstd",
            hint="COPY the archive and unpack it in RUN (tar --zstd -xf)",
        )
    if any(c in _GLOB for c in src):
        raise UsageError(
            f"{where}: ADD {src}: a wildcard of archives, each of which Docker would unpack",
            hint="ADD each archive by its name",
        )
    return True


def _unpack(staged: str, src: str, target: str) -> str:
    """Unpack a staged archive into the destination folder, as Docker's ADD does."""
    flag = _TAR_FLAG.get(src.rsplit(".", 1)[-1].lower(), "")
    q = shlex.quote(target)
    return f"mkdir -p {q} && tar -x{flag}f {staged} -C {q}"


def _place(staged: str, src: str, target: str, folder: bool) -> str:
    q = shlex.quote(target)
    named = shlex.quote(posixpath.join(target, posixpath.basename(src.rstrip("/"))))
    if folder:
        return f"mkdir -p {q} && if [ -d {staged} ]; then cp -a {staged}/. {q}; " + (
            f"else cp -a {staged} {named}; fi"
        )
    parent = shlex.quote(posixpath.dirname(target) or "/")
    return (
        f"if [ -d {staged} ]; then mkdir -p {q} && cp -a {staged}/. {q}; "
        f"elif [ -d {q} ]; then cp -a {staged} {named}; "
        f"else mkdir -p {parent} && cp -a {staged} {q}; fi"
    )


def _place_glob(staged: str, target: str) -> str:
    q = shlex.quote(target)
    return (
        f"mkdir -p {q} && for f in {staged}/* {staged}/.[!.]* {staged}/..?*; do "
        f'if [ -d "$f" ]; then cp -a "$f"/. {q}; elif [ -e "$f" ]; then cp -a "$f" {q}; fi; done'
    )


def _absolute(path: str) -> str:
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/")


def _check_source(p: str, kw: str, where: str, add: bool) -> None:
    if add and _URL_RE.match(p):
        raise UsageError(
            f"{where}: ADD {p} downloads content that nothing pins",
            hint=f"pin it: ADD --checksum=sha256:<64 hex digits> {p} DEST",
        )
    if not p or any(c.isspace() for c in p):
        raise UsageError(f"{where}: {kw} paths with spaces cannot go into %files")
    if not _SOURCE_RE.fullmatch(p) or p.startswith("-"):
        raise UsageError(
            f"{where}: {kw} source {p!r}: Apptainer reads %files sources with the shell, so only "
            "letters, digits, . _ / @ + , : = - and the wildcards * ? [ ] are taken",
            hint="rename the file, or copy its folder instead",
        )
    if ".." in p.split("/"):
        raise UsageError(
            f"{where}: {kw} source {p}: '..' leaves the build context",
            hint="move the file under the Dockerfile's folder",
        )


def _copy_source(value: str, stages: list[Stage], where: str) -> str:
    """The stage ``--from=`` names: an earlier one (by name or number), or an image pinned by
    digest, which becomes a stage of its own (``image_stages``); an unpinned image is refused."""
    names = [s.name for s in stages[:-1]]
    if value.isascii() and value.isdigit() and len(value) < 5 and int(value) < len(names):
        return names[int(value)]
    if value.lower() in names:
        return value.lower()
    problem = pinned_ref_problem(value)
    if problem is None and not value.lower().startswith(LOCALIMAGE_PREFIX):
        name = image_stage_name(value)
        stages[-1].images[name] = value
        return name
    if "/" in value or ":" in value or "@" in value:  # an image, as Docker reads it
        raise UsageError(
            f"{where}: COPY --from={value}: the image is not pinned by digest ({problem})",
            hint=f"pin it: COPY --from={value.split('@', 1)[0]}@sha256:<digest>; find the digest"
            f" with `skopeo inspect docker://{value.split('@', 1)[0]}`",
        )
    raise UsageError(
        f"{where}: COPY --from={value} names no earlier stage, nor an image pinned by digest",
        hint=f"name an earlier stage, or an image: COPY --from={value}@sha256:<digest>",
    )


def image_stage_name(ref: str) -> str:
    """The stage of ``COPY --from=IMAGE@sha256:HEX``: one per image, named by its digest."""
    return "image-" + ref.rsplit("@sha256:", 1)[1][:12]
