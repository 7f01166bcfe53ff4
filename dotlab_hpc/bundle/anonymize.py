"""``pack --anonymize``: a bundle for double-blind review, with no login name, user id, home
folder or host path of the run in any of its files.

Every text file ``pack`` copies or writes goes through one ``Scrubber`` before ``SHA256SUMS``,
the crate and the statement are computed, so the bundle stays consistent and verifies. The
placeholders are fixed strings, so packing one run twice gives the same bytes:

    run directory     /anon/run           code folder     /anon/code
    data folder       /anon/data          output folder   /anon/out
    image             /anon/image.sif     runs root       /anon/runs (the run directory's parent)
    manifest's folder /anon/manifest      home folder     /anon/home
    apptainer program /anon/bin/<name>    site file       /anon/site/<name>
    login name        anonymous           uid, gid        65534 (``nobody``: the overflow id)

A login name is replaced as a word (``pytest-of-alice`` becomes ``pytest-of-anonymous``); a uid
or gid only where it is one (``uid 1000``, ``"gid": "1000"``, ``/run/user/1000``), never any
number. The image is binary and never rewritten: ``image_problems`` says when its embedded .def
or its descriptors name the user, and ``pack`` then refuses unless ``--no-image``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
from pathlib import Path, PurePosixPath

from ..values import frozen

ANON_USER = "anonymous"
ANON_ID = "65534"
ANON_ROOT = "/anon"

# Folders that are the system's, not the user's: never a prefix to rewrite (the container's own
# /work/* paths appear in the isolation facts, /tmp in the site settings)
_NOT_HOST_PATHS = frozenset(
    {
        "/",
        "/tmp",  # noqa: S108 - a name, never opened
        "/var/tmp",  # noqa: S108 - a name, never opened
        "/home",
        "/usr",
        "/opt",
        "/scratch",
        "/dev/shm",  # noqa: S108 - a name, never opened
        "/run",
        "/var",
        "/work",
        "/work/code",
        "/work/data",
        "/work/out",
    }
)
_NAME_CHAR = r"[A-Za-z0-9_]"
TOOL_PREFIX = "dotlab"  # the word the tool's own names start with
_PATH_CHAR = r"[\w.\-+@~%]"
_ID_PATTERNS = (
    # uid 1000 | uid=1000 | "uid": "1000" | "gid":1000 | @@iso fact uid 1000
    r'(?<![A-Za-z0-9_])(?:[ug]id)"?\s*[:=]?\s*"?({id})(?!\d)',
    r"/run/user/({id})(?!\d)",
    r"CANCELLED by ({id})(?!\d)",
    # the probe's "uid X gid Y inside, X' Y' outside" when the user check failed
    r"(?<!\d)({id}) \d+ outside",
    r"(?<!\d)\d+ ({id}) outside",
)


@frozen
class Identity:
    """Who a bundle must not name: a login name, its uid and gid, its home folder."""

    user: str
    uid: int
    gid: int
    home: str


def identity_of(uid: int) -> Identity:
    """The password database's account of ``uid`` (just the number when it has none)."""
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return Identity(user="", uid=uid, gid=uid, home="")
    return Identity(user=pw.pw_name, uid=uid, gid=pw.pw_gid, home=pw.pw_dir)


def identities(run_dir: Path) -> tuple[Identity, ...]:
    """The run directory's owner (who submitted it) and the user packing it, once each."""
    uids = dict.fromkeys((run_dir.stat().st_uid, os.getuid()))
    found = [identity_of(u) for u in uids]
    home = os.environ.get("HOME", "")
    if home.startswith("/") and all(i.home != home for i in found):
        found.append(Identity(user="", uid=os.getuid(), gid=os.getgid(), home=home))
    return tuple(found)


@frozen
class Scrubber:
    """Rewrites text: host paths to placeholders (longest first), then names, then ids."""

    paths: tuple[tuple[str, str], ...]
    users: tuple[str, ...]
    ids: tuple[str, ...]
    literal: tuple[tuple[str, str], ...] = ()  # exact strings (a manifest's old sha256)

    def text(self, s: str) -> str:
        """``s`` with every host path, login name and user id replaced."""
        for old, new in self.literal:
            s = s.replace(old, new)
        for old, new in self.paths:
            s = _path_re(old).sub(new.replace("\\", "\\\\"), s)
        for user in self.users:
            s = _word_re(user).sub(ANON_USER, s)
        for pattern in self._id_res():
            s = pattern.sub(lambda m: _swap_group(m, ANON_ID), s)
        return s

    def data(self, b: bytes) -> bytes:
        """The bytes of a text file, rewritten (bytes that are not UTF-8 are kept as they are)."""
        return self.text(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def leaks(self, s: str) -> list[str]:
        """What of the host ``s`` still names (empty once scrubbed)."""
        found = [old for old, _ in self.paths if _path_re(old).search(s)]
        found += [u for u in self.users if _word_re(u).search(s)]
        found += [f"id {m.group(1)}" for p in self._id_res() if (m := p.search(s))]
        return found

    def _id_res(self) -> list[re.Pattern[str]]:
        return [re.compile(p.format(id=i)) for i in self.ids for p in _ID_PATTERNS]


def _word_re(word: str) -> re.Pattern[str]:
    # a login name that is the tool's own prefix cannot be told from the tool's names
    # (dotlab-hpc, dotlab.claim, dotlab:isolation, dotlab-<run id>): only the bare word is hers
    after = r"[A-Za-z0-9_.:\-]" if word == TOOL_PREFIX else _NAME_CHAR
    return re.compile(rf"(?<!{_NAME_CHAR}){re.escape(word)}(?!{after})")


def _path_re(path: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!{_PATH_CHAR}){re.escape(path)}(?!{_PATH_CHAR})")


def _swap_group(m: re.Match[str], new: str) -> str:
    start, end = m.span(1)
    whole = m.group(0)
    base = m.start(0)
    return whole[: start - base] + new + whole[end - base :]


def _is_host_path(path: str) -> bool:
    return path.startswith("/") and os.path.normpath(path) not in _NOT_HOST_PATHS


def scrubber(
    found: tuple[Identity, ...],
    *,
    run_dir: str,
    code_dir: str,
    data_dir: str,
    out_dir: str,
    image: str,
    manifest_path: str = "",
    apptainer: str = "",
    site_file: str | None = None,
) -> Scrubber:
    """The rewrite of one run's bundle: its folders, the users' homes, names and ids."""
    pairs = [
        (run_dir, f"{ANON_ROOT}/run"),
        (code_dir, f"{ANON_ROOT}/code"),
        (data_dir, f"{ANON_ROOT}/data"),
        (out_dir, f"{ANON_ROOT}/out"),
        (image, f"{ANON_ROOT}/image.sif"),
        (str(PurePosixPath(run_dir).parent), f"{ANON_ROOT}/runs"),
        (str(PurePosixPath(manifest_path).parent), f"{ANON_ROOT}/manifest"),
        (apptainer, f"{ANON_ROOT}/bin/{PurePosixPath(apptainer).name}"),
        (site_file or "", f"{ANON_ROOT}/site/{PurePosixPath(site_file or '').name}"),
        *((i.home, f"{ANON_ROOT}/home") for i in found),
    ]
    mapped: dict[str, str] = {}
    for old, new in pairs:
        if _is_host_path(old) and old not in mapped:
            mapped[old] = new
            escaped = json.dumps(old)[1:-1]  # how JSON writes a path with " \ or control chars
            if escaped != old:
                mapped.setdefault(escaped, new)
    paths = tuple(sorted(mapped.items(), key=lambda kv: (-len(kv[0]), kv[0])))
    users = tuple(dict.fromkeys(i.user for i in found if i.user and i.user != ANON_USER))
    ids = tuple(dict.fromkeys(str(n) for i in found for n in (i.uid, i.gid) if str(n) != ANON_ID))
    return Scrubber(paths=paths, users=users, ids=ids)


def image_problems(s: Scrubber, deffile: bytes | None, owner_ids: tuple[int, ...]) -> list[str]:
    """Where a SIF names the user: its embedded .def (``From: /home/alice/base.sif``) or its
    descriptors' uid/gid (only a uid other than 0: a root or fakeroot build records 0)."""
    problems = []
    if deffile is not None:
        # root's name is in any image's .def (chown root, /root): it names no person
        leaks = [x for x in s.leaks(deffile.decode("utf-8", "replace")) if x != "root"]
        if leaks:
            problems.append(f"its embedded .def names {', '.join(sorted(set(leaks)))}")
    named = sorted({n for n in owner_ids if n != 0 and str(n) in s.ids})
    if named:
        problems.append(f"its descriptors record the user id {', '.join(map(str, named))}")
    return problems


def rewrite_tree(tree: Path, s: Scrubber, *, skip: frozenset[str]) -> None:
    """Rewrite every file below ``tree`` in place, but those named in ``skip`` (the image)."""
    for path in sorted(tree.rglob("*")):
        if path.is_file() and path.relative_to(tree).as_posix() not in skip:
            data = path.read_bytes()
            new = s.data(data)
            if new != data:
                path.write_bytes(new)


def tree_leaks(tree: Path, s: Scrubber, *, skip: frozenset[str]) -> list[str]:
    """``file: what it still names`` for each file below ``tree`` that names the host."""
    out = []
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree).as_posix()
        if path.is_file() and rel not in skip:
            leaks = s.leaks(path.read_bytes().decode("utf-8", "surrogateescape"))
            if leaks:
                out.append(f"{rel}: {', '.join(sorted(set(leaks)))}")
    return out
